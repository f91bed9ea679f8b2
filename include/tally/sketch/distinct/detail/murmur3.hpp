// tally/sketch/distinct/detail/murmur3.hpp: MurmurHash3_x64_128, the hash of Apache
// DataSketches (seed 9001: HllSketch, Theta) and of
// postgresql-hll (seed 0). Austin Appleby's public-domain hash (SMHasher,
// MurmurHash3.cpp): 16-byte little-endian blocks, constants c1 and c2 below, a
// 1..15 byte tail and the fmix64 finalizer.
//
// All functions are pure and thread-safe.
#pragma once

#include "../../../detail/abi.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>

#include "../../../core/hash.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

struct Hash128 {
    std::uint64_t h1;
    std::uint64_t h2;
};

TALLY_ALWAYS_INLINE std::uint64_t murmur3_fmix64(std::uint64_t k) noexcept {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

TALLY_ALWAYS_INLINE std::uint64_t murmur3_mix_k1(std::uint64_t k1) noexcept {
    return std::rotl(k1 * 0x87c37b91114253d5ull, 31) * 0x4cf5ad432745937full;
}

TALLY_ALWAYS_INLINE std::uint64_t murmur3_mix_k2(std::uint64_t k2) noexcept {
    return std::rotl(k2 * 0x4cf5ad432745937full, 33) * 0x87c37b91114253d5ull;
}

// The length fold and the two fmix64 rounds that end every MurmurHash3_x64_128.
TALLY_ALWAYS_INLINE Hash128 murmur3_finish(std::uint64_t h1, std::uint64_t h2, std::size_t len) noexcept {
    h1 ^= static_cast<std::uint64_t>(len);
    h2 ^= static_cast<std::uint64_t>(len);
    h1 += h2;
    h2 += h1;
    h1 = murmur3_fmix64(h1);
    h2 = murmur3_fmix64(h2);
    h1 += h2;
    h2 += h1;
    return {h1, h2};
}

// One 16-byte block of MurmurHash3_x64_128's body.
TALLY_ALWAYS_INLINE void murmur3_block(std::uint64_t& h1, std::uint64_t& h2, const unsigned char* p) noexcept {
    h1 ^= murmur3_mix_k1(load_le64(p));
    h1 = std::rotl(h1, 27);
    h1 += h2;
    h1 = h1 * 5 + 0x52dce729;
    h2 ^= murmur3_mix_k2(load_le64(p + 8));
    h2 = std::rotl(h2, 31);
    h2 += h1;
    h2 = h2 * 5 + 0x38495ab5;
}

/// Austin Appleby's MurmurHash3_x64_128 of `len` bytes (data may be null when
/// len == 0), written as the reference describes it: 16-byte blocks, then the
/// tail byte by byte. The reference for murmur3_x64_128_fast.
inline Hash128 murmur3_x64_128(const void* data, std::size_t len, std::uint64_t seed) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    std::uint64_t h1 = seed;
    std::uint64_t h2 = seed;
    const std::size_t blocks = len / 16;
    for (std::size_t i = 0; i < blocks; ++i, p += 16) murmur3_block(h1, h2, p);
    const std::size_t tail = len & 15;
    std::uint64_t k1 = 0;
    std::uint64_t k2 = 0;
    for (std::size_t b = tail; b-- > 8;) k2 ^= static_cast<std::uint64_t>(p[b]) << (8 * (b - 8));
    if (tail > 8) h2 ^= murmur3_mix_k2(k2);
    for (std::size_t b = tail < 8 ? tail : 8; b-- > 0;) k1 ^= static_cast<std::uint64_t>(p[b]) << (8 * b);
    if (tail > 0) h1 ^= murmur3_mix_k1(k1);
    return murmur3_finish(h1, h2, len);
}

/// The same function as murmur3_x64_128, bit for bit, for the hot path: the
/// 1..15-byte tail is read with at most two (possibly overlapping) word
/// loads instead of byte by byte. Never reads outside [data, data + len).
TALLY_ALWAYS_INLINE Hash128 murmur3_x64_128_fast(const void* data, std::size_t len, std::uint64_t seed) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    std::uint64_t h1 = seed;
    std::uint64_t h2 = seed;
    for (std::size_t n = len / 16; n > 0; --n, p += 16) murmur3_block(h1, h2, p);
    const std::size_t tail = len & 15;
    if (tail > 8) {
        // Bytes 8..tail-1 are the top of the word that ends at the last byte.
        h2 ^= murmur3_mix_k2(load_le64(p + tail - 8) >> (8 * (16 - tail)));
        h1 ^= murmur3_mix_k1(load_le64(p));
    } else if (tail > 0) {
        std::uint64_t k1;
        if (len >= 8) {  // the 8 bytes before the end exist: keep the last `tail` of them
            k1 = load_le64(p + tail - 8) >> (8 * (8 - tail));
        } else if (tail >= 4) {  // two overlapping 4-byte words; shared bytes are equal
            k1 = load_le32(p) | (load_le32(p + tail - 4) << (8 * (tail - 4)));
        } else {  // first, middle and last byte (they may coincide)
            k1 = static_cast<std::uint64_t>(p[0]) | (static_cast<std::uint64_t>(p[tail >> 1]) << (8 * (tail >> 1))) |
                 (static_cast<std::uint64_t>(p[tail - 1]) << (8 * (tail - 1)));
        }
        h1 ^= murmur3_mix_k1(k1);
    }
    return murmur3_finish(h1, h2, len);
}

/// MurmurHash3_x64_128 of the 8 little-endian bytes of v (how DataSketches and
/// postgresql-hll hash a 64-bit integer): no 16-byte block, one tail word in
/// k1, and before the finish h2 is the constant seed ^ 8, so both fmix64
/// inputs (h1 + h2, then h2 + that) are one mixed word plus constants.
TALLY_ALWAYS_INLINE Hash128 murmur3_x64_128_u64(std::uint64_t v, std::uint64_t seed) noexcept {
    const std::uint64_t c = seed ^ 8;
    const std::uint64_t a = ((seed ^ murmur3_mix_k1(v)) ^ 8) + c;
    const std::uint64_t f1 = murmur3_fmix64(a);
    const std::uint64_t f2 = murmur3_fmix64(a + c);
    return {f1 + f2, f1 + f2 + f2};
}

}  // namespace detail
TALLY_END_NAMESPACE
