// tally/sketch/quantiles/detail/tdigest_pass.hpp: the merge pass of tally::TDigest and
// the knots of its quantile function, with runs of tied values kept as point
// masses. Not for direct use.
#pragma once

#include "../../../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "../../../core/platform.hpp"
#include "tdigest_sort.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

/// A run of tied values (equal means in the sorted stream) is kept as a point
/// mass when it weighs more than 1 and more than this fraction of the size
/// limit of a centroid at its rank (on the scale of all the weight): lighter
/// runs cost at most that fraction of a centroid's width of rank error when
/// they are merged with their neighbours, as continuous data is.
inline constexpr double tdigest_point_mass_fraction = 1.0 / 16;

/// The unit-weight values of a merge pass, as sort keys, ascending.
struct TDigestUnits {
    const std::uint64_t* u;
    const std::uint64_t* u_end;
    double um;  // the value of *u, +inf at the end

    TDigestUnits(const std::uint64_t* keys, std::size_t nk) noexcept : u(keys), u_end(keys + nk) {
        um = u != u_end ? tdigest_unkey(*u) : std::numeric_limits<double>::infinity();
    }
    [[nodiscard]] bool more() const noexcept { return u != u_end; }
    // Whether the next unit comes before centroid r (nullptr: none left);
    // on a tie the lighter goes first.
    template <class C>
    [[nodiscard]] bool before(const C* r) const noexcept {
        return u != u_end && (r == nullptr || um < r->mean || (um == r->mean && 1.0 < r->weight));
    }
    void take(double& m, double& w, double& pw) noexcept {
        m = um;
        w = 1;
        pw = 1;
        ++u;
        um = u != u_end ? tdigest_unkey(*u) : std::numeric_limits<double>::infinity();
    }
};

/// The input of a merge pass: three sorted streams read in (mean, weight)
/// order, centroids of the digest, records (weighted values of add, or
/// centroids of a merge) and unit-weight values as sort keys. A callable
/// take(m, w, pw) for tdigest_pass; copy it for each pass.
template <class C>
struct TDigestStream {
    const C* c;
    const C* c_end;
    const C* b;
    const C* b_end;
    TDigestUnits units;
    bool records_raw;  // the records are values of add, not centroids

    TDigestStream(const C* cs, std::size_t nc, const C* rs, std::size_t nr, const std::uint64_t* keys,
                  std::size_t nk, bool raw) noexcept
        : c(cs), c_end(cs + nc), b(rs), b_end(rs + nr), units(keys, nk), records_raw(raw) {}

    /// The usual case, centroids and unit-weight values only.
    struct Plain {
        const C* c;
        const C* c_end;
        TDigestUnits units;
        bool operator()(double& m, double& w, double& pw) noexcept {
            if (units.before(c != c_end ? c : nullptr)) {
                units.take(m, w, pw);
            } else {
                m = c->mean;
                w = c->weight;
                pw = 0;
                ++c;
            }
            return units.more() || c != c_end;
        }
    };
    Plain without_records() const noexcept { return Plain{c, c_end, units}; }

    bool operator()(double& m, double& w, double& pw) noexcept {
        const bool from_b = b != b_end && (c == c_end || tdigest_less(*b, *c));
        const C* r = from_b ? b : (c != c_end ? c : nullptr);
        if (units.before(r)) {
            units.take(m, w, pw);
        } else {
            m = r->mean;
            w = r->weight;
            pw = from_b && records_raw ? w : 0;
            if (from_b)
                ++b;
            else
                ++c;
        }
        return units.more() || b != b_end || c != c_end;
    }
};

/// The fraction of the weight of centroids cs[0, k) (sorted by mean) that
/// sits in point masses (two or more centroids of equal mean); 0 when k = 0.
template <class C>
double tdigest_point_mass_fraction_of(const C* cs, std::size_t k) noexcept {
    double all = 0, in_masses = 0;
    for (std::size_t i = 0; i < k;) {
        double w = cs[i].weight;
        std::size_t j = i + 1;
        while (j < k && cs[j].mean == cs[i].mean) w += cs[j++].weight;
        all += w;
        if (j - i > 1) in_masses += w;
        i = j;
    }
    return all > 0 ? in_masses / all : 0.0;
}

/// Appends the centroid of the items from `base` to `last` (weight cw, acc
/// the weighted sum of their distances from base), its mean kept within them.
template <class C>
void tdigest_emit(std::vector<C>& out, double base, double last, double acc, double cw) noexcept {
    double m = base + acc / cw;
    if (!std::isfinite(m)) m = base / 2 + last / 2;
    out.push_back(C{std::min(std::max(m, base), last), cw});
}

/// One greedy pass over a sorted stream of (mean, weight) items, appending
/// the centroids to `out`. take(m, w, pw) yields the next item and returns
/// whether more follow (the stream is never empty); pw is w when the item is
/// one value (an add), 0 for a centroid of a previous pass. Items of equal mean
/// form a run; a run is pure (certainly one value) when it is raw or has two
/// or more items (a point mass of a previous pass has two).
///
/// A pure run heavier than 1 for which heavy(weight before the run, weight)
/// holds is written as two centroids of equal mean and half its weight each,
/// which the queries read as a point mass. Other runs join the open centroid
/// while its weight stays within limit(weight of the closed centroids), the
/// k-size limit of Dunning & Ertl, counted over the weight that is not in
/// point masses; a centroid's mean is kept within its items' range.
template <class C, class Limit, class Heavy>
struct TDigestPass {
    std::vector<C>& out;
    const Limit& limit;
    const Heavy& heavy;
    // the open centroid (empty when cw = 0, with base the next run's mean)
    double base, last, acc = 0, cw = 0;
    double closed = 0, in_masses = 0;  // weight of the closed centroids, of the point masses
    double wmax = 0;

    /// Takes the run (m, w), of which pw is known to be one value (w when
    /// pure, else 0); next is the mean of the run after it.
    TALLY_ALWAYS_INLINE void run(double m, double w, double pw, double next) noexcept {
        if (pw > 1 && heavy(closed + cw + in_masses, w)) [[unlikely]] {
            if (cw > 0) close();
            out.push_back(C{m, w / 2});
            out.push_back(C{m, w / 2});
            in_masses += w;
            base = last = next;
            acc = 0;
            cw = 0;
        } else if (closed + cw + w <= wmax) {
            acc += (m - base) * w;
            cw += w;
            last = m;
        } else {
            if (cw > 0) close();
            base = last = m;
            acc = 0;
            cw = w;
        }
    }
    TALLY_ALWAYS_INLINE void close() noexcept {
        double m = base + acc / cw;
        if (!std::isfinite(m)) m = base / 2 + last / 2;
        out.push_back(C{std::min(std::max(m, base), last), cw});
        closed += cw;
        wmax = limit(closed);
    }
};

template <class C, class Limit, class Heavy, class Take>
void tdigest_pass(std::vector<C>& out, const Limit& limit, const Heavy& heavy, Take take) noexcept {
    double rm = 0, rw = 0, rpw = 0;  // the current run; rpw = rw when it is pure, else 0
    bool more = take(rm, rw, rpw);
    TDigestPass<C, Limit, Heavy> pass{out, limit, heavy, rm, rm};
    pass.wmax = limit(0.0);
    while (more) {
        double m, w, pw;
        more = take(m, w, pw);
        if (m == rm) [[unlikely]] {
            rw += w;
            rpw = rw;  // two or more items: pure
            continue;
        }
        pass.run(rm, rw, rpw, m);
        rm = m;
        rw = w;
        rpw = pw;
    }
    pass.run(rm, rw, rpw, rm);
    if (pass.cw > 0) pass.close();
}

/// The interpolated quantile function of centroids cs[0, k) (sorted by mean,
/// total weight n > 0, exact min and max) is piecewise linear through knots
/// (cumulative weight, value), visited in order until visit returns true:
/// (0, min) first; a point mass (two or more centroids of equal mean, or one
/// of weight <= 1) is a flat step over its rank interval; any other centroid
/// is one knot at the middle of its interval, and when it is the first (last)
/// the paper's unit-wide flat step at min (max) comes before (after) it; (n,
/// max) last. Positions are clamped to be non-decreasing within [0, n].
template <class C, class Visit>
void tdigest_walk_knots(const C* cs, std::size_t k, double n, double min, double max, Visit&& visit) {
    double prev = 0;
    auto emit = [&](double pos, double v) {
        pos = std::clamp(pos, prev, n);
        prev = pos;
        return visit(pos, v);
    };
    if (emit(0, min)) return;
    double w_before = 0;
    for (std::size_t i = 0; i < k;) {
        const double v = cs[i].mean;
        double w = cs[i].weight;
        std::size_t j = i + 1;
        while (j < k && cs[j].mean == v) w += cs[j++].weight;
        if (j - i > 1 || w <= 1) {
            if (emit(w_before, v) || emit(w_before + w, v)) return;
        } else {
            const double half = w / 2;
            if (i == 0 && emit(std::min(1.0, half), min)) return;
            if (emit(w_before + half, v)) return;
            if (j == k && emit(n - std::min(1.0, half), max)) return;
        }
        w_before += w;
        i = j;
    }
    emit(n, max);
}

}  // namespace detail
TALLY_END_NAMESPACE
