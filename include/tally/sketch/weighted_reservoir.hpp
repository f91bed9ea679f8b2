// tally/sketch/weighted_reservoir.hpp: a weighted random sample without
// replacement of k items from a stream, in one pass, mergeable.
#pragma once

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

#include "../core/platform.hpp"
#include "../core/serialize.hpp"
#include "../core/summary.hpp"
#include "../detail/reservoir_random.hpp"
#include "../detail/throw.hpp"

namespace tally {

/// WeightedReservoir<T>: k items sampled without replacement with
/// probabilities proportional to their weights, from a stream of unknown
/// length.
///
/// Algorithm: Efraimidis & Spirakis, "Weighted random sampling with a
/// reservoir", Information Processing Letters 97(5), 2006. Every item gets
/// the key u^(1/w) (u uniform) and the sample is the k items with the
/// largest keys (A-Res); after the first k items, A-ExpJ draws how much
/// weight to pass over before the next insertion, an exponential jump, so
/// skipped items cost a subtraction and a compare, and only
/// O(k log(n/k)) items draw random numbers. Keys are kept as log(u) / w,
/// which orders exactly like u^(1/w) but never underflows: with w = 1e-3,
/// u^(1/w) is 0 in double precision for almost every u.
///
/// Guarantee (exact, given an ideal generator): the sample has the law of
/// k successive draws without replacement, each item drawn with probability
/// w_i / (total weight of the items not yet drawn). For k = 1 that is
/// P(i) = w_i / sum(w). size() == min(k, seen()).
///
/// Merge keeps the k largest keys of both samples: since every item's key
/// is drawn independently of the others, the result is exactly the sample
/// one reservoir would hold over the union (same law, and the same items
/// for the same keys). The pending jump is then redrawn from the target's
/// generator (it is memoryless: exponential with rate -log(smallest key)).
/// So merge is commutative and associative in the sample it keeps, exactly;
/// merging an empty reservoir changes nothing; merging into an empty one
/// copies the other's sample and jump, keeping its own generator.
/// Mergeable when k is the same (T is the same by type).
///
/// Weights: must be finite and > 0. add() throws std::invalid_argument for
/// anything else (0, negatives, NaN, infinities are bad input, not a
/// sampling choice) and leaves the reservoir unchanged; try_add() is the
/// noexcept alternative that returns false instead.
///
/// Memory: min(k, n) items and min(k, n) doubles (the log keys, a min-heap),
/// plus 80 bytes.
///
/// Thread safety: none inside. Const methods (sample, keys, seen,
/// total_weight, mergeable_with, serialize) may run concurrently with each
/// other; add, try_add and merge need exclusive access.
///
/// Example:
///     tally::WeightedReservoir<std::string> r(/*k=*/10, /*seed=*/7);
///     for (const auto& [user, bytes] : transfers) r.add(user, double(bytes));
///     // r.sample(): 10 users, heavy senders more likely, none twice
///
/// Wire format (Family::weighted_reservoir, version 1), after the 8-byte
/// frame header:
///
///   offset size  field
///   8      1     item encoding: 1 = fixed-size (trivially copyable T), 2 = string
///   9      4     item size in bytes (sizeof(T); 0 for strings)
///   13     8     k, in [1, 4294967295]
///   21     8     seen: items offered so far
///   29     8     total weight offered, f64, >= 0 (+inf once it overflows)
///   37     8     jump, f64: weight still to pass before the next insertion;
///                0 while filling (seen < k), >= 0 (possibly +inf) after
///   45     32    generator state: four u64 words of xoshiro256**, not all zero
///   77     8     m: sample size, must equal min(k, seen)
///   85     ...   m entries in min-heap order (parent key <= child key):
///                key as f64 (log(u) / w, <= 0, not NaN), then the item as in
///                Reservoir's format (fixed-size bytes, or u32 length + bytes)
///
/// A deserialised reservoir continues exactly as the original would have.
template <class T>
class WeightedReservoir {
    static_assert(!std::is_same_v<T, bool>, "tally::WeightedReservoir<bool>: std::vector<bool> cannot back a span; use std::uint8_t");

  public:
    using value_type = T;
    static constexpr std::uint64_t max_k = 0xFFFFFFFFull;
    static constexpr std::uint8_t format_version = 1;

    /// A reservoir that keeps `k` items, its generator seeded with `seed`.
    /// Throws std::invalid_argument unless 1 <= k <= max_k.
    WeightedReservoir(std::size_t k, std::uint64_t seed) : k_(static_cast<std::uint64_t>(k)), rng_(seed) {
        if (k_ == 0 || k_ > max_k)
            detail::throw_invalid_argument("tally::WeightedReservoir: k " + std::to_string(k) +
                                           " is out of range [1, " + std::to_string(max_k) + "]");
    }

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

    /// The sample: min(k, seen()) items, in heap order.
    std::span<const T> sample() const noexcept { return items_; }
    /// The log-space key log(u) / w of each sampled item, in the same order.
    std::span<const double> keys() const noexcept { return keys_; }
    std::uint64_t seen() const noexcept { return seen_; }
    double total_weight() const noexcept { return total_weight_; }
    std::size_t k() const noexcept { return static_cast<std::size_t>(k_); }
    std::size_t size() const noexcept { return items_.size(); }
    bool empty() const noexcept { return seen_ == 0; }

    bool mergeable_with(const WeightedReservoir& other) const noexcept { return k_ == other.k_; }

    /// Keeps the k largest keys of both samples (see the class comment).
    /// Throws std::invalid_argument, leaving *this unchanged, if k differs.
    WeightedReservoir& merge(const WeightedReservoir& other) {
        if (!mergeable_with(other))
            detail::throw_invalid_argument("tally::WeightedReservoir::merge: k " + std::to_string(k_) +
                                           " does not match the other reservoir's k " + std::to_string(other.k_));
        if (other.seen_ == 0) return *this;
        if (this == &other) {
            const WeightedReservoir copy = other;
            return merge(copy);
        }
        if (seen_ == 0) {
            keys_ = other.keys_;
            items_ = other.items_;
            seen_ = other.seen_;
            total_weight_ = other.total_weight_;
            jump_ = other.jump_;
            return *this;
        }
        const std::size_t n1 = keys_.size();
        const std::size_t n2 = other.keys_.size();
        std::vector<std::size_t> order(n1 + n2);
        std::iota(order.begin(), order.end(), std::size_t{0});
        auto key_of = [&](std::size_t i) { return i < n1 ? keys_[i] : other.keys_[i - n1]; };
        const std::size_t m = static_cast<std::size_t>(std::min<std::uint64_t>(k_, n1 + n2));
        // Largest keys first; ties keep this side first, so the result is deterministic.
        std::stable_sort(order.begin(), order.end(),
                         [&](std::size_t a, std::size_t b) { return key_of(a) > key_of(b); });
        std::vector<double> keys;
        std::vector<T> items;
        keys.reserve(m);
        items.reserve(m);
        for (std::size_t j = 0; j < m; ++j) {
            const std::size_t i = order[j];
            keys.push_back(key_of(i));
            items.push_back(i < n1 ? items_[i] : other.items_[i - n1]);
        }
        make_heap(keys, items);
        detail::ReservoirRng rng = rng_;
        const double jump = m == k_ ? draw_jump(rng, keys[0]) : 0.0;
        keys_.swap(keys);
        items_.swap(items);
        seen_ = sat_add(seen_, other.seen_);
        total_weight_ += other.total_weight_;
        jump_ = jump;
        rng_ = rng;
        return *this;
    }

    std::vector<std::byte> serialize() const
        requires detail::ReservoirSerializable<T>
    {
        using Codec = detail::ReservoirItemCodec<T>;
        ByteWriter w(85 + items_.size() * (8 + Codec::min_wire_bytes));
        w.header(Family::weighted_reservoir, format_version);
        Codec::write_params(w);
        w.u64(k_);
        w.u64(seen_);
        w.f64(total_weight_);
        w.f64(jump_);
        rng_.write(w);
        w.u64(items_.size());
        for (std::size_t i = 0; i < items_.size(); ++i) {
            w.f64(keys_[i]);
            Codec::write(w, items_[i]);
        }
        return w.take();
    }

    /// Reads serialize()'s bytes. Throws tally::FormatError for anything that
    /// is not exactly a valid encoding of a WeightedReservoir<T>.
    static WeightedReservoir deserialize(std::span<const std::byte> bytes)
        requires detail::ReservoirSerializable<T>
    {
        using Codec = detail::ReservoirItemCodec<T>;
        ByteReader r(bytes);
        r.header(Family::weighted_reservoir, format_version);
        Codec::read_params(r, "tally::WeightedReservoir");
        const std::uint64_t k = r.u64();
        format_check(k >= 1 && k <= max_k, "weighted reservoir k is out of range [1, 4294967295]");
        const std::uint64_t seen = r.u64();
        const double total = r.f64();
        format_check(total >= 0.0, "weighted reservoir total weight is negative or NaN");
        const double jump = r.f64();
        if (seen < k) {
            format_check(jump == 0.0 && !std::signbit(jump), "weighted reservoir still filling but its jump is not 0");
        } else {
            format_check(jump >= 0.0, "weighted reservoir jump is negative or NaN");
        }
        const detail::ReservoirRng rng = detail::ReservoirRng::read(r);
        const std::uint64_t m = r.count(r.u64(), 8 + Codec::min_wire_bytes, k, "weighted reservoir entry");
        format_check(m == std::min(k, seen), "weighted reservoir sample size is not min(k, seen)");
        WeightedReservoir out(static_cast<std::size_t>(k), 0);
        out.keys_.reserve(static_cast<std::size_t>(m));
        out.items_.reserve(static_cast<std::size_t>(m));
        for (std::uint64_t i = 0; i < m; ++i) {
            const double key = r.f64();
            format_check(key <= 0.0, "weighted reservoir key is positive or NaN");
            if (i > 0) format_check(out.keys_[(i - 1) / 2] <= key, "weighted reservoir keys are not in heap order");
            out.keys_.push_back(key);
            out.items_.push_back(Codec::read(r));
        }
        r.expect_end();
        out.seen_ = seen;
        out.total_weight_ = total;
        out.jump_ = jump;
        out.rng_ = rng;
        return out;
    }

  private:
    static constexpr bool nothrow_copy =
        std::is_nothrow_copy_constructible_v<T> && std::is_nothrow_copy_assignable_v<T>;

    static bool valid_weight(double w) noexcept {
        return w > 0.0 && w <= std::numeric_limits<double>::max();  // false for NaN and inf
    }
    [[noreturn]] static void throw_bad_weight(double w) {
        char text[32];
        std::snprintf(text, sizeof text, "%g", w);
        detail::throw_invalid_argument(std::string("tally::WeightedReservoir::add: weight ") + text +
                                       " is out of range (0, inf): weights must be finite and positive");
    }
    static constexpr std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) noexcept {
        const std::uint64_t s = a + b;
        return s < a ? std::numeric_limits<std::uint64_t>::max() : s;
    }

    /// Weight to pass over before the next insertion: X = log(r) / log(T)
    /// with T the smallest key (as u^(1/w)), i.e. exponential with rate
    /// -log(T). A smallest key of 1 (log 0) means nothing can ever enter.
    static double draw_jump(detail::ReservoirRng& rng, double min_key) noexcept {
        const double log_r = std::log(rng.uniform_open0());  // <= 0
        if (!(min_key < 0.0)) return std::numeric_limits<double>::infinity();
        return log_r / min_key;  // >= 0; +inf if min_key is tiny, 0 if it is -inf
    }

    template <class U>
    void offer(U&& item, double w) {
        ++seen_;
        total_weight_ += w;
        if (items_.size() < k_) {
            keys_.push_back(std::log(rng_.uniform_open0()) / w);
            items_.push_back(std::forward<U>(item));
            sift_up(keys_, items_, keys_.size() - 1);
            if (items_.size() == k_) jump_ = draw_jump(rng_, keys_[0]);
            return;
        }
        jump_ -= w;
        if (TALLY_LIKELY(jump_ > 0.0)) return;
        // This item's key is conditioned to beat the smallest key T: with
        // t = T^w, its u is uniform in (t, 1), so log(u) = log1p((t - 1) v)
        // for v uniform in (0, 1], computed without forming t (which may
        // underflow) via expm1.
        const double log_t = w * keys_[0];
        const double key = std::log1p(std::expm1(log_t) * rng_.uniform_open0()) / w;
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

}  // namespace tally
