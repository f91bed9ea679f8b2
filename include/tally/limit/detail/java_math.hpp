// tally/limit/detail/java_math.hpp: the few Java arithmetic rules the
// concurrency-limit algorithms depend on, so that they return the limits
// Netflix concurrency-limits returns for the same samples: (int) casts of
// doubles, Math.max/Math.min on doubles, int and long wrap-around, and no
// fused multiply-add (Java rounds every product).
#pragma once

#include "../../detail/abi.hpp"

#include "../../core/detail/simd.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

TALLY_BEGIN_NAMESPACE
namespace detail {

/// Java's (int) of a double: NaN is 0, out-of-range values saturate,
/// everything else truncates toward zero.
[[nodiscard]] inline int java_d2i(double x) noexcept {
    if (x != x) return 0;
    if (x >= 2147483647.0) return std::numeric_limits<int>::max();
    if (x <= -2147483648.0) return std::numeric_limits<int>::min();
    return static_cast<int>(x);
}

/// Java's Math.max(double, double): NaN wins, and +0.0 beats -0.0.
[[nodiscard]] inline double java_max(double a, double b) noexcept {
    if (a != a) return a;
    if (a == 0.0 && b == 0.0 && std::signbit(a)) return b;
    return a >= b ? a : b;
}

/// Java's Math.min(double, double): NaN wins, and -0.0 beats +0.0.
[[nodiscard]] inline double java_min(double a, double b) noexcept {
    if (a != a) return a;
    if (a == 0.0 && b == 0.0 && std::signbit(b)) return b;
    return a <= b ? a : b;
}

/// Java int arithmetic: two's complement wrap-around, never UB.
[[nodiscard]] constexpr int java_iadd(int a, int b) noexcept {
    return static_cast<int>(static_cast<std::uint32_t>(a) + static_cast<std::uint32_t>(b));
}
[[nodiscard]] constexpr int java_imul(int a, int b) noexcept {
    return static_cast<int>(static_cast<std::uint32_t>(a) * static_cast<std::uint32_t>(b));
}

/// A double as Java's long sees the same 64 bits (a sample time above 2^63
/// is negative there).
[[nodiscard]] constexpr std::int64_t java_long(std::uint64_t v) noexcept {
    return static_cast<std::int64_t>(v);
}

/// Netflix's Log10RootIntFunction: max(1, (int) Math.log10(t)) below 1000 and
/// (int) Math.log10(t) from 1000 on; Math.log10 is exact at powers of ten and
/// monotone, so this is floor(log10(t)), counted in integers here. Java
/// indexes an array with t, so t < 0 throws there; here it gives 1.
[[nodiscard]] constexpr int log10_root_int(int t) noexcept {
    if (t < 1'000) return t < 100 ? 1 : 2;
    if (t < 100'000) return t < 10'000 ? 3 : 4;
    if (t < 10'000'000) return t < 1'000'000 ? 5 : 6;
    return t < 100'000'000 ? 7 : t < 1'000'000'000 ? 8 : 9;
}

// VegasLimit's default alpha, beta, threshold, increase and decrease functions.
[[nodiscard]] inline int vegas_default_alpha(int limit) noexcept {
    return 3 * log10_root_int(limit);
}
[[nodiscard]] inline int vegas_default_beta(int limit) noexcept {
    return 6 * log10_root_int(limit);
}
[[nodiscard]] inline int vegas_default_threshold(int limit) noexcept {
    return log10_root_int(limit);
}
[[nodiscard]] inline double vegas_default_increase(double limit) noexcept {
    return limit + log10_root_int(java_d2i(limit));
}
[[nodiscard]] inline double vegas_default_decrease(double limit) noexcept {
    return limit - log10_root_int(java_d2i(limit));
}

}  // namespace detail
TALLY_END_NAMESPACE
