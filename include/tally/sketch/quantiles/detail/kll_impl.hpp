// tally/sketch/quantiles/detail/kll_impl.hpp: the bodies of KllSketch.
// Included at the end of the public header, whose declarations it needs.
#pragma once

#include "../../../detail/abi.hpp"

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
#include "../../../core/platform.hpp"
#include "../../../core/serialize.hpp"
#include "../../../detail/primitives.hpp"
#include "../../../detail/throw.hpp"
#include "kll_compactor.hpp"
#include "kll_datasketches.hpp"
#include "../kll.hpp"

TALLY_BEGIN_NAMESPACE

// ---------------------------------------------------------------------------
// Implementation

template <class T>
KllSketch<T>::KllSketch(std::uint16_t k, std::uint64_t seed) : caps_(k < min_k ? min_k : k), seed_(seed), rng_(seed), k_(k), min_k_(k) {
    if (k < min_k)
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
KllSketch<T>::KllSketch(KllSketch&& o) noexcept : caps_(o.caps_) {
    *this = std::move(o);
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
        detail::KllArray<T> buf(new (std::nothrow) T[cap_]);
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
    detail::KllArray<T> buf(new (std::nothrow) T[new_cap]);
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
    detail::KllArray<T> work(new T[count]);
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
    detail::KllArray<T> buf;
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
    // items ascending with their weights, level by level: level 0 sorted,
    // then each higher level merged in
    std::vector<T> items(m), merged_items(m);
    std::vector<std::uint64_t> weights(m), merged_weights(m);
    std::uint32_t filled = levels_[1] - levels_[0];
    std::copy(items_.get() + (levels_[0] - base_), items_.get() + (levels_[1] - base_), items.begin());
    std::fill(weights.begin(), weights.begin() + filled, std::uint64_t{1});
    if (!sorted0_) detail::kll_sort(items.data(), filled);
    for (std::uint32_t h = 1; h < num_levels_; ++h) {
        const T* level = items_.get() + (levels_[h] - base_);
        const std::uint32_t nl = levels_[h + 1] - levels_[h];
        const std::uint64_t w = std::uint64_t{1} << h;
        // the higher level first among equal items: they then stand in
        // descending level order, as in DataSketches Java's view, so that
        // cumulative weights inside a run of ties are Java's too
        std::uint32_t i = 0, j = 0, o = 0;
        while (i < nl && j < filled) {
            if (items[j] < level[i]) {
                merged_items[o] = items[j];
                merged_weights[o++] = weights[j++];
            } else {
                merged_items[o] = level[i++];
                merged_weights[o++] = w;
            }
        }
        for (; i < nl; ++i, ++o) {
            merged_items[o] = level[i];
            merged_weights[o] = w;
        }
        for (; j < filled; ++j, ++o) {
            merged_items[o] = items[j];
            merged_weights[o] = weights[j];
        }
        filled = o;
        items.swap(merged_items);
        weights.swap(merged_weights);
    }
    // In estimation mode the exact min and max may have been compacted away:
    // as DataSketches Java (IncludeMinMax), the view then starts with min at
    // cumulative weight 1 and ends with max at n, the last retained item
    // giving up one unit of weight to it.
    const T lo = m ? lowest() : T(0), hi = m ? highest() : T(0);
    const bool add_lo = m && items.front() != lo;
    const bool add_hi = m && items.back() != hi;
    const std::size_t len = m + (add_lo ? 1 : 0) + (add_hi ? 1 : 0);
    view_.items_.resize(len);
    view_.cum_.resize(len);
    std::uint64_t total = 0;
    const std::size_t off = add_lo ? 1 : 0;
    for (std::uint32_t i = 0; i < m; ++i) {
        view_.items_[i + off] = items[i];
        total += weights[i];
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

namespace detail {
// A bucket index over m ascending keys key_at(0..m-1) whose largest is
// `span`: buckets of 2^shift (the smallest shift with at most 2 m buckets),
// out[b] = the first i < limit with key_at(i) >= b << shift (limit when
// none). Returns the shift; an empty index (shift 0) when m = 0.
template <class Key, class KeyAt>
int kll_bucket_index(std::size_t m, Key span, std::size_t limit, KeyAt key_at, std::vector<std::uint32_t>& out) {
    out.clear();
    if (m == 0) return 0;
    int shift = 0;
    while ((span >> shift) >= 2 * m) ++shift;
    const std::size_t buckets = static_cast<std::size_t>(span >> shift) + 1;
    out.resize(buckets);
    std::size_t i = 0;
    for (std::size_t b = 0; b < buckets; ++b) {
        const Key start = static_cast<Key>(b) << shift;
        while (i < limit && key_at(i) < start) ++i;
        out[b] = static_cast<std::uint32_t>(i);
    }
    return shift;
}
}  // namespace detail

template <class T>
void KllSketch<T>::SortedView::index_weights() {
    const std::size_t m = cum_.size();
    // The last item answers every weight up to n, so no bucket points past it.
    shift_ = detail::kll_bucket_index(m, m ? cum_.back() : 0, m ? m - 1 : 0,
                                      [&](std::size_t i) { return cum_[i]; }, first_at_);
}

template <class T>
void KllSketch<T>::SortedView::index_items() {
    const std::size_t m = items_.size();
    key_lo_ = m ? order_key(items_.front()) : 0;
    key_hi_ = m ? order_key(items_.back()) : 0;
    key_shift_ = detail::kll_bucket_index(
        m, static_cast<Key>(key_hi_ - key_lo_), m,
        [&](std::size_t i) { return static_cast<Key>(order_key(items_[i]) - key_lo_); }, below_);
    if (m) below_.push_back(static_cast<std::uint32_t>(m));
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
        detail::kll_put_item(w, lowest());
        detail::kll_put_item(w, highest());
        for (std::uint32_t h = 0; h < num_levels_; ++h) w.u32(level_size(h));
        for (std::uint32_t i = levels_[0]; i < levels_[num_levels_]; ++i) detail::kll_put_item(w, items_[i - base_]);
    }
    return w.take();
}

template <class T>
KllSketch<T> KllSketch<T>::build(const char* who, std::uint16_t k, std::uint16_t mk, std::uint64_t n, std::uint32_t nl,
                                 const detail::KllLevels& levels, ByteReader& r, T min, T max, bool sorted0,
                                 std::uint64_t seed, std::uint64_t state) {
    using detail::throw_format_error_of;
    if (k < min_k) throw_format_error_of({who, ": k ", k, " is out of range [8, 65535]"});
    if (mk < min_k || mk > k) throw_format_error_of({who, ": min k ", mk, " is out of range [8, k = ", k, "]"});
    if (nl < 1 || nl > detail::kll_max_levels_for(n))
        throw_format_error_of(
            {who, ": level count ", nl, " is out of range [1, ", detail::kll_max_levels_for(n), "] for n = ", n});
    const detail::KllCapacities caps(k);
    const std::uint32_t capacity = caps.total(nl);
    if (levels[nl] != capacity) throw_format_error_of({who, ": levels do not end at the capacity"});
    for (std::uint32_t h = 0; h < nl; ++h)
        if (levels[h] > levels[h + 1]) throw_format_error_of({who, ": level offsets decrease at level ", h});
    std::uint64_t weight = 0;
    if (!detail::kll_total_weight(levels.data(), nl, weight) || weight != n)
        throw_format_error_of({who, ": the levels' total weight is not n = ", n});
    const std::uint32_t m = capacity - levels[0];
    if (r.remaining() != std::size_t{m} * sizeof(T))
        throw_format_error_of(
            {who, ": ", r.remaining(), " item bytes where ", std::size_t{m} * sizeof(T), " are needed"});
    if (min != min || max != max || !(min <= max))
        throw_format_error_of({who, ": min and max items are NaN or out of order"});
    KllSketch s(k, seed);
    s.rng_ = state;
    // only the items are allocated (the free space below them comes with the first add)
    s.items_.reset(new T[m]);
    s.base_ = levels[0];
    for (std::uint32_t i = 0; i < m; ++i) {
        const T x = detail::kll_get_item<T>(r);
        if (!(x >= min && x <= max)) throw_format_error_of({who, ": an item is NaN or outside [min, max]"});
        s.items_[i] = x;
    }
    for (std::uint32_t h = (sorted0 ? 0 : 1); h < nl; ++h)
        if (!std::is_sorted(s.items_.get() + (levels[h] - levels[0]), s.items_.get() + (levels[h + 1] - levels[0])))
            throw_format_error_of({who, ": level ", h, " is not sorted"});
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
    using detail::throw_format_error_of;
    if (item_bytes != sizeof(T))
        throw_format_error_of({who, ": item size ", item_bytes, " where ", sizeof(T), " was expected"});
    const std::uint32_t nl = r.u8();
    const std::uint16_t k = r.u16();
    const std::uint16_t mk = r.u16();
    const std::uint8_t flags = r.u8();
    if (flags > 1) throw_format_error_of({who, ": unknown flag bits"});
    if (r.u8() != 0) throw_format_error_of({who, ": reserved byte is not zero"});
    const std::uint64_t n = r.u64();
    const std::uint64_t seed = r.u64();
    const std::uint64_t state = r.u64();
    if (n == 0) {
        if (nl != 1 || k < min_k || mk != k)
            throw_format_error_of({who, ": an empty sketch has one level and min k = k >= 8"});
        r.expect_end();
        KllSketch s(k, seed);
        s.rng_ = state;
        s.sorted0_ = (flags & 1) != 0;
        return s;
    }
    const T min = detail::kll_get_item<T>(r);
    const T max = detail::kll_get_item<T>(r);
    if (nl < 1 || nl > detail::kll_max_levels)
        throw_format_error_of({who, ": level count ", nl, " is out of range [1, ", detail::kll_max_levels, "]"});
    if (k < min_k) throw_format_error_of({who, ": k ", k, " is out of range [8, 65535]"});
    std::uint32_t sizes[detail::kll_max_levels];
    std::uint64_t m = 0;
    for (std::uint32_t h = 0; h < nl; ++h) {
        sizes[h] = r.u32();
        m += sizes[h];
    }
    const std::uint64_t capacity = detail::KllCapacities(k).total(nl);
    if (m > capacity)
        throw_format_error_of({who, ": ", m, " items exceed the capacity ", capacity});
    detail::KllLevels levels{};
    levels[nl] = static_cast<std::uint32_t>(capacity);
    for (std::uint32_t h = nl; h-- > 0;) levels[h] = levels[h + 1] - sizes[h];
    return build(who, k, mk, n, nl, levels, r, min, max, (flags & 1) != 0, seed, state);
}

template <class T>
std::vector<std::byte> KllSketch<T>::to_datasketches() const {
    const bool none = empty();
    const detail::KllDsImage<T> im{.k = k_,
                                   .min_k = min_k_,
                                   .n = n_,
                                   .num_levels = num_levels_,
                                   .levels = levels_,
                                   .min = none ? T{} : lowest(),
                                   .max = none ? T{} : highest(),
                                   .sorted0 = sorted0_,
                                   .item_bytes = {}};
    if (none) return detail::kll_ds_encode<T>(im, {});
    return detail::kll_ds_encode<T>(im, std::span<const T>(items_.get() + (levels_[0] - base_), num_retained()));
}

template <class T>
KllSketch<T> KllSketch<T>::from_datasketches(std::span<const std::byte> bytes, std::uint64_t seed) {
    const detail::KllDsImage<T> im = detail::kll_ds_decode<T>(bytes);
    if (im.n == 0) {
        KllSketch s(im.k, seed);
        s.sorted0_ = im.sorted0;
        return s;
    }
    ByteReader items(im.item_bytes);
    return build("tally::KllSketch::from_datasketches", im.k, im.min_k, im.n, im.num_levels, im.levels, items, im.min,
                 im.max, im.sorted0, seed, seed);
}

TALLY_END_NAMESPACE
