// tally/detail/primitives.hpp: the small primitives every component shares:
// the 128-bit integer, saturating arithmetic, number formatting and the one
// "out of range" message format. Nothing here knows an algorithm.
#pragma once

#include "abi.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>

#include "throw.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

#if defined(__SIZEOF_INT128__)
__extension__ typedef unsigned __int128 uint128;
__extension__ typedef __int128 int128;
#else
#error "tally needs a compiler with a 128-bit integer type (g++ >= 12, clang >= 14, Apple clang >= 15)"
#endif

/// a + b, or the type's maximum when the sum would wrap.
template <class U>
    requires std::is_unsigned_v<U>
[[nodiscard]] constexpr U sat_add(U a, U b) noexcept {
    const U s = static_cast<U>(a + b);
    return s < a ? std::numeric_limits<U>::max() : s;
}

/// a * b, or the type's maximum when the product would wrap.
template <class U>
    requires std::is_unsigned_v<U>
[[nodiscard]] constexpr U sat_mul(U a, U b) noexcept {
    U r;
    return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<U>::max() : r;
}

/// Decimal text of a number, for messages: integers exactly, floating point
/// with up to 17 significant digits ("%.17g" trimmed to the shortest form
/// that reads back to the same double).
template <class T>
[[nodiscard]] std::string format_number(T v) {
    if constexpr (std::is_floating_point_v<T>) {
        char buf[40];
        for (int digits = 6; digits <= 17; ++digits) {
            std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(v));
            if (std::strtod(buf, nullptr) == static_cast<double>(v) || v != v) break;
        }
        return buf;
    } else if constexpr (std::is_same_v<T, bool>) {
        return v ? "true" : "false";
    } else {
        return std::to_string(v);
    }
}

/// How the ends of a range are written and tested: [lo, hi], (lo, hi), ...
enum class Bounds { closed, open, left_open, right_open };

/// The message check_range produces, for callers that test the range themselves.
template <class T, class L, class H>
[[nodiscard]] std::string out_of_range_message(const char* who, const char* name, T value, L lo, H hi,
                                               Bounds bounds = Bounds::closed) {
    const bool lo_open = bounds == Bounds::open || bounds == Bounds::left_open;
    const bool hi_open = bounds == Bounds::open || bounds == Bounds::right_open;
    return std::string(who) + ": " + name + " " + format_number(value) + " is out of range " + (lo_open ? "(" : "[") +
           format_number(lo) + ", " + format_number(hi) + (hi_open ? ")" : "]");
}

template <class T, class L, class H>
[[noreturn]] void throw_out_of_range_message(const char* who, const char* name, T value, L lo, H hi, Bounds bounds) {
    throw_invalid_argument(out_of_range_message(who, name, value, lo, hi, bounds));
}

/// Throws std::invalid_argument "<who>: <name> <value> is out of range [lo, hi]"
/// (brackets per `bounds`) unless value lies in the range. `who` is the
/// qualified function, e.g. "tally::CountMin::CountMin". NaN is always out.
template <class T, class L, class H>
constexpr void check_range(const char* who, const char* name, T value, L lo, H hi, Bounds bounds = Bounds::closed) {
    const bool lo_ok = (bounds == Bounds::open || bounds == Bounds::left_open) ? (value > lo) : (value >= lo);
    const bool hi_ok = (bounds == Bounds::open || bounds == Bounds::right_open) ? (value < hi) : (value <= hi);
    if (lo_ok && hi_ok) [[likely]]
        return;
    throw_out_of_range_message(who, name, value, lo, hi, bounds);
}

}  // namespace detail
TALLY_END_NAMESPACE
