// tally/core/hash.hpp: hash64 over bytes and the Hasher<T> customisation point.
//
// hash64 is wyhash (Wang Yi, github.com/wangyi-fudan/wyhash, final version
// 4 structure with the default secret of its reference test_vector.cpp; this
// is our own implementation from the published description). It passes
// SMHasher and reads each input byte once; its published test vectors are
// checked in tests/test_hash.cpp (speed: docs/benchmarks.md).
//
// Hasher<T> turns a value into 64 well-mixed bits for the sketches:
//   * integers and enums: the SplitMix64 finaliser (Steele, Lea, Flood 2014),
//     a bijection with full avalanche;
//   * floating point by value: +0 and -0 hash alike, every NaN hashes alike;
//   * std::string, std::string_view, const char*, byte spans: hash64 of the
//     bytes, so all string forms of the same text agree.
// Users specialise tally::Hasher<MyType> with a const operator() returning
// std::uint64_t. Every function here is pure and thread-safe.
#pragma once

#include "../detail/abi.hpp"

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "../detail/primitives.hpp"
#include "detail/wyhash.hpp"
#include "platform.hpp"

TALLY_BEGIN_NAMESPACE

/// wyhash of `len` bytes at `data`. `data` may be null when len == 0.
[[nodiscard]] inline std::uint64_t hash64(const void* data, std::size_t len, std::uint64_t seed = 0) noexcept {
    using namespace detail;
    const auto* p = static_cast<const std::uint8_t*>(data);
    seed ^= wy_mix(seed ^ wy_secret[0], wy_secret[1]);
    std::uint64_t a = 0;
    std::uint64_t b = 0;
    if (TALLY_LIKELY(len <= 16)) {
        if (TALLY_LIKELY(len >= 4)) {
            const std::size_t shift = (len >> 3) << 2;  // 0 for 4..7 bytes, 4 for 8..16
            a = (load_le32(p) << 32) | load_le32(p + shift);
            b = (load_le32(p + len - 4) << 32) | load_le32(p + len - 4 - shift);
        } else if (TALLY_LIKELY(len > 0)) {
            a = load_1to3(p, len);
        }
    } else {
        std::size_t i = len;
        if (TALLY_UNLIKELY(i > 48)) {
            std::uint64_t see1 = seed;
            std::uint64_t see2 = seed;
            do {
                seed = wy_mix(load_le64(p) ^ wy_secret[1], load_le64(p + 8) ^ seed);
                see1 = wy_mix(load_le64(p + 16) ^ wy_secret[2], load_le64(p + 24) ^ see1);
                see2 = wy_mix(load_le64(p + 32) ^ wy_secret[3], load_le64(p + 40) ^ see2);
                p += 48;
                i -= 48;
            } while (TALLY_LIKELY(i > 48));
            seed ^= see1 ^ see2;
        }
        while (TALLY_UNLIKELY(i > 16)) {
            seed = wy_mix(load_le64(p) ^ wy_secret[1], load_le64(p + 8) ^ seed);
            i -= 16;
            p += 16;
        }
        a = load_le64(p + i - 16);
        b = load_le64(p + i - 8);
    }
    a ^= wy_secret[1];
    b ^= seed;
    wy_mum(a, b);
    return wy_mix(a ^ wy_secret[0] ^ len, b ^ wy_secret[1]);
}

[[nodiscard]] inline std::uint64_t hash64(std::string_view s, std::uint64_t seed = 0) noexcept {
    return hash64(s.data(), s.size(), seed);
}

/// The customisation point: specialise for your own types.
template <class T, class Enable = void>
struct Hasher;

template <class T>
struct Hasher<T, std::enable_if_t<std::is_integral_v<T> || std::is_enum_v<T>>> {
    constexpr std::uint64_t operator()(T value) const noexcept {
        if constexpr (std::is_enum_v<T>) {
            using U = std::underlying_type_t<T>;
            return detail::mix64(static_cast<std::uint64_t>(static_cast<U>(value)));
        } else {
            // Sign-extend so that int(-1) and long(-1) hash alike.
            return detail::mix64(static_cast<std::uint64_t>(value));
        }
    }
};

template <class T>
struct Hasher<T, std::enable_if_t<std::is_floating_point_v<T>>> {
    std::uint64_t operator()(T value) const noexcept {
        // By value: -0.0 == +0.0 must hash alike, and NaNs (which compare
        // unequal to everything) are folded to one canonical hash so that a
        // stream of NaNs counts as one distinct item rather than many.
        if (std::isnan(value)) return detail::mix64(0x7ff8000000000000ull);
        const double d = value == T(0) ? 0.0 : static_cast<double>(value);
        return detail::mix64(std::bit_cast<std::uint64_t>(d));
    }
};

template <>
struct Hasher<std::string_view> {
    std::uint64_t operator()(std::string_view s) const noexcept { return hash64(s.data(), s.size()); }
};

template <>
struct Hasher<std::string> : Hasher<std::string_view> {};

template <>
struct Hasher<const char*> {
    std::uint64_t operator()(const char* s) const noexcept {
        return s == nullptr ? hash64(nullptr, 0) : hash64(s, std::strlen(s));
    }
};
template <>
struct Hasher<char*> : Hasher<const char*> {};

template <std::size_t Extent>
struct Hasher<std::span<const std::byte, Extent>> {
    std::uint64_t operator()(std::span<const std::byte, Extent> s) const noexcept {
        return hash64(s.data(), s.size());
    }
};
template <std::size_t Extent>
struct Hasher<std::span<std::byte, Extent>> {
    std::uint64_t operator()(std::span<const std::byte> s) const noexcept { return hash64(s.data(), s.size()); }
};
template <std::size_t Extent>
struct Hasher<std::span<const unsigned char, Extent>> {
    std::uint64_t operator()(std::span<const unsigned char, Extent> s) const noexcept {
        return hash64(s.data(), s.size());
    }
};

/// True when Hasher<T> is usable for T.
template <class T, class H = Hasher<T>>
concept Hashable = requires(const H& h, const T& v) {
    { h(v) } -> std::convertible_to<std::uint64_t>;
};

/// hash of an item through Hasher<std::decay_t<T>>, with string literals and
/// char arrays treated as strings.
template <class T>
[[nodiscard]] std::uint64_t hash_of(const T& item) noexcept {
    using D = std::decay_t<T>;
    if constexpr (std::is_same_v<D, const char*> || std::is_same_v<D, char*>) {
        return Hasher<const char*>{}(item);
    } else {
        return Hasher<D>{}(item);
    }
}

TALLY_END_NAMESPACE
