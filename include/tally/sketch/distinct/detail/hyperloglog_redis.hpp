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

#include <algorithm>
#include <charconv>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "../../../detail/throw.hpp"
#include "../../common/detail/item_kind.hpp"

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

// The item kinds (item_kind.hpp) as PFADD sees them: an element is a string,
// so booleans are "1" / "0" and integers their decimal digits; what Redis
// cannot be sent as text (floating point, user types) keeps tally's hash.
struct RedisItemHasher {
    std::uint64_t operator()(ItemBytes b) const noexcept { return murmur64a(b.data, b.size, redis_hll_seed); }
    std::uint64_t operator()(bool v) const noexcept { return redis_hll_hash(v ? "1" : "0"); }
    template <std::integral I>
    std::uint64_t operator()(I v) const noexcept {
        char buf[24];
        const auto res = std::to_chars(buf, buf + sizeof buf, v);
        return murmur64a(buf, static_cast<std::size_t>(res.ptr - buf), redis_hll_seed);
    }
    template <std::floating_point F>
    std::uint64_t operator()(F v) const noexcept {
        return hash_of(v);
    }
    std::uint64_t operator()(ItemHashed h) const noexcept { return h.hash; }
};

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

/// Redis's dense HYLL string of 2^14 registers (the cached cardinality marked
/// invalid, so PFCOUNT recomputes it).
inline std::string redis_hll_encode(std::span<const std::uint8_t> registers) {
    std::string s(redis_hll_dense_size, '\0');
    std::memcpy(s.data(), "HYLL", 4);
    s[4] = static_cast<char>(redis_hll_dense);
    s[15] = static_cast<char>(0x80);  // card[7] bit 7: cached cardinality invalid
    pack6(registers.data(), redis_hll_registers, reinterpret_cast<unsigned char*>(s.data()) + redis_hll_header);
    return s;
}

/// Decodes a HYLL string, dense or sparse, into `registers` (any container
/// of bytes with assign(n, 0) and data(), left empty when every register is
/// zero). Every opcode and length is checked: tally::FormatError otherwise.
template <class Registers>
void redis_hll_decode(std::string_view s, Registers& registers) {
    constexpr const char* who = "tally::HyperLogLog::from_redis: ";
    if (s.size() < redis_hll_header)
        throw_format_error(who + std::string("truncated header (") + std::to_string(s.size()) + " bytes, need 16)");
    if (std::memcmp(s.data(), "HYLL", 4) != 0) throw_format_error(who + std::string("bad magic (expected \"HYLL\")"));
    const auto encoding = static_cast<std::uint8_t>(s[4]);
    constexpr std::size_t m = redis_hll_registers;
    constexpr std::uint8_t top = 64 - redis_hll_p + 1;
    const auto* in = reinterpret_cast<const unsigned char*>(s.data());
    const auto allocate = [&] {
        if (registers.size() != m) registers.assign(m, 0);
    };
    if (encoding == redis_hll_dense) {
        if (s.size() != redis_hll_dense_size)
            throw_format_error(who + std::string("dense string is ") + std::to_string(s.size()) + " bytes, not 12304");
        allocate();
        unpack6(in + redis_hll_header, m, registers.data());
        for (std::size_t i = 0; i < m; ++i)
            if (registers[i] > top)
                throw_format_error(who + std::string("register value ") + std::to_string(registers[i]) + " exceeds 51");
        return;
    }
    if (encoding != redis_hll_sparse)
        throw_format_error(who + std::string("bad encoding ") + std::to_string(encoding) +
                           " (expected 0 dense or 1 sparse)");
    std::size_t index = 0;
    for (std::size_t pos = redis_hll_header; pos < s.size();) {
        const unsigned char op = in[pos];
        std::size_t run;
        std::uint8_t value = 0;
        if ((op & 0xc0) == 0x00) {  // ZERO
            run = (op & 0x3fu) + 1;
            pos += 1;
        } else if ((op & 0xc0) == 0x40) {  // XZERO
            if (pos + 1 >= s.size()) throw_format_error(who + std::string("truncated XZERO opcode"));
            run = ((static_cast<std::size_t>(op & 0x3fu) << 8) | in[pos + 1]) + 1;
            pos += 2;
        } else {  // VAL
            value = static_cast<std::uint8_t>(((op >> 2) & 0x1fu) + 1);
            run = (op & 0x3u) + 1;
            pos += 1;
        }
        if (run > m - index) throw_format_error(who + std::string("sparse runs overflow 16384 registers"));
        if (value != 0) {
            allocate();
            std::fill_n(registers.data() + index, run, value);
        }
        index += run;
    }
    if (index != m)
        throw_format_error(who + std::string("sparse runs cover ") + std::to_string(index) +
                           " registers, not 16384 (truncated)");
}

}  // namespace detail
TALLY_END_NAMESPACE
