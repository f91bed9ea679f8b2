// DryRun<L>: every Decision is L's (checked against an enforcing L fed the
// same admitted traffic), everything is admitted, would-be denials counted.
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "catch.hpp"
#include "tally/limit/dry_run.hpp"
#include "tally/limit/fixed_window.hpp"
#include "tally/limit/gcra.hpp"
#include "tally/limit/sliding_log.hpp"
#include "tally/limit/sliding_window.hpp"
#include "tally/limit/token_bucket.hpp"
#include "test_support.hpp"

using tally::Decision;
using tally::Quota;

TEMPLATE_TEST_CASE("DryRun reports the wrapped limiter's decisions and admits everything", "[dry_run]",
                   tally::FixedWindowLimiter, tally::SlidingWindowLimiter<>, tally::SlidingLogLimiter,
                   tally::TokenBucket, tally::Gcra, tally::AtomicGcra) {
    using L = TestType;
    STATIC_REQUIRE(tally::RateLimiter<tally::DryRun<L>>);
    const Quota q = Quota::per(10, std::chrono::nanoseconds(1000)).with_burst(4);
    tally::DryRun<L> dry(q);
    L oracle(q);  // enforcing, fed the same requests
    tally::test::Rng rng(17);
    std::uint64_t t = 10'000, denied = 0, denied_cost = 0, n = 0;
    for (int i = 0; i < 20000; ++i) {
        t += rng.below(3) == 0 ? rng.below(400) : rng.below(30);
        const std::uint64_t cost = rng.below(4);
        const Decision want = oracle.try_acquire(t, cost);
        Decision got;
        switch (i % 3) {
            case 0: got = dry.check(t, cost); break;
            case 1: {
                got = dry.try_acquire(t, cost);
                CHECK(got.allowed);
                CHECK(got.retry_after_ns == 0);
                got.allowed = want.allowed;
                got.retry_after_ns = want.retry_after_ns;
                break;
            }
            default: {
                CHECK(dry.allow(t, cost));
                got = want;
            }
        }
        REQUIRE(got == want);
        ++n;
        if (!want.allowed) {
            ++denied;
            denied_cost += cost;
        }
    }
    CHECK(denied > 1000);  // the quota bites: the counts are not vacuous
    CHECK(dry.checks() == n);
    CHECK(dry.would_deny() == denied);
    CHECK(dry.would_deny_cost() == denied_cost);
    CHECK(dry.quota() == q);
    dry.reset_counts();
    CHECK(dry.checks() == 0);
    CHECK(dry.would_deny() == 0);
}

TEST_CASE("DryRun: set_quota reaches the wrapped limiter", "[dry_run][set_quota]") {
    tally::DryRun<tally::Gcra> dry(Quota::per_second(2));
    CHECK(dry.allow(1000));
    CHECK(dry.allow(1000));
    CHECK(dry.allow(1000));
    CHECK(dry.would_deny() == 1);
    dry.set_quota(Quota::per_second(10), 1000);
    CHECK(dry.quota() == Quota::per_second(10));
    CHECK(dry.check(1000, 0).remaining == 8);
    CHECK(dry.inner().state().tat != 0);
}

TEST_CASE("DryRun<AtomicGcra> counts exactly under contention", "[dry_run][concurrent]") {
    tally::DryRun<tally::AtomicGcra> dry(Quota::per_second(100));
    const unsigned threads = 4;
    const std::uint64_t per = tally::test::big(20000, 2000);
    std::atomic<std::uint64_t> admitted{0};
    std::vector<std::thread> pool;
    for (unsigned i = 0; i < threads; ++i)
        pool.emplace_back([&] {
            for (std::uint64_t k = 0; k < per; ++k)
                if (dry.check(5'000'000'000, 1).allowed) admitted.fetch_add(1, std::memory_order_relaxed);
        });
    for (auto& th : pool) th.join();
    CHECK(admitted.load() == 100);  // the burst, at one instant
    CHECK(dry.checks() == threads * per);
    CHECK(dry.would_deny() == threads * per - 100);
}

TEST_CASE("DryRun in_place construction", "[dry_run]") {
    tally::DryRun<tally::SlidingWindowLimiter<std::uint16_t, 2>> dry(std::in_place, Quota::per_second(3));
    for (int i = 0; i < 5; ++i) CHECK(dry.allow(7));
    CHECK(dry.would_deny() == 2);
}
