// tally/sketch/common/detail/item_codec.hpp: how the summaries that store items (TopK,
// Reservoir, WeightedReservoir) write one item: little-endian, never the
// machine's native byte order, so bytes written on any platform read on any
// other.
//
// An item type is described on the wire by two bytes, kind and size:
//   1 unsigned integer (bool, char, unsigned types, unsigned enums), size 1/2/4/8
//   2 signed integer (signed types and enums), size 1/2/4/8
//   3 IEEE-754 floating point (float, double), size 4/8, the bits as an integer
//   4 string (std::string): size 0; each item is u32 length, then the bytes
//   5 user-defined: tally::ItemCodec<T> (below); size its wire_size
// Readers compare both bytes with their own T and refuse anything else.
#pragma once

#include "../../../detail/abi.hpp"

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "../../../core/serialize.hpp"
#include "../item_codec.hpp"

TALLY_BEGIN_NAMESPACE


namespace detail {

enum class ItemKind : std::uint8_t { unsigned_int = 1, signed_int = 2, floating = 3, string = 4, custom = 5 };

template <class T>
concept UserItemCodec = requires(ByteWriter& w, ByteReader& r, const T& item) {
    { ItemCodec<T>::wire_size } -> std::convertible_to<std::uint8_t>;
    ItemCodec<T>::write(w, item);
    { ItemCodec<T>::read(r) } -> std::same_as<T>;
};

template <class T>
inline constexpr bool is_builtin_wire_item =
    ((std::is_integral_v<T> || std::is_enum_v<T>) && (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8)) ||
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::string>;

/// Item types that summaries can serialise.
template <class T>
concept WireItem = is_builtin_wire_item<T> || UserItemCodec<T>;

template <std::size_t N>
using wire_uint =
    std::conditional_t<N == 1, std::uint8_t,
                       std::conditional_t<N == 2, std::uint16_t, std::conditional_t<N == 4, std::uint32_t, std::uint64_t>>>;

template <WireItem T>
struct WireCodec {
    static constexpr bool is_string = std::is_same_v<T, std::string>;
    static constexpr bool is_custom = !is_builtin_wire_item<T>;

    static constexpr ItemKind kind = [] {
        if constexpr (is_string) {
            return ItemKind::string;
        } else if constexpr (is_custom) {
            return ItemKind::custom;
        } else if constexpr (std::is_floating_point_v<T>) {
            return ItemKind::floating;
        } else if constexpr (std::is_enum_v<T>) {
            return std::is_signed_v<std::underlying_type_t<T>> ? ItemKind::signed_int : ItemKind::unsigned_int;
        } else {
            return std::is_signed_v<T> ? ItemKind::signed_int : ItemKind::unsigned_int;
        }
    }();
    static constexpr std::uint8_t size = [] {
        if constexpr (is_string) {
            return std::uint8_t{0};
        } else if constexpr (is_custom) {
            return static_cast<std::uint8_t>(ItemCodec<T>::wire_size);
        } else {
            return static_cast<std::uint8_t>(sizeof(T));
        }
    }();
    /// The fewest bytes one item takes (bounds a count before allocating).
    static constexpr std::size_t min_wire_bytes = is_string ? 4 : (size == 0 ? 1 : size);

    /// The two descriptor bytes: kind, size.
    static void write_descriptor(ByteWriter& w) {
        w.u8(static_cast<std::uint8_t>(kind));
        w.u8(size);
    }
    /// Refuses a descriptor written for another item type.
    static void check_descriptor(std::uint8_t k, std::uint8_t s, const char* who) {
        if (k != static_cast<std::uint8_t>(kind) || s != size)
            throw_format_error(std::string(who) + ": item kind " + std::to_string(k) + " of size " + std::to_string(s) +
                               " where kind " + std::to_string(static_cast<int>(kind)) + " of size " +
                               std::to_string(size) + " was expected (a different item type)");
    }

    static void write(ByteWriter& w, const T& item) {
        if constexpr (is_string) {
            format_check(item.size() <= std::numeric_limits<std::uint32_t>::max(), "string item longer than 4 GiB");
            w.string(item);
        } else if constexpr (is_custom) {
            const std::size_t before = w.size();
            ItemCodec<T>::write(w, item);
            format_check(w.size() - before == size, "ItemCodec<T>::write wrote other than wire_size bytes");
        } else {
            using U = wire_uint<sizeof(T)>;
            U bits;
            std::memcpy(&bits, &item, sizeof(T));
            if constexpr (sizeof(T) == 1) {
                w.u8(bits);
            } else if constexpr (sizeof(T) == 2) {
                w.u16(bits);
            } else if constexpr (sizeof(T) == 4) {
                w.u32(bits);
            } else {
                w.u64(bits);
            }
        }
    }

    static T read(ByteReader& r) {
        if constexpr (is_string) {
            return r.string();
        } else if constexpr (is_custom) {
            const std::size_t before = r.position();
            T item = ItemCodec<T>::read(r);
            format_check(r.position() - before == size, "ItemCodec<T>::read read other than wire_size bytes");
            return item;
        } else {
            using U = wire_uint<sizeof(T)>;
            U bits;
            if constexpr (sizeof(T) == 1) {
                bits = r.u8();
            } else if constexpr (sizeof(T) == 2) {
                bits = r.u16();
            } else if constexpr (sizeof(T) == 4) {
                bits = r.u32();
            } else {
                bits = r.u64();
            }
            if constexpr (std::is_same_v<T, bool>) format_check(bits <= 1, "bool item is neither 0 nor 1");
            T item;
            std::memcpy(&item, &bits, sizeof(T));
            return item;
        }
    }
};

}  // namespace detail
TALLY_END_NAMESPACE
