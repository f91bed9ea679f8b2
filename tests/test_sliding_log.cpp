// SlidingLogLimiter: exact against a brute-force recount, memory, extremes,
// time going backwards.
#include <chrono>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "tally/limit/sliding_log.hpp"
#include "test_support.hpp"

using tally::Decision;
using tally::Quota;
using std::chrono::nanoseconds;

namespace {
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
}

TEST_CASE("SlidingLogLimiter is exact: brute-force recount oracle", "[sliding_log]") {
    for (const Quota& q : {Quota::per(10, nanoseconds(1000)), Quota::per(50, nanoseconds(777))}) {
        tally::SlidingLogLimiter log(q);
        std::vector<std::pair<std::uint64_t, std::uint64_t>> kept;  // every admission
        tally::test::Rng rng(q.limit);
        std::uint64_t t = 0;
        const std::size_t steps = tally::test::big(20000, 3000);
        for (std::size_t i = 0; i < steps; ++i) {
            t += rng.below(3) == 0 ? rng.below(300) : rng.below(20);
            const std::uint64_t cost = rng.below(4);
            std::uint64_t in_window = 0;
            for (auto it = kept.rbegin(); it != kept.rend() && t - it->first < q.window_ns; ++it) in_window += it->second;
            const bool want = in_window + cost <= q.limit;
            const Decision d = log.try_acquire(t, cost);
            REQUIRE(d.allowed == want);
            REQUIRE(d.remaining == q.limit - in_window - (want ? cost : 0));
            REQUIRE(log.count(t) == in_window + (want ? cost : 0));
            if (want && cost > 0) kept.emplace_back(t, cost);
        }
    }
}

TEST_CASE("SlidingLogLimiter has no boundary artifact and shares same-ns entries", "[sliding_log]") {
    tally::SlidingLogLimiter log(Quota::per(100, nanoseconds(1000)));
    for (int i = 0; i < 100; ++i) REQUIRE(log.allow(1999));
    CHECK(log.entries() == 1);  // one entry for one nanosecond
    const Decision d = log.try_acquire(2000);
    CHECK_FALSE(d.allowed);  // a fixed window would reset here
    CHECK(d.retry_after_ns == 999);
    CHECK(d.reset_after_ns == 999);
    CHECK(log.allow(2999));
    CHECK(log.entries() == 1);  // the 1999 entry expired
    CHECK(log.try_acquire(2999, 0).remaining == 99);
}

TEST_CASE("SlidingLogLimiter: a stale timestamp is logged at the latest time", "[sliding_log][clock]") {
    tally::SlidingLogLimiter log(Quota::per(2, nanoseconds(100)));
    CHECK(log.allow(1000));
    CHECK(log.allow(500));  // logged at 1000, so it lives until 1100
    CHECK_FALSE(log.allow(1099));
    const Decision d = log.try_acquire(600);
    CHECK(d.retry_after_ns == 500);  // measured from the caller's now
    CHECK(log.allow(1100, 2));
    // A denial or a peek also records the latest time.
    tally::SlidingLogLimiter p(Quota::per(1, nanoseconds(100)));
    (void)p.try_acquire(5000, 0);
    CHECK(p.allow(10));  // logged at 5000
    CHECK_FALSE(p.allow(5099));
    CHECK(p.allow(5100));
}

TEST_CASE("SlidingLogLimiter extremes", "[sliding_log]") {
    const std::uint64_t l = std::uint64_t{1} << 40, w = std::uint64_t{1} << 62;
    tally::SlidingLogLimiter log(Quota{l, w});
    CHECK(log.allow(w, l - 1));
    CHECK(log.allow(2 * w - 1, 1));
    Decision d = log.try_acquire(2 * w - 1, 2);
    CHECK_FALSE(d.allowed);
    CHECK(d.retry_after_ns == 1);  // the first entry leaves at 2w
    CHECK(log.try_acquire(2 * w, 2).allowed);
    tally::SlidingLogLimiter end(Quota{1, w});
    CHECK(end.allow(kMax - 1));
    d = end.try_acquire(kMax);
    CHECK_FALSE(d.allowed);
    CHECK(d.retry_after_ns == tally::never);  // leaves after the end of the clock
    CHECK(d.reset_after_ns == tally::never);
}
