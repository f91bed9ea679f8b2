// tally/sketch/frequency/detail/top_k_string.hpp: how tally::TopK<std::string> holds a string
// of at most 16 bytes in its slot. Not for direct use.
//
// wyhash (include/tally/core/hash.hpp) reads a string of 4..16 bytes as four
// 4-byte words, at 0, 4*(len/8), len-4 and len-4-4*(len/8), and one of 1..3
// bytes as its first, middle and last byte; the words cover every byte, so
// the two 64-bit values a and b it builds, with the length, determine the
// string. TopK keeps (a, b, len) as the item: equality is three integer
// compares, storing it three integer stores, the hash two multiplies away
// (the same value as hash64), and the bytes are rebuilt from it when asked.
#pragma once

#include "../../../detail/abi.hpp"

#include "../../../core/detail/byte_order.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "../../../core/hash.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::size_t top_k_inline_max = 16;

/// A string key: for len <= top_k_inline_max, (a, b) as wyhash reads them;
/// for longer strings a = b = 0 and the bytes stay at `data`.
struct TopKStringKey {
    const char* data;
    std::size_t len;
    std::uint64_t a;
    std::uint64_t b;
};

[[nodiscard]] TALLY_ALWAYS_INLINE TopKStringKey top_k_string_key(std::string_view s) noexcept {
    TopKStringKey k{s.data(), s.size(), 0, 0};
    const auto* p = reinterpret_cast<const std::uint8_t*>(s.data());
    const std::size_t len = s.size();
    if (TALLY_LIKELY(len <= top_k_inline_max)) {
        if (TALLY_LIKELY(len >= 4)) {
            const std::size_t shift = (len >> 3) << 2;
            k.a = (load_le32(p) << 32) | load_le32(p + shift);
            k.b = (load_le32(p + len - 4) << 32) | load_le32(p + len - 4 - shift);
        } else if (len > 0) {
            k.a = load_1to3(p, len);
        }
    }
    return k;
}

/// hash64's seed after its first step (once per summary rather than per add).
[[nodiscard]] inline std::uint64_t top_k_wy_seed(std::uint64_t seed) noexcept {
    return seed ^ wy_mix(seed ^ wy_secret[0], wy_secret[1]);
}

/// hash64(bytes, len, seed) of a string of at most 16 bytes, from its (a, b).
[[nodiscard]] TALLY_ALWAYS_INLINE std::uint64_t top_k_short_hash(std::uint64_t a, std::uint64_t b, std::size_t len,
                                                                 std::uint64_t wy_seed) noexcept {
    a ^= wy_secret[1];
    b ^= wy_seed;
    wy_mum(a, b);
    return wy_mix(a ^ wy_secret[0] ^ len, b ^ wy_secret[1]);
}


/// The bytes of a string of len <= 16 bytes from its (a, b): out gets len bytes.
inline void top_k_string_bytes(std::uint64_t a, std::uint64_t b, std::size_t len, char* out) noexcept {
    if (len >= 4) {
        const std::size_t shift = (len >> 3) << 2;
        store_le(reinterpret_cast<std::byte*>(out), a >> 32, 4);
        store_le(reinterpret_cast<std::byte*>(out + shift), a, 4);
        store_le(reinterpret_cast<std::byte*>(out + len - 4), b >> 32, 4);
        store_le(reinterpret_cast<std::byte*>(out + len - 4 - shift), b, 4);
    } else if (len > 0) {
        out[0] = static_cast<char>(a >> 16);
        out[len >> 1] = static_cast<char>(a >> 8);
        out[len - 1] = static_cast<char>(a);
    }
}

}  // namespace detail
TALLY_END_NAMESPACE
