// tally/detail/reservoir_random.hpp: the generator and the item codec that
// Reservoir and WeightedReservoir share.
//
// ReservoirRng is xoshiro256** (Blackman & Vigna, "Scrambled linear
// pseudorandom number generators", 2018/2021), seeded through SplitMix64 as
// its authors recommend. Its whole state is four words, so a reservoir can
// serialise it and continue after a round trip exactly where it left off.
// It is our own implementation from the published description; the output
// of the first draws is pinned in tests/test_reservoir.cpp.
//
// Not thread-safe: each reservoir owns one.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "../core/serialize.hpp"

namespace tally::detail {

class ReservoirRng {
  public:
    static constexpr std::size_t state_words = 4;

    explicit ReservoirRng(std::uint64_t seed) noexcept {
        // SplitMix64 spreads any seed (0 included) over all 256 bits; four
        // consecutive outputs are never all zero.
        for (auto& w : s_) w = splitmix64(seed);
    }

    /// xoshiro256**: the next 64 random bits.
    std::uint64_t next() noexcept {
        const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const std::uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }

    /// Exactly uniform in [0, n) for n >= 1 (Lemire's multiply-shift with
    /// rejection, "Fast random integer generation in an interval", 2019);
    /// n == 0 returns 0 rather than dividing by zero.
    std::uint64_t below(std::uint64_t n) noexcept {
        if (n == 0) return 0;
#if defined(__SIZEOF_INT128__)
        __extension__ typedef unsigned __int128 u128;
        u128 m = static_cast<u128>(next()) * n;
        auto low = static_cast<std::uint64_t>(m);
        if (low < n) {
            const std::uint64_t threshold = (0 - n) % n;
            while (low < threshold) {
                m = static_cast<u128>(next()) * n;
                low = static_cast<std::uint64_t>(m);
            }
        }
        return static_cast<std::uint64_t>(m >> 64);
#else
        const std::uint64_t threshold = (0 - n) % n;  // 2^64 mod n
        std::uint64_t r = next();
        while (r < threshold) r = next();
        return r % n;
#endif
    }

    /// Uniform in (0, 1]: never 0, so its logarithm is always finite.
    double uniform_open0() noexcept { return static_cast<double>((next() >> 11) + 1) * 0x1.0p-53; }

    /// Standard normal (Marsaglia's polar method).
    double normal() noexcept {
        for (;;) {
            const double u = 2.0 * uniform_open0() - 1.0;
            const double v = 2.0 * uniform_open0() - 1.0;
            const double s = u * u + v * v;
            if (s > 0.0 && s < 1.0) return u * std::sqrt(-2.0 * std::log(s) / s);
        }
    }

    /// Gamma(shape, 1) for shape >= 1 (Marsaglia & Tsang, "A simple method
    /// for generating gamma variables", 2000). O(1) expected draws for any
    /// shape, which is what makes a Beta draw with a shape of 10^12 cheap.
    double gamma(double shape) noexcept {
        const double d = shape - 1.0 / 3.0;
        const double c = 1.0 / std::sqrt(9.0 * d);
        for (;;) {
            double x = 0.0;
            double v = 0.0;
            do {
                x = normal();
                v = 1.0 + c * x;
            } while (v <= 0.0);
            v = v * v * v;
            const double u = uniform_open0();
            if (u < 1.0 - 0.0331 * (x * x) * (x * x)) return d * v;
            if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
        }
    }

    /// Beta(a, b) for a, b >= 1, as X / (X + Y) with X ~ Gamma(a), Y ~ Gamma(b).
    double beta(double a, double b) noexcept {
        const double x = gamma(a);
        const double y = gamma(b);
        return x / (x + y);
    }

    std::uint64_t state(std::size_t i) const noexcept { return s_[i]; }
    void set_state(const std::uint64_t (&words)[state_words]) noexcept {
        for (std::size_t i = 0; i < state_words; ++i) s_[i] = words[i];
    }
    friend bool operator==(const ReservoirRng&, const ReservoirRng&) = default;

    void write(ByteWriter& w) const {
        for (auto word : s_) w.u64(word);
    }
    static ReservoirRng read(ByteReader& r) {
        std::uint64_t words[state_words];
        for (auto& word : words) word = r.u64();
        // The all-zero state is xoshiro's one fixed point: it would emit zeros forever.
        format_check((words[0] | words[1] | words[2] | words[3]) != 0, "generator state is all zero");
        ReservoirRng rng(0);
        rng.set_state(words);
        return rng;
    }

  private:
    static std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
    static std::uint64_t splitmix64(std::uint64_t& x) noexcept {
        std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    std::uint64_t s_[state_words];
};

/// Item types a reservoir can serialise: trivially copyable types (written
/// in their object representation; arithmetic and enum types little-endian)
/// and std::string (u32 length, then the bytes). Any byte pattern must be a
/// valid T for corrupted input to stay harmless: true of integers, floats
/// and structs of them; an enum read from corrupted bytes may hold a value
/// outside its enumerators.
template <class T>
concept ReservoirSerializable = std::is_trivially_copyable_v<T> || std::is_same_v<T, std::string>;

/// Wire codes of the item encoding (one byte in each reservoir frame).
inline constexpr std::uint8_t item_encoding_fixed = 1;
inline constexpr std::uint8_t item_encoding_string = 2;

template <ReservoirSerializable T>
struct ReservoirItemCodec {
    static constexpr bool is_string = std::is_same_v<T, std::string>;
    static constexpr std::uint8_t encoding = is_string ? item_encoding_string : item_encoding_fixed;
    static constexpr std::uint32_t item_size = is_string ? 0 : static_cast<std::uint32_t>(sizeof(T));
    /// The fewest bytes one item takes on the wire (bounds counts before allocating).
    static constexpr std::size_t min_wire_bytes = is_string ? 4 : sizeof(T);

    static void write_params(ByteWriter& w) {
        w.u8(encoding);
        w.u32(item_size);
    }
    static void read_params(ByteReader& r, const char* who) {
        const std::uint8_t enc = r.u8();
        const std::uint32_t size = r.u32();
        if (enc != encoding || size != item_size)
            throw_format_error(std::string("tally: ") + who + ": item encoding " + std::to_string(enc) + " of size " +
                               std::to_string(size) + " where " + std::to_string(encoding) + " of size " +
                               std::to_string(item_size) + " was expected (a different item type)");
    }

    static void write(ByteWriter& w, const T& item) {
        if constexpr (is_string) {
            format_check(item.size() <= std::numeric_limits<std::uint32_t>::max(), "string item longer than 4 GiB");
            w.string(item);
        } else if constexpr ((std::is_integral_v<T> || std::is_enum_v<T> || std::is_floating_point_v<T>) &&
                             (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8)) {
            write_le(w, item);
        } else {
            w.bytes(&item, sizeof(T));  // native object representation
        }
    }

    static T read(ByteReader& r) {
        if constexpr (is_string) {
            return r.string();
        } else if constexpr ((std::is_integral_v<T> || std::is_enum_v<T> || std::is_floating_point_v<T>) &&
                             (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8)) {
            return read_le(r);
        } else {
            static_assert(std::is_default_constructible_v<T>, "tally: serialising a reservoir of T needs a default-constructible T");
            T item;
            r.bytes_into(&item, sizeof(T));
            return item;
        }
    }

  private:
    static void write_le(ByteWriter& w, const T& item) {
        if constexpr (sizeof(T) == 1) {
            std::uint8_t v;
            std::memcpy(&v, &item, 1);
            w.u8(v);
        } else if constexpr (sizeof(T) == 2) {
            std::uint16_t v;
            std::memcpy(&v, &item, 2);
            w.u16(v);
        } else if constexpr (sizeof(T) == 4) {
            std::uint32_t v;
            std::memcpy(&v, &item, 4);
            w.u32(v);
        } else {
            std::uint64_t v;
            std::memcpy(&v, &item, 8);
            w.u64(v);
        }
    }
    static T read_le(ByteReader& r) {
        T item;
        if constexpr (sizeof(T) == 1) {
            const std::uint8_t v = r.u8();
            std::memcpy(&item, &v, 1);
        } else if constexpr (sizeof(T) == 2) {
            const std::uint16_t v = r.u16();
            std::memcpy(&item, &v, 2);
        } else if constexpr (sizeof(T) == 4) {
            const std::uint32_t v = r.u32();
            std::memcpy(&item, &v, 4);
        } else {
            const std::uint64_t v = r.u64();
            std::memcpy(&item, &v, 8);
        }
        return item;
    }
};

}  // namespace tally::detail
