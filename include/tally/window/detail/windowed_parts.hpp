// tally/window/detail/windowed_parts.hpp: Windowed's frame family id, the
// WindowedSampler concept (summaries seeded per bucket) and its seed mixer
// (window/windowed.hpp).
#pragma once

#include "../../detail/abi.hpp"

#include <concepts>
#include <cstddef>
#include <cstdint>

#include "../../core/seed.hpp"
#include "../../core/serialize.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

/// Frame family id of Windowed (the next free id after tdigest = 8).
inline constexpr Family windowed_family = static_cast<Family>(9);

/// A summary that draws random numbers from a generator it owns and is built
/// from (k, seed): Reservoir, WeightedReservoir. Copies of one such summary
/// would replay the same draws, so Windowed seeds each bucket on its own.
template <class S>
concept WindowedSampler = requires(const S& s) {
    { s.k() } -> std::convertible_to<std::size_t>;
    s.sample();
} && (std::constructible_from<S, std::size_t, std::uint64_t> || std::constructible_from<S, std::size_t, Seed>);

constexpr std::uint64_t windowed_mix(std::uint64_t z) noexcept {  // SplitMix64's finalizer
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

}  // namespace detail
TALLY_END_NAMESPACE
