// tally/sketch/distinct/detail/theta_impl.hpp: the bodies of ThetaSketch and its set operations.
// Included at the end of the public header, whose declarations it needs.
#pragma once

#include "../../../detail/abi.hpp"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>
#include "../../../core/platform.hpp"
#include "../../../core/serialize.hpp"
#include "../../../detail/primitives.hpp"
#include "../../../detail/throw.hpp"
#include "datasketches_hash.hpp"
#include "theta_bounds.hpp"
#include "theta_datasketches.hpp"
#include "theta_table.hpp"
#include "../theta.hpp"

TALLY_BEGIN_NAMESPACE

// ---- implementation --------------------------------------------------------

inline ThetaSketch::ThetaSketch(int lg_k) {
    detail::check_range("tally::ThetaSketch", "lg_k", lg_k, min_lg_k, max_lg_k);
    lg_k_ = static_cast<std::uint8_t>(lg_k);
}

template <class T>
TALLY_ALWAYS_INLINE void ThetaSketch::add(const T& item) noexcept {
    detail::Hash128 h;
    if (!detail::ds_hash_item(item, h)) return;
    ++total_;
    offer(h.h1 >> 1);
}

TALLY_ALWAYS_INLINE void ThetaSketch::add_hash(std::uint64_t h1) noexcept {
    ++total_;
    offer(h1 >> 1);
}

TALLY_ALWAYS_INLINE void ThetaSketch::offer(std::uint64_t h) noexcept {
    // One compare rejects both 0 (never retained) and h >= theta.
    if (TALLY_LIKELY(h - 1 >= theta_ - 1)) return;
    insert(h);
}

TALLY_DETAIL_THETA_NOINLINE inline void ThetaSketch::insert(std::uint64_t h) noexcept {
    if (slots_.empty()) expand();
    const std::size_t i = detail::theta_probe(slots_.data(), slots_.size() - 1, h);
    if (slots_[i] == h) return;
    slots_[i] = h;
    if (++count_ > capacity_) grow_or_rebuild();
}

inline void ThetaSketch::grow_or_rebuild() noexcept {
    // The vectors below are at most 2^27 slots; allocation failure terminates
    // (noexcept), as it would for any add that must grow its table.
    if (lg_size_ <= lg_k_) {
        const int lg = std::min(lg_size_ + detail::theta_lg_resize, lg_k_ + 1);
        std::vector<std::uint64_t> next(std::size_t{1} << lg, 0);
        const std::size_t mask = next.size() - 1;
        for (const std::uint64_t v : slots_)
            if (v != 0) next[detail::theta_probe(next.data(), mask, v)] = v;
        slots_.swap(next);
        lg_size_ = static_cast<std::uint8_t>(lg);
        capacity_ = detail::theta_capacity(lg, lg_k_);
        return;
    }
    // Rebuild: keep the k smallest, theta = the (k+1)-th (DataSketches' rule).
    const std::size_t k = std::size_t{1} << lg_k_;
    std::vector<std::uint64_t> live;
    live.reserve(count_);
    for (const std::uint64_t v : slots_)
        if (v != 0) live.push_back(v);
    std::nth_element(live.begin(), live.begin() + static_cast<std::ptrdiff_t>(k), live.end());
    theta_ = live[k];
    std::fill(slots_.begin(), slots_.end(), 0);
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t j = 0; j < k; ++j) slots_[detail::theta_probe(slots_.data(), mask, live[j])] = live[j];
    count_ = static_cast<std::uint32_t>(k);
}

// From the compact form to a table (allocation failure terminates, as for
// any add that must grow its table).
inline void ThetaSketch::expand() noexcept {
    std::vector<std::uint64_t> h;
    h.swap(sorted_);
    assign_hashes(h.data(), h.size(), theta_);
}

// Replaces the retained hashes by h[0..n) (distinct, each in [1, theta)),
// with a table sized for them as the update sketch would have grown it.
inline void ThetaSketch::assign_hashes(const std::uint64_t* h, std::size_t n, std::uint64_t theta) {
    const int lg = detail::theta_lg_size_for(static_cast<std::uint32_t>(n), lg_k_);
    slots_.assign(std::size_t{1} << lg, 0);
    lg_size_ = static_cast<std::uint8_t>(lg);
    capacity_ = detail::theta_capacity(lg, lg_k_);
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t j = 0; j < n; ++j) slots_[detail::theta_probe(slots_.data(), mask, h[j])] = h[j];
    count_ = static_cast<std::uint32_t>(n);
    theta_ = theta;
}

inline double ThetaSketch::theta() const noexcept {
    return static_cast<double>(theta_) / static_cast<double>(max_theta);
}

inline double ThetaSketch::estimate() const noexcept { return static_cast<double>(count_) / theta(); }

inline double ThetaSketch::lower_bound(int num_std_devs) const {
    detail::check_range("tally::ThetaSketch::lower_bound", "num_std_devs", num_std_devs, 1, 3);
    if (!is_estimation_mode()) return static_cast<double>(count_);
    return detail::theta_lower_bound(count_, theta(), num_std_devs);
}

inline double ThetaSketch::upper_bound(int num_std_devs) const {
    detail::check_range("tally::ThetaSketch::upper_bound", "num_std_devs", num_std_devs, 1, 3);
    if (!is_estimation_mode()) return static_cast<double>(count_);
    return detail::theta_upper_bound(count_, theta(), num_std_devs);
}

inline std::vector<std::uint64_t> ThetaSketch::hashes() const {
    if (slots_.empty()) return sorted_;
    std::vector<std::uint64_t> out;
    out.reserve(count_);
    for (const std::uint64_t v : slots_)
        if (v != 0) out.push_back(v);
    std::sort(out.begin(), out.end());
    return out;
}

inline bool ThetaSketch::contains_hash(std::uint64_t h) const noexcept {
    if (slots_.empty()) return std::binary_search(sorted_.begin(), sorted_.end(), h);
    return h != 0 && detail::theta_table_contains(slots_, h);
}

inline void ThetaSketch::clear() noexcept {
    theta_ = max_theta;
    total_ = 0;
    count_ = 0;
    nonempty_ = false;
    slots_ = {};
    sorted_ = {};
}

namespace detail {

/// Builds set-operation results (friend of ThetaSketch).
struct ThetaAccess {
    // A result of hashes h[0..n) (distinct, below theta): compact when they
    // are ascending, else a table.
    static ThetaSketch make(int lg_k, bool empty, std::uint64_t theta, const std::uint64_t* h, std::size_t n,
                            std::uint64_t total, bool ascending) {
        ThetaSketch s(lg_k);
        if (empty) return s;
        s.nonempty_ = true;
        s.total_ = total;
        if (ascending) {
            s.sorted_.assign(h, h + n);
            s.count_ = static_cast<std::uint32_t>(n);
            s.theta_ = theta;
        } else {
            s.assign_hashes(h, n, theta);
        }
        return s;
    }
    // The same from a vector whose first n hashes are the result, moved in.
    static ThetaSketch make(int lg_k, bool empty, std::uint64_t theta, std::vector<std::uint64_t>&& h, std::size_t n,
                            std::uint64_t total, bool ascending) {
        if (!ascending || empty) return make(lg_k, empty, theta, h.data(), n, total, ascending);
        ThetaSketch s(lg_k);
        s.nonempty_ = true;
        s.total_ = total;
        h.resize(n);
        if (h.capacity() > 2 * n + 64) h.shrink_to_fit();
        s.sorted_ = std::move(h);
        s.count_ = static_cast<std::uint32_t>(n);
        s.theta_ = theta;
        return s;
    }
    static bool compact(const ThetaSketch& s) noexcept { return s.slots_.empty(); }
    static const std::vector<std::uint64_t>& slots(const ThetaSketch& s) noexcept { return s.slots_; }
    static const std::vector<std::uint64_t>& sorted(const ThetaSketch& s) noexcept { return s.sorted_; }
    // Room gather_below may need.
    static std::size_t room(const ThetaSketch& s) noexcept { return compact(s) ? s.sorted_.size() : s.slots_.size(); }
    // Appends s's hashes below theta to out[n...]; returns the new n.
    static std::size_t gather_below(const ThetaSketch& s, std::uint64_t theta, std::uint64_t* out, std::size_t n) {
        if (!compact(s)) return detail::theta_gather_below(s.slots_, theta, out, n);
        const auto end = std::lower_bound(s.sorted_.begin(), s.sorted_.end(), theta);
        std::copy(s.sorted_.begin(), end, out + n);
        return n + static_cast<std::size_t>(end - s.sorted_.begin());
    }
    // The hashes of a compact sketch below theta: [begin, end).
    static std::span<const std::uint64_t> sorted_below(const ThetaSketch& s, std::uint64_t theta) noexcept {
        const auto end = std::lower_bound(s.sorted_.begin(), s.sorted_.end(), theta);
        return {s.sorted_.data(), static_cast<std::size_t>(end - s.sorted_.begin())};
    }
};

template <class Get>
ThetaSketch theta_union_of(std::size_t m, Get get, int lg_k) {
    std::uint64_t theta = theta_max;
    std::uint64_t total = 0;
    bool any = false;
    int max_lg = ThetaSketch::default_lg_k;
    bool first = true;
    for (std::size_t i = 0; i < m; ++i) {
        const ThetaSketch& s = get(i);
        max_lg = first ? s.lg_k() : std::max(max_lg, s.lg_k());
        first = false;
        total += s.total();
        if (s.empty()) continue;
        any = true;
        theta = std::min(theta, s.theta64());
    }
    if (lg_k == 0) lg_k = max_lg;
    detail::check_range("tally::theta_union", "lg_k", lg_k, ThetaSketch::min_lg_k, ThetaSketch::max_lg_k);
    if (!any) return ThetaAccess::make(lg_k, true, theta_max, nullptr, 0, total, true);
    // Histogram of the candidates' top bits, then gather only the lowest
    // buckets that hold (twice) the k + 1 needed; widen if duplicates left
    // fewer than k + 1 distinct hashes there.
    const std::size_t k = std::size_t{1} << lg_k;
    std::size_t cand = 0;
    for (std::size_t i = 0; i < m; ++i) cand += get(i).empty() ? 0 : get(i).num_retained();
    const int want_bits = std::clamp(static_cast<int>(std::bit_width(cand / 8)), 4, 16);
    const int value_bits = static_cast<int>(std::bit_width(theta - 1));
    const int shift = value_bits > want_bits ? value_bits - want_bits : 0;
    const std::size_t nb = std::size_t{1} << (value_bits - shift);
    detail::ThetaScratch& scratch = detail::theta_scratch();
    const struct TrimAtExit {
        detail::ThetaScratch& s;
        ~TrimAtExit() { s.trim(); }
    } trim_at_exit{scratch};
    std::vector<std::uint32_t>& hist = scratch.hist;
    hist.assign(nb, 0);
    const auto each_below = [&](const ThetaSketch& s, std::uint64_t limit_value, auto&& f) {
        if (ThetaAccess::compact(s)) {
            for (const std::uint64_t v : ThetaAccess::sorted_below(s, limit_value)) f(v);
        } else {
            const std::uint64_t lim = limit_value - 1;
            for (const std::uint64_t v : ThetaAccess::slots(s))
                if (v - 1 < lim) f(v);
        }
    };
    for (std::size_t i = 0; i < m; ++i)
        if (!get(i).empty()) each_below(get(i), theta, [&](std::uint64_t v) { ++hist[v >> shift]; });
    std::vector<std::uint64_t> kept;
    std::vector<std::uint64_t>& pool = scratch.pool;
    std::uint64_t new_theta = theta;
    std::size_t c = 0;
    std::size_t cum = 0;
    std::size_t goal = 2 * (k + 1);
    for (;;) {
        while (c < nb && cum < goal) cum += hist[c++];
        const std::uint64_t limit_value = c == nb ? theta : std::min(theta, static_cast<std::uint64_t>(c) << shift);
        pool.resize(cum);
        std::size_t n = 0;
        for (std::size_t i = 0; i < m; ++i)
            if (!get(i).empty()) each_below(get(i), limit_value, [&](std::uint64_t v) { pool[n++] = v; });
        const std::uint64_t t = theta_select_smallest(pool, n, limit_value, k, kept, scratch);
        if (limit_value == theta || t < limit_value) {
            new_theta = t;
            break;
        }
        goal = 2 * cum + 1;
    }
    const std::size_t kn = kept.size();
    return ThetaAccess::make(lg_k, false, new_theta, std::move(kept), kn, total, true);
}

template <class Get>
ThetaSketch theta_intersection_of(std::size_t m, Get get) {
    if (m == 0) throw_invalid_argument("tally::theta_intersection: no sketches (need at least one)");
    std::uint64_t theta = theta_max;
    std::size_t smallest = 0;
    bool any_empty = false;
    for (std::size_t i = 0; i < m; ++i) {
        const ThetaSketch& s = get(i);
        any_empty |= s.empty();
        theta = std::min(theta, s.theta64());
        if (s.num_retained() < get(smallest).num_retained()) smallest = i;
    }
    const ThetaSketch& first = get(0);
    if (any_empty) return ThetaAccess::make(first.lg_k(), true, theta_max, nullptr, 0, 0, true);
    const ThetaSketch& it = get(smallest);
    std::vector<std::uint64_t> kept(ThetaAccess::room(it));
    std::size_t n = 0;
    const bool ascending = ThetaAccess::compact(it);
    if (m == 2 && ascending && ThetaAccess::compact(get(1 - smallest))) {
        // Two sorted runs: a branch-free merge.
        const auto x = ThetaAccess::sorted_below(it, theta);
        const auto y = ThetaAccess::sorted_below(get(1 - smallest), theta);
        n = theta_merge_sorted<false>(x.data(), x.size(), y.data(), y.size(), kept.data());
    } else {
        const auto probe = [&](const ThetaSketch& s, std::uint64_t v) {
            return ThetaAccess::compact(s) ? std::binary_search(ThetaAccess::sorted(s).begin(), ThetaAccess::sorted(s).end(), v)
                                           : theta_table_contains(ThetaAccess::slots(s), v);
        };
        const auto visit = [&](std::uint64_t v) {
            bool all = true;
            for (std::size_t i = 0; i < m && all; ++i)
                if (i != smallest) all = probe(get(i), v);
            kept[n] = v;
            n += all ? 1 : 0;
        };
        if (ascending) {
            for (const std::uint64_t v : ThetaAccess::sorted_below(it, theta)) visit(v);
        } else {
            const std::uint64_t limit = theta - 1;
            for (const std::uint64_t v : ThetaAccess::slots(it))
                if (v - 1 < limit) visit(v);
        }
    }
    const bool empty = n == 0 && theta == theta_max;
    return ThetaAccess::make(first.lg_k(), empty, theta, std::move(kept), n, first.total(), ascending);
}

}  // namespace detail

inline ThetaSketch& ThetaSketch::merge(const ThetaSketch& other) {
    if (!mergeable_with(other))
        detail::throw_invalid_argument("tally::ThetaSketch::merge: lg_k " + std::to_string(other.lg_k_) +
                                       " differs from this sketch's " + std::to_string(lg_k_) +
                                       " (use theta_union for sketches of different lg_k)");
    if (other.empty()) return *this;
    if (empty()) {
        *this = other;
        return *this;
    }
    if (&other == this) {
        const ThetaSketch copy = other;
        return merge(copy);
    }
    // The union rule (theta = the least theta, the hashes below it, trimmed
    // to the k smallest) kept in compact form: merging into it is one pass
    // over two ascending runs that stops at the (k+1)-th hash, rather than a
    // table to probe and trim after every merge. A table (after adds, or the
    // first merge's copy) is folded by selection once.
    total_ += other.total_;
    if (!slots_.empty())
        fold_by_selection(other);
    else
        merge_sorted(other);
    return *this;
}

// The union rule on both sketches' hashes below the least theta, kept
// compact.
inline void ThetaSketch::fold_by_selection(const ThetaSketch& other) {
    const std::uint64_t theta = std::min(theta_, other.theta_);
    detail::ThetaScratch& scratch = detail::theta_scratch();
    std::vector<std::uint64_t>& pool = scratch.pool;
    pool.resize(detail::ThetaAccess::room(*this) + detail::ThetaAccess::room(other));
    std::size_t n = detail::ThetaAccess::gather_below(*this, theta, pool.data(), 0);
    n = detail::ThetaAccess::gather_below(other, theta, pool.data(), n);
    std::vector<std::uint64_t>& kept = scratch.run;
    const std::uint64_t t = detail::theta_select_smallest(pool, n, theta, std::size_t{1} << lg_k_, kept, scratch);
    keep_sorted(kept, t);
    scratch.trim();
}

// This sketch compact: its ascending hashes and the other's candidates (a
// prefix of a compact sketch, or the k smallest of a table's) merged up to
// the (k+1)-th distinct hash.
inline void ThetaSketch::merge_sorted(const ThetaSketch& other) {
    const std::size_t k = std::size_t{1} << lg_k_;
    std::uint64_t theta = std::min(theta_, other.theta_);
    detail::ThetaScratch& scratch = detail::theta_scratch();
    std::span<const std::uint64_t> theirs;
    if (detail::ThetaAccess::compact(other)) {
        theirs = detail::ThetaAccess::sorted_below(other, theta);
    } else {
        std::vector<std::uint64_t>& pool = scratch.pool;
        pool.resize(other.slots_.size());
        const std::size_t n = detail::theta_gather_below(other.slots_, theta, pool.data(), 0);
        // Only the other's k + 1 smallest can be among the union's.
        theta = detail::theta_select_smallest(pool, n, theta, k, scratch.run, scratch);
        theirs = scratch.run;
    }
    const std::uint64_t* x = sorted_.data();
    const std::uint64_t* const x_end = x + (std::lower_bound(sorted_.begin(), sorted_.end(), theta) - sorted_.begin());
    const std::uint64_t* y = theirs.data();
    const std::uint64_t* const y_end = y + theirs.size();
    std::vector<std::uint64_t>& out = scratch.merged;
    out.resize(std::min(k + 1, static_cast<std::size_t>(x_end - x) + theirs.size()));
    const std::size_t cap = out.size();
    std::size_t n = 0;
    // Usually far fewer of theirs than ours: copy our run below each of
    // theirs whole, found by galloping from where the last one stopped.
    for (; n < cap && y != y_end; ++y) {
        const std::uint64_t b = *y;
        const std::uint64_t* lo = x;
        const std::uint64_t* hi = x;
        for (std::size_t step = 1; hi != x_end && *hi < b; step <<= 1) {
            lo = hi + 1;
            hi = static_cast<std::size_t>(x_end - hi) > step ? hi + step : x_end;
        }
        const std::uint64_t* run_end = std::lower_bound(lo, hi, b);
        const std::size_t len = std::min(static_cast<std::size_t>(run_end - x), cap - n);
        std::copy(x, x + len, out.data() + n);
        n += len;
        x += len;
        if (n == cap) break;
        if (x != x_end && *x == b) ++x;  // in both: one copy
        out[n++] = b;
    }
    const std::size_t rest = std::min(static_cast<std::size_t>(x_end - x), cap - n);
    std::copy(x, x + rest, out.data() + n);
    n += rest;
    if (n > k) {
        theta = out[k];
        n = k;
    }
    out.resize(n);
    sorted_.swap(out);
    count_ = static_cast<std::uint32_t>(n);
    theta_ = theta;
    scratch.trim();
}

// Makes h (ascending, distinct, below t) the retained hashes, compact.
inline void ThetaSketch::keep_sorted(std::vector<std::uint64_t>& h, std::uint64_t t) {
    sorted_.swap(h);
    std::vector<std::uint64_t>().swap(slots_);
    lg_size_ = 0;
    capacity_ = 0;
    count_ = static_cast<std::uint32_t>(sorted_.size());
    theta_ = t;
}

inline ThetaSketch theta_union(std::span<const ThetaSketch* const> sketches, int lg_k) {
    return detail::theta_union_of(
        sketches.size(), [&](std::size_t i) -> const ThetaSketch& { return *sketches[i]; }, lg_k);
}

inline ThetaSketch theta_union(std::span<const ThetaSketch> sketches, int lg_k) {
    return detail::theta_union_of(
        sketches.size(), [&](std::size_t i) -> const ThetaSketch& { return sketches[i]; }, lg_k);
}

inline ThetaSketch theta_union(const ThetaSketch& a, const ThetaSketch& b) {
    const ThetaSketch* both[2] = {&a, &b};
    return theta_union(std::span<const ThetaSketch* const>(both, 2), 0);
}

inline ThetaSketch theta_intersection(std::span<const ThetaSketch* const> sketches) {
    return detail::theta_intersection_of(sketches.size(),
                                         [&](std::size_t i) -> const ThetaSketch& { return *sketches[i]; });
}

inline ThetaSketch theta_intersection(std::span<const ThetaSketch> sketches) {
    return detail::theta_intersection_of(sketches.size(),
                                         [&](std::size_t i) -> const ThetaSketch& { return sketches[i]; });
}

inline ThetaSketch theta_intersection(const ThetaSketch& a, const ThetaSketch& b) {
    const ThetaSketch* both[2] = {&a, &b};
    return theta_intersection(std::span<const ThetaSketch* const>(both, 2));
}

inline ThetaSketch theta_a_not_b(const ThetaSketch& a, const ThetaSketch& b) {
    if (a.empty() || b.empty()) return a;
    const std::uint64_t theta = std::min(a.theta64(), b.theta64());
    std::vector<std::uint64_t> kept(detail::ThetaAccess::room(a));
    std::size_t n = 0;
    const bool ascending = detail::ThetaAccess::compact(a);
    if (b.num_retained() == 0) {
        n = detail::ThetaAccess::gather_below(a, theta, kept.data(), 0);
    } else if (ascending && detail::ThetaAccess::compact(b)) {
        // Two sorted runs: a branch-free merge keeps what only `a` has.
        const auto x = detail::ThetaAccess::sorted_below(a, theta);
        const auto y = detail::ThetaAccess::sorted_below(b, theta);
        n = detail::theta_merge_sorted<true>(x.data(), x.size(), y.data(), y.size(), kept.data());
    } else {
        const auto in_b = [&](std::uint64_t v) {
            return detail::ThetaAccess::compact(b) ? std::binary_search(detail::ThetaAccess::sorted(b).begin(), detail::ThetaAccess::sorted(b).end(), v)
                                           : detail::theta_table_contains(detail::ThetaAccess::slots(b), v);
        };
        if (ascending) {
            for (const std::uint64_t v : detail::ThetaAccess::sorted_below(a, theta)) {
                kept[n] = v;
                n += in_b(v) ? 0 : 1;
            }
        } else {
            const std::uint64_t limit = theta - 1;
            for (const std::uint64_t v : detail::ThetaAccess::slots(a)) {
                if (v - 1 >= limit) continue;
                kept[n] = v;
                n += in_b(v) ? 0 : 1;
            }
        }
    }
    const bool empty = n == 0 && theta == ThetaSketch::max_theta;
    return detail::ThetaAccess::make(a.lg_k(), empty, theta, std::move(kept), n, a.total(), ascending);
}

// ---- bytes -----------------------------------------------------------------

inline std::vector<std::byte> ThetaSketch::serialize() const {
    const std::vector<std::uint64_t> h = hashes();
    ByteWriter w(8 + 24 + 9 * h.size());
    w.header(Family::theta, format_version);
    w.u8(lg_k_);
    w.u8(empty() ? 0 : 1);
    w.u64(theta_);
    w.varint(total_);
    w.u32(static_cast<std::uint32_t>(h.size()));
    std::uint64_t prev = 0;
    for (const std::uint64_t v : h) {
        w.varint(v - prev);
        prev = v;
    }
    return w.take();
}

inline ThetaSketch ThetaSketch::deserialize(std::span<const std::byte> bytes) {
    ByteReader r(bytes);
    r.header(Family::theta, format_version);
    const int lg_k = r.u8();
    format_check(lg_k >= min_lg_k && lg_k <= max_lg_k, "ThetaSketch: lg_k is out of range [5, 26]");
    const std::uint8_t flags = r.u8();
    format_check(flags <= 1, "ThetaSketch: unknown flag bits");
    const std::uint64_t theta = r.u64();
    format_check(theta >= 1 && theta <= max_theta, "ThetaSketch: theta is out of range [1, 2^63 - 1]");
    const std::uint64_t total = r.varint();
    const std::uint64_t count =
        r.count(r.u32(), 1, detail::theta_capacity(lg_k + 1, lg_k), "ThetaSketch hash");
    if (flags == 0)
        format_check(total == 0 && theta == max_theta && count == 0,
                     "ThetaSketch: an empty sketch has total 0, theta 1 and no hashes");
    std::vector<std::uint64_t> h(static_cast<std::size_t>(count));
    std::uint64_t prev = 0;
    for (auto& v : h) {
        const std::uint64_t d = r.varint();
        format_check(d > 0 && d < theta - prev, "ThetaSketch: hashes are not ascending below theta");
        prev += d;
        v = prev;
    }
    r.expect_end();
    const std::size_t n = h.size();
    return detail::ThetaAccess::make(lg_k, flags == 0, theta, std::move(h), n, total, true);
}

inline std::vector<std::byte> ThetaSketch::to_datasketches(bool compressed) const {
    return detail::ds_theta_encode(empty(), empty() ? max_theta : theta_, hashes(), compressed);
}

inline ThetaSketch ThetaSketch::from_datasketches(std::span<const std::byte> bytes, int lg_k) {
    detail::check_range("tally::ThetaSketch::from_datasketches", "lg_k", lg_k, min_lg_k, max_lg_k);
    detail::DsThetaImage img = detail::ds_theta_decode(bytes);
    while (lg_k < max_lg_k && img.hashes.size() > detail::theta_capacity(lg_k + 1, lg_k)) ++lg_k;
    if (img.hashes.size() > detail::theta_capacity(lg_k + 1, lg_k))
        detail::ds_theta_fail(std::to_string(img.hashes.size()) + " hashes exceed what lg_k 26 holds");
    const std::size_t n = img.hashes.size();
    return detail::ThetaAccess::make(lg_k, img.empty, img.theta, std::move(img.hashes), n, 0, true);
}

TALLY_END_NAMESPACE
