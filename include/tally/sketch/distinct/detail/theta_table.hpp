// tally/sketch/distinct/detail/theta_table.hpp: the pieces of tally::ThetaSketch that
// are not its interface: the open-addressing table of retained hashes and
// the selection kernel behind unions.
//
// Table: 2^lg_size slots of std::uint64_t, 0 = free (0 is never a retained
// hash), linear probing from the low bits. Sizes follow DataSketches' update
// sketch (start at 2^5..2^7, grow 8x at half full, 2^(lg_k+1) slots at most,
// rebuilt to the k smallest hashes past 15/16 full), so the retained hashes
// after any sequence of adds are those DataSketches retains.
//
// All functions are pure over their arguments and thread-safe.
#pragma once

#include "../../../detail/abi.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../../../detail/primitives.hpp"

#if defined(__GNUC__) || defined(__clang__)
#define TALLY_DETAIL_THETA_NOINLINE __attribute__((noinline))
#else
#define TALLY_DETAIL_THETA_NOINLINE
#endif

TALLY_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::uint64_t theta_max = 0x7fffffffffffffffull;  // DataSketches' MAX_THETA (Java's Long.MAX_VALUE)
inline constexpr int theta_min_lg_k = 5;
inline constexpr int theta_max_lg_k = 26;
inline constexpr int theta_lg_resize = 3;  // DataSketches' default resize factor X8

/// Slots a table of 2^lg_size holds before it grows (<= lg_k) or is rebuilt
/// (lg_k + 1): floor(0.5 * size), floor(15/16 * size).
constexpr std::uint32_t theta_capacity(int lg_size, int lg_k) noexcept {
    const std::uint64_t size = std::uint64_t{1} << lg_size;
    return static_cast<std::uint32_t>(lg_size <= lg_k ? size / 2 : (size * 15) / 16);
}

/// DataSketches' starting table size: lg_k + 1 reduced by whole resize steps
/// down to no less than 5.
constexpr int theta_start_lg_size(int lg_k) noexcept {
    const int target = lg_k + 1;
    return target <= theta_min_lg_k ? theta_min_lg_k : ((target - theta_min_lg_k) % theta_lg_resize) + theta_min_lg_k;
}

/// The smallest table (from the starting size in resize steps, at most
/// lg_k + 1) whose capacity holds `count` hashes.
constexpr int theta_lg_size_for(std::uint32_t count, int lg_k) noexcept {
    int lg = theta_start_lg_size(lg_k);
    while (lg < lg_k + 1 && count > theta_capacity(lg, lg_k)) lg = std::min(lg + theta_lg_resize, lg_k + 1);
    return lg;
}

/// Slot of `h` in the table, or of the free slot where it would go.
inline std::size_t theta_probe(const std::uint64_t* slots, std::size_t mask, std::uint64_t h) noexcept {
    std::size_t i = static_cast<std::size_t>(h) & mask;
    while (slots[i] != 0 && slots[i] != h) i = (i + 1) & mask;
    return i;
}

inline bool theta_table_contains(const std::vector<std::uint64_t>& slots, std::uint64_t h) noexcept {
    return slots[theta_probe(slots.data(), slots.size() - 1, h)] == h;
}

/// Removes the hash at slot i of a full-or-not linear-probing table by
/// shifting the rest of its cluster back (Knuth's Algorithm R), so probes
/// stay correct without tombstones. `moved(from, to)` is called for each
/// entry that changes slot (tables with values beside the hashes move them).
template <class Moved>
void theta_erase_at(std::uint64_t* slots, std::size_t mask, std::size_t i, Moved moved) noexcept {
    std::size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        const std::uint64_t v = slots[j];
        if (v == 0) break;
        const std::size_t home = static_cast<std::size_t>(v) & mask;
        // v may fill the hole at i unless its home lies cyclically in (i, j].
        const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (stays) continue;
        slots[i] = v;
        moved(j, i);
        i = j;
    }
    slots[i] = 0;
}

/// The union rule's cut of a table of `count` (> k) hashes in [1, theta):
/// the (k+1)-th smallest hash t. Only the hashes on one side of a cutoff
/// that the uniform spread of hashes puts just past t are selected from
/// (above it when fewer than k are to go, else below), so a cut costs a scan
/// and a small selection rather than a sort. With `above`, the hashes >= t
/// are selected from above, and on return buf[first, end) holds them (t
/// first); otherwise first == end.
struct ThetaCut {
    std::uint64_t t;
    std::size_t first, end;
};
inline ThetaCut theta_find_cut(const std::vector<std::uint64_t>& slots, std::uint32_t count, std::uint64_t theta,
                               std::size_t k, std::vector<std::uint64_t>& buf, bool above = true) {
    const std::size_t excess = count - k;
    const double slack = 4.0 * std::sqrt(static_cast<double>(k)) + 16.0;
    buf.resize(slots.size());
    std::size_t m = 0;
    if (!above && excess > k) {
        // from below: the k + 1 smallest lie under about (k + slack) / count of theta
        const double frac = (static_cast<double>(k) + slack) / static_cast<double>(count);
        std::uint64_t cut = frac < 1 ? static_cast<std::uint64_t>(frac * static_cast<double>(theta)) : theta;
        for (;;) {
            m = 0;
            for (const std::uint64_t v : slots) {  // branch-free: free slots are too many to predict
                buf[m] = v;
                m += v - 1 < cut - 1 ? 1 : 0;  // 0 < v < cut
            }
            if (m > k) break;
            cut = theta;  // the spread was unlucky: select from all
        }
        std::nth_element(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(k),
                         buf.begin() + static_cast<std::ptrdiff_t>(m));
        return {buf[k], 0, 0};
    }
    const double below = (static_cast<double>(k) - slack) / static_cast<double>(count);
    std::uint64_t cut = below > 0 ? static_cast<std::uint64_t>(below * static_cast<double>(theta)) : 0;
    for (;;) {
        m = 0;
        for (const std::uint64_t v : slots) {  // branch-free: free slots are too many to predict
            buf[m] = v;
            m += v >= cut && v != 0 ? 1 : 0;
        }
        if (m >= excess) break;
        cut = 0;  // the spread was unlucky: select from all
    }
    const std::size_t idx = k - (count - m);  // t's rank among the selected
    std::nth_element(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(idx),
                     buf.begin() + static_cast<std::ptrdiff_t>(m));
    return {buf[idx], idx, m};
}

/// The union rule's trim of a table at most about half full: erases the
/// hashes >= the cut (count - k of them) and returns the new theta.
template <class Moved>
std::uint64_t theta_trim_table(std::vector<std::uint64_t>& slots, std::uint32_t count, std::uint64_t theta,
                               std::size_t k, std::vector<std::uint64_t>& buf, Moved moved) {
    const ThetaCut c = theta_find_cut(slots, count, theta, k, buf);
    const std::size_t mask = slots.size() - 1;
    for (std::size_t j = c.first; j < c.end; ++j)
        theta_erase_at(slots.data(), mask, theta_probe(slots.data(), mask, buf[j]), moved);
    return c.t;
}

/// Appends the hashes of `slots` below `theta` (and not 0) to out[n...];
/// returns the new n. out must have room for slots.size() more.
inline std::size_t theta_gather_below(const std::vector<std::uint64_t>& slots, std::uint64_t theta,
                                      std::uint64_t* out, std::size_t n) noexcept {
    const std::uint64_t limit = theta - 1;  // v - 1 < theta - 1 <=> 0 < v < theta
    const std::uint64_t* s = slots.data();
    const std::size_t size = slots.size();
    std::size_t i = 0;
    // Groups of four first: once theta is low most groups hold no candidate,
    // and one predictable test skips them.
    for (; i + 4 <= size; i += 4) {
        const bool any = ((s[i] - 1) < limit) | ((s[i + 1] - 1) < limit) | ((s[i + 2] - 1) < limit) |
                         ((s[i + 3] - 1) < limit);
        if (!any) continue;
        for (std::size_t j = i; j < i + 4; ++j) {
            out[n] = s[j];
            n += (s[j] - 1) < limit ? 1 : 0;
        }
    }
    for (; i < size; ++i) {
        out[n] = s[i];
        n += (s[i] - 1) < limit ? 1 : 0;
    }
    return n;
}

/// Working memory of a union, kept per thread between calls: a union of
/// sketches at lg_k 12 needs a few hundred KiB of histogram and candidates,
/// and allocating it anew each call made the allocator grow and trim the
/// heap (two brk calls and fresh page faults per union, a third of its
/// time). Buffers larger than `keep_bytes` are released after the call.
struct ThetaScratch {
    static constexpr std::size_t keep_bytes = std::size_t{1} << 20;
    std::vector<std::uint32_t> hist;
    std::vector<std::uint32_t> start;
    std::vector<std::uint32_t> next;
    std::vector<std::uint64_t> pool;
    std::vector<std::uint64_t> sorted;
    std::vector<std::uint64_t> run;     // a merge's candidates, ascending
    std::vector<std::uint64_t> merged;  // a merge's result, swapped into the sketch

    /// Releases whatever grew past keep_bytes (called when a union ends).
    void trim() noexcept {
        release_if_large(hist);
        release_if_large(start);
        release_if_large(next);
        release_if_large(pool);
        release_if_large(sorted);
        release_if_large(run);
        release_if_large(merged);
    }

  private:
    template <class V>
    static void release_if_large(V& v) noexcept {
        if (v.capacity() * sizeof(typename V::value_type) > keep_bytes) V().swap(v);
    }
};

/// This thread's scratch (see ThetaScratch).
inline ThetaScratch& theta_scratch() noexcept {
    thread_local ThetaScratch scratch;
    return scratch;
}

/// The union rule of the theta sketch framework on a pool of candidate
/// hashes, all in [1, theta), possibly with duplicates: returns (ascending in
/// `result`) the distinct candidates if at most k, else the k smallest, and
/// the new theta (the (k+1)-th smallest distinct candidate, or `theta`).
/// Candidates are bucketed by their top bits, and buckets are sorted from
/// the bottom only until k + 1 distinct hashes are found.
inline std::uint64_t theta_select_smallest(std::vector<std::uint64_t>& pool, std::size_t n, std::uint64_t theta,
                                           std::size_t k, std::vector<std::uint64_t>& result,
                                           ThetaScratch& scratch) {
    result.clear();
    if (n == 0) return theta;
    if (n <= 64) {
        std::sort(pool.begin(), pool.begin() + static_cast<std::ptrdiff_t>(n));
        const auto end = std::unique(pool.begin(), pool.begin() + static_cast<std::ptrdiff_t>(n));
        const std::size_t d = static_cast<std::size_t>(end - pool.begin());
        if (d <= k) {
            result.assign(pool.begin(), end);
            return theta;
        }
        result.assign(pool.begin(), pool.begin() + static_cast<std::ptrdiff_t>(k));
        return pool[k];
    }
    const int want_bits = std::clamp(static_cast<int>(std::bit_width(n / 4)), 4, 16);
    const int value_bits = static_cast<int>(std::bit_width(theta - 1));
    const int shift = value_bits > want_bits ? value_bits - want_bits : 0;
    const std::size_t buckets = (std::size_t{1} << (value_bits - shift)) + 1;
    std::vector<std::uint32_t>& start = scratch.start;
    start.assign(buckets + 1, 0);
    for (std::size_t i = 0; i < n; ++i) ++start[(pool[i] >> shift) + 1];
    for (std::size_t b = 1; b <= buckets; ++b) start[b] += start[b - 1];
    std::vector<std::uint64_t>& sorted = scratch.sorted;
    sorted.resize(n);
    {
        std::vector<std::uint32_t>& next = scratch.next;
        next.assign(start.begin(), start.end() - 1);
        for (std::size_t i = 0; i < n; ++i) sorted[next[pool[i] >> shift]++] = pool[i];
    }
    result.reserve(std::min(n, k + 1));
    for (std::size_t b = 0; b < buckets; ++b) {
        std::uint64_t* first = sorted.data() + start[b];
        std::uint64_t* last = sorted.data() + start[b + 1];
        if (first == last) continue;
        // Buckets hold a few hashes each: insertion sort them in line.
        if (last - first <= 16) {
            for (std::uint64_t* i = first + 1; i < last; ++i) {
                const std::uint64_t v = *i;
                std::uint64_t* j = i;
                for (; j > first && j[-1] > v; --j) *j = j[-1];
                *j = v;
            }
        } else {
            std::sort(first, last);
        }
        for (const std::uint64_t* it = first; it != last; ++it) {
            if (!result.empty() && result.back() == *it) continue;  // a duplicate (ascending: adjacent)
            if (result.size() == k) return *it;  // the (k+1)-th smallest distinct hash
            result.push_back(*it);
        }
    }
    return theta;
}


/// The difference x \ y (Difference) or the intersection of two ascending
/// runs of distinct hashes, written ascending to out (room for x's size);
/// returns the count. The value range is cut into `lanes` parts merged in one
/// loop, so the merge steps of different lanes overlap instead of waiting on
/// each other's loads.
template <bool Difference, int lanes = 2>
std::size_t theta_merge_sorted(const std::uint64_t* x, std::size_t nx, const std::uint64_t* y, std::size_t ny,
                               std::uint64_t* out) noexcept {
    const std::uint64_t* xs[lanes + 1];
    const std::uint64_t* ys[lanes + 1];
    const std::uint64_t top = std::max(nx ? x[nx - 1] : 0, ny ? y[ny - 1] : 0) + 1;
    for (int l = 0; l <= lanes; ++l) {
        const std::uint64_t v = l == lanes ? top : static_cast<std::uint64_t>((static_cast<uint128>(top) * l) / lanes);
        xs[l] = std::lower_bound(x, x + nx, v);
        ys[l] = std::lower_bound(y, y + ny, v);
    }
    const std::uint64_t* xi[lanes];
    const std::uint64_t* yi[lanes];
    std::uint64_t* o[lanes];
    for (int l = 0; l < lanes; ++l) {
        xi[l] = xs[l];
        yi[l] = ys[l];
        o[l] = out + (xs[l] - x);  // a lane writes at most its own share of x
    }
    const auto step = [&](int l) {
        const std::uint64_t u = *xi[l], v = *yi[l];
        *o[l] = u;
        o[l] += Difference ? (u < v ? 1 : 0) : (u == v ? 1 : 0);
        xi[l] += u <= v ? 1 : 0;
        yi[l] += v <= u ? 1 : 0;
    };
    for (;;) {
        bool all = true;
        for (int l = 0; l < lanes; ++l) all &= (xi[l] != xs[l + 1]) & (yi[l] != ys[l + 1]);
        if (!all) break;
        for (int l = 0; l < lanes; ++l) step(l);
    }
    std::uint64_t* w = out;
    for (int l = 0; l < lanes; ++l) {
        while (xi[l] != xs[l + 1] && yi[l] != ys[l + 1]) step(l);
        if (Difference)
            while (xi[l] != xs[l + 1]) *o[l]++ = *xi[l]++;
        // Lanes are in value order: move lane l's output down behind the previous ones.
        std::uint64_t* begin = out + (xs[l] - x);
        w = std::copy(begin, o[l], w);
    }
    return static_cast<std::size_t>(w - out);
}

}  // namespace detail
TALLY_END_NAMESPACE
