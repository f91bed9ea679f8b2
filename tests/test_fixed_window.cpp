// FixedWindowLimiter: exact per aligned window, up to 2x across a boundary
// (documented and pinned here), extremes, time going backwards.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <vector>

#include "catch.hpp"
#include "tally/limit/fixed_window.hpp"
#include "test_support.hpp"

using tally::Decision;
using tally::Quota;
using std::chrono::nanoseconds;

namespace {
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
}

TEST_CASE("FixedWindowLimiter admits up to 2x the limit across a boundary", "[fixed_window]") {
    tally::FixedWindowLimiter fw(Quota::per(100, nanoseconds(1000)));
    for (int i = 0; i < 100; ++i) REQUIRE(fw.allow(1999));
    const Decision d = fw.try_acquire(1999);
    CHECK_FALSE(d.allowed);
    CHECK(d.retry_after_ns == 1);  // the boundary is one nanosecond away
    CHECK(d.reset_after_ns == 1);
    for (int i = 0; i < 100; ++i) REQUIRE(fw.allow(2000));
    CHECK_FALSE(fw.allow(2000));
    // 200 admitted within two nanoseconds: the documented flaw.
}

TEST_CASE("FixedWindowLimiter: exact per aligned window, <= 2x in any window", "[fixed_window]") {
    const Quota q = Quota::per(10, nanoseconds(1000));
    tally::FixedWindowLimiter fw(q);
    tally::test::Rng rng(4);
    std::vector<std::uint64_t> admitted;
    std::vector<std::uint64_t> demand(64, 0), got(64, 0);
    std::uint64_t t = 0;
    const std::size_t steps = tally::test::big(40000, 5000);
    for (std::size_t i = 0; i < steps && t < 64000; ++i) {
        t += rng.below(4);
        ++demand[t / 1000];
        if (fw.allow(t)) {
            admitted.push_back(t);
            ++got[t / 1000];
        }
    }
    for (std::size_t w = 0; w < 64; ++w) REQUIRE(got[w] == std::min<std::uint64_t>(demand[w], 10));
    bool saw_double = false;
    for (std::size_t i = 0; i < admitted.size(); ++i) {
        // Admitted in [admitted[i], admitted[i] + 1000).
        const auto end = std::lower_bound(admitted.begin(), admitted.end(), admitted[i] + 1000);
        const auto n = static_cast<std::uint64_t>(end - (admitted.begin() + static_cast<std::ptrdiff_t>(i)));
        REQUIRE(n <= 20);
        saw_double = saw_double || n > 10;
    }
    CHECK(saw_double);  // the boundary effect really happens on this stream
}

TEST_CASE("FixedWindowLimiter decisions and state", "[fixed_window]") {
    tally::FixedWindowLimiter fw(Quota::per(3, nanoseconds(100)));
    CHECK(fw.try_acquire(250) == Decision{true, 2, 0, 50});
    CHECK(fw.try_acquire(260, 2) == Decision{true, 0, 0, 40});
    CHECK(fw.try_acquire(270) == Decision{false, 0, 30, 30});
    CHECK(fw.try_acquire(270, 4) == Decision{false, 0, tally::never, 30});
    CHECK(fw.state().count == 3);
    CHECK(fw.state().window == 2);
    CHECK(fw.try_acquire(300, 0) == Decision{true, 3, 0, 0});
    CHECK_FALSE(fw.is_fresh(fw.state(), 299));
    CHECK(fw.is_fresh(fw.state(), 300));
    // burst is ignored by the window limiters.
    tally::FixedWindowLimiter b(Quota::per(3, nanoseconds(100)).with_burst(50));
    CHECK(b.allow(0, 3));
    CHECK_FALSE(b.allow(0, 1));
}

TEST_CASE("FixedWindowLimiter: a stale timestamp counts in the latest window", "[fixed_window][clock]") {
    tally::FixedWindowLimiter fw(Quota::per(2, nanoseconds(100)));
    CHECK(fw.allow(550));
    CHECK(fw.allow(120));  // window 1 is long gone: counted in window 5
    CHECK(fw.state().window == 5);
    CHECK_FALSE(fw.allow(10));
    const Decision d = fw.try_acquire(10);
    CHECK(d.retry_after_ns == 590);  // from the caller's now to the end of window 5
    CHECK_FALSE(fw.allow(599));
    CHECK(fw.allow(600));
}

TEST_CASE("FixedWindowLimiter extremes", "[fixed_window]") {
    const std::uint64_t l = std::uint64_t{1} << 40, w = std::uint64_t{1} << 62;
    tally::FixedWindowLimiter fw(Quota{l, w});
    const std::uint64_t t = 2 * w + 5;  // window 2 ends at 3w < 2^64
    CHECK(fw.try_acquire(t, l) == Decision{true, 0, 0, w - 5});
    CHECK(fw.try_acquire(t, 1) == Decision{false, 0, w - 5, w - 5});
    // The window after the last one that starts on a 64-bit clock: never.
    tally::FixedWindowLimiter end(Quota{l, w});
    const Decision a = end.try_acquire(kMax - 3, l);
    CHECK(a.allowed);
    CHECK(a.reset_after_ns == tally::never);
    CHECK(end.try_acquire(kMax, 1).retry_after_ns == tally::never);
    tally::FixedWindowLimiter one(Quota{1, 1});
    CHECK(one.allow(kMax));
    CHECK(one.try_acquire(kMax).retry_after_ns == tally::never);
}
