// tally/sketch/sampling/reservoir.hpp: a uniform random sample of k items from a
// stream of unknown length, in one pass, mergeable across shards.
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <numeric>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../core/platform.hpp"
#include "../../core/serialize.hpp"
#include "../../core/summary.hpp"
#include "detail/reservoir_random.hpp"
#include "../../detail/primitives.hpp"
#include "../../detail/throw.hpp"

TALLY_BEGIN_NAMESPACE

/// A uniform random sample without replacement of k items from a stream of
/// unknown length: Vitter's Algorithm R semantics, skipping with Li's
/// Algorithm L (K.-H. Li, "Reservoir-sampling algorithms of time complexity
/// O(n(1 + log(N/n)))", ACM TOMS 20(4), 1994) once n >= 16 k.
///
/// Guarantee (exact, given an ideal generator): after n items,
///     size() == min(k, n)   and   P(item i is in sample()) = min(k, n) / n,
/// every min(k, n)-subset equally likely. Same seed and items, same sample
/// on every platform. merge() leaves a uniform sample of the union stream
/// (hypergeometric split, then Algorithm L's W redrawn from its exact law);
/// the merge laws hold in distribution.
///
/// Cost: add is O(1), a skipped item one increment and compare; add_range
/// jumps over skipped items; O(k (1 + log(n/k))) random draws in all.
/// Memory: min(k, n) items plus 72 bytes; memory_bytes().
/// Thread safety: const methods may run concurrently; add, add_range, merge
/// and clear need exclusive access. Details: docs/reservoir.md.
///
///     tally::Reservoir<std::uint64_t> r(/*k=*/100, /*seed=*/42);
///     for (std::uint64_t id : request_ids) r.add(id);
///     for (std::uint64_t id : r.sample()) audit(id);   // 100 uniform picks
template <class T>
class Reservoir {
    static_assert(!std::is_same_v<T, bool>, "tally::Reservoir<bool>: std::vector<bool> cannot back a span; use std::uint8_t");

  public:
    using value_type = T;
    /// The largest k accepted (the wire format checks k against it too).
    static constexpr std::uint64_t max_k = detail::reservoir_max_k;
    static constexpr std::uint8_t format_version = 2;
    /// Items per slot (n / k) below which the reservoir runs Algorithm R;
    /// part of the format's invariants.
    static constexpr std::uint64_t dense_factor = 16;

    /// A reservoir that keeps `k` items, its generator seeded with `seed`.
    /// Throws std::invalid_argument unless 1 <= k <= max_k.
    Reservoir(std::size_t k, std::uint64_t seed)
        : k_(detail::checked_reservoir_k("tally::Reservoir::Reservoir", k)), rng_(seed) {}

    /// Offers one item. O(1); a skipped item costs one increment and one compare.
    TALLY_ALWAYS_INLINE void add(const T& item) noexcept(nothrow_copy) { offer(item); }
    TALLY_ALWAYS_INLINE void add(T&& item) noexcept(nothrow_move) { offer(std::move(item)); }

    /// Offers every item of `items`, in order; the result is exactly that of
    /// calling add() on each (same draws, same sample). For random-access
    /// sized ranges it jumps straight from one accepted item to the next and
    /// never reads the skipped ones.
    template <std::ranges::input_range R>
        requires std::convertible_to<std::ranges::range_reference_t<R>, T>
    void add_range(R&& items);

    /// Forgets the stream; keeps k and the generator's state.
    void clear() noexcept {
        sample_.clear();
        seen_ = 0;
        next_ = 0;
        w_ = 0.0;
    }

    /// The sample: min(k, total()) items, in no particular order.
    [[nodiscard]] std::span<const T> sample() const noexcept { return sample_; }
    /// Items offered so far (including those merged in), saturating at 2^64 - 1.
    [[nodiscard]] std::uint64_t total() const noexcept { return seen_; }
    /// Capacity of the sample.
    [[nodiscard]] std::size_t k() const noexcept { return static_cast<std::size_t>(k_); }
    [[nodiscard]] std::size_t size() const noexcept { return sample_.size(); }
    [[nodiscard]] bool empty() const noexcept { return seen_ == 0; }
    /// This object, the sample's storage and, for std::string, the strings' heap buffers.
    [[nodiscard]] std::size_t memory_bytes() const noexcept {
        return sizeof(*this) + detail::items_memory_bytes(sample_);
    }

    [[nodiscard]] bool mergeable_with(const Reservoir& other) const noexcept { return k_ == other.k_; }

    /// Replaces this sample by a uniform sample of min(k, n1 + n2) items of
    /// both streams (see the class comment). Throws std::invalid_argument,
    /// leaving *this unchanged, if k differs.
    Reservoir& merge(const Reservoir& other);

    /// The bytes documented in docs/reservoir.md (version 2).
    [[nodiscard]] std::vector<std::byte> serialize() const
        requires detail::ReservoirSerializable<T>
;

    /// Reads serialize()'s bytes, version 2 or 1. Throws tally::FormatError
    /// for anything that is not exactly a valid encoding of a Reservoir<T>.
    [[nodiscard]] static Reservoir deserialize(std::span<const std::byte> bytes)
        requires detail::ReservoirSerializable<T>
;

  private:
    static constexpr bool nothrow_copy =
        std::is_nothrow_copy_constructible_v<T> && std::is_nothrow_copy_assignable_v<T>;
    static constexpr bool nothrow_move =
        std::is_nothrow_move_constructible_v<T> && std::is_nothrow_move_assignable_v<T>;

    static constexpr std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) noexcept { return detail::sat_add(a, b); }

    /// W stays positive even if a product of extreme draws underflows (the
    /// skip then saturates), so the state is always one the format accepts.
    static double floor_w(double w) noexcept {
        return w > std::numeric_limits<double>::denorm_min() ? w : std::numeric_limits<double>::denorm_min();
    }

    /// Items to pass over before the next accepted one: floor(log(u) /
    /// log(1 - W)), geometric with success probability W. Saturates instead
    /// of overflowing when W is so small the skip exceeds 2^64.
    static std::uint64_t skip(detail::ReservoirRng& rng, double w) noexcept {
        const double log_u = std::log(rng.uniform_open0());  // <= 0, finite
        const double log_miss = std::log1p(-w);              // < 0 for w in (0, 1]
        if (!(log_miss < 0.0)) return std::numeric_limits<std::uint64_t>::max();  // w == 0 (underflow)
        const double q = log_u / log_miss;                   // >= 0; +-0 when w == 1
        if (!(q < 0x1.0p64)) return std::numeric_limits<std::uint64_t>::max();
        return static_cast<std::uint64_t>(q);
    }

    template <class U>
    TALLY_ALWAYS_INLINE void offer(U&& item) {
        const std::uint64_t i = seen_;
        seen_ = i + 1;
        if (TALLY_LIKELY(i < next_)) return;
        if (sample_.size() < k_) {
            fill(i, std::forward<U>(item));
        } else {
            replace(i, std::forward<U>(item));
        }
    }

    template <class U>
    void fill(std::uint64_t i, U&& item) {
        sample_.push_back(std::forward<U>(item));
        after(i + 1);
    }

    template <class U>
    void replace(std::uint64_t i, U&& item) {
        if (w_ == 0.0) {
            // Dense phase, Algorithm R: item i enters with probability k / (i + 1).
            const std::uint64_t j = rng_.below(i + 1);
            if (j < k_) sample_[static_cast<std::size_t>(j)] = std::forward<U>(item);
        } else {
            // Algorithm L: the accepted item's key is uniform below W and
            // evicts the holder of the largest key, equally likely any slot;
            // the new largest key is W times the largest of k uniforms.
            sample_[static_cast<std::size_t>(rng_.below(k_))] = std::forward<U>(item);
            w_ = floor_w(w_ * std::exp(std::log(rng_.uniform_open0()) / static_cast<double>(k_)));
        }
        after(i + 1);
    }

    /// Sets the next index to examine once n items are seen: every item
    /// while filling or dense; at n = sparse_from() W is drawn from its
    /// exact law and skipping starts.
    void after(std::uint64_t n) {
        if (n < sparse_from()) {
            next_ = n;
            return;
        }
        if (w_ == 0.0) w_ = draw_w(rng_, n);
        next_ = sat_add(n, skip(rng_, w_));
    }

    /// First count at which the reservoir skips (Algorithm L).
    std::uint64_t sparse_from() const noexcept { return k_ * dense_factor; }

    /// W after n >= k items: the k-th smallest of n uniform keys,
    /// Beta(k, n - k + 1), independent of which items are held.
    double draw_w(detail::ReservoirRng& rng, std::uint64_t n) const noexcept {
        return floor_w(rng.beta(static_cast<double>(k_), static_cast<double>(n - k_) + 1.0));
    }

    std::uint64_t k_;
    std::uint64_t seen_ = 0;
    std::uint64_t next_ = 0;  // stream index of the next item to examine
    double w_ = 0.0;          // Algorithm L's W; 0 while filling and dense
    detail::ReservoirRng rng_;
    std::vector<T> sample_;
};

TALLY_END_NAMESPACE

#include "detail/reservoir_impl.hpp"
