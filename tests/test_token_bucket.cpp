// TokenBucket and AtomicTokenBucket: identical decisions to Gcra, burst and
// refill, byte-sized costs, extremes, time going backwards.
#include <chrono>
#include <cstdint>
#include <limits>

#include "catch.hpp"
#include "tally/limit/gcra.hpp"
#include "tally/limit/token_bucket.hpp"
#include "test_support.hpp"

using tally::Decision;
using tally::Quota;
using std::chrono::nanoseconds;

namespace {
__extension__ typedef unsigned __int128 u128;
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
}  // namespace

TEST_CASE("TokenBucket and Gcra make identical decisions on random streams", "[token_bucket][gcra]") {
    const Quota quotas[] = {Quota::per_second(3),
                            Quota::per_second(100).with_burst(7),
                            Quota::per(7, nanoseconds(1000)).with_burst(20),
                            Quota::per(10, nanoseconds(10)),
                            Quota::per_day(std::uint64_t{1} << 40),
                            Quota{std::uint64_t{1} << 40, std::uint64_t{1} << 62, std::uint64_t{1} << 40},
                            Quota{std::uint64_t{1} << 40, std::uint64_t{1} << 40, 5},
                            Quota{999'983, 1'000'000'007, 13}};
    std::uint64_t seed = 1;
    for (const Quota& q : quotas) {
        for (const bool backwards : {false, true}) {
            INFO("quota " << q.limit << "/" << q.window_ns << " burst " << q.burst << " backwards " << backwards);
            tally::TokenBucket tb(q);
            tally::Gcra g(q);
            tally::AtomicTokenBucket atb(q);
            tally::test::Rng rng(seed++);
            const std::uint64_t T = q.window_ns / q.limit + 1;
            // Some streams start near the end of the clock.
            std::uint64_t t = rng.below(3) == 0 ? kMax - rng.below(T * 1000) : rng.below(std::uint64_t{1} << 62);
            const std::size_t steps = tally::test::big(30000, 4000);
            for (std::size_t i = 0; i < steps; ++i) {
                const std::uint64_t dt = rng.below(3) == 0 ? rng.below(T * 4) : rng.below(T / 2 + 1);
                t = t > kMax - dt ? kMax : t + dt;
                std::uint64_t when = t;
                if (backwards && rng.below(4) == 0) {
                    const std::uint64_t back = rng.below(T * 8);
                    when = t > back ? t - back : 0;
                }
                const std::uint64_t cap = q.capacity();
                const std::uint64_t cost = rng.below(8) == 0 ? rng.below(cap + 2) : rng.below(4);
                const Decision a = tb.try_acquire(when, cost);
                const Decision b = g.try_acquire(when, cost);
                REQUIRE(a == b);
                REQUIRE(atb.try_acquire(when, cost) == a);
                REQUIRE(tb.tokens(when) == atb.tokens(when));
                REQUIRE(tb.state().origin + tb.state().missing == g.state().tat);
            }
        }
    }
}

TEST_CASE("TokenBucket burst after idle and refill at the rate", "[token_bucket]") {
    // 10 tokens per 1000 ns (T = 100 ns), bucket of 30.
    tally::TokenBucket tb(Quota::per(10, nanoseconds(1000)).with_burst(30));
    CHECK(tb.tokens(5000) == 30);
    for (int i = 0; i < 30; ++i) REQUIRE(tb.allow(5000));
    Decision d = tb.try_acquire(5000);
    CHECK_FALSE(d.allowed);
    CHECK(d.remaining == 0);
    CHECK(d.retry_after_ns == 100);
    CHECK(d.reset_after_ns == 3000);
    CHECK(tb.tokens(5099) == 0);
    CHECK(tb.tokens(5100) == 1);
    CHECK(tb.tokens(5950) == 9);
    CHECK(tb.tokens(8000) == 30);
    CHECK(tb.tokens(80000) == 30);  // capped at the bucket size
    // A cost of exactly the bucket passes on a full bucket; one more never does.
    CHECK(tb.try_acquire(8000, 30).allowed);
    d = tb.try_acquire(8000, 31);
    CHECK_FALSE(d.allowed);
    CHECK(d.retry_after_ns == tally::never);
    d = tb.try_acquire(8000, 30);
    CHECK(d.retry_after_ns == 3000);
    CHECK(tb.try_acquire(11000, 30).allowed);
}

TEST_CASE("TokenBucket with byte costs and a rate above the window limit", "[token_bucket]") {
    // 1 MiB/s with a 4 MiB bucket.
    const std::uint64_t mib = 1 << 20;
    tally::TokenBucket up(Quota::per_second(mib).with_burst(4 * mib));
    std::uint64_t t = 10'000'000'000;
    CHECK(up.allow(t, 4 * mib));
    const Decision d = up.try_acquire(t, mib / 2);
    CHECK_FALSE(d.allowed);
    // Half a MiB at exactly 2^19 grid instants of 1e9/2^20 ns.
    const u128 k = u128(t) * mib / 1'000'000'000 + mib / 2;
    const std::uint64_t at = static_cast<std::uint64_t>((k * 1'000'000'000 + mib - 1) / mib);
    CHECK(d.retry_after_ns == at - t);
    CHECK_FALSE(up.allow(at - 1, mib / 2));
    CHECK(up.allow(at, mib / 2));
}

TEST_CASE("TokenBucket extremes: limit and burst 2^40, windows of 146 years", "[token_bucket]") {
    const std::uint64_t l = std::uint64_t{1} << 40;
    tally::TokenBucket tb(Quota{l, std::uint64_t{1} << 62, l});
    const std::uint64_t t = (std::uint64_t{1} << 63) + 999;
    CHECK(tb.tokens(t) == l);
    CHECK(tb.allow(t, l - 1));
    CHECK(tb.tokens(t) == 1);
    CHECK(tb.allow(t, 1));
    const Decision d = tb.try_acquire(t, l);
    CHECK_FALSE(d.allowed);
    CHECK(d.retry_after_ns == d.reset_after_ns);
    CHECK(d.reset_after_ns == ((t >> 22) + l) * (std::uint64_t{1} << 22) - t);
    CHECK(tb.tokens(t + d.reset_after_ns) == l);
    CHECK(tb.tokens(t + d.reset_after_ns - 1) == l - 1);
    // Near the end of the clock nothing wraps into capacity.
    tally::TokenBucket end(Quota{l, l, 0});
    CHECK(end.allow(kMax - 10, 10));
    CHECK_FALSE(end.allow(kMax, 1));
    CHECK(end.try_acquire(kMax, 1).retry_after_ns == tally::never);
}

TEST_CASE("TokenBucket: a stale timestamp never moves the refill origin back", "[token_bucket][clock]") {
    const Quota q = Quota::per(1, nanoseconds(100)).with_burst(2);
    tally::TokenBucket tb(q);
    CHECK(tb.allow(1000, 2));  // empty at grid index 10
    CHECK(tb.state().origin == 10);
    // The classic bug: treating 500 as "last refill" and refilling again from there.
    CHECK_FALSE(tb.allow(500));
    CHECK(tb.state().origin == 10);
    CHECK(tb.tokens(1099) == 0);
    CHECK(tb.tokens(1100) == 1);
    // A token granted at 1200 was not there at 1150.
    CHECK(tb.allow(1200));
    CHECK_FALSE(tb.allow(1150));
    // A stale admission is charged at the origin, which stays put.
    tally::TokenBucket b3(Quota::per(1, nanoseconds(100)).with_burst(3));
    CHECK(b3.allow(1000, 3));
    CHECK(b3.allow(1300));  // refilled 3: origin 13, one missing
    CHECK(b3.state().origin == 13);
    CHECK(b3.allow(1250));  // index 12: two missing then, one left
    CHECK(b3.state().origin == 13);
    CHECK(b3.state().missing == 2);
    CHECK(b3.tokens(1300) == 1);
    CHECK(b3.tokens(1400) == 2);
    CHECK_FALSE(b3.allow(1250));
    // Random non-monotone streams: origin never decreases.
    tally::TokenBucket r(Quota::per(10, nanoseconds(1000)).with_burst(4));
    tally::test::Rng rng(3);
    std::uint64_t t = 100'000, origin = 0;
    for (int i = 0; i < 20000; ++i) {
        t += rng.below(60);
        const std::uint64_t when = rng.below(3) == 0 ? t - rng.below(4000) : t;
        (void)r.try_acquire(when, rng.below(3));
        REQUIRE(r.state().origin >= origin);
        origin = r.state().origin;
    }
}
