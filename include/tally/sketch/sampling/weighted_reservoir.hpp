// tally/sketch/sampling/weighted_reservoir.hpp: a weighted random sample without
// replacement of k items from a stream, in one pass, mergeable.
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
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

/// k items sampled without replacement with probabilities proportional to
/// their weights, from a stream of unknown length: Efraimidis & Spirakis,
/// "Weighted random sampling with a reservoir", IPL 97(5), 2006 (A-Res keys,
/// A-ExpJ exponential jumps over the weight of skipped items).
///
/// Guarantee (exact, given an ideal generator, for every finite weight > 0,
/// subnormal ones included): the sample has the law of k successive draws
/// without replacement, each item drawn with probability w_i / (weight of
/// the items not yet drawn); for k = 1, P(i) = w_i / sum(w). Keys are kept
/// as log(w) - log(-log u), an increasing function of u^(1/w) that is finite
/// for every such weight. merge() keeps the k largest keys of both samples:
/// exactly the sample of the union, so merge is commutative and associative.
///
/// Cost: after the first k items, a skipped item is a subtraction and a
/// compare; O(k log(n/k)) items draw random numbers. Memory: min(k, n) items
/// and keys plus 80 bytes; memory_bytes(). Thread safety: const methods may
/// run concurrently; add, try_add, merge and clear need exclusive access.
/// add() throws std::invalid_argument for a weight that is not finite and
/// > 0; try_add() returns false instead. Details: docs/reservoir.md.
///
///     tally::WeightedReservoir<std::string> r(/*k=*/10, /*seed=*/7);
///     for (const auto& [user, bytes] : transfers) r.add(user, double(bytes));
///     // r.sample(): 10 users, heavy senders more likely, none twice
template <class T>
class WeightedReservoir {
    static_assert(!std::is_same_v<T, bool>, "tally::WeightedReservoir<bool>: std::vector<bool> cannot back a span; use std::uint8_t");

  public:
    using value_type = T;
    static constexpr std::uint64_t max_k = detail::reservoir_max_k;
    static constexpr std::uint8_t format_version = 2;

    /// A reservoir that keeps `k` items, its generator seeded with `seed`.
    /// Throws std::invalid_argument unless 1 <= k <= max_k.
    WeightedReservoir(std::size_t k, std::uint64_t seed)
        : k_(detail::checked_reservoir_k("tally::WeightedReservoir::WeightedReservoir", k)), rng_(seed) {}

    /// Offers `item` with `weight`. Throws std::invalid_argument, changing
    /// nothing, unless weight is finite and > 0.
    void add(const T& item, double weight) {
        if (!valid_weight(weight)) throw_bad_weight(weight);
        offer(item, weight);
    }
    void add(T&& item, double weight) {
        if (!valid_weight(weight)) throw_bad_weight(weight);
        offer(std::move(item), weight);
    }
    /// As add(), but returns false (changing nothing) for a bad weight.
    bool try_add(const T& item, double weight) noexcept(nothrow_copy) {
        if (!valid_weight(weight)) return false;
        offer(item, weight);
        return true;
    }

    /// Forgets the stream; keeps k and the generator's state.
    void clear() noexcept {
        keys_.clear();
        items_.clear();
        seen_ = 0;
        total_weight_ = 0.0;
        jump_ = 0.0;
    }

    /// The sample: min(k, items_seen()) items, in heap order.
    [[nodiscard]] std::span<const T> sample() const noexcept { return items_; }
    /// The key log(w) - log(-log u) of each sampled item, in the same order
    /// (larger keys win; +inf for u = 1).
    [[nodiscard]] std::span<const double> keys() const noexcept { return keys_; }
    /// Items offered so far.
    [[nodiscard]] std::uint64_t items_seen() const noexcept { return seen_; }
    /// The stream's weight: the sum of all weights offered (+inf once it overflows).
    [[nodiscard]] double total() const noexcept { return total_weight_; }
    [[nodiscard]] std::size_t k() const noexcept { return static_cast<std::size_t>(k_); }
    [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
    [[nodiscard]] bool empty() const noexcept { return seen_ == 0; }
    [[nodiscard]] std::size_t memory_bytes() const noexcept {
        return sizeof(*this) + keys_.capacity() * sizeof(double) + detail::items_memory_bytes(items_);
    }

    [[nodiscard]] bool mergeable_with(const WeightedReservoir& other) const noexcept { return k_ == other.k_; }

    /// Keeps the k largest keys of both samples (see the class comment).
    /// Throws std::invalid_argument, leaving *this unchanged, if k differs.
    WeightedReservoir& merge(const WeightedReservoir& other);

    /// The bytes documented in docs/reservoir.md (version 2).
    [[nodiscard]] std::vector<std::byte> serialize() const
        requires detail::ReservoirSerializable<T>
;

    /// Reads serialize()'s bytes, version 2 or 1 (whose keys log(u) / w are
    /// converted). Throws tally::FormatError for anything that is not exactly
    /// a valid encoding of a WeightedReservoir<T>.
    [[nodiscard]] static WeightedReservoir deserialize(std::span<const std::byte> bytes)
        requires detail::ReservoirSerializable<T>
;

  private:
    static constexpr bool nothrow_copy =
        std::is_nothrow_copy_constructible_v<T> && std::is_nothrow_copy_assignable_v<T>;

    static bool valid_weight(double w) noexcept {
        return w > 0.0 && w <= std::numeric_limits<double>::max();  // false for NaN and inf
    }
    [[noreturn]] static void throw_bad_weight(double w) {
        detail::throw_out_of_range_message("tally::WeightedReservoir::add", "weight", w, 0.0,
                                           std::numeric_limits<double>::max(), detail::Bounds::left_open);
    }
    static constexpr std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) noexcept { return detail::sat_add(a, b); }

    /// Items lighter than this skip the jump: with such weights the jump
    /// would be a subnormal number, too coarse to compare against them.
    static constexpr double jump_min_weight = 0x1.0p-1000;

    /// The key of an item of weight w with uniform draw u in (0, 1]:
    /// log(w) - log(-log u), increasing in u^(1/w), finite for every finite
    /// w > 0 (log of a subnormal is about -745), +inf for u = 1.
    static double key_of(double w, double u) noexcept { return std::log(w) - std::log(-std::log(u)); }

    /// Weight to pass over before the next insertion: exponential with rate
    /// -log T, T = the smallest key as u^(1/w), i.e. rate exp(-min_key):
    /// X = -log(r) * exp(min_key). +inf when it overflows (then every item
    /// is tested on its own key, see offer()).
    static double draw_jump(detail::ReservoirRng& rng, double min_key) noexcept {
        const double e = -std::log(rng.uniform_open0());  // >= 0
        if (e == 0.0) return 0.0;
        return e * std::exp(min_key);  // 0 for min_key = -inf, +inf for +inf
    }

    template <class U>
    void offer(U&& item, double w) {
        ++seen_;
        total_weight_ += w;
        if (items_.size() < k_) {
            keys_.push_back(key_of(w, rng_.uniform_open0()));
            items_.push_back(std::forward<U>(item));
            sift_up(keys_, items_, keys_.size() - 1);
            if (items_.size() == k_) jump_ = draw_jump(rng_, keys_[0]);
            return;
        }
        if (TALLY_UNLIKELY(w < jump_min_weight || !(jump_ < std::numeric_limits<double>::infinity()))) {
            // A-Res for this item alone: its own key against the smallest.
            // The pending jump is exponential, hence memoryless: an item
            // decided on its own leaves its law unchanged.
            const double key = key_of(w, rng_.uniform_open0());
            if (!(key > keys_[0])) return;
            replace_root(std::forward<U>(item), key);
            return;
        }
        jump_ -= w;
        if (TALLY_LIKELY(jump_ > 0.0)) return;
        // This item's key is conditioned to beat the smallest key T: with
        // t = T^w and E = -log t = exp(log w - min_key), its u is uniform in
        // (t, 1), so y = -log u = -log1p(expm1(-E) v), v uniform in (0, 1).
        const double log_e = std::log(w) - keys_[0];
        const double v = rng_.uniform_open();
        // For tiny E, y = E v (1 + O(E)) and expm1/log1p would lose it to underflow.
        const double log_y = log_e < -600.0 ? log_e + std::log(v) : std::log(-std::log1p(std::expm1(-std::exp(log_e)) * v));
        replace_root(std::forward<U>(item), std::max(std::log(w) - log_y, keys_[0]));
    }

    template <class U>
    void replace_root(U&& item, double key) {
        keys_[0] = key;
        items_[0] = std::forward<U>(item);
        sift_down(keys_, items_, 0);
        jump_ = draw_jump(rng_, keys_[0]);
    }

    // A min-heap on keys over two parallel vectors, so sample() can be a span of T.
    static void sift_up(std::vector<double>& keys, std::vector<T>& items, std::size_t i) {
        while (i > 0) {
            const std::size_t parent = (i - 1) / 2;
            if (!(keys[i] < keys[parent])) break;
            std::swap(keys[i], keys[parent]);
            std::swap(items[i], items[parent]);
            i = parent;
        }
    }
    static void sift_down(std::vector<double>& keys, std::vector<T>& items, std::size_t i) {
        const std::size_t n = keys.size();
        for (;;) {
            const std::size_t l = 2 * i + 1;
            if (l >= n) break;
            std::size_t c = l;
            if (l + 1 < n && keys[l + 1] < keys[l]) c = l + 1;
            if (!(keys[c] < keys[i])) break;
            std::swap(keys[i], keys[c]);
            std::swap(items[i], items[c]);
            i = c;
        }
    }
    static void make_heap(std::vector<double>& keys, std::vector<T>& items) {
        for (std::size_t i = keys.size() / 2; i-- > 0;) sift_down(keys, items, i);
    }

    std::uint64_t k_;
    std::uint64_t seen_ = 0;
    double total_weight_ = 0.0;
    double jump_ = 0.0;  // weight still to pass before the next insertion
    detail::ReservoirRng rng_;
    std::vector<double> keys_;  // log(u) / w, min-heap
    std::vector<T> items_;
};

TALLY_END_NAMESPACE

#include "detail/weighted_reservoir_impl.hpp"
