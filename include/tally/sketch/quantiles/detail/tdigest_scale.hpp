// tally/sketch/quantiles/detail/tdigest_scale.hpp: the scale function of tally::TDigest's
// merge pass and the overflow-safe interpolation its queries use. Not for
// direct use.
#pragma once

#include "../../../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

TALLY_BEGIN_NAMESPACE
namespace detail {

/// The scale function k(q) of one merge pass and its inverse.
///
/// Middle, q in [qc, 1 - qc]: k1(q) = delta / (2 pi) * asin(2q - 1), the
/// arcsine of Dunning & Ertl. Tails, q < qc: k3-style logarithm
/// kc + (delta / Z) * ln(q / qc), with Z = 4 ln(n / delta) + 24 (the paper's
/// normaliser for k2/k3), and the mirror image for q > 1 - qc. qc is where the
/// two size limits dk/dq meet (delta / (2 pi sqrt(q(1-q))) = delta / (Z q),
/// qc = 4 pi^2 / (Z^2 + 4 pi^2), about 0.011 at n = 1e6), so k is continuous
/// with a continuous derivative and is monotone: a valid scale function.
struct TDigestScale {
    double c1, c3, qc, kc;

    TDigestScale(double delta, double n) noexcept {
        constexpr double two_pi = 2 * std::numbers::pi;
        const double z = 4 * std::log(std::max(n / delta, 1.0)) + 24;
        c1 = delta / two_pi;
        c3 = delta / z;
        qc = two_pi * two_pi / (z * z + two_pi * two_pi);
        kc = c1 * std::asin(2 * qc - 1);  // negative; k(1 - qc) = -kc
        up = std::exp(1 / c3);
        down = std::exp(-1 / c3);
        cos_phi = std::cos(1 / c1);
        sin_phi = std::sin(1 / c1);
    }
    double k(double q) const noexcept {
        if (q < qc) return kc + c3 * std::log(q / qc);  // -inf at q = 0
        if (q > 1 - qc) return -kc - c3 * std::log((1 - q) / qc);
        return c1 * std::asin(2 * q - 1);
    }
    double q(double k) const noexcept {
        if (k < kc) return qc * std::exp((k - kc) / c3);
        if (k > -kc) return 1 - qc * std::exp((-kc - k) / c3);
        return (std::sin(k / c1) + 1) / 2;
    }
    /// q(k(q0) + 1), the far end of a centroid that starts at q0, without
    /// transcendental calls on the common paths: in the log tails k + 1 is a
    /// constant factor on q (or 1 - q); in the arcsine middle it is a fixed
    /// rotation by 1 / c1 of (2q - 1, 2 sqrt(q (1 - q))) = (sin, cos). The
    /// general formula handles a step that crosses from one piece to the next.
    double next_q(double q0) const noexcept {
        if (q0 < qc) {
            const double q1 = q0 * up;
            return q1 <= qc ? q1 : q(k(q0) + 1);
        }
        if (q0 > 1 - qc) return 1 - (1 - q0) * down;
        const double s = 2 * q0 - 1, c = 2 * std::sqrt(q0 * (1 - q0));
        const double s1 = s * cos_phi + c * sin_phi, c_next = c * cos_phi - s * sin_phi;
        return (c_next >= 0 && s1 <= 1 - 2 * qc) ? (s1 + 1) / 2 : q(k(q0) + 1);
    }
    double up = 0, down = 0, cos_phi = 0, sin_phi = 0;
};

/// a + (b - a) * t for a <= b, t in [0, 1], without overflow for huge spans.
inline double tdigest_lerp(double a, double b, double t) noexcept {
    const double d = b - a;
    const double v = std::isfinite(d) ? a + d * t : a * (1 - t) + b * t;
    return std::min(std::max(v, a), b);  // not std::clamp: no precondition to break
}

}  // namespace detail
TALLY_END_NAMESPACE
