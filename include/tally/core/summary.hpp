// tally/core/summary.hpp: the MergeableSummary concept every sketch satisfies,
// and SummaryObservers, the observers every sketch answers alike.
//
// Laws (checked for every summary by tests/merge_laws.hpp):
//   merge is commutative and associative (exactly for deterministic
//   summaries, in distribution for sampled ones); merging an empty summary is
//   the identity; deserialize(serialize(s)) answers every query as s does;
//   merging incompatible summaries throws std::invalid_argument and leaves
//   the target unchanged.
#pragma once

#include "../detail/abi.hpp"

#include <concepts>
#include <cstddef>
#include <type_traits>
#include <iterator>
#include <ranges>
#include <span>
#include <vector>

#include "../detail/throw.hpp"

TALLY_BEGIN_NAMESPACE

template <class S>
concept MergeableSummary = std::copyable<S> && requires(S& s, const S& other, std::span<const std::byte> bytes) {
    { s.merge(other) } -> std::same_as<S&>;
    { other.mergeable_with(other) } -> std::same_as<bool>;
    { other.serialize() } -> std::same_as<std::vector<std::byte>>;
    { S::deserialize(bytes) } -> std::same_as<S>;
};

/// The observers every summary answers with one meaning:
///   total()         the weight of the stream summarised (items or counts added;
///                   an integer, or a double for real-valued weights);
///   empty()         nothing has been added since construction or clear();
///   memory_bytes()  bytes the summary occupies, heap included;
///   clear()         back to the state of a newly constructed summary with the
///                   same parameters (and seed).
template <class S>
concept SummaryObservers = requires(S& s, const S& cs) {
    requires std::is_arithmetic_v<std::remove_cvref_t<decltype(cs.total())>>;
    { cs.empty() } -> std::same_as<bool>;
    { cs.memory_bytes() } -> std::same_as<std::size_t>;
    { s.clear() } -> std::same_as<void>;
};

/// A copy of `a` merged with `b`. Throws what `merge` throws.
template <MergeableSummary S>
[[nodiscard]] S merged(S a, const S& b) {
    a.merge(b);
    return a;
}

/// Merges every summary of a non-empty range, left to right. Throws
/// std::invalid_argument for an empty range or incompatible members.
template <std::ranges::input_range R>
    requires MergeableSummary<std::ranges::range_value_t<R>>
[[nodiscard]] std::ranges::range_value_t<R> merge_all(R&& range) {
    auto it = std::ranges::begin(range);
    const auto end = std::ranges::end(range);
    if (it == end) detail::throw_invalid_argument("tally::merge_all: range is empty (need at least one summary)");
    std::ranges::range_value_t<R> result = *it;
    for (++it; it != end; ++it) result.merge(*it);
    return result;
}

TALLY_END_NAMESPACE
