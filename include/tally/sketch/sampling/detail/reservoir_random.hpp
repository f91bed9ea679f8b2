// tally/sketch/sampling/detail/reservoir_random.hpp: the generator, the k check and the item
// descriptor that Reservoir and WeightedReservoir share.
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

#include "../../../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../../core/serialize.hpp"
#include "../../common/detail/item_codec.hpp"
#include "../../../detail/primitives.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

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
        uint128 m = static_cast<uint128>(next()) * n;
        auto low = static_cast<std::uint64_t>(m);
        if (low < n) {
            const std::uint64_t threshold = (0 - n) % n;
            while (low < threshold) {
                m = static_cast<uint128>(next()) * n;
                low = static_cast<std::uint64_t>(m);
            }
        }
        return static_cast<std::uint64_t>(m >> 64);
    }

    /// Uniform in (0, 1]: never 0, so its logarithm is always finite.
    double uniform_open0() noexcept { return static_cast<double>((next() >> 11) + 1) * 0x1.0p-53; }
    /// Uniform in (0, 1): neither end, so log(u) and log1p(-u) are finite.
    double uniform_open() noexcept { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }

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

/// Item types a reservoir can serialise (see item_codec.hpp).
template <class T>
concept ReservoirSerializable = WireItem<T>;

/// What Reservoir and WeightedReservoir share: k in [1, max_k], checked
/// before any arithmetic on it.
inline constexpr std::uint64_t reservoir_max_k = 0xFFFFFFFFull;
inline std::uint64_t checked_reservoir_k(const char* who, std::size_t k) {
    check_range(who, "k", k, std::size_t{1}, static_cast<std::size_t>(reservoir_max_k));
    return static_cast<std::uint64_t>(k);
}

/// The merge precondition of both reservoirs: the same k.
inline void check_same_k(const char* who, std::uint64_t k, std::uint64_t other_k) {
    if (k != other_k)
        throw_invalid_argument(std::string(who) + ": k " + std::to_string(k) + " does not match the other reservoir's k " +
                               std::to_string(other_k));
}

// The cases of a sampler's merge that draw nothing, in order: a different k
// is refused; an empty other changes nothing; a sampler merged with itself
// merges a copy; an empty one takes the other's state but keeps its own
// generator (`self_rng`, a member of self). True when the merge is done.
template <class Sampler>
bool merge_without_sampling(const char* who, Sampler& self, const Sampler& other, std::uint64_t k,
                            std::uint64_t other_k, bool self_empty, bool other_empty, ReservoirRng& self_rng) {
    check_same_k(who, k, other_k);
    if (other_empty) return true;
    if (&self == &other) {
        const Sampler copy = other;
        self.merge(copy);
        return true;
    }
    if (self_empty) {
        // Copied first, so a throwing copy leaves self as it was.
        Sampler copy = other;
        const ReservoirRng own = self_rng;
        self = std::move(copy);
        self_rng = own;
        return true;
    }
    return false;
}

/// Heap bytes of a sample: its storage and, for std::string, the buffers of
/// strings too long for the in-object (small-string) storage.
template <class T>
std::size_t items_memory_bytes(const std::vector<T>& items) noexcept {
    std::size_t bytes = items.capacity() * sizeof(T);
    if constexpr (std::is_same_v<T, std::string>) {
        const std::size_t inline_capacity = std::string().capacity();
        for (const std::string& s : items)
            if (s.capacity() > inline_capacity) bytes += s.capacity() + 1;
    }
    return bytes;
}

/// Reads the item descriptor of either frame version: version 1 wrote
/// u8 encoding (1 fixed-size, 2 string) and u32 size, version 2 the two
/// bytes of item_codec.hpp. Version 1 wrote arithmetic items little-endian
/// but other fixed-size items in native byte order, so it is refused for
/// types with a user-defined ItemCodec.
template <ReservoirSerializable T>
void read_item_descriptor(ByteReader& r, std::uint8_t version, const char* who) {
    using Codec = WireCodec<T>;
    if (version >= 2) {
        const std::uint8_t kind = r.u8();
        const std::uint8_t size = r.u8();
        Codec::check_descriptor(kind, size, who);
        return;
    }
    const std::uint8_t enc = r.u8();
    const std::uint32_t size = r.u32();
    const std::uint8_t want_enc = Codec::is_string ? 2 : 1;
    const std::uint32_t want_size = Codec::is_string ? 0 : Codec::size;
    if (enc != want_enc || size != want_size)
        throw_format_error(std::string(who) + ": item encoding " + std::to_string(enc) + " of size " +
                           std::to_string(size) + " where " + std::to_string(want_enc) + " of size " +
                           std::to_string(want_size) + " was expected (a different item type)");
    if (Codec::is_custom)
        throw_format_error(std::string(who) +
                           ": version 1 stored this item type in native byte order; it cannot be read portably");
}

/// What both samplers' frames open with: the header, the item descriptor,
/// k and the count of items seen.
struct SamplerHead {
    std::uint8_t version;
    std::uint64_t k;
    std::uint64_t seen;
};

template <ReservoirSerializable T>
void write_sampler_head(ByteWriter& w, Family family, std::uint8_t version, std::uint64_t k, std::uint64_t seen) {
    w.header(family, version);
    WireCodec<T>::write_descriptor(w);
    w.u64(k);
    w.u64(seen);
}

/// Reads and checks SamplerHead (k in [1, max_k]); `who` names the sampler in errors.
template <ReservoirSerializable T>
SamplerHead read_sampler_head(ByteReader& r, Family family, std::uint8_t max_version, std::uint64_t max_k,
                              const char* who) {
    SamplerHead head{};
    head.version = r.header(family, max_version);
    read_item_descriptor<T>(r, head.version, who);
    head.k = r.u64();
    if (head.k < 1 || head.k > max_k) throw_format_error_of({who, ": k ", head.k, " is out of range [1, ", max_k, "]"});
    head.seen = r.u64();
    return head;
}

/// Reads the count of retained entries that ends a sampler's state: it must
/// be min(k, seen), and the bytes left must hold that many entries of at
/// least min_entry_bytes each. `what` names an entry in errors.
inline std::size_t read_sample_size(ByteReader& r, std::uint64_t k, std::uint64_t seen, std::size_t min_entry_bytes,
                                    const char* what) {
    const std::uint64_t m = r.count(r.u64(), min_entry_bytes, k, what);
    if (m != std::min(k, seen))
        throw_format_error_of({"tally: ", what, " count ", m, " is not min(k, seen) = ", std::min(k, seen)});
    return static_cast<std::size_t>(m);
}

}  // namespace detail
TALLY_END_NAMESPACE
