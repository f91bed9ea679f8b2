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
#include <memory>
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
///
/// Error (rank, guaranteed in probability): with probability 99% every
/// rank(x) and quantile(r) is off by at most eps = normalized_rank_error()
/// = 2.296 / k^0.9723 (k = 200: 1.33%; pmf: 2.446 / k^0.9433), single or
/// merged; DataSketches' fit, checked here over 300 seeded trials
/// (docs/kll.md). min_item() and max_item() are exact.
///
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
    static constexpr std::uint16_t smallest_k = 8;
    static constexpr std::uint16_t largest_k = 65535;
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
    /// this k; min_k() becomes the smaller one). Throws std::invalid_argument
    /// (unchanged) if the item count would overflow.
    KllSketch& merge(const KllSketch& other);
    /// Always true: sketches of any k merge (the error is that of min_k()).
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

    /// 2.296 / min_k^0.9723 (rank, quantile, cdf) or 2.446 / min_k^0.9433 (pmf).
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
    [[nodiscard]] std::uint16_t min_k() const noexcept { return min_k_; }
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
    static void put_item(ByteWriter& w, T x) {
        if constexpr (sizeof(T) == 4)
            w.u32(std::bit_cast<std::uint32_t>(x));
        else
            w.u64(std::bit_cast<std::uint64_t>(x));
    }
    static T get_item(ByteReader& r) {
        if constexpr (sizeof(T) == 4)
            return std::bit_cast<T>(r.u32());
        else
            return std::bit_cast<T>(r.u64());
    }
    /// Reads an updatable image (serial version 3) past its first 8 bytes.
    static KllSketch from_updatable(ByteReader& r, std::uint16_t k, std::uint8_t flags, std::uint64_t seed);
    /// Validates a decoded layout (absolute offsets in levels[0..nl]) and builds the sketch.
    static KllSketch build(const char* who, std::uint16_t k, std::uint16_t min_k, std::uint64_t n, std::uint32_t nl,
                           const detail::KllLevels& levels, ByteReader& items, T min, T max, bool sorted0,
                           std::uint64_t seed, std::uint64_t state);

    detail::KllCapacities caps_;
    detail::KllLevels levels_{};
    std::unique_ptr<T[]> items_;  ///< logical slots [base_, cap_): slot i at items_[i - base_]
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

// ---------------------------------------------------------------------------
// Implementation

template <class T>
KllSketch<T>::KllSketch(std::uint16_t k, std::uint64_t seed) : caps_(k < smallest_k ? smallest_k : k), seed_(seed), rng_(seed), k_(k), min_k_(k) {
    if (k < smallest_k)
        detail::throw_invalid_argument("tally::KllSketch::KllSketch: k " + std::to_string(k) +
                                       " is out of range [8, 65535]");
}

template <class T>
KllSketch<T>::KllSketch(const KllSketch& o)
    : caps_(o.caps_), levels_(o.levels_), n_(o.n_), seed_(o.seed_), rng_(o.rng_), min_(o.min_), max_(o.max_),
      cap_(o.cap_), base_(o.base_), k_(o.k_), min_k_(o.min_k_), num_levels_(o.num_levels_), sorted0_(o.sorted0_) {
    if (o.items_) {
        items_.reset(new T[cap_ - base_]);
        std::copy(o.items_.get() + (levels_[0] - base_), o.items_.get() + (cap_ - base_),
                  items_.get() + (levels_[0] - base_));
    }
}

template <class T>
KllSketch<T>& KllSketch<T>::operator=(const KllSketch& o) {
    if (this != &o) {
        KllSketch copy(o);
        *this = std::move(copy);
    }
    return *this;
}

template <class T>
KllSketch<T>::KllSketch(KllSketch&& o) noexcept
    : caps_(o.caps_), levels_(o.levels_), items_(std::move(o.items_)), n_(o.n_), seed_(o.seed_), rng_(o.rng_),
      min_(o.min_), max_(o.max_), cap_(o.cap_), base_(o.base_), k_(o.k_), min_k_(o.min_k_), num_levels_(o.num_levels_),
      sorted0_(o.sorted0_), view_ok_(o.view_ok_), view_(std::move(o.view_)) {
    o.reset_empty();
}

template <class T>
KllSketch<T>& KllSketch<T>::operator=(KllSketch&& o) noexcept {
    if (this != &o) {
        caps_ = o.caps_;
        levels_ = o.levels_;
        items_ = std::move(o.items_);
        n_ = o.n_;
        seed_ = o.seed_;
        rng_ = o.rng_;
        min_ = o.min_;
        max_ = o.max_;
        cap_ = o.cap_;
        base_ = o.base_;
        k_ = o.k_;
        min_k_ = o.min_k_;
        num_levels_ = o.num_levels_;
        sorted0_ = o.sorted0_;
        view_ok_ = o.view_ok_;
        view_ = std::move(o.view_);
        o.reset_empty();
    }
    return *this;
}

template <class T>
void KllSketch<T>::reset_empty() noexcept {
    items_.reset();
    levels_ = {};
    n_ = 0;
    rng_ = seed_;
    min_ = std::numeric_limits<T>::infinity();
    max_ = -std::numeric_limits<T>::infinity();
    cap_ = 0;
    base_ = 0;
    min_k_ = k_;
    num_levels_ = 1;
    sorted0_ = false;
    view_ok_ = false;
    view_.items_.clear();
    view_.cum_.clear();
    view_.first_at_.clear();
    view_.below_.clear();
}

template <class T>
void KllSketch<T>::clear() noexcept {
    reset_empty();
    view_.items_.shrink_to_fit();
    view_.cum_.shrink_to_fit();
    view_.first_at_.shrink_to_fit();
    view_.below_.shrink_to_fit();
}

template <class T>
TALLY_ALWAYS_INLINE bool KllSketch<T>::try_add(T x) noexcept {
    if (TALLY_UNLIKELY(x != x)) return false;
    if (TALLY_UNLIKELY(levels_[0] == base_) && !make_room()) return false;
    x += T(0);  // -0 -> +0
    items_[--levels_[0] - base_] = x;
    ++n_;
    sorted0_ = false;
    view_ok_ = false;
    return true;
}

template <class T>
bool KllSketch<T>::make_room() noexcept {
    if (!items_) {
        items_.reset(new (std::nothrow) T[k_]);
        if (!items_) return false;
        cap_ = k_;
        levels_[0] = levels_[1] = k_;
        num_levels_ = 1;
        return true;
    }
    if (base_ != 0) {  // decoded: allocate the free space now
        std::unique_ptr<T[]> buf(new (std::nothrow) T[cap_]);
        if (!buf) return false;
        std::copy(items_.get(), items_.get() + (cap_ - base_), buf.get() + base_);
        items_ = std::move(buf);
        base_ = 0;
        return true;
    }
    // the buffer is full: compact the lowest level at or over its capacity
    std::uint32_t h = 0;
    while (h + 1 < num_levels_ && levels_[h + 1] - levels_[h] < caps_.level(num_levels_, h)) ++h;
    if (h == num_levels_ - 1 && !grow()) return false;
    detail::kll_compact_level(items_.get(), levels_.data(), h, sorted0_, bit(), min_, max_);
    return true;
}

template <class T>
bool KllSketch<T>::grow() noexcept {
    if (num_levels_ >= detail::kll_max_levels) return false;
    const std::uint32_t delta = caps_.level(num_levels_ + 1, 0);
    const std::uint32_t new_cap = cap_ + delta;
    std::unique_ptr<T[]> buf(new (std::nothrow) T[new_cap]);
    if (!buf) return false;
    std::copy(items_.get() + levels_[0], items_.get() + cap_, buf.get() + levels_[0] + delta);
    items_ = std::move(buf);
    for (std::uint32_t i = 0; i <= num_levels_; ++i) levels_[i] += delta;
    ++num_levels_;
    levels_[num_levels_] = new_cap;
    cap_ = new_cap;
    return true;
}

template <class T>
KllSketch<T>& KllSketch<T>::merge(const KllSketch& other) {
    if (other.empty()) return *this;
    if (this == &other) {
        const KllSketch copy(other);
        return merge(copy);
    }
    if (n_ > std::numeric_limits<std::uint64_t>::max() - other.n_)
        detail::throw_invalid_argument("tally::KllSketch::merge: the item count would overflow 2^64 - 1");
    const std::uint64_t final_n = n_ + other.n_;
    // before the level-0 items of either are compacted away
    const T lo = std::min(lowest(), other.lowest());
    const T hi = std::max(highest(), other.highest());
    const std::uint32_t prov = std::max(num_levels_, other.num_levels_);
    const std::uint32_t count = num_retained() + other.num_retained();
    std::unique_ptr<T[]> work(new T[count]);
    // only the bounds the sweep reads: up to prov + 2 levels
    detail::KllLevels in, out;
    const std::size_t used = std::min<std::size_t>(prov + 3, in.size());
    std::fill_n(in.begin(), used, 0u);
    std::fill_n(out.begin(), used, 0u);
    // level 0: both level 0s, unsorted; above: the two sorted runs merged
    T* w = work.get();
    const std::uint32_t s0 = level_size(0), o0 = other.level_size(0);
    const auto self_at = [&](std::uint32_t i) { return items_.get() + (i - base_); };
    const auto other_at = [&](std::uint32_t i) { return other.items_.get() + (i - other.base_); };
    if (s0) std::copy(self_at(levels_[0]), self_at(levels_[1]), w);
    std::copy(other_at(other.levels_[0]), other_at(other.levels_[1]), w + s0);
    in[0] = 0;
    in[1] = s0 + o0;
    for (std::uint32_t h = 1; h < prov; ++h) {
        const std::uint32_t a = level_size(h), b = other.level_size(h);
        const T* pa = a ? self_at(levels_[h]) : nullptr;
        const T* pb = b ? other_at(other.levels_[h]) : nullptr;
        detail::kll_merge_into(pa, a, pb, b, w + in[h]);
        in[h + 1] = in[h] + a + b;
    }
    const detail::KllCompressResult r =
        detail::kll_general_compress(caps_, prov, w, in.data(), out.data(), false, [this] { return bit(); });
    std::unique_ptr<T[]> buf;
    if (r.capacity != cap_ || !items_ || base_ != 0) buf.reset(new T[r.capacity]);
    // nothing below throws
    if (buf) items_ = std::move(buf);
    const std::uint32_t bottom = r.capacity - r.num_items;
    std::copy(w + out[0], w + out[0] + r.num_items, items_.get() + bottom);
    levels_ = {};
    for (std::uint32_t h = 0; h <= r.num_levels; ++h) levels_[h] = out[h] - out[0] + bottom;
    num_levels_ = r.num_levels;
    cap_ = r.capacity;
    base_ = 0;
    n_ = final_n;
    min_ = lo;
    max_ = hi;
    if (other.num_levels_ > 1) min_k_ = std::min(min_k_, other.min_k_);
    sorted0_ = false;
    view_ok_ = false;
    return *this;
}

// ---- sorted view ------------------------------------------------------------

template <class T>
void KllSketch<T>::build_view() const {
    const std::uint32_t m = num_retained();
    std::vector<std::pair<T, std::uint64_t>> cur, tmp;
    cur.reserve(m);
    tmp.reserve(m);
    const auto by_item = [](const std::pair<T, std::uint64_t>& a, const std::pair<T, std::uint64_t>& b) {
        return a.first < b.first;
    };
    for (std::uint32_t i = levels_[0]; i < levels_[1]; ++i) cur.emplace_back(items_[i - base_], 1);
    if (!sorted0_) std::sort(cur.begin(), cur.end(), by_item);
    for (std::uint32_t h = 1; h < num_levels_; ++h) {
        if (levels_[h] == levels_[h + 1]) continue;
        const std::size_t before = cur.size();
        for (std::uint32_t i = levels_[h]; i < levels_[h + 1]; ++i) cur.emplace_back(items_[i - base_], std::uint64_t{1} << h);
        if (before == 0) continue;
        tmp.clear();
        // the higher level first: equal items then stand in descending level
        // order, as in DataSketches Java's view, so that cumulative weights
        // inside a run of ties are Java's too
        std::merge(cur.begin() + static_cast<std::ptrdiff_t>(before), cur.end(), cur.begin(),
                   cur.begin() + static_cast<std::ptrdiff_t>(before), std::back_inserter(tmp), by_item);
        cur.swap(tmp);
    }
    // In estimation mode the exact min and max may have been compacted away:
    // as DataSketches Java (IncludeMinMax), the view then starts with min at
    // cumulative weight 1 and ends with max at n, the last retained item
    // giving up one unit of weight to it.
    const T lo = m ? lowest() : T(0), hi = m ? highest() : T(0);
    const bool add_lo = m && cur.front().first != lo;
    const bool add_hi = m && cur.back().first != hi;
    const std::size_t len = m + (add_lo ? 1 : 0) + (add_hi ? 1 : 0);
    view_.items_.resize(len);
    view_.cum_.resize(len);
    std::uint64_t total = 0;
    const std::size_t off = add_lo ? 1 : 0;
    for (std::uint32_t i = 0; i < m; ++i) {
        view_.items_[i + off] = cur[i].first;
        total += cur[i].second;
        view_.cum_[i + off] = total;
    }
    if (add_lo) {
        view_.items_[0] = lo;
        view_.cum_[0] = 1;
    }
    if (add_hi) {
        view_.items_[len - 1] = hi;
        view_.cum_[len - 1] = total;
        view_.cum_[len - 2] = total - 1;
    }
    view_.index_weights();
    view_.index_items();
    view_ok_ = true;
}

template <class T>
const typename KllSketch<T>::SortedView& KllSketch<T>::sorted_view() const {
    if (!view_ok_) build_view();
    return view_;
}

template <class T>
void KllSketch<T>::SortedView::index_weights() {
    const std::size_t m = cum_.size();
    first_at_.clear();
    shift_ = 0;
    if (m == 0) return;
    const std::uint64_t total = cum_.back();
    while ((total >> shift_) >= 2 * m) ++shift_;
    const std::size_t buckets = static_cast<std::size_t>(total >> shift_) + 1;
    first_at_.resize(buckets);
    std::size_t i = 0;
    for (std::size_t b = 0; b < buckets; ++b) {
        const std::uint64_t start = static_cast<std::uint64_t>(b) << shift_;
        while (i + 1 < m && cum_[i] < start) ++i;
        first_at_[b] = static_cast<std::uint32_t>(i);
    }
}

template <class T>
void KllSketch<T>::SortedView::index_items() {
    const std::size_t m = items_.size();
    below_.clear();
    key_shift_ = 0;
    if (m == 0) return;
    key_lo_ = order_key(items_.front());
    key_hi_ = order_key(items_.back());
    const Key span = key_hi_ - key_lo_;
    while ((span >> key_shift_) >= 2 * m) ++key_shift_;
    const std::size_t buckets = static_cast<std::size_t>(span >> key_shift_) + 1;
    below_.resize(buckets + 1);
    std::size_t i = 0;
    for (std::size_t b = 0; b < buckets; ++b) {
        const Key start = key_lo_ + (static_cast<Key>(b) << key_shift_);
        while (i < m && order_key(items_[i]) < start) ++i;
        below_[b] = static_cast<std::uint32_t>(i);
    }
    below_[buckets] = static_cast<std::uint32_t>(m);
}

template <class T>
T KllSketch<T>::SortedView::quantile(double rank, bool inclusive) const noexcept {
    // The answer is the first item whose cumulative weight reaches `need`,
    // at most n (the last item's weight, so every scan below stops by the
    // last item), so its bucket exists.
    const std::uint64_t need = needed_weight(rank, cum_.back(), inclusive);
    std::size_t i = first_at_[static_cast<std::size_t>(need >> shift_)];
    const std::uint64_t* cum = cum_.data();
    // a bucket holds one or two boundaries in most views: two steps without
    // branches, then a loop that seldom runs
    i += static_cast<std::size_t>(cum[i] < need);
    i += static_cast<std::size_t>(cum[i] < need);
    while (cum[i] < need) ++i;
    return items_[i];
}

template <class T>
double KllSketch<T>::SortedView::rank(T item, bool inclusive) const noexcept {
    const Key key = order_key(item);
    if (key < key_lo_) return 0;   // below every item
    if (key > key_hi_) return 1;   // above every item: all the weight
    // Items before the key's bucket are below item, items from the next
    // bucket on above it: only the bucket's own items need comparing.
    const std::size_t b = static_cast<std::size_t>((key - key_lo_) >> key_shift_);
    const T* base = items_.data() + below_[b];
    std::size_t len = below_[b + 1] - below_[b];
    // the number of the bucket's items <= item (inclusive) or < item, by a
    // search whose steps are selects (a conditional move is the shortest step
    // of a chain of dependent loads)
    if (inclusive) {
        while (len > 0) {
            const std::size_t half = len / 2;
            const bool below = !(item < base[half]);
            base = below ? base + half + 1 : base;
            len = below ? len - half - 1 : half;
        }
    } else {
        while (len > 0) {
            const std::size_t half = len / 2;
            const bool below = base[half] < item;
            base = below ? base + half + 1 : base;
            len = below ? len - half - 1 : half;
        }
    }
    const std::size_t i = static_cast<std::size_t>(base - items_.data());
    if (i == 0) return 0;
    return static_cast<double>(cum_[i - 1]) / static_cast<double>(cum_.back());
}

template <class T>
T KllSketch<T>::quantile(double rank, bool inclusive) const {
    if (TALLY_UNLIKELY(!(rank >= 0.0 && rank <= 1.0))) bad_rank(rank);
    if (empty()) return std::numeric_limits<T>::quiet_NaN();
    if (TALLY_UNLIKELY(!view_ok_)) build_view();
    return view_.quantile(rank, inclusive);
}

template <class T>
double KllSketch<T>::rank(T item, bool inclusive) const {
    if (TALLY_UNLIKELY(item != item)) detail::throw_invalid_argument("tally::KllSketch::rank: item is NaN (must be a number)");
    if (empty()) return std::numeric_limits<double>::quiet_NaN();
    if (TALLY_UNLIKELY(!view_ok_)) build_view();
    return view_.rank(item, inclusive);
}

template <class T>
std::vector<double> KllSketch<T>::cdf(std::span<const T> split_points, bool inclusive) const {
    for (std::size_t i = 0; i < split_points.size(); ++i) {
        if (split_points[i] != split_points[i])
            detail::throw_invalid_argument("tally::KllSketch::cdf: split_points[" + std::to_string(i) +
                                           "] is NaN (must be a number)");
        if (i > 0 && !(split_points[i - 1] < split_points[i]))
            detail::throw_invalid_argument("tally::KllSketch::cdf: split_points[" + std::to_string(i) + "] " +
                                           detail::format_number(split_points[i]) +
                                           " is not above the previous one (must be strictly increasing)");
    }
    std::vector<double> out;
    if (empty()) return out;
    const SortedView& v = sorted_view();
    out.reserve(split_points.size() + 1);
    for (const T s : split_points) out.push_back(v.rank(s, inclusive));
    out.push_back(1.0);
    return out;
}

template <class T>
std::vector<double> KllSketch<T>::pmf(std::span<const T> split_points, bool inclusive) const {
    std::vector<double> out = cdf(split_points, inclusive);
    for (std::size_t i = out.size(); i-- > 1;) out[i] -= out[i - 1];
    return out;
}

// ---- bytes ----------------------------------------------------------------

template <class T>
std::vector<std::byte> KllSketch<T>::serialize() const {
    ByteWriter w(40 + (std::size_t{num_retained()} + 2) * sizeof(T) + 4 * num_levels_);
    w.header(Family::kll, format_version);
    w.u8(sizeof(T));
    w.u8(static_cast<std::uint8_t>(num_levels_));
    w.u16(k_);
    w.u16(min_k_);
    w.u8(sorted0_ ? 1 : 0);
    w.u8(0);
    w.u64(n_);
    w.u64(seed_);
    w.u64(rng_);
    if (n_ != 0) {
        put_item(w, lowest());
        put_item(w, highest());
        for (std::uint32_t h = 0; h < num_levels_; ++h) w.u32(level_size(h));
        for (std::uint32_t i = levels_[0]; i < levels_[num_levels_]; ++i) put_item(w, items_[i - base_]);
    }
    return w.take();
}

template <class T>
KllSketch<T> KllSketch<T>::build(const char* who, std::uint16_t k, std::uint16_t mk, std::uint64_t n, std::uint32_t nl,
                                 const detail::KllLevels& levels, ByteReader& r, T min, T max, bool sorted0,
                                 std::uint64_t seed, std::uint64_t state) {
    const auto fail = [who](const std::string& what) { detail::throw_format_error(std::string(who) + ": " + what); };
    if (k < smallest_k) fail("k " + std::to_string(k) + " is out of range [8, 65535]");
    if (mk < smallest_k || mk > k) fail("min k " + std::to_string(mk) + " is out of range [8, k = " + std::to_string(k) + "]");
    if (nl < 1 || nl > detail::kll_max_levels_for(n))
        fail("level count " + std::to_string(nl) + " is out of range [1, " +
             std::to_string(detail::kll_max_levels_for(n)) + "] for n = " + std::to_string(n));
    const detail::KllCapacities caps(k);
    const std::uint32_t capacity = caps.total(nl);
    if (levels[nl] != capacity) fail("levels do not end at the capacity");
    for (std::uint32_t h = 0; h < nl; ++h)
        if (levels[h] > levels[h + 1]) fail("level offsets decrease at level " + std::to_string(h));
    std::uint64_t weight = 0;
    if (!detail::kll_total_weight(levels.data(), nl, weight) || weight != n)
        fail("the levels' total weight is not n = " + std::to_string(n));
    const std::uint32_t m = capacity - levels[0];
    if (r.remaining() != std::size_t{m} * sizeof(T))
        fail(std::to_string(r.remaining()) + " item bytes where " + std::to_string(std::size_t{m} * sizeof(T)) +
             " are needed");
    if (min != min || max != max || !(min <= max)) fail("min and max items are NaN or out of order");
    KllSketch s(k, seed);
    s.rng_ = state;
    // only the items are allocated (the free space below them comes with the first add)
    s.items_.reset(new T[m]);
    s.base_ = levels[0];
    for (std::uint32_t i = 0; i < m; ++i) {
        const T x = get_item(r);
        if (!(x >= min && x <= max)) fail("an item is NaN or outside [min, max]");
        s.items_[i] = x;
    }
    for (std::uint32_t h = (sorted0 ? 0 : 1); h < nl; ++h)
        if (!std::is_sorted(s.items_.get() + (levels[h] - levels[0]), s.items_.get() + (levels[h + 1] - levels[0])))
            fail("level " + std::to_string(h) + " is not sorted");
    s.levels_ = levels;
    s.cap_ = capacity;
    s.num_levels_ = nl;
    s.n_ = n;
    s.min_k_ = mk;
    s.min_ = min;
    s.max_ = max;
    s.sorted0_ = sorted0;
    return s;
}

template <class T>
KllSketch<T> KllSketch<T>::deserialize(std::span<const std::byte> bytes) {
    constexpr const char* who = "tally::KllSketch::deserialize";
    ByteReader r(bytes);
    r.header(Family::kll, format_version);
    const std::uint8_t item_bytes = r.u8();
    if (item_bytes != sizeof(T))
        detail::throw_format_error(std::string(who) + ": item size " + std::to_string(item_bytes) + " where " +
                                   std::to_string(sizeof(T)) + " was expected");
    const std::uint32_t nl = r.u8();
    const std::uint16_t k = r.u16();
    const std::uint16_t mk = r.u16();
    const std::uint8_t flags = r.u8();
    if (flags > 1) detail::throw_format_error(std::string(who) + ": unknown flag bits");
    if (r.u8() != 0) detail::throw_format_error(std::string(who) + ": reserved byte is not zero");
    const std::uint64_t n = r.u64();
    const std::uint64_t seed = r.u64();
    const std::uint64_t state = r.u64();
    if (n == 0) {
        if (nl != 1 || k < smallest_k || mk != k)
            detail::throw_format_error(std::string(who) + ": an empty sketch has one level and min k = k >= 8");
        r.expect_end();
        KllSketch s(k, seed);
        s.rng_ = state;
        s.sorted0_ = (flags & 1) != 0;
        return s;
    }
    const T min = get_item(r);
    const T max = get_item(r);
    if (nl < 1 || nl > detail::kll_max_levels)
        detail::throw_format_error(std::string(who) + ": level count " + std::to_string(nl) + " is out of range [1, 64]");
    if (k < smallest_k) detail::throw_format_error(std::string(who) + ": k " + std::to_string(k) + " is out of range [8, 65535]");
    std::uint32_t sizes[detail::kll_max_levels];
    std::uint64_t m = 0;
    for (std::uint32_t h = 0; h < nl; ++h) {
        sizes[h] = r.u32();
        m += sizes[h];
    }
    const std::uint64_t capacity = detail::KllCapacities(k).total(nl);
    if (m > capacity)
        detail::throw_format_error(std::string(who) + ": " + std::to_string(m) + " items exceed the capacity " +
                                   std::to_string(capacity));
    detail::KllLevels levels{};
    levels[nl] = static_cast<std::uint32_t>(capacity);
    for (std::uint32_t h = nl; h-- > 0;) levels[h] = levels[h + 1] - sizes[h];
    return build(who, k, mk, n, nl, levels, r, min, max, (flags & 1) != 0, seed, state);
}

template <class T>
std::vector<std::byte> KllSketch<T>::to_datasketches() const {
    const bool single = n_ == 1;
    ByteWriter w(detail::kll_ds_data_start + 4 * num_levels_ + (std::size_t{num_retained()} + 2) * sizeof(T));
    w.u8(empty() || single ? detail::kll_ds_preamble_short : detail::kll_ds_preamble_full);
    w.u8(single ? detail::kll_ds_serial_v2 : detail::kll_ds_serial_v1);
    w.u8(detail::kll_ds_family);
    w.u8(static_cast<std::uint8_t>((empty() ? detail::kll_ds_flag_empty : 0) | (sorted0_ ? detail::kll_ds_flag_sorted : 0) |
                                   (single ? detail::kll_ds_flag_single : 0)));
    w.u16(k_);
    w.u8(detail::kll_m);
    w.u8(0);
    if (empty()) return w.take();
    if (!single) {
        w.u64(n_);
        w.u16(min_k_);
        w.u8(static_cast<std::uint8_t>(num_levels_));
        w.u8(0);
        for (std::uint32_t h = 0; h < num_levels_; ++h) w.u32(levels_[h]);
        put_item(w, lowest());
        put_item(w, highest());
    }
    for (std::uint32_t i = levels_[0]; i < levels_[num_levels_]; ++i) put_item(w, items_[i - base_]);
    return w.take();
}

template <class T>
KllSketch<T> KllSketch<T>::from_datasketches(std::span<const std::byte> bytes, std::uint64_t seed) {
    constexpr const char* who = "tally::KllSketch::from_datasketches";
    const auto fail = [](const std::string& what) {
        detail::throw_format_error(std::string("tally::KllSketch::from_datasketches: ") + what);
    };
    ByteReader r(bytes);
    const std::uint8_t pre = r.u8();
    const std::uint8_t ver = r.u8();
    const std::uint8_t fam = r.u8();
    const std::uint8_t flags = r.u8();
    const std::uint16_t k = r.u16();
    const std::uint8_t m = r.u8();
    if (r.u8() != 0) fail("byte 7 (unused) is not zero");
    if (fam != detail::kll_ds_family) fail("family id " + std::to_string(fam) + " is not KLL (15)");
    if (ver != detail::kll_ds_serial_v1 && ver != detail::kll_ds_serial_v2 && ver != detail::kll_ds_serial_v3)
        fail("serial version " + std::to_string(ver) + " is not 1, 2 or 3");
    if (m != detail::kll_m) fail("m " + std::to_string(m) + " is not 8");
    if (k < smallest_k) fail("k " + std::to_string(k) + " is out of range [8, 65535]");
    if (flags & ~(detail::kll_ds_flag_empty | detail::kll_ds_flag_sorted | detail::kll_ds_flag_single))
        fail("unknown flag bits " + std::to_string(flags));
    const bool is_empty = (flags & detail::kll_ds_flag_empty) != 0;
    const bool single = (flags & detail::kll_ds_flag_single) != 0;
    const bool sorted0 = (flags & detail::kll_ds_flag_sorted) != 0;
    if (is_empty && single) fail("flags say both empty and single item");
    if (ver == detail::kll_ds_serial_v3) {
        if (pre != detail::kll_ds_preamble_full)
            fail("preamble ints " + std::to_string(pre) + " where 5 is required (updatable image)");
        return from_updatable(r, k, flags, seed);
    }
    const std::uint8_t want_pre = (is_empty || single) ? detail::kll_ds_preamble_short : detail::kll_ds_preamble_full;
    if (pre != want_pre)
        fail("preamble ints " + std::to_string(pre) + " where " + std::to_string(want_pre) + " is required");
    if (is_empty) {
        if (r.remaining() != 0) fail("an empty image has 8 bytes");
        KllSketch s(k, seed);
        s.sorted0_ = sorted0;
        return s;
    }
    detail::KllLevels levels{};
    if (single) {
        if (r.remaining() != sizeof(T))
            fail(std::to_string(r.remaining()) + " bytes for a single item of " + std::to_string(sizeof(T)));
        const detail::KllCapacities caps(k);
        const std::uint32_t capacity = caps.total(1);
        levels[0] = capacity - 1;
        levels[1] = capacity;
        ByteReader peek(bytes.subspan(detail::kll_ds_short_size));
        const T x = get_item(peek);
        return build(who, k, k, 1, 1, levels, r, x, x, sorted0, seed, seed);
    }
    const std::uint64_t n = r.u64();
    const std::uint16_t mk = r.u16();
    const std::uint32_t nl = r.u8();
    if (r.u8() != 0) fail("byte 19 (unused) is not zero");
    if (nl < 1 || nl > detail::kll_max_levels_for(n)) fail("level count " + std::to_string(nl) + " is out of range for n = " + std::to_string(n));
    for (std::uint32_t h = 0; h < nl; ++h) levels[h] = r.u32();
    levels[nl] = detail::KllCapacities(k).total(nl);
    if (levels[0] > levels[nl]) fail("level 0 starts past the capacity");
    const T min = get_item(r);
    const T max = get_item(r);
    return build(who, k, mk, n, nl, levels, r, min, max, sorted0, seed, seed);
}

template <class T>
KllSketch<T> KllSketch<T>::from_updatable(ByteReader& r, std::uint16_t k, std::uint8_t flags, std::uint64_t seed) {
    constexpr const char* who = "tally::KllSketch::from_datasketches";
    const auto fail = [](const std::string& what) {
        detail::throw_format_error(std::string("tally::KllSketch::from_datasketches: updatable image: ") + what);
    };
    const std::uint64_t n = r.u64();
    const std::uint16_t mk = r.u16();
    const std::uint32_t nl = r.u8();
    if (r.u8() != 0) fail("byte 19 (unused) is not zero");
    // Java's direct sketches leave the empty flag clear on an empty image;
    // heap ones set it, and the single-item flag at n = 1
    if ((flags & detail::kll_ds_flag_empty) && n != 0) fail("the empty flag is set with n = " + std::to_string(n));
    if ((flags & detail::kll_ds_flag_single) && n != 1) fail("the single-item flag is set with n = " + std::to_string(n));
    const std::uint32_t max_nl = n == 0 ? 1 : detail::kll_max_levels_for(n);
    if (nl < 1 || nl > max_nl) fail("level count " + std::to_string(nl) + " is out of range for n = " + std::to_string(n));
    detail::KllLevels levels{};
    for (std::uint32_t h = 0; h <= nl; ++h) levels[h] = r.u32();
    const std::uint32_t capacity = detail::KllCapacities(k).total(nl);
    if (levels[nl] != capacity) fail("the last level offset is not the capacity " + std::to_string(capacity));
    if (levels[0] > capacity) fail("level 0 starts past the capacity");
    const T min = get_item(r);
    const T max = get_item(r);
    // the free space below level 0: any bytes
    (void)r.bytes(std::size_t{levels[0]} * sizeof(T));
    const bool sorted0 = (flags & detail::kll_ds_flag_sorted) != 0;
    if (n == 0) {
        if (levels[0] != capacity || mk != k) fail("an empty sketch has no items and min k = k");
        r.expect_end();
        KllSketch s(k, seed);
        s.sorted0_ = sorted0;
        return s;
    }
    return build(who, k, mk, n, nl, levels, r, min, max, sorted0, seed, seed);
}

TALLY_END_NAMESPACE
