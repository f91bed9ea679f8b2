// wait_until_allowed with ManualClock only: no test sleeps in real time. The
// sleep hook advances the clock by exactly what it is asked to sleep, so the
// waits are checked to the nanosecond.
#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "catch.hpp"
#include "tally/core/clock.hpp"
#include "tally/limit/dry_run.hpp"
#include "tally/limit/fixed_window.hpp"
#include "tally/limit/gcra.hpp"
#include "tally/limit/sliding_log.hpp"
#include "tally/limit/sliding_window.hpp"
#include "tally/limit/token_bucket.hpp"
#include "tally/limit/wait.hpp"

using tally::Decision;
using tally::Jitter;
using tally::Quota;
using tally::Seed;
using tally::WaitStatus;

namespace {

constexpr std::uint64_t kMs = 1'000'000;
constexpr std::uint64_t kSec = 1'000'000'000;

struct Tag;
using Clock = tally::ManualClock<Tag>;

// Sleeps by advancing the manual clock, and records every sleep.
struct Sleeper {
    std::vector<std::uint64_t>* log;
    void operator()(std::uint64_t ns) const {
        log->push_back(ns);
        Clock::advance(ns);
    }
};

}  // namespace

TEST_CASE("wait_until_allowed sleeps exactly retry_after_ns", "[wait]") {
    Clock::set(10 * kSec);
    tally::Gcra g(Quota::per_second(10).with_burst(1));
    REQUIRE(g.allow(Clock::now_ns()));
    std::vector<std::uint64_t> sleeps;
    const auto r = tally::wait_until_allowed(g, Clock{}, 1, tally::never, Sleeper{&sleeps});
    CHECK(r);
    CHECK(r.status == WaitStatus::acquired);
    CHECK(r.decision.allowed);
    CHECK(r.attempts == 2);
    CHECK(sleeps == std::vector<std::uint64_t>{100 * kMs});
    CHECK(r.slept_ns == 100 * kMs);
    CHECK(Clock::now_ns() == 10 * kSec + 100 * kMs);
    // Admitted at the first instant it could be: one nanosecond earlier it was not.
    tally::Gcra h(Quota::per_second(10).with_burst(1));
    REQUIRE(h.allow(10 * kSec));
    CHECK_FALSE(h.try_acquire(10 * kSec + 100 * kMs - 1).allowed);
}

TEST_CASE("wait_until_allowed: admitted at once sleeps nothing", "[wait]") {
    Clock::set(5);
    tally::TokenBucket tb(Quota::per_second(3));
    std::vector<std::uint64_t> sleeps;
    const auto r = tally::wait_until_allowed(tb, Clock{}, 2, 5, Sleeper{&sleeps});
    CHECK(r.status == WaitStatus::acquired);
    CHECK(r.attempts == 1);
    CHECK(sleeps.empty());
    CHECK(tb.tokens(5) == 1);
}

TEST_CASE("wait_until_allowed: a deadline too close times out without sleeping or consuming", "[wait]") {
    Clock::set(10 * kSec);
    tally::Gcra g(Quota::per_second(10).with_burst(1));
    REQUIRE(g.allow(Clock::now_ns()));
    std::vector<std::uint64_t> sleeps;
    auto r = tally::wait_until_allowed(g, Clock{}, 1, 10 * kSec + 100 * kMs - 1, Sleeper{&sleeps});
    CHECK(r.status == WaitStatus::timed_out);
    CHECK_FALSE(r);
    CHECK_FALSE(r.decision.allowed);
    CHECK(r.decision.retry_after_ns == 100 * kMs);
    CHECK(sleeps.empty());
    CHECK(g.try_acquire(10 * kSec + 100 * kMs, 0).remaining == 1);  // nothing consumed
    // A deadline exactly at the earliest admission is met.
    r = tally::wait_until_allowed(g, Clock{}, 1, 10 * kSec + 100 * kMs, Sleeper{&sleeps});
    CHECK(r.status == WaitStatus::acquired);
    // A deadline already past.
    r = tally::wait_until_allowed(g, Clock{}, 1, 0, Sleeper{&sleeps});
    CHECK(r.status == WaitStatus::timed_out);
}

TEST_CASE("wait_until_allowed: a cost that can never pass returns at once", "[wait]") {
    Clock::set(1);
    tally::Gcra g(Quota::per_second(10).with_burst(3));
    std::vector<std::uint64_t> sleeps;
    const auto r = tally::wait_until_allowed(g, Clock{}, 4, tally::never, Sleeper{&sleeps});
    CHECK(r.status == WaitStatus::never);
    CHECK(r.decision.retry_after_ns == tally::never);
    CHECK(r.attempts == 1);
    CHECK(sleeps.empty());
}

TEST_CASE("wait_until_allowed re-checks when another caller took the slot", "[wait]") {
    Clock::set(10 * kSec);
    tally::Gcra g(Quota::per_second(10).with_burst(1));
    REQUIRE(g.allow(Clock::now_ns()));
    std::vector<std::uint64_t> sleeps;
    int stolen = 0;
    // While the waiter sleeps, a competitor wakes first and takes the unit,
    // twice; the waiter must notice, wait again, and get the third one.
    auto racing_sleep = [&](std::uint64_t ns) {
        sleeps.push_back(ns);
        Clock::advance(ns);
        if (stolen < 2 && g.allow(Clock::now_ns())) ++stolen;
    };
    const auto r = tally::wait_until_allowed(g, Clock{}, 1, tally::never, racing_sleep);
    CHECK(stolen == 2);
    CHECK(r.status == WaitStatus::acquired);
    CHECK(r.attempts == 4);
    CHECK(sleeps == std::vector<std::uint64_t>{100 * kMs, 100 * kMs, 100 * kMs});
    CHECK(Clock::now_ns() == 10 * kSec + 300 * kMs);
    // The deadline still holds when the slot keeps being stolen.
    Clock::set(20 * kSec);
    tally::Gcra h(Quota::per_second(10).with_burst(1));
    REQUIRE(h.allow(Clock::now_ns()));
    auto always_stolen = [&](std::uint64_t ns) {
        Clock::advance(ns);
        (void)h.allow(Clock::now_ns());
    };
    const auto t = tally::wait_until_allowed(h, Clock{}, 1, 20 * kSec + 450 * kMs, always_stolen);
    CHECK(t.status == WaitStatus::timed_out);
    CHECK(t.attempts == 5);  // at 0, 100, 200, 300, 400 ms; the next unit (500 ms) is past the deadline
    CHECK(Clock::now_ns() == 20 * kSec + 400 * kMs);
}

TEST_CASE("wait_until_allowed: jitter is added, drawn from the caller's Jitter, and cut at the deadline", "[wait]") {
    Clock::set(10 * kSec);
    tally::Gcra g(Quota::per_second(10).with_burst(1));
    REQUIRE(g.allow(Clock::now_ns()));
    Jitter jitter(50 * kMs, Seed{42});
    Jitter copy = jitter;  // the same draws, for the expected value
    const std::uint64_t extra = copy.next();
    CHECK(extra <= 50 * kMs);
    std::vector<std::uint64_t> sleeps;
    auto r = tally::wait_until_allowed(g, Clock{}, 1, jitter, tally::never, Sleeper{&sleeps});
    CHECK(r.status == WaitStatus::acquired);
    CHECK(sleeps == std::vector<std::uint64_t>{100 * kMs + extra});
    // The deadline cuts the jitter: no sleep ends past it.
    Clock::set(30 * kSec);
    tally::Gcra h(Quota::per_second(10).with_burst(1));
    REQUIRE(h.allow(Clock::now_ns()));
    Jitter big(kSec, Seed{7});
    sleeps.clear();
    r = tally::wait_until_allowed(h, Clock{}, 1, big, 30 * kSec + 120 * kMs, Sleeper{&sleeps});
    CHECK(r.status == WaitStatus::acquired);
    CHECK(sleeps.size() == 1);
    CHECK(sleeps[0] >= 100 * kMs);
    CHECK(sleeps[0] <= 120 * kMs);
}

TEST_CASE("Jitter: uniform in [0, max], reproducible per seed, spreads waiters", "[wait]") {
    Jitter a(999, Seed{1}), b(999, Seed{1}), c(999, Seed{2});
    std::vector<std::uint64_t> xs;
    bool differ = false;
    for (int i = 0; i < 20000; ++i) {
        const std::uint64_t x = a.next();
        REQUIRE(x <= 999);
        REQUIRE(b.next() == x);
        differ = differ || c.next() != x;
        xs.push_back(x);
    }
    CHECK(differ);
    // Ten equal bins of 100: each within 15% of 2000 (binomial sd ~ 42).
    std::vector<int> bins(10);
    for (std::uint64_t x : xs) ++bins[x / 100];
    for (int n : bins) CHECK((n > 1700 && n < 2300));
    CHECK(*std::max_element(xs.begin(), xs.end()) >= 990);
    CHECK(*std::min_element(xs.begin(), xs.end()) <= 9);
    Jitter none;
    CHECK(none.next() == 0);
    CHECK(Jitter(std::uint64_t(-1), Seed{3}).max_ns() == std::uint64_t(-1));
    // 100 waiters denied together: without jitter they wake at one instant,
    // with 10 ms of jitter (each its own seed) at (nearly) 100 distinct ones.
    std::set<std::uint64_t> plain, spread;
    for (std::uint64_t w = 0; w < 100; ++w) {
        Jitter j(10 * kMs, Seed{1000 + w});
        plain.insert(100 * kMs);
        spread.insert(100 * kMs + j.next());
    }
    CHECK(plain.size() == 1);
    CHECK(spread.size() >= 95);
}

TEMPLATE_TEST_CASE("wait_until_allowed works with every limiter", "[wait]", tally::FixedWindowLimiter,
                   tally::SlidingWindowLimiter<>, tally::SlidingLogLimiter, tally::TokenBucket, tally::Gcra,
                   tally::AtomicGcra, tally::AtomicTokenBucket) {
    Clock::set(7 * kSec + 123);
    TestType lim(Quota::per_second(5));
    for (int i = 0; i < 5; ++i) REQUIRE(lim.allow(Clock::now_ns()));
    const Decision before = lim.try_acquire(Clock::now_ns(), 1);
    REQUIRE_FALSE(before.allowed);
    std::vector<std::uint64_t> sleeps;
    const auto r = tally::wait_until_allowed(lim, Clock{}, 1, tally::never, Sleeper{&sleeps});
    CHECK(r.status == WaitStatus::acquired);
    REQUIRE_FALSE(sleeps.empty());
    CHECK(sleeps[0] == before.retry_after_ns);
    CHECK(Clock::now_ns() == 7 * kSec + 123 + r.slept_ns);
}

TEST_CASE("wait_until_allowed on a DryRun never waits", "[wait][dry_run]") {
    Clock::set(1000);
    tally::DryRun<tally::Gcra> shadow(Quota::per_second(1));
    std::vector<std::uint64_t> sleeps;
    for (int i = 0; i < 5; ++i)
        CHECK(tally::wait_until_allowed(shadow, Clock{}, 1, tally::never, Sleeper{&sleeps}).attempts == 1);
    CHECK(sleeps.empty());
    CHECK(shadow.would_deny() == 4);
}
