// tally/core/detail/wyhash.hpp: wyhash's multiply-mix, its little-endian loads and
// secret (the pieces of hash64 in core/hash.hpp), and SplitMix64's mix64.
#pragma once

#include "../../detail/abi.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../../detail/primitives.hpp"
#include "../platform.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

TALLY_ALWAYS_INLINE void wy_mum(std::uint64_t& a, std::uint64_t& b) noexcept {
    const uint128 r = static_cast<uint128>(a) * b;
    a = static_cast<std::uint64_t>(r);
    b = static_cast<std::uint64_t>(r >> 64);
}

TALLY_ALWAYS_INLINE std::uint64_t wy_mix(std::uint64_t a, std::uint64_t b) noexcept {
    wy_mum(a, b);
    return a ^ b;
}

// Unaligned little-endian loads; memcpy compiles to one mov.
TALLY_ALWAYS_INLINE std::uint64_t load_le64(const std::uint8_t* p) noexcept {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
    return v;
}
TALLY_ALWAYS_INLINE std::uint64_t load_le32(const std::uint8_t* p) noexcept {
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
    return v;
}
// 1..3 bytes: first, middle and last byte (they may coincide).
TALLY_ALWAYS_INLINE std::uint64_t load_1to3(const std::uint8_t* p, std::size_t k) noexcept {
    return (static_cast<std::uint64_t>(p[0]) << 16) | (static_cast<std::uint64_t>(p[k >> 1]) << 8) | p[k - 1];
}

// The default secret of the reference test_vector.cpp (the values its
// published vectors, also pinned by Zig's std.hash.Wyhash, were made with).
inline constexpr std::uint64_t wy_secret[4] = {0xa0761d6478bd642full, 0xe7037ed1a0b428dbull,
                                               0x8ebc6af09c88c6e3ull, 0x589965cc75374cc3ull};

/// SplitMix64's output function: a bijection on 64 bits with full avalanche.
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

}  // namespace detail
TALLY_END_NAMESPACE
