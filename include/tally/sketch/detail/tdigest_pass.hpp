// tally/sketch/detail/tdigest_pass.hpp: the merge pass of tally::TDigest and
// the knots of its quantile function, with runs of tied values kept as point
// masses. Not for direct use.
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

TALLY_BEGIN_NAMESPACE
namespace detail {

/// A run of tied values (equal means in the sorted stream) is kept as a point
/// mass when it weighs more than 1 and more than this fraction of the size
/// limit of a centroid at its rank (on the scale of all the weight): lighter
/// runs cost at most that fraction of a centroid's width of rank error when
/// they are merged with their neighbours, as continuous data is.
inline constexpr double tdigest_point_mass_fraction = 1.0 / 16;

/// Reads a sorted stream of (mean, weight) items as runs of equal means:
/// take(m, w, raw) yields the next item and returns whether more follow (the
/// stream is never empty); raw says the item is one value (an add), not a
/// centroid of a previous pass. f(mean, weight, pure) gets each run; a run is
/// pure (certainly one value) when it is raw or has two or more items (a
/// point mass of a previous pass has two).
template <class Take, class F>
void tdigest_runs(Take&& take, F&& f) noexcept {
    double rm = 0, rw = 0;
    bool raw = false;
    bool more = take(rm, rw, raw);
    bool pure = raw;
    for (;;) {
        double m = 0, w = 0;
        bool next_raw = false, have_next = false;
        while (more) {
            more = take(m, w, next_raw);
            if (m != rm) {
                have_next = true;
                break;
            }
            rw += w;
            pure = true;
        }
        f(rm, rw, pure);
        if (!have_next) return;
        rm = m;
        rw = w;
        pure = next_raw;
    }
}

/// The total weight of the runs that become point masses: pure runs heavier
/// than 1 for which heavy(weight before the run, weight) holds.
template <class Heavy, class Take>
double tdigest_point_mass_weight(const Heavy& heavy, Take&& take) noexcept {
    double pos = 0, sum = 0;
    tdigest_runs(take, [&](double, double w, bool pure) {
        if (w > 1 && pure && heavy(pos, w)) sum += w;
        pos += w;
    });
    return sum;
}

/// One greedy pass over a sorted stream (see tdigest_runs), appending the
/// centroids to `out`.
///
/// A pure run heavier than 1 for which heavy(weight before the run, weight)
/// holds is written as two centroids of equal mean and half its weight each,
/// which the queries read as a point mass. Other runs join the open centroid
/// while its weight stays within limit(weight of the closed centroids), the
/// k-size limit of Dunning & Ertl, counted over the weight that is not in
/// point masses; a centroid's mean is kept within its items' range.
template <class C, class Limit, class Heavy, class Take>
void tdigest_pass(std::vector<C>& out, const Limit& limit, const Heavy& heavy, Take&& take) noexcept {
    double base = 0, last = 0, acc = 0, cw = 0, closed = 0, pos = 0;
    double wmax = limit(0.0);
    auto close = [&] {
        double m = base + acc / cw;
        if (!std::isfinite(m)) m = base / 2 + last / 2;
        out.push_back(C{std::min(std::max(m, base), last), cw});
        closed += cw;
        wmax = limit(closed);
        cw = 0;
    };
    tdigest_runs(take, [&](double m, double w, bool pure) {
        if (w > 1 && pure && heavy(pos, w)) {
            if (cw > 0) close();
            out.push_back(C{m, w / 2});
            out.push_back(C{m, w / 2});
        } else if (cw > 0 && closed + cw + w <= wmax) {
            acc += (m - base) * w;
            cw += w;
            last = m;
        } else {
            if (cw > 0) close();
            base = last = m;
            acc = 0;
            cw = w;
        }
        pos += w;
    });
    if (cw > 0) close();
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
