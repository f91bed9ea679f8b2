// tally/sketch/distinct/detail/hyperloglog_estimator.hpp: the pieces of Ertl's improved
// HyperLogLog estimator (arXiv:1702.01284) that tally::HyperLogLog uses, and
// the shared all-zero register array. All functions are pure and thread-safe.
#pragma once

#include "../../../detail/abi.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

TALLY_BEGIN_NAMESPACE

namespace detail {

// Bounds of an estimate with relative standard error rse at s standard
// deviations: est / (1 - s rse) above (infinity once s rse >= 1) and
// est / (1 + s rse) below, never under the `seen` distinct registers (or
// sparse entries) set, since each was set by a distinct item.
inline double rse_bound(double est, double rse, int s, double seen, bool upper) noexcept {
    const double e = s * rse;
    if (upper) return e < 1.0 ? est / (1.0 - e) : HUGE_VAL;
    const double b = est / (1.0 + e);
    return b > seen ? b : seen;
}

// sigma(x) = x + sum_{k>=1} x^(2^k) 2^(k-1) (Ertl 2017, eq. 36), x in [0, 1];
// summed until the double stops changing. sigma(1) = infinity.
inline double hll_sigma(double x) noexcept {
    if (x == 1.0) return HUGE_VAL;
    double y = 1.0;
    double z = x;
    double previous;
    do {
        x *= x;
        previous = z;
        z += x * y;
        y += y;
    } while (previous != z);
    return z;
}

// tau(x) = (1 - x - sum_{k>=1} (1 - x^(2^-k))^2 2^-k) / 3 (Ertl 2017, eq. 38).
inline double hll_tau(double x) noexcept {
    if (x == 0.0 || x == 1.0) return 0.0;
    double y = 1.0;
    double z = 1.0 - x;
    double previous;
    do {
        x = std::sqrt(x);
        previous = z;
        y *= 0.5;
        const double d = 1.0 - x;
        z -= d * d * y;
    } while (previous != z);
    return z / 3.0;
}

template <class T>
concept HllByteString = std::is_convertible_v<const T&, std::string_view>;

// All-zero registers for a sketch whose register array is not allocated yet
// (zero-initialized, so it costs address space, not memory): 2^21, the
// largest precision (mode datasketches).
inline std::uint8_t hll_zero_registers[std::size_t{1} << 21] = {};

}  // namespace detail

TALLY_END_NAMESPACE
