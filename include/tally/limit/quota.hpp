// tally/limit/quota.hpp: what a rate limit allows, independent of the
// algorithm that enforces it.
//
// Every limiter in tally/limit is constructible from a Quota, so swapping
// FixedWindowLimiter for Gcra is a one-word change.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <ratio>
#include <string>

#include "../detail/throw.hpp"

namespace tally {

/// `limit` units per `window_ns` nanoseconds; `burst` is how many units may
/// pass at one instant for the bucket-style limiters (TokenBucket, Gcra and
/// their atomic variants), 0 meaning "equal to limit". The window limiters
/// (FixedWindowLimiter, SlidingWindowLimiter, SlidingLogLimiter) ignore burst.
///
/// Representable range, checked by `validate()` (every limiter constructor
/// calls it): `limit` in [1, 2^40] and at most one per nanosecond
/// (`limit <= window_ns`), `window_ns` in [1, 2^62] (about 146 years),
/// `burst` in [0, 2^40]. Within it no limiter overflows: products are formed
/// in 128 bits where they can exceed 64. A rate above one unit per
/// nanosecond should use a coarser unit (KiB instead of bytes).
///
/// Quota is an aggregate, so designated initialisers work:
///   tally::Quota{.limit = 100, .window_ns = 1'000'000'000, .burst = 20}
///   tally::Quota::per_second(100).with_burst(20)   // same, validated
struct Quota {
    std::uint64_t limit;
    std::uint64_t window_ns;
    std::uint64_t burst = 0;

    static constexpr std::uint64_t max_limit = std::uint64_t{1} << 40;
    static constexpr std::uint64_t max_window_ns = std::uint64_t{1} << 62;
    static constexpr std::uint64_t max_burst = std::uint64_t{1} << 40;

    static constexpr std::uint64_t ns_per_second = 1'000'000'000;

    /// Named constructors; each validates and throws std::invalid_argument.
    static Quota per_second(std::uint64_t n) { return make(n, ns_per_second); }
    static Quota per_minute(std::uint64_t n) { return make(n, 60 * ns_per_second); }
    static Quota per_hour(std::uint64_t n) { return make(n, 3600 * ns_per_second); }
    static Quota per_day(std::uint64_t n) { return make(n, 86400 * ns_per_second); }

    /// `n` per any std::chrono duration, e.g. `Quota::per(10, 250ms)`. The
    /// duration must be positive and at most max_window_ns nanoseconds.
    template <class Rep, class Period>
    static Quota per(std::uint64_t n, std::chrono::duration<Rep, Period> d) {
        using Ns = std::chrono::duration<long double, std::nano>;
        const long double ns = std::chrono::duration_cast<Ns>(d).count();
        if (!(ns >= 1.0L) || ns > static_cast<long double>(max_window_ns)) {
            detail::throw_invalid_argument("tally::Quota: window " + std::to_string(static_cast<double>(ns)) +
                                           " ns is out of range [1, " + std::to_string(max_window_ns) + "]");
        }
        const auto whole = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
        if (static_cast<long double>(whole) != ns) {
            detail::throw_invalid_argument("tally::Quota: window " + std::to_string(static_cast<double>(ns)) +
                                           " ns is not a whole number of nanoseconds");
        }
        return make(n, static_cast<std::uint64_t>(whole));
    }

    /// A copy with `burst` set, validated.
    [[nodiscard]] Quota with_burst(std::uint64_t b) const {
        Quota q{limit, window_ns, b};
        q.validate();
        return q;
    }

    /// The bucket size the bucket-style limiters use: burst, or limit if 0.
    [[nodiscard]] constexpr std::uint64_t capacity() const noexcept { return burst != 0 ? burst : limit; }

    /// Throws std::invalid_argument naming the first bad parameter, its value
    /// and the valid range; `who` prefixes the message ("tally::Gcra").
    void validate(const char* who = "tally::Quota") const {
        if (window_ns < 1 || window_ns > max_window_ns) {
            detail::throw_invalid_argument(std::string(who) + ": window_ns " + std::to_string(window_ns) +
                                           " is out of range [1, " + std::to_string(max_window_ns) + "]");
        }
        const std::uint64_t hi = window_ns < max_limit ? window_ns : max_limit;
        if (limit < 1 || limit > hi) {
            detail::throw_invalid_argument(std::string(who) + ": limit " + std::to_string(limit) +
                                           " is out of range [1, " + std::to_string(hi) +
                                           "] (at most 2^40, and at most one per nanosecond of window_ns " +
                                           std::to_string(window_ns) + ")");
        }
        if (burst > max_burst) {
            detail::throw_invalid_argument(std::string(who) + ": burst " + std::to_string(burst) +
                                           " is out of range [0, " + std::to_string(max_burst) +
                                           "] (0 means equal to limit)");
        }
    }

    friend constexpr bool operator==(const Quota&, const Quota&) = default;

  private:
    static Quota make(std::uint64_t n, std::uint64_t window) {
        Quota q{n, window, 0};
        q.validate();
        return q;
    }
};

}  // namespace tally
