// Quota, Decision, the RateLimiter / PerKeyPolicy concepts, and the
// semantics every limiter shares, checked for all of them.
#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "catch.hpp"
#include "tally/limit/decision.hpp"
#include "tally/limit/fixed_window.hpp"
#include "tally/limit/gcra.hpp"
#include "tally/limit/quota.hpp"
#include "tally/limit/sliding_log.hpp"
#include "tally/limit/sliding_window.hpp"
#include "tally/limit/token_bucket.hpp"
#include "test_support.hpp"

using tally::Decision;
using tally::Quota;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint64_t kSec = 1'000'000'000;


using SW = tally::SlidingWindowLimiter<>;
using SW2 = tally::SlidingWindowLimiter<std::uint64_t, 2>;

// The most a limiter built from q can hold at one instant.
template <class L>
std::uint64_t full_of(const Quota& q) {
    if constexpr (std::is_same_v<L, tally::TokenBucket> || std::is_same_v<L, tally::Gcra>)
        return q.capacity();
    else
        return q.limit;
}

}  // namespace

TEST_CASE("Quota named constructors", "[quota]") {
    CHECK(Quota::per_second(100) == Quota{100, kSec, 0});
    CHECK(Quota::per_minute(7) == Quota{7, 60 * kSec, 0});
    CHECK(Quota::per_hour(5) == Quota{5, 3600 * kSec, 0});
    CHECK(Quota::per_day(9) == Quota{9, 86400 * kSec, 0});
    CHECK(Quota::per(10, 250ms) == Quota{10, 250'000'000, 0});
    CHECK(Quota::per(3, std::chrono::hours(24 * 365 * 100)).window_ns == 100ull * 365 * 86400 * kSec);
    CHECK(Quota::per_second(100).with_burst(20) == Quota{100, kSec, 20});
    CHECK(Quota::per_second(100).capacity() == 100);
    CHECK(Quota::per_second(100).with_burst(20).capacity() == 20);
    constexpr Quota designated{.limit = 5, .window_ns = 10, .burst = 2};
    STATIC_REQUIRE(designated.capacity() == 2);
}

TEST_CASE("Quota validation names parameter, value and range", "[quota]") {
    CHECK_THROWS_WITH(Quota({0, kSec}).validate(), "tally::Quota::validate: limit 0 is out of range [1, 1000000000]");
    CHECK_THROWS_WITH(Quota({5, 0}).validate(),
                      "tally::Quota::validate: window_ns 0 is out of range [1, 4611686018427387904]");
    CHECK_THROWS_WITH(Quota({5, (1ull << 62) + 1}).validate(),
                      "tally::Quota::validate: window_ns 4611686018427387905 is out of range [1, 4611686018427387904]");
    CHECK_THROWS_WITH(Quota({(1ull << 40) + 1, 1ull << 62}).validate(),
                      "tally::Quota::validate: limit 1099511627777 is out of range [1, 1099511627776]");
    CHECK_THROWS_WITH(Quota::per_second(2'000'000'000),
                      "tally::Quota::per_second: limit 2000000000 is out of range [1, 1000000000]");
    CHECK_THROWS_WITH(Quota::per_minute(0), "tally::Quota::per_minute: limit 0 is out of range [1, 60000000000]");
    CHECK_THROWS_WITH(Quota::per_hour(0), "tally::Quota::per_hour: limit 0 is out of range [1, 1099511627776]");
    CHECK_THROWS_WITH(Quota::per_day(0), "tally::Quota::per_day: limit 0 is out of range [1, 1099511627776]");
    CHECK_THROWS_WITH(Quota::per_second(10).with_burst((1ull << 40) + 1),
                      "tally::Quota::with_burst: burst 1099511627777 is out of range [0, 1099511627776]");
    CHECK_THROWS_WITH(Quota::per(1, 0ms), "tally::Quota::per: window_ns 0 is out of range [1, 4611686018427387904]");
    CHECK_THROWS_WITH(Quota::per(1, std::chrono::duration<double, std::nano>(1.5)),
                      "tally::Quota::per: window_ns 1.5 is not a whole number of nanoseconds");
    CHECK_THROWS_WITH(Quota::per(1, std::chrono::hours(24 * 365 * 200)),
                      "tally::Quota::per: window_ns 6.3072e+18 is out of range [1, 4611686018427387904]");
    CHECK_THROWS_WITH(Quota::per(2, 1ns), "tally::Quota::per: limit 2 is out of range [1, 1]");
    CHECK_NOTHROW(Quota{1ull << 40, 1ull << 62, 1ull << 40}.validate());
    CHECK_NOTHROW(Quota{1, 1}.validate());
}

TEST_CASE("every limiter validates its Quota with its own name", "[quota]") {
    const Quota bad{0, kSec};
    const char* const lim0 = ": limit 0 is out of range [1, 1000000000]";
    CHECK_THROWS_WITH(tally::Gcra(bad), std::string("tally::Gcra::Gcra") + lim0);
    CHECK_THROWS_WITH(tally::AtomicGcra(bad), std::string("tally::AtomicGcra::AtomicGcra") + lim0);
    CHECK_THROWS_WITH(tally::TokenBucket(bad), std::string("tally::TokenBucket::TokenBucket") + lim0);
    CHECK_THROWS_WITH(tally::AtomicTokenBucket(bad), std::string("tally::AtomicTokenBucket::AtomicTokenBucket") + lim0);
    CHECK_THROWS_WITH(tally::FixedWindowLimiter(bad),
                      std::string("tally::FixedWindowLimiter::FixedWindowLimiter") + lim0);
    CHECK_THROWS_WITH(tally::SlidingLogLimiter(bad), std::string("tally::SlidingLogLimiter::SlidingLogLimiter") + lim0);
    CHECK_THROWS_WITH(SW(bad), std::string("tally::SlidingWindowLimiter::SlidingWindowLimiter") + lim0);
    CHECK_THROWS_WITH(tally::Gcra(Quota{1, 1, (1ull << 40) + 1}),
                      "tally::Gcra::Gcra: burst 1099511627777 is out of range [0, 1099511627776]");
    CHECK_THROWS_WITH(tally::FixedWindowLimiter(Quota{5, 0}),
                      "tally::FixedWindowLimiter::FixedWindowLimiter: window_ns 0 is out of range [1, "
                      "4611686018427387904]");
}

TEST_CASE("Decision: explicit bool, equality", "[decision]") {
    STATIC_REQUIRE(!std::is_convertible_v<Decision, bool>);
    STATIC_REQUIRE(std::is_constructible_v<bool, Decision>);
    constexpr Decision yes{true, 3, 0, 10};
    constexpr Decision no{false, 0, 5, 10};
    STATIC_REQUIRE(static_cast<bool>(yes));
    STATIC_REQUIRE(!static_cast<bool>(no));
    STATIC_REQUIRE(yes != no);
    STATIC_REQUIRE(tally::never == kMax);
}

TEST_CASE("concepts and per-key state sizes", "[decision]") {
    STATIC_REQUIRE(tally::RateLimiter<tally::FixedWindowLimiter>);
    STATIC_REQUIRE(tally::RateLimiter<SW>);
    STATIC_REQUIRE(tally::RateLimiter<tally::SlidingLogLimiter>);
    STATIC_REQUIRE(tally::RateLimiter<tally::TokenBucket>);
    STATIC_REQUIRE(tally::RateLimiter<tally::Gcra>);
    STATIC_REQUIRE(tally::RateLimiter<tally::AtomicTokenBucket>);
    STATIC_REQUIRE(tally::RateLimiter<tally::AtomicGcra>);
    STATIC_REQUIRE(tally::PerKeyPolicy<tally::FixedWindowLimiter>);
    STATIC_REQUIRE(tally::PerKeyPolicy<SW>);
    STATIC_REQUIRE(tally::PerKeyPolicy<SW2>);
    STATIC_REQUIRE(tally::PerKeyPolicy<tally::TokenBucket>);
    STATIC_REQUIRE(tally::PerKeyPolicy<tally::Gcra>);
    STATIC_REQUIRE(!tally::PerKeyPolicy<tally::SlidingLogLimiter>);
    STATIC_REQUIRE(!tally::RateLimiter<int>);
    STATIC_REQUIRE(sizeof(tally::Gcra::State) == 8);
    STATIC_REQUIRE(sizeof(tally::TokenBucket::State) == 16);
    STATIC_REQUIRE(sizeof(tally::FixedWindowLimiter::State) == 16);
    STATIC_REQUIRE(sizeof(SW::State) == 56);
    STATIC_REQUIRE(sizeof(SW::State) <= 64);
    STATIC_REQUIRE(alignof(tally::AtomicGcra) == tally::false_sharing_size);
    STATIC_REQUIRE(alignof(tally::AtomicTokenBucket) == tally::false_sharing_size);
}

// ---- Shared semantics, for every copyable limiter --------------------------

TEMPLATE_TEST_CASE("Decision fields are exact on random streams", "[limit][semantics]", tally::FixedWindowLimiter, SW,
                   SW2, tally::SlidingLogLimiter, tally::TokenBucket, tally::Gcra) {
    using L = TestType;
    const Quota quotas[] = {Quota::per(10, 1000ns), Quota::per(7, 700ns).with_burst(3), Quota::per(3, 1000ns),
                            Quota::per(20, 2000ns).with_burst(35)};
    std::uint64_t seed = 1;
    for (const Quota& q : quotas) {
        INFO("quota " << q.limit << "/" << q.window_ns << " burst " << q.burst);
        L lim(q);
        tally::test::Rng rng(seed++);
        const std::uint64_t full = full_of<L>(q);
        std::uint64_t t = 1'000'000;
        const std::size_t steps = tally::test::big(4000, 600);
        for (std::size_t i = 0; i < steps; ++i) {
            t += rng.below(4) == 0 ? rng.below(q.window_ns) : rng.below(40);
            const std::uint64_t cost = rng.below(10) == 0 ? 0 : 1 + rng.below(rng.below(3) == 0 ? full + 2 : 3);
            const L before = lim;
            const Decision d = lim.try_acquire(t, cost);
            INFO("step " << i << " t " << t << " cost " << cost);
            if (d) {
                CHECK(d.retry_after_ns == 0);
            } else {
                // Denied: nothing consumed (same answers as the untouched copy).
                L twin = before;
                CHECK(twin.try_acquire(t, cost) == d);
                if (cost > full) {
                    CHECK(d.retry_after_ns == tally::never);
                } else {
                    REQUIRE(d.retry_after_ns > 0);
                    REQUIRE(d.retry_after_ns != tally::never);
                    L at = before;
                    CHECK(at.try_acquire(t + d.retry_after_ns, cost).allowed);
                    L early = before;
                    CHECK_FALSE(early.try_acquire(t + d.retry_after_ns - 1, cost).allowed);
                }
            }
            // remaining: exactly what passes right now.
            {
                L a = lim;
                CHECK(a.try_acquire(t, d.remaining).allowed);
                L b = lim;
                CHECK_FALSE(b.try_acquire(t, d.remaining + 1).allowed);
            }
            // reset_after_ns: fully replenished then, not a nanosecond earlier.
            {
                L a = lim;
                CHECK(a.try_acquire(t + d.reset_after_ns, 0).remaining == full);
                if (d.reset_after_ns > 0) {
                    L b = lim;
                    CHECK(b.try_acquire(t + d.reset_after_ns - 1, 0).remaining < full);
                }
            }
        }
    }
}

TEMPLATE_TEST_CASE("peek, oversize cost and extreme arguments", "[limit][semantics]", tally::FixedWindowLimiter, SW,
                   tally::SlidingLogLimiter, tally::TokenBucket, tally::Gcra, tally::AtomicTokenBucket,
                   tally::AtomicGcra) {
    using L = TestType;
    const Quota q = Quota::per(5, 100ns);
    L lim(q);
    // A peek on a fresh limiter: allowed, nothing consumed, nothing to reset.
    for (int i = 0; i < 10; ++i) CHECK(lim.try_acquire(50, 0) == Decision{true, 5, 0, 0});
    CHECK(lim.try_acquire(50, 2).allowed);
    const Decision p1 = lim.try_acquire(50, 0);
    CHECK(p1.allowed);
    CHECK(p1.remaining == 3);
    CHECK(lim.try_acquire(50, 0) == p1);  // still nothing consumed
    // Above the limit: never, repeatedly, consuming nothing.
    for (std::uint64_t c : {std::uint64_t{6}, std::uint64_t{1} << 40, kMax}) {
        const Decision d = lim.try_acquire(50, c);
        CHECK_FALSE(d.allowed);
        CHECK(d.retry_after_ns == tally::never);
        CHECK(d.remaining == 3);
    }
    CHECK(lim.try_acquire(50, 0) == p1);
    CHECK(lim.try_acquire(50, 3).allowed);
    CHECK_FALSE(lim.try_acquire(50, 1).allowed);
    // The end of the clock: no UB, no wrap into capacity.
    L end(q);
    const Decision e1 = end.try_acquire(kMax, 1);
    const Decision e2 = end.try_acquire(kMax, 0);
    CHECK(e2.remaining <= 5);
    if (e1.allowed) CHECK(e2.remaining == 4);
    for (int i = 0; i < 10; ++i) (void)end.try_acquire(kMax, 1);
    CHECK(end.try_acquire(kMax, 0).remaining == 0);
    CHECK(end.try_acquire(0, 0).remaining == 0);  // and a stale time from there sees no more
}

namespace {
// Per-key interface: the State overloads are the object-level behaviour.
template <class L>
void check_state_api(const Quota& q, std::uint64_t seed) {
    L obj(q);
    const L policy(q);
    typename L::State s{};  // State{} is fresh: it must answer as fresh_state() does
    {
        typename L::State a{}, b = policy.fresh_state();
        for (std::uint64_t u : {std::uint64_t{0}, std::uint64_t{5}, q.window_ns, 77 * q.window_ns + 3}) {
            REQUIRE(policy.is_fresh(a, u));
            REQUIRE(policy.try_acquire(a, u, 0) == policy.try_acquire(b, u, 0));
        }
    }
    tally::test::Rng rng(seed);
    std::uint64_t t = 10;
    for (int i = 0; i < 3000; ++i) {
        t += rng.below(3) == 0 ? rng.below(2 * q.window_ns) : rng.below(30);
        const std::uint64_t cost = rng.below(4);
        const bool fresh = policy.is_fresh(s, t);
        if (fresh) {
            // is_fresh: behaves exactly like fresh_state() from now on.
            typename L::State a = s, b = policy.fresh_state();
            std::uint64_t u = t;
            for (int k = 0; k < 20; ++k) {
                u += rng.below(q.window_ns / 4 + 1);
                const std::uint64_t c = rng.below(4);
                REQUIRE(policy.try_acquire(a, u, c) == policy.try_acquire(b, u, c));
            }
        }
        const Decision d1 = obj.try_acquire(t, cost);
        const Decision d2 = policy.try_acquire(s, t, cost);
        REQUIRE(d1 == d2);
    }
    // A state used within the window is not fresh; it is after a long idle.
    typename L::State u = policy.fresh_state();
    CHECK(policy.try_acquire(u, 1000, 1).allowed);
    CHECK_FALSE(policy.is_fresh(u, 1000));
    CHECK(policy.is_fresh(u, 1000 + 3 * q.window_ns));
}
}  // namespace

TEST_CASE("State overloads equal the object API; is_fresh is exact", "[limit][keyed]") {
    const Quota q = Quota::per(10, 1000ns).with_burst(4);
    check_state_api<tally::FixedWindowLimiter>(q, 11);
    check_state_api<SW>(q, 12);
    check_state_api<SW2>(q, 13);
    check_state_api<tally::TokenBucket>(q, 14);
    check_state_api<tally::Gcra>(q, 15);
}

// ---- Time going backwards, for every limiter --------------------------------

TEMPLATE_TEST_CASE("a stale timestamp never mints capacity", "[limit][clock]", tally::FixedWindowLimiter, SW, SW2,
                   tally::SlidingLogLimiter, tally::TokenBucket, tally::Gcra) {
    using L = TestType;
    const Quota q = Quota::per(10, 1000ns).with_burst(6);
    tally::test::Rng rng(77);
    for (int round = 0; round < 300; ++round) {
        L base(q);
        std::uint64_t t = 5000 + rng.below(1000);
        const int n = static_cast<int>(rng.below(12));
        for (int i = 0; i < n; ++i) {
            t += rng.below(150);
            (void)base.try_acquire(t, 1 + rng.below(2));
        }
        // The latest time the limiter has recorded: an admitted request.
        t += 1 + rng.below(100);
        if (!base.try_acquire(t, 1).allowed) continue;
        const std::uint64_t latest = t;
        const std::uint64_t stale = latest - 1 - rng.below(3000);
        INFO("round " << round << " latest " << latest << " stale " << stale);
        // Reading at a stale time shows no more than reading at the latest.
        {
            L a = base, b = base;
            CHECK(a.try_acquire(stale, 0).remaining <= b.try_acquire(latest, 0).remaining);
        }
        // A request at a stale time leaves the limiter no better off, at every
        // later time, than the same request at the latest time.
        const std::uint64_t cost = 1 + rng.below(2);
        L late = base, now = base;
        const bool a1 = late.try_acquire(stale, cost).allowed;
        const bool a2 = now.try_acquire(latest, cost).allowed;
        if (a1) CHECK(a2);
        if (a1 != a2) continue;  // both consumed or neither did
        for (std::uint64_t u = latest; u < latest + 3 * q.window_ns; u += 1 + rng.below(97)) {
            L x = late, y = now;
            REQUIRE(x.try_acquire(u, 0).remaining <= y.try_acquire(u, 0).remaining);
        }
        // And repeated stale requests cannot exceed what the latest time allows.
        L burst = base, ref = base;
        std::uint64_t got = 0, want = 0;
        for (int i = 0; i < 40; ++i) {
            got += burst.try_acquire(stale - static_cast<std::uint64_t>(i), 1).allowed ? 1 : 0;
            want += ref.try_acquire(latest, 1).allowed ? 1 : 0;
        }
        CHECK(got <= want);
    }
}

TEMPLATE_TEST_CASE("allow() decides exactly as try_acquire()", "[limit][semantics]", tally::FixedWindowLimiter, SW,
                   SW2, tally::SlidingLogLimiter, tally::TokenBucket, tally::Gcra, tally::AtomicTokenBucket,
                   tally::AtomicGcra) {
    using L = TestType;
    const Quota q = Quota::per(10, 1000ns).with_burst(4);
    L a(q), b(q);
    tally::test::Rng rng(31);
    std::uint64_t t = 50'000;
    for (int i = 0; i < 20000; ++i) {
        t += rng.below(3) == 0 ? rng.below(700) : rng.below(40);
        const std::uint64_t when = rng.below(6) == 0 ? t - rng.below(3000) : t;
        const std::uint64_t cost = rng.below(5);
        REQUIRE(a.allow(when, cost) == b.try_acquire(when, cost).allowed);
        REQUIRE(a.try_acquire(t, 0) == b.try_acquire(t, 0));
    }
}
