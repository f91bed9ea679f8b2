// tally/core/seed.hpp: the hash seed that keyed tables and sketches take.
//
// With the default seed 0 anyone can compute where an item lands, and so craft
// items that collide (in a Count-Min row, a Bloom block, a keyed limiter's
// probe group). Components fed by untrusted input take Seed::random(); the
// seed is part of a sketch's serialized form, so sketches that share one
// still merge. Seed is a plain value: copying it is thread-safe,
// Seed::random() is thread-safe.
#pragma once

#include "../detail/abi.hpp"

#include <cstdint>
#include <random>

TALLY_BEGIN_NAMESPACE

/// A 64-bit hash seed. Seed{} is 0, the reproducible default.
struct Seed {
    std::uint64_t value = 0;

    constexpr Seed() noexcept = default;
    constexpr explicit Seed(std::uint64_t v) noexcept : value(v) {}

    /// A seed drawn from std::random_device: unpredictable to a caller who
    /// controls the items.
    [[nodiscard]] static Seed random() {
        std::random_device rd;
        const std::uint64_t hi = rd(), lo = rd();
        return Seed{(hi << 32) ^ lo ^ 0x9e3779b97f4a7c15ULL};
    }

    friend constexpr bool operator==(Seed, Seed) noexcept = default;
};

TALLY_END_NAMESPACE
