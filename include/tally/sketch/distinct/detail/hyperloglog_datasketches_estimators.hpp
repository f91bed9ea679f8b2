// tally/sketch/distinct/detail/hyperloglog_datasketches_estimators.hpp: the estimates
// and bounds DataSketches Java 6.x's HllSketch answers (getEstimate,
// getLowerBound, getUpperBound), from its tables
// (detail/hyperloglog_datasketches_tables.hpp), for HyperLogLog in mode
// datasketches:
//
//   coupons (LIST/SET): cubic (Lagrange) interpolation of the coupon count in
//     the coupon table, at least the count; bounds est / (1 +- s 0.409 / 2^13).
//   HLL, in order: the HIP accumulator. Out of order: the composite estimator,
//     Flajolet's raw estimate mapped through the lg_k's table by cubic
//     interpolation (equally spaced cardinalities), linear extrapolation above
//     it, and below 3k the bitmap (coupon collector) estimate where the mean of
//     the two is under 0.64 k (0.718 k at lg_k 4, 0.672 k at lg_k 5).
//   HLL bounds: est / (1 + e) (at least the nonzero registers) and est / (1 - e),
//     e from the relative-error tables up to lg_k 12, else s f / sqrt(k) with
//     f = sqrt(ln 2) (HIP) or sqrt(3 ln 2 - 1).
//
// Every product and quotient is written in the order DataSketches evaluates it,
// so the same inputs give the same doubles.
#pragma once

#include "../../../detail/abi.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>

#include "../../../core/detail/simd.hpp"
#include "hyperloglog_datasketches_tables.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

// The cubic through four points at x, in Lagrange form (no product here
// feeds an add directly: each term is a quotient).
inline double ds_cubic(const double* xs, const double* ys, double x) noexcept {
    const double x0 = xs[0], x1 = xs[1], x2 = xs[2], x3 = xs[3];
    const double n0 = (x - x1) * (x - x2) * (x - x3);
    const double n1 = (x - x0) * (x - x2) * (x - x3);
    const double n2 = (x - x0) * (x - x1) * (x - x3);
    const double n3 = (x - x0) * (x - x1) * (x - x2);
    const double d0 = (x0 - x1) * (x0 - x2) * (x0 - x3);
    const double d1 = (x1 - x0) * (x1 - x2) * (x1 - x3);
    const double d2 = (x2 - x0) * (x2 - x1) * (x2 - x3);
    const double d3 = (x3 - x0) * (x3 - x1) * (x3 - x2);
    const double t0 = ys[0] * n0 / d0;
    const double t1 = ys[1] * n1 / d1;
    const double t2 = ys[2] * n2 / d2;
    const double t3 = ys[3] * n3 / d3;
    return t0 + t1 + t2 + t3;
}

// The first point of the four around x (xs[0] <= x < xs.back()): the interval
// holding x by bisection, then one point to the left, clamped to the ends.
inline std::size_t ds_cubic_start(std::span<const double> xs, double x) noexcept {
    std::size_t lo = 0, hi = xs.size() - 1;
    while (lo + 1 < hi) {
        const std::size_t mid = lo + (hi - lo) / 2;
        if (xs[mid] <= x)
            lo = mid;
        else
            hi = mid;
    }
    if (lo == 0) return 0;
    if (lo == xs.size() - 2) return lo - 2;
    return lo - 1;
}

// The coupon table at c (c below its last point, as every SET is).
inline double ds_coupon_interpolate(double c) noexcept {
    constexpr std::size_t n = std::size(ds_coupon_x);
    if (c >= ds_coupon_x[n - 1]) return ds_coupon_y[n - 1];
    const std::size_t s = ds_cubic_start(std::span<const double>(ds_coupon_x), c);
    return ds_cubic(ds_coupon_x + s, ds_coupon_y + s, c);
}

/// Cardinality for `coupons` coupons (LIST/SET mode).
inline double ds_coupon_estimate(std::uint64_t coupons) noexcept {
    const double c = static_cast<double>(coupons);
    const double est = ds_coupon_interpolate(c);
    return est > c ? est : c;
}

inline constexpr double ds_coupon_rse = 0.409 / (1 << 13);

/// The bounds bound the interpolated value, each at least the coupon count.
inline double ds_coupon_bound(std::uint64_t coupons, int num_std_dev, bool upper) noexcept {
    const double c = static_cast<double>(coupons);
    const double raw = ds_coupon_interpolate(c);
    const double e = rounded(num_std_dev * ds_coupon_rse);
    const double b = upper ? raw / (1.0 - e) : raw / (1.0 + e);
    return b > c ? b : c;
}

/// H(n), exactly below 25, else the asymptotic series.
inline double ds_harmonic(std::uint64_t n) noexcept {
    if (n < 25) return ds_exact_harmonic[n];
    const double x = static_cast<double>(n);
    const double inv_sq = 1.0 / (x * x);
    double sum = std::log(x) + 0.577215664901532860606512090082 + 1.0 / (2.0 * x);
    double pow = inv_sq;
    sum -= rounded(pow * (1.0 / 12.0));
    pow *= inv_sq;
    sum += rounded(pow * (1.0 / 120.0));
    pow *= inv_sq;
    sum -= rounded(pow * (1.0 / 252.0));
    pow *= inv_sq;
    sum += rounded(pow * (1.0 / 240.0));
    return sum;
}

/// The composite (out-of-order) estimate of 2^lg_k registers with the given
/// sum of 2^-R and number of zero registers.
inline double ds_composite_estimate(int lg_k, double kxq, std::uint64_t zeros) noexcept {
    const std::uint64_t k = std::uint64_t{1} << lg_k;
    const double kd = static_cast<double>(k);
    const double cf = lg_k == 4 ? 0.673 : lg_k == 5 ? 0.697 : lg_k == 6 ? 0.709 : 0.7213 / (1.0 + 1.079 / kd);
    const double raw = cf * kd * kd / kxq;
    const std::span<const double> xs = ds_composite_x[lg_k - 4];
    const double stride = ds_composite_y_stride[lg_k - 4];
    const std::size_t last = xs.size() - 1;
    if (raw < xs[0]) return 0;
    if (raw > xs[last]) return raw * (stride * static_cast<double>(last) / xs[last]);
    double adj;
    if (raw == xs[last]) {
        adj = stride * static_cast<double>(last);
    } else {
        const std::size_t s = ds_cubic_start(xs, raw);
        const double ys[4] = {stride * static_cast<double>(s), stride * static_cast<double>(s + 1),
                              stride * static_cast<double>(s + 2), stride * static_cast<double>(s + 3)};
        adj = ds_cubic(xs.data() + s, ys, raw);
    }
    if (adj > static_cast<double>(3 * k)) return adj;
    const double lin = zeros == 0 ? kd * std::log(kd / 0.5) : kd * (ds_harmonic(k) - ds_harmonic(zeros));
    const double avg = (adj + lin) / 2.0;
    const double cross = lg_k == 4 ? 0.718 : lg_k == 5 ? 0.672 : 0.64;
    return avg > cross * kd ? adj : lin;
}

/// The relative error DataSketches divides an HLL estimate by (1 + e for the
/// lower bound, 1 - e for the upper).
inline double ds_hll_rel_err(int lg_k, int num_std_dev, bool upper, bool out_of_order) noexcept {
    if (lg_k > 12) {
        const double f = out_of_order ? std::sqrt(3.0 * std::log(2.0) - 1.0) : std::sqrt(std::log(2.0));
        return num_std_dev * f / std::sqrt(static_cast<double>(std::uint64_t{1} << lg_k));
    }
    const int i = (lg_k - 4) * 3 + (num_std_dev - 1);
    return std::fabs(ds_rel_err[out_of_order][upper][i]);
}

inline double ds_hll_bound(int lg_k, double estimate, std::uint64_t zeros, int num_std_dev, bool upper,
                           bool out_of_order) noexcept {
    const double e = ds_hll_rel_err(lg_k, num_std_dev, upper, out_of_order);
    if (upper) return estimate / (1.0 - e);
    const double nonzero = static_cast<double>((std::uint64_t{1} << lg_k) - zeros);
    const double b = estimate / (1.0 + e);
    return b > nonzero ? b : nonzero;
}

}  // namespace detail
TALLY_END_NAMESPACE
