// tally/sketch/distinct/detail/hyperloglog_redis.hpp: the pieces of Redis's HyperLogLog format
// that tally::HyperLogLog needs to read and write Redis 7 "HYLL" strings, and
// MurmurHash64A, the hash Redis applies to PFADD elements.
//
// MurmurHash64A is Austin Appleby's public-domain 64-bit MurmurHash2 variant
// (SMHasher, MurmurHash2.cpp), written here from its description: 8-byte
// little-endian blocks mixed with m = 0xc6a4a7935bd1e995 and r = 47, a 1..7
// byte tail, then a final avalanche. Redis calls it with seed 0xadc83b19.
//
// Redis string layout (src/hyperloglog.c, Redis 2.8.9 through 7.x):
//
//   offset size  field
//   0      4     magic "HYLL"
//   4      1     encoding: 0 dense, 1 sparse (Redis never stores its internal
//                "raw" encoding 255)
//   5      3     unused (Redis writes zeros and never reads them)
//   8      8     cached cardinality, little-endian; card[7] & 0x80 set means
//                "cache invalid, recompute on PFCOUNT"
//   16     ...   registers
//
//   dense:  16384 six-bit registers packed LSB-first: register i occupies bits
//           6i .. 6i+5 of the payload read as a little-endian bit string;
//           12288 payload bytes, 12304 in all.
//   sparse: a run-length code covering exactly 16384 registers:
//           ZERO  00xxxxxx           run of (x + 1) zero registers, 1..64
//           XZERO 01xxxxxx yyyyyyyy  run of (x << 8 | y) + 1 zeros, 1..16384
//           VAL   1vvvvvxx           run of (x + 1) registers of value v + 1,
//                                     value 1..32, run 1..4
//
// All functions are pure and thread-safe.
#pragma once

#include "../../../detail/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

TALLY_BEGIN_NAMESPACE
namespace detail {

/// Austin Appleby's MurmurHash64A of `len` bytes. `data` may be null when
/// len == 0. The seed is 64-bit here; Redis passes the 32-bit 0xadc83b19.
inline std::uint64_t murmur64a(const void* data, std::size_t len, std::uint64_t seed) noexcept {
    constexpr std::uint64_t m = 0xc6a4a7935bd1e995ull;
    constexpr int r = 47;
    const auto* p = static_cast<const unsigned char*>(data);
    std::uint64_t h = seed ^ (static_cast<std::uint64_t>(len) * m);
    const std::size_t blocks = len / 8;
    for (std::size_t i = 0; i < blocks; ++i, p += 8) {
        // Assemble little-endian explicitly: the published algorithm reads
        // native words, and every platform Redis hashes on is little-endian.
        std::uint64_t k = 0;
        for (int b = 7; b >= 0; --b) k = (k << 8) | p[b];
        k *= m;
        k ^= k >> r;
        k *= m;
        h ^= k;
        h *= m;
    }
    const std::size_t tail = len & 7;
    if (tail != 0) {
        for (std::size_t b = tail; b-- > 0;) h ^= static_cast<std::uint64_t>(p[b]) << (8 * b);
        h *= m;
    }
    h ^= h >> r;
    h *= m;
    h ^= h >> r;
    return h;
}

inline constexpr std::uint64_t redis_hll_seed = 0xadc83b19ull;
inline constexpr int redis_hll_p = 14;
inline constexpr std::size_t redis_hll_registers = std::size_t{1} << redis_hll_p;
inline constexpr std::size_t redis_hll_header = 16;
inline constexpr std::size_t redis_hll_dense_payload = redis_hll_registers * 6 / 8;  // 12288
inline constexpr std::size_t redis_hll_dense_size = redis_hll_header + redis_hll_dense_payload;  // 12304
inline constexpr std::uint8_t redis_hll_dense = 0;
inline constexpr std::uint8_t redis_hll_sparse = 1;

/// Redis's hash of a PFADD element.
inline std::uint64_t redis_hll_hash(std::string_view element) noexcept {
    return murmur64a(element.data(), element.size(), redis_hll_seed);
}

/// Packs `count` registers (each < 64) as 6-bit fields, LSB-first, into `out`,
/// which must hold count * 6 / 8 zeroed bytes (count a multiple of 4).
inline void pack6(const std::uint8_t* regs, std::size_t count, unsigned char* out) noexcept {
    // Four registers make exactly three bytes, so no field straddles a group.
    for (std::size_t i = 0; i + 4 <= count; i += 4, out += 3) {
        const std::uint32_t v = static_cast<std::uint32_t>(regs[i] & 63) |
                                (static_cast<std::uint32_t>(regs[i + 1] & 63) << 6) |
                                (static_cast<std::uint32_t>(regs[i + 2] & 63) << 12) |
                                (static_cast<std::uint32_t>(regs[i + 3] & 63) << 18);
        out[0] = static_cast<unsigned char>(v);
        out[1] = static_cast<unsigned char>(v >> 8);
        out[2] = static_cast<unsigned char>(v >> 16);
    }
}

/// The inverse of pack6: reads count * 6 / 8 bytes at `in`.
inline void unpack6(const unsigned char* in, std::size_t count, std::uint8_t* regs) noexcept {
    for (std::size_t i = 0; i + 4 <= count; i += 4, in += 3) {
        const std::uint32_t v = static_cast<std::uint32_t>(in[0]) | (static_cast<std::uint32_t>(in[1]) << 8) |
                                (static_cast<std::uint32_t>(in[2]) << 16);
        regs[i] = static_cast<std::uint8_t>(v & 63);
        regs[i + 1] = static_cast<std::uint8_t>((v >> 6) & 63);
        regs[i + 2] = static_cast<std::uint8_t>((v >> 12) & 63);
        regs[i + 3] = static_cast<std::uint8_t>((v >> 18) & 63);
    }
}

}  // namespace detail
TALLY_END_NAMESPACE
