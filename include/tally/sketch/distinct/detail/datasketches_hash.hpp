// tally/sketch/distinct/detail/datasketches_hash.hpp: how Apache DataSketches hashes
// an item (HllSketch, Theta): MurmurHash3_x64_128 (murmur3.hpp) with seed 9001
// over the item's bytes: integers widened to 8 little-endian bytes, doubles
// canonicalised (-0.0 as 0.0, every NaN as Java's canonical NaN), strings and
// byte spans as they are (empty strings are not items).
//
// All functions are pure and thread-safe.
#pragma once

#include "../../../detail/abi.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>

#include "../../../core/hash.hpp"
#include "murmur3.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

/// DataSketches' DEFAULT_SEED.
inline constexpr std::uint64_t ds_hll_seed = 9001;

TALLY_ALWAYS_INLINE Hash128 ds_hash_bytes(const void* data, std::size_t len) noexcept {
    return murmur3_x64_128_fast(data, len, ds_hll_seed);
}

/// MurmurHash3_x64_128 (seed 9001) of the 8 little-endian bytes of v.
TALLY_ALWAYS_INLINE Hash128 ds_hash_i64(std::int64_t v) noexcept {
    return murmur3_x64_128_u64(static_cast<std::uint64_t>(v), ds_hll_seed);
}

inline Hash128 ds_hash_double(double d) noexcept {
    std::uint64_t bits = std::bit_cast<std::uint64_t>(d == 0.0 ? 0.0 : d);  // -0.0 as 0.0
    if (d != d) bits = 0x7ff8000000000000ull;                               // Java's canonical NaN
    return ds_hash_i64(static_cast<std::int64_t>(bits));
}

/// Hashes `item` as DataSketches' HllSketch::update overloads do. Returns
/// false for the items update() ignores (empty strings, null pointers).
template <class T>
TALLY_ALWAYS_INLINE bool ds_hll_hash_item(const T& item, Hash128& out) noexcept {
    using D = std::decay_t<T>;
    if constexpr (std::is_same_v<D, const char*> || std::is_same_v<D, char*>) {
        const char* s = item;
        if (s == nullptr || *s == '\0') return false;
        out = ds_hash_bytes(s, std::strlen(s));
    } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
        const std::string_view s = item;
        if (s.empty()) return false;
        out = ds_hash_bytes(s.data(), s.size());
    } else if constexpr (std::is_same_v<D, std::span<const std::byte>> || std::is_same_v<D, std::span<std::byte>> ||
                         std::is_same_v<D, std::span<const unsigned char>>) {
        if (item.data() == nullptr) return false;
        out = ds_hash_bytes(item.data(), item.size());
    } else if constexpr (std::is_same_v<D, bool>) {
        out = ds_hash_i64(item ? 1 : 0);
    } else if constexpr (std::is_integral_v<D>) {
        // 64-bit values as they are; narrower ones through their signed type,
        // sign-extended (DataSketches casts uint32_t to int32_t first).
        if constexpr (sizeof(D) == 8)
            out = ds_hash_i64(static_cast<std::int64_t>(item));
        else
            out = ds_hash_i64(static_cast<std::int64_t>(static_cast<std::make_signed_t<D>>(item)));
    } else if constexpr (std::is_floating_point_v<D>) {
        out = ds_hash_double(static_cast<double>(item));
    } else {
        out = ds_hash_i64(static_cast<std::int64_t>(hash_of(item)));
    }
    return true;
}

}  // namespace detail
TALLY_END_NAMESPACE
