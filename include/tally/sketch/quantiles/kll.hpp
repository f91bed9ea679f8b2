// tally/sketch/quantiles/kll.hpp: KllSketch, quantiles with a guaranteed rank error,
// mergeable, in the bytes Apache DataSketches (and Druid, Pinot) read.
// Details, error tables and the wire formats: docs/kll.md.
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../core/platform.hpp"
#include "../../core/serialize.hpp"
#include "../../detail/primitives.hpp"
#include "../../detail/throw.hpp"
#include "detail/kll_compactor.hpp"
#include "detail/kll_datasketches.hpp"

TALLY_BEGIN_NAMESPACE

/// KllSketch<T>: the KLL quantiles sketch (Karnin, Lang, Liberty, "Optimal
/// Quantile Approximation in Streams", FOCS 2016) in Apache DataSketches'
/// variant: levels of compactors, level h of capacity max(8, k (2/3)^depth)
/// items of weight 2^h; a full sketch compacts its lowest full level (sort,
/// keep the odd or the even items at random, promote them). T is float or
/// double.
/// Error (rank, guaranteed in probability): with probability 99% every
/// rank(x) and quantile(r) is off by at most eps = normalized_rank_error()
/// = 2.296 / k^0.9723 (k = 200: 1.33%; pmf: 2.446 / k^0.9433), single or
/// merged; DataSketches' fit, checked here over 300 seeded trials
/// (docs/kll.md). min_item() and max_item() are exact.
/// Cost: add amortised O(1) (a compaction every few adds sorts a few items);
/// quantile an index lookup and a step or two, rank an index lookup and a
/// search of one bucket, over the sorted view the first query after a change
/// builds (O(retained log levels)); merge O(retained of both). Memory: about
/// 3k + 8 log2(n/k) items (k = 200, n = 10^6: 614 items, 4.9 KB of doubles)
/// plus the sorted view once queried (at most 28 or 32 bytes a retained
/// item); memory_bytes() reports it.
/// Compaction is randomised by the sketch's own splitmix64 stream from
/// `seed`: same seed, same inputs, same sketch.
/// Thread safety: one writer; const queries may run concurrently once the
/// sorted view is built (call sorted_view() once after the last change).
/// Errors: bad arguments throw std::invalid_argument; bad bytes FormatError.
/// NaN is never added (add ignores it, try_add returns false). Queries on an
/// empty sketch return NaN.
///
///     tally::KllSketch<double> s;              // k = 200
///     for (double ms : latencies) s.add(ms);
///     double p99 = s.quantile(0.99);           // global.merge(s) across shards
///     auto bytes = s.to_datasketches();        // read by DataSketches, Druid, Pinot
template <class T>
class KllSketch {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "KllSketch<T>: T is float or double");

  public:
    using value_type = T;
    static constexpr std::uint16_t min_k = 8;
    static constexpr std::uint16_t max_k = 65535;
    static constexpr std::uint16_t default_k = 200;
    static constexpr std::uint64_t default_seed = 0x4b4c4c2d7365656bULL;
    static constexpr std::uint8_t format_version = 1;

    /// The retained items in order with their cumulative weights: what every
    /// query reads. In estimation mode, as DataSketches Java's sorted view, it
    /// starts with the exact min (weight 1) and ends with the exact max when
    /// compaction dropped them. Immutable; copies are independent.
    class SortedView {
      public:
        [[nodiscard]] std::span<const T> items() const noexcept { return items_; }
        [[nodiscard]] std::span<const std::uint64_t> cumulative_weights() const noexcept { return cum_; }
        [[nodiscard]] std::uint64_t total_weight() const noexcept { return cum_.empty() ? 0 : cum_.back(); }
        [[nodiscard]] bool empty() const noexcept { return items_.empty(); }
        /// As KllSketch::quantile, without argument checks (rank in [0, 1], non-empty view).
        [[nodiscard]] T quantile(double rank, bool inclusive = true) const noexcept;
        /// As KllSketch::rank, without argument checks (item not NaN, non-empty view).
        [[nodiscard]] double rank(T item, bool inclusive = true) const noexcept;

      private:
        friend class KllSketch;
        // Fills first_at_: the weight axis in buckets of 2^shift_ (at most
        // 2 m buckets), each holding the index of the first cumulative weight
        // at or above its start, so quantile() lands within a step or two of
        // its answer instead of searching all m.
        void index_weights();
        // Fills below_: the items' order keys (integers ordered as the items)
        // from the smallest item's in buckets of 2^key_shift_ (at most 2 m
        // buckets, and one past the last), each holding the number of items
        // below its start, so rank() searches one bucket's items, usually a
        // few, instead of all m.
        void index_items();
        // The weight the answer's cumulative weight must reach: ceil(rank n)
        // inclusive, floor(rank n) + 1 exclusive, at most n, with rank n as
        // DataSketches Java computes it (QuantilesUtil.getNaturalRank): up to
        // n = 10^7 rounded to 7 decimals (half up), so that a rank such as
        // 0.07 of n = 100 (7.000000000000001) is 7, not just above.
        static std::uint64_t needed_weight(double rank, std::uint64_t n, bool inclusive) noexcept {
            const double wd = rank * static_cast<double>(n);
            std::uint64_t need;
            if (n <= 10000000) {
                // X = round(rank n 10^7) is an integer below 2^47, so Java's
                // X / 10^7 is an integer exactly when 10^7 divides X, and
                // otherwise at least 10^-7 from one (far more than an ulp):
                // its ceil and floor come from integer division, no division
                // of doubles on the query path.
                const double x = wd * 1e7;
                const auto t = static_cast<std::int64_t>(x);  // signed: one instruction
                // half up, compared without a subtraction (that a fused
                // multiply-subtract would take from the unrounded product)
                const auto big = static_cast<std::uint64_t>(t + (x >= static_cast<double>(t) + 0.5 ? 1 : 0));
                need = inclusive ? (big + 9999999) / 10000000 : big / 10000000 + 1;
            } else {
                constexpr double two64 = 18446744073709551616.0;
                const std::uint64_t below = wd >= two64 ? n : static_cast<std::uint64_t>(wd);
                need = below + (inclusive ? static_cast<std::uint64_t>(static_cast<double>(below) < wd) : 1);
                if (below >= n) need = n;
            }
            return need < n ? need : n;
        }
        using Key = detail::KllBits<T>;
        // The compaction kernels' signed order key, made unsigned (so that
        // differences of keys do not overflow); -0 and +0 compare equal, so
        // they share +0's key.
        static Key order_key(T x) noexcept {
            constexpr Key sign = Key{1} << (sizeof(T) * 8 - 1);
            return static_cast<Key>(detail::kll_order_key<T>(std::bit_cast<Key>(x + T(0)))) ^ sign;
        }
        std::vector<T> items_;
        std::vector<std::uint64_t> cum_;
        std::vector<std::uint32_t> first_at_;
        std::vector<std::uint32_t> below_;
        int shift_ = 0;
        int key_shift_ = 0;
        Key key_lo_ = 0;
        Key key_hi_ = 0;
    };

    /// k in [8, 65535] (std::invalid_argument otherwise). Allocates nothing
    /// until the first add.
    explicit KllSketch(std::uint16_t k = default_k, std::uint64_t seed = default_seed);

    KllSketch(const KllSketch& other);
    KllSketch& operator=(const KllSketch& other);
    /// The moved-from sketch is empty, with the same k and seed.
    KllSketch(KllSketch&& other) noexcept;
    KllSketch& operator=(KllSketch&& other) noexcept;
    ~KllSketch() = default;

    // ---- adding ------------------------------------------------------------

    /// Adds x (NaN is ignored; -0 is stored as +0).
    void add(T x) noexcept { (void)try_add(x); }
    /// As add; false (sketch unchanged) for NaN, or when a new level's memory
    /// cannot be allocated.
    bool try_add(T x) noexcept;
    /// Adds every item of the range.
    void add_range(std::span<const T> xs) noexcept {
        for (const T x : xs) add(x);
    }
    /// Merges other into this sketch (DataSketches' merge: the result keeps
    /// this k; min_merged_k() becomes the smaller one). Throws std::invalid_argument
    /// (unchanged) if the item count would overflow.
    KllSketch& merge(const KllSketch& other);
    /// Always true: sketches of any k merge (the error is that of min_merged_k()).
    [[nodiscard]] bool mergeable_with(const KllSketch&) const noexcept { return true; }
    /// Forgets every item and frees the buffer; k and seed stay, the random stream restarts.
    void clear() noexcept;

    // ---- queries -----------------------------------------------------------

    /// The item at normalized rank `rank` in [0, 1] (std::invalid_argument
    /// otherwise): with inclusive, the smallest item of the sorted view whose
    /// cumulative weight is >= ceil(rank n); exclusive, the smallest whose
    /// weight exceeds floor(rank n), rank n rounded to 7 decimals first for
    /// n <= 10^7 (DataSketches Java's semantics, answer for answer). NaN when empty.
    [[nodiscard]] T quantile(double rank, bool inclusive = true) const;
    /// Normalized rank of item: weight of the sorted view's items <= item
    /// (inclusive) or < item (exclusive), over n. std::invalid_argument for
    /// NaN; NaN when empty.
    [[nodiscard]] double rank(T item, bool inclusive = true) const;
    /// rank(s_i) for each split point, then 1 (size m + 1). Split points must
    /// be strictly increasing and not NaN (std::invalid_argument). Empty when empty.
    [[nodiscard]] std::vector<double> cdf(std::span<const T> split_points, bool inclusive = true) const;
    /// Mass between consecutive split points (cdf differences, size m + 1).
    [[nodiscard]] std::vector<double> pmf(std::span<const T> split_points, bool inclusive = true) const;
    /// The sorted view queries use, built on first use after a change.
    [[nodiscard]] const SortedView& sorted_view() const;

    /// 2.296 / k^0.9723 (rank, quantile, cdf) or 2.446 / k^0.9433 (pmf), for the
    /// smallest k merged in (min_merged_k()).
    [[nodiscard]] double normalized_rank_error(bool pmf = false) const noexcept { return normalized_rank_error(min_k_, pmf); }
    [[nodiscard]] static double normalized_rank_error(std::uint16_t k, bool pmf) noexcept {
        return pmf ? 2.446 / std::pow(k, 0.9433) : 2.296 / std::pow(k, 0.9723);
    }

    // ---- observers ---------------------------------------------------------

    [[nodiscard]] std::uint64_t total() const noexcept { return n_; }
    [[nodiscard]] bool empty() const noexcept { return n_ == 0; }
    /// Exact smallest and largest item added; NaN when empty. O(level 0 items).
    [[nodiscard]] T min_item() const noexcept { return n_ ? lowest() : std::numeric_limits<T>::quiet_NaN(); }
    [[nodiscard]] T max_item() const noexcept { return n_ ? highest() : std::numeric_limits<T>::quiet_NaN(); }
    [[nodiscard]] std::uint16_t k() const noexcept { return k_; }
    [[nodiscard]] std::uint16_t min_merged_k() const noexcept { return min_k_; }
    [[nodiscard]] std::uint64_t seed() const noexcept { return seed_; }
    [[nodiscard]] std::uint32_t num_levels() const noexcept { return num_levels_; }
    [[nodiscard]] std::uint32_t num_retained() const noexcept { return levels_[num_levels_] - levels_[0]; }
    /// True once some item was compacted away (answers are estimates).
    [[nodiscard]] bool is_estimation_mode() const noexcept { return num_levels_ > 1; }
    /// Object, item buffer and sorted view bytes.
    [[nodiscard]] std::size_t memory_bytes() const noexcept {
        return sizeof(*this) + std::size_t{cap_ - base_} * sizeof(T) + view_.items_.capacity() * sizeof(T) +
               view_.cum_.capacity() * sizeof(std::uint64_t) +
               (view_.first_at_.capacity() + view_.below_.capacity()) * sizeof(std::uint32_t);
    }

    // ---- bytes -------------------------------------------------------------

    /// The tally frame (family kll, version 1; layout below the class).
    [[nodiscard]] std::vector<std::byte> serialize() const;
    /// Reads serialize()'s bytes; FormatError for anything else.
    [[nodiscard]] static KllSketch deserialize(std::span<const std::byte> bytes);
    /// DataSketches' compact image (empty, single-item or full form; layout in
    /// detail/kll_datasketches.hpp), read by kll_sketch<T> (C++) and
    /// KllFloatsSketch / KllDoublesSketch (Java).
    [[nodiscard]] std::vector<std::byte> to_datasketches() const;
    /// Reads a DataSketches image of this T: compact (serial versions 1 and 2)
    /// or updatable (3, what Java's direct sketches hold), validating every
    /// field (FormatError). The result answers every query as
    /// DataSketches does on the same image; its random stream starts at `seed`.
    [[nodiscard]] static KllSketch from_datasketches(std::span<const std::byte> bytes, std::uint64_t seed = default_seed);

  private:
    bool make_room() noexcept;
    bool grow() noexcept;
    std::uint32_t bit() noexcept { return static_cast<std::uint32_t>(detail::kll_splitmix(rng_) >> 63); }
    std::uint32_t level_size(std::uint32_t h) const noexcept {
        return h < num_levels_ ? levels_[h + 1] - levels_[h] : 0;
    }
    // Exact smallest / largest item added (infinity / -infinity when empty).
    T lowest() const noexcept {
        T m = min_;
        for (std::uint32_t i = levels_[0]; i < levels_[1]; ++i) m = items_[i - base_] < m ? items_[i - base_] : m;
        return m;
    }
    T highest() const noexcept {
        T m = max_;
        for (std::uint32_t i = levels_[0]; i < levels_[1]; ++i) m = m < items_[i - base_] ? items_[i - base_] : m;
        return m;
    }
    void build_view() const;
    void reset_empty() noexcept;
    // Out of line so that quantile() keeps no string-building frame.
#if defined(__GNUC__) || defined(__clang__)
    [[noreturn, gnu::noinline, gnu::cold]]
#else
    [[noreturn]]
#endif
    static void bad_rank(double rank) {
        detail::throw_invalid_argument("tally::KllSketch::quantile: rank " + detail::format_number(rank) +
                                       " is out of range [0, 1]");
    }
    /// Validates a decoded layout (absolute offsets in levels[0..nl]) and builds the sketch.
    static KllSketch build(const char* who, std::uint16_t k, std::uint16_t merged_k, std::uint64_t n, std::uint32_t nl,
                           const detail::KllLevels& levels, ByteReader& items, T min, T max, bool sorted0,
                           std::uint64_t seed, std::uint64_t state);

    detail::KllCapacities caps_;
    detail::KllLevels levels_{};
    detail::KllArray<T> items_;  ///< logical slots [base_, cap_): slot i at items_[i - base_]
    std::uint64_t n_ = 0;
    std::uint64_t seed_;
    std::uint64_t rng_;
    // The smallest and largest item, except those still in level 0: add stores
    // an item and nothing else (a running minimum and maximum in the object
    // made every add wait on the previous one's store), and level 0 is folded
    // in when it is compacted (its sorted ends) or read (lowest(), highest()).
    T min_ = std::numeric_limits<T>::infinity();
    T max_ = -std::numeric_limits<T>::infinity();
    std::uint32_t cap_ = 0;
    std::uint32_t base_ = 0;  ///< a decoded sketch allocates only its items; the first add allocates the rest
    std::uint16_t k_;
    std::uint16_t min_k_;
    std::uint32_t num_levels_ = 1;
    bool sorted0_ = false;
    mutable bool view_ok_ = false;
    mutable SortedView view_;
};

// Tally frame, family kll (10), version 1; little-endian:
//   offset size field
//   0      8    frame header (core/serialize.hpp)
//   8      1    item bytes: 4 (float) or 8 (double)
//   9      1    number of levels L (1..64)
//   10     2    k
//   12     2    min k (8..k)
//   14     1    flags: bit 0 level 0 sorted
//   15     1    reserved, 0
//   16     8    n (items added)
//   24     8    seed
//   32     8    random stream state
//   40     ...  when n > 0: min item, max item (T), then L u32 level sizes
//                (level 0 first), then the items, level 0 first
// Checked on read: every field's range, sum of size << level = n, levels
// above 0 sorted, no NaN, every item within [min, max], the items fit the
// capacity of k and L, no trailing bytes.

TALLY_END_NAMESPACE

#include "detail/kll_impl.hpp"
