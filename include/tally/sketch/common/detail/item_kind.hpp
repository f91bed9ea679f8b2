// tally/sketch/common/detail/item_kind.hpp: the one place that sorts an item
// into the kinds foreign hash formats tell apart (Redis PFADD, PostgreSQL
// hll_hash_*, DataSketches update overloads). Each format writes a small
// visitor with one overload per kind, rather than its own if-constexpr chain
// over item types.
//
// The kinds, in the order they are tried:
//   ItemBytes    C strings, anything convertible to std::string_view, and
//                spans of std::byte / unsigned char: the bytes as they are;
//                `null` marks a null C string or a span without data, `text`
//                a string (formats that skip empty strings hash empty spans)
//   bool         on its own, before the integers (formats hash it apart)
//   integral     the value in its own type
//   floating     float or double, in its own type
//   ItemHashed   anything else: tally's own hash_of(item)
//
// All functions are pure and thread-safe.
#pragma once

#include "../../../detail/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>

#include "../../../core/hash.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

struct ItemBytes {
    const void* data;
    std::size_t size;
    bool null;
    bool text;
};

struct ItemHashed {
    std::uint64_t hash;
};

template <class D>
inline constexpr bool is_byte_span_v = std::is_same_v<D, std::span<const std::byte>> ||
                                       std::is_same_v<D, std::span<std::byte>> ||
                                       std::is_same_v<D, std::span<const unsigned char>>;

/// Calls the overload of `visitor` for the kind of `item` and returns what it
/// returns.
template <class T, class Visitor>
TALLY_ALWAYS_INLINE decltype(auto) visit_item(const T& item, Visitor&& visitor) noexcept {
    using D = std::decay_t<T>;
    if constexpr (std::is_same_v<D, const char*> || std::is_same_v<D, char*>) {
        const char* s = item;
        return visitor(ItemBytes{s, s == nullptr ? 0 : std::strlen(s), s == nullptr, true});
    } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
        const std::string_view s = item;
        return visitor(ItemBytes{s.data(), s.size(), false, true});
    } else if constexpr (is_byte_span_v<D>) {
        return visitor(ItemBytes{item.data(), item.size(), item.data() == nullptr, false});
    } else if constexpr (std::is_same_v<D, bool> || std::is_integral_v<D> || std::is_floating_point_v<D>) {
        return visitor(static_cast<D>(item));
    } else {
        return visitor(ItemHashed{hash_of(item)});
    }
}

}  // namespace detail
TALLY_END_NAMESPACE
