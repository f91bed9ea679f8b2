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
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>

#include "../../../core/hash.hpp"
#include "../../common/detail/item_kind.hpp"
#include "murmur3.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

/// DataSketches' DEFAULT_SEED.
inline constexpr std::uint64_t ds_default_seed = 9001;

TALLY_ALWAYS_INLINE Hash128 ds_hash_bytes(const void* data, std::size_t len) noexcept {
    return murmur3_x64_128_fast(data, len, ds_default_seed);
}

/// MurmurHash3_x64_128 (seed 9001) of the 8 little-endian bytes of v.
TALLY_ALWAYS_INLINE Hash128 ds_hash_i64(std::int64_t v) noexcept {
    return murmur3_x64_128_u64(static_cast<std::uint64_t>(v), ds_default_seed);
}

inline Hash128 ds_hash_double(double d) noexcept {
    std::uint64_t bits = std::bit_cast<std::uint64_t>(d == 0.0 ? 0.0 : d);  // -0.0 as 0.0
    if (d != d) bits = 0x7ff8000000000000ull;                               // Java's canonical NaN
    return ds_hash_i64(static_cast<std::int64_t>(bits));
}

// The item kinds (item_kind.hpp) as DataSketches' update overloads hash
// them; false for the items update() ignores (empty strings, null pointers).
struct DsItemHasher {
    Hash128& out;
    bool operator()(ItemBytes b) const noexcept {
        if (b.null || (b.text && b.size == 0)) return false;
        out = ds_hash_bytes(b.data, b.size);
        return true;
    }
    bool operator()(bool v) const noexcept {
        out = ds_hash_i64(v ? 1 : 0);
        return true;
    }
    // 64-bit values as they are; narrower ones through their signed type,
    // sign-extended (DataSketches casts uint32_t to int32_t first).
    template <std::integral I>
    bool operator()(I v) const noexcept {
        out = ds_hash_i64(static_cast<std::int64_t>(static_cast<std::make_signed_t<I>>(v)));
        return true;
    }
    template <std::floating_point F>
    bool operator()(F v) const noexcept {
        out = ds_hash_double(static_cast<double>(v));
        return true;
    }
    bool operator()(ItemHashed h) const noexcept {
        out = ds_hash_i64(static_cast<std::int64_t>(h.hash));
        return true;
    }
};

/// Hashes `item` as DataSketches' update overloads do (HllSketch, Theta,
/// Tuple). Returns false for the items update() ignores.
template <class T>
TALLY_ALWAYS_INLINE bool ds_hash_item(const T& item, Hash128& out) noexcept {
    return visit_item(item, DsItemHasher{out});
}

}  // namespace detail
TALLY_END_NAMESPACE
