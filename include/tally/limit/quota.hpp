// tally/limit/quota.hpp: what a rate limit allows, independent of the
// algorithm that enforces it.
//
// Every limiter in tally/limit is constructible from a Quota, so swapping
// FixedWindowLimiter for Gcra is a one-word change.
#pragma once

#include "../detail/abi.hpp"

#include <chrono>
#include <cstdint>
#include <limits>
#include <ratio>
#include <string>

#include "../detail/primitives.hpp"
#include "../detail/throw.hpp"

TALLY_BEGIN_NAMESPACE

/// `limit` units per `window_ns` nanoseconds; `burst` is how many units may
/// pass at one instant for the bucket-style limiters (TokenBucket, Gcra and
/// their atomic forms), 0 meaning "equal to limit". The window limiters
/// (FixedWindowLimiter, SlidingWindowLimiter, SlidingLogLimiter) ignore burst.
///
/// Range, checked by validate() (every limiter constructor and set_quota
/// call it): window_ns in [1, 2^62] (about 146 years), limit in
/// [1, min(2^40, window_ns)] (at most one unit per nanosecond: use a coarser
/// unit, KiB instead of bytes, above that), burst in [0, 2^40]. Within it no
/// limiter overflows (products are formed in 128 bits where needed).
///
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
    [[nodiscard]] static Quota per_second(std::uint64_t n) { return make(n, ns_per_second, "tally::Quota::per_second"); }
    [[nodiscard]] static Quota per_minute(std::uint64_t n) {
        return make(n, 60 * ns_per_second, "tally::Quota::per_minute");
    }
    [[nodiscard]] static Quota per_hour(std::uint64_t n) { return make(n, 3600 * ns_per_second, "tally::Quota::per_hour"); }
    [[nodiscard]] static Quota per_day(std::uint64_t n) { return make(n, 86400 * ns_per_second, "tally::Quota::per_day"); }

    /// `n` per any std::chrono duration, e.g. `Quota::per(10, 250ms)`. The
    /// duration must be a whole, positive number of nanoseconds, at most
    /// max_window_ns.
    template <class Rep, class Period>
    [[nodiscard]] static Quota per(std::uint64_t n, std::chrono::duration<Rep, Period> d) {
        using Ns = std::chrono::duration<long double, std::nano>;
        const long double ns = std::chrono::duration_cast<Ns>(d).count();
        // NaN fails both comparisons inside check_range.
        detail::check_range("tally::Quota::per", "window_ns", static_cast<double>(ns), 1, max_window_ns);
        const auto whole = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
        if (static_cast<long double>(whole) != ns) {
            detail::throw_invalid_argument("tally::Quota::per: window_ns " +
                                           detail::format_number(static_cast<double>(ns)) +
                                           " is not a whole number of nanoseconds");
        }
        return make(n, static_cast<std::uint64_t>(whole), "tally::Quota::per");
    }

    /// A copy with `burst` set, validated.
    [[nodiscard]] Quota with_burst(std::uint64_t b) const {
        Quota q{limit, window_ns, b};
        q.validate("tally::Quota::with_burst");
        return q;
    }

    /// The bucket size the bucket-style limiters use: burst, or limit if 0.
    [[nodiscard]] constexpr std::uint64_t capacity() const noexcept { return burst != 0 ? burst : limit; }

    /// Throws std::invalid_argument "<who>: <name> <value> is out of range
    /// [lo, hi]" for the first bad parameter; `who` names the calling
    /// function ("tally::Gcra::Gcra").
    void validate(const char* who = "tally::Quota::validate") const {
        detail::check_range(who, "window_ns", window_ns, std::uint64_t{1}, max_window_ns);
        detail::check_range(who, "limit", limit, std::uint64_t{1}, window_ns < max_limit ? window_ns : max_limit);
        detail::check_range(who, "burst", burst, std::uint64_t{0}, max_burst);
    }

    friend constexpr bool operator==(const Quota&, const Quota&) = default;

  private:
    static Quota make(std::uint64_t n, std::uint64_t window, const char* who) {
        Quota q{n, window, 0};
        q.validate(who);
        return q;
    }
};

TALLY_END_NAMESPACE
