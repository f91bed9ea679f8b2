// SlidingWindowLimiter: the seed's example, randomized differential tests
// against SlidingLogLimiter (as an exact counter) asserting the documented
// oldest-bucket bound, a negative control showing it errs both ways, slot
// range, extremes and time going backwards.
#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "catch.hpp"
#include "tally/limit/sliding_log.hpp"
#include "tally/limit/sliding_window.hpp"
#include "test_support.hpp"

using tally::Decision;
using tally::Quota;
using std::chrono::nanoseconds;

namespace {
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

struct Errors {
    bool lenient = false;  // admitted although the exact count said no
    bool strict = false;   // denied although the exact count said yes
};

// Runs `sw` on a random stream; an exact log (limit far above) records what
// it admitted. Asserts at every step:
//   |ceil(estimate) - exact| <= oldest, admitted => exact + cost <= limit + oldest,
//   denied (cost <= limit) => exact + cost > limit - oldest.
template <class SWL>
Errors differential(const Quota& q, std::uint64_t seed, bool bursty) {
    SWL sw(q);
    REQUIRE(sw.window_ns() == q.window_ns);
    const std::uint64_t big_limit = q.window_ns < (std::uint64_t{1} << 40) ? q.window_ns : (std::uint64_t{1} << 40);
    REQUIRE(big_limit >= 3 * q.limit);
    tally::SlidingLogLimiter exact(Quota{big_limit, q.window_ns});
    tally::test::Rng rng(seed);
    Errors seen;
    const std::uint64_t b = sw.bucket_ns();
    std::uint64_t t = 10 * q.window_ns;
    const std::size_t steps = tally::test::big(30000, 4000);
    for (std::size_t i = 0; i < steps; ++i) {
        if (bursty) {
            // Clumps at a random point of a bucket, then quiet.
            if (rng.below(8) == 0) t += rng.below(3 * b);
            else t += rng.below(2);
        } else {
            t += rng.below(2 * q.window_ns / q.limit + 1);
        }
        const std::uint64_t cost = rng.below(6) == 0 ? 2 + rng.below(3) : 1;
        typename SWL::State copy = sw.state();
        const tally::SlidingEstimate est = sw.counter().read(copy, t);
        const std::uint64_t oldest = est.oldest;
        const std::uint64_t n = exact.count(t);
        const std::uint64_t ce = est.ceil();
        INFO("step " << i << " t " << t << " exact " << n << " ceil(est) " << ce << " oldest " << oldest);
        REQUIRE((ce > n ? ce - n : n - ce) <= oldest);
        const Decision d = sw.try_acquire(t, cost);
        if (d.allowed) {
            REQUIRE(exact.allow(t, cost));
            REQUIRE(n + cost <= q.limit + oldest);
            seen.lenient = seen.lenient || n + cost > q.limit;
        } else {
            REQUIRE(n + cost + oldest > q.limit);
            seen.strict = seen.strict || n + cost <= q.limit;
        }
    }
    return seen;
}
}  // namespace

TEST_CASE("SlidingWindowLimiter: the seed's two-bucket example", "[sliding_window]") {
    tally::SlidingWindowLimiter<std::uint32_t, 2> l(Quota::per(10, nanoseconds(1000)));
    for (int i = 0; i < 10; ++i) REQUIRE(l.allow(999));
    CHECK_FALSE(l.allow(1000));  // a fixed window would reset here and admit 10 more
    CHECK(l.allow(1500));        // previous bucket now weighs 0.5 -> estimate 5
    for (int i = 0; i < 4; ++i) REQUIRE(l.allow(1500));
    const Decision d = l.try_acquire(1500);
    CHECK_FALSE(d.allowed);
    CHECK(d.remaining == 0);
    // Estimate 10 at 1500 = 5 + 10*(1000-500)/1000; one more fits once the
    // old bucket weighs <= 0.4: at 1600.
    CHECK(d.retry_after_ns == 100);
    CHECK(d.reset_after_ns == 1500);  // the current bucket leaves the ring at 3000
}

TEST_CASE("SlidingWindowLimiter vs SlidingLogLimiter within the oldest-bucket bound", "[sliding_window][big]") {
    using Two = tally::SlidingWindowLimiter<std::uint32_t, 2>;
    using Eleven = tally::SlidingWindowLimiter<>;
    using Sixty = tally::SlidingWindowLimiter<std::uint16_t, 61>;
    using Wide = tally::SlidingWindowLimiter<std::uint64_t, 5>;
    for (const bool bursty : {false, true}) {
        (void)differential<Two>(Quota::per(10, nanoseconds(1000)), 1, bursty);
        (void)differential<Two>(Quota::per(100, nanoseconds(1000)), 2, bursty);
        (void)differential<Eleven>(Quota::per(10, nanoseconds(1000)), 3, bursty);
        (void)differential<Eleven>(Quota::per(50, nanoseconds(2000)), 4, bursty);
        (void)differential<Sixty>(Quota::per(100, nanoseconds(6000)), 5, bursty);
        (void)differential<Wide>(Quota::per(30, nanoseconds(400)), 6, bursty);
    }
}

TEST_CASE("SlidingWindowLimiter errs in both directions (negative control)", "[sliding_window]") {
    // A bound without the oldest-bucket term would fail: on bursty traffic
    // the estimate admits beyond the exact count and denies below it.
    const Errors e = differential<tally::SlidingWindowLimiter<std::uint32_t, 2>>(Quota::per(10, nanoseconds(1000)), 9,
                                                                                 true);
    CHECK(e.lenient);
    CHECK(e.strict);
}

TEST_CASE("SlidingWindowLimiter geometry and slot range", "[sliding_window]") {
    tally::SlidingWindowLimiter<> a(Quota::per_minute(600));
    CHECK(a.bucket_ns() == 6'000'000'000);
    CHECK(a.window_ns() == 60'000'000'000);
    tally::SlidingWindowLimiter<> r(Quota::per(10, nanoseconds(1005)));
    CHECK(r.bucket_ns() == 101);  // rounded up: window 1010 >= 1005 (stricter)
    CHECK(r.window_ns() == 1010);
    CHECK_THROWS_WITH((tally::SlidingWindowLimiter<std::uint16_t, 11>(Quota::per_second(40000))),
                      "tally::SlidingWindowLimiter::SlidingWindowLimiter: limit 40000 is out of range [1, 32767]");
    CHECK_NOTHROW(tally::SlidingWindowLimiter<std::uint16_t, 11>(Quota::per_second(32767)));
}

TEST_CASE("SlidingWindowLimiter: a stale timestamp is charged at the newest bucket", "[sliding_window][clock]") {
    tally::SlidingWindowLimiter<std::uint32_t, 2> l(Quota::per(4, nanoseconds(1000)));
    CHECK(l.allow(1500));
    CHECK(l.allow(700));  // bucket 0 is still in the ring, but the charge goes to bucket 1
    const auto c = l.counter().counts(l.state());
    CHECK(c[0] == 0);
    CHECK(c[1] == 2);
    // Charged in bucket 0 it would weigh only (1000-e)/1000 from now on.
    CHECK(l.try_acquire(1999, 0).remaining == 2);
    const Decision d = l.try_acquire(700, 3);
    CHECK_FALSE(d.allowed);
    CHECK(d.retry_after_ns == 1300 + 500);  // from 700: at 2500 the old bucket weighs 0.5
    CHECK(l.allow(2500, 3));
}

TEST_CASE("SlidingWindowLimiter extremes: limit 2^40, window of 146 years", "[sliding_window]") {
    using L = tally::SlidingWindowLimiter<std::uint64_t, 11>;
    const std::uint64_t lim = std::uint64_t{1} << 40, w = std::uint64_t{1} << 62;
    L sw(Quota{lim, w});
    const std::uint64_t t = std::uint64_t{1} << 63;
    CHECK(sw.allow(t, lim));
    const L before = sw;
    const Decision d = sw.try_acquire(t, 1);
    CHECK_FALSE(d.allowed);
    REQUIRE(d.retry_after_ns != tally::never);
    L a = before, b = before;
    CHECK(a.allow(t + d.retry_after_ns));
    CHECK_FALSE(b.allow(t + d.retry_after_ns - 1));
    L end(Quota{lim, w});
    CHECK(end.allow(kMax, lim));
    CHECK_FALSE(end.allow(kMax, 1));
    CHECK(end.try_acquire(kMax, 1).retry_after_ns == tally::never);
}
