// set_quota and rebase_state on every limiter: a change up, a change down, an
// equal quota (no decision changes), validation, and exact oracles:
// - the bucket limiters (Gcra, TokenBucket and their atomic forms) against a
//   reference bucket written here from the definition ("units spent stay
//   spent; the new rate applies from now"), on random streams with random
//   quota changes;
// - SlidingWindowLimiter against a ring rebuilt from the log of admitted
//   requests;
// - FixedWindowLimiter and SlidingLogLimiter on hand-checked scenarios.
// A negative control shows that clamping the debt to the new burst (the
// obvious alternative) lets a key gain capacity at one instant.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "catch.hpp"
#include "tally/limit/fixed_window.hpp"
#include "tally/limit/gcra.hpp"
#include "tally/limit/sliding_log.hpp"
#include "tally/limit/sliding_window.hpp"
#include "tally/limit/token_bucket.hpp"
#include "test_support.hpp"

using tally::Decision;
using tally::Quota;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kSec = 1'000'000'000;
constexpr std::uint64_t kMs = 1'000'000;
__extension__ typedef unsigned __int128 u128;

// ---- The reference bucket ---------------------------------------------------
// Units are re-emitted one at a time at the instants k * window / limit; idx(t)
// counts those in (0, t]. `debt` is what was spent and not yet re-emitted as
// of grid index `n0` of the current quota. Monotone times only.
struct RefBucket {
    Quota q;
    std::uint64_t debt = 0;
    std::uint64_t n0 = 0;

    std::uint64_t idx(std::uint64_t t) const { return static_cast<std::uint64_t>(u128(t) * q.limit / q.window_ns); }
    // Earliest t with idx(t) >= k.
    std::uint64_t time_of(std::uint64_t k) const {
        const u128 p = u128(k) * q.window_ns;
        return static_cast<std::uint64_t>(p / q.limit + (p % q.limit != 0 ? 1 : 0));
    }
    void advance(std::uint64_t t) {
        const std::uint64_t n = idx(t);
        REQUIRE(n >= n0);
        debt = debt > n - n0 ? debt - (n - n0) : 0;
        n0 = n;
    }
    Decision acquire(std::uint64_t t, std::uint64_t cost) {
        advance(t);
        const std::uint64_t cap = q.capacity();
        const std::uint64_t level = debt >= cap ? 0 : cap - debt;
        if (cost <= level) {
            debt += cost;
            const std::uint64_t full = time_of(n0 + debt);
            return Decision{true, level - cost, 0, full > t ? full - t : 0};
        }
        const std::uint64_t full = time_of(n0 + debt);
        const std::uint64_t reset = full > t ? full - t : 0;
        if (cost > cap) return Decision{false, level, tally::never, reset};
        return Decision{false, level, time_of(n0 + debt + cost - cap) - t, reset};
    }
    void set_quota(const Quota& nq, std::uint64_t t) {
        advance(t);  // the debt at t under the old quota...
        q = nq;
        n0 = idx(t);  // ...is re-emitted on the new grid from t
    }
};

// The obvious alternative: clamp the debt to the new burst. Used only as the
// negative control below.
struct ClampedBucket : RefBucket {
    void set_quota(const Quota& nq, std::uint64_t t) {
        RefBucket::set_quota(nq, t);
        if (debt > q.capacity()) debt = q.capacity();
    }
};

}  // namespace

TEST_CASE("bucket limiters: set_quota equals the reference bucket on random streams", "[set_quota][gcra]") {
    const Quota pool[] = {Quota::per_second(10),
                          Quota::per_second(100).with_burst(7),
                          Quota::per_second(3).with_burst(20),
                          Quota::per(7, 1000ns).with_burst(3),
                          Quota::per(999'983, 1'000'000'007ns).with_burst(13),
                          Quota::per_minute(600).with_burst(1)};
    const std::size_t n_pool = sizeof pool / sizeof pool[0];
    for (std::uint64_t seed = 1; seed <= 12; ++seed) {
        tally::test::Rng rng(seed);
        Quota q = pool[rng.below(n_pool)];
        RefBucket ref{q};
        tally::Gcra g(q);
        tally::TokenBucket tb(q);
        tally::AtomicGcra ag(q);
        tally::AtomicTokenBucket atb(q);
        std::uint64_t t = 1 + rng.below(kSec);
        const std::size_t steps = tally::test::big(20000, 3000);
        for (std::size_t i = 0; i < steps; ++i) {
            const std::uint64_t T = q.window_ns / q.limit + 1;
            t += rng.below(3) == 0 ? rng.below(4 * T) : rng.below(T / 3 + 1);
            if (rng.below(200) == 0) {
                q = pool[rng.below(n_pool)];
                INFO("seed " << seed << " step " << i << " set_quota " << q.limit << "/" << q.window_ns << " b "
                             << q.burst);
                ref.set_quota(q, t);
                g.set_quota(q, t);
                tb.set_quota(q, t);
                ag.set_quota(q, t);
                atb.set_quota(q, t);
                REQUIRE(g.quota() == q);
                REQUIRE(ag.quota() == q);
                REQUIRE(atb.quota() == q);
            }
            const std::uint64_t cost = rng.below(10) == 0 ? rng.below(q.capacity() + 3) : rng.below(3);
            const Decision want = ref.acquire(t, cost);
            INFO("seed " << seed << " step " << i << " t " << t << " cost " << cost);
            REQUIRE(g.try_acquire(t, cost) == want);
            REQUIRE(tb.try_acquire(t, cost) == want);
            REQUIRE(ag.try_acquire(t, cost) == want);
            REQUIRE(atb.try_acquire(t, cost) == want);
            REQUIRE(ag.state().tat == g.state().tat);
            REQUIRE(atb.tokens(t) == tb.tokens(t));
        }
    }
}

TEST_CASE("bucket limiters agree with each other under set_quota at stale times", "[set_quota][gcra]") {
    const Quota pool[] = {Quota::per_second(10), Quota::per(7, 1000ns).with_burst(3), Quota::per(5, 700ns).with_burst(9)};
    tally::test::Rng rng(99);
    Quota q = pool[0];
    tally::Gcra g(q);
    tally::TokenBucket tb(q);
    tally::AtomicGcra ag(q);
    tally::AtomicTokenBucket atb(q);
    std::uint64_t t = 5000;
    for (int i = 0; i < 50000; ++i) {
        t += rng.below(300);
        const std::uint64_t when = rng.below(4) == 0 ? t - rng.below(3000) : t;
        if (rng.below(100) == 0) {
            q = pool[rng.below(3)];
            g.set_quota(q, when);
            tb.set_quota(q, when);
            ag.set_quota(q, when);
            atb.set_quota(q, when);
        }
        const std::uint64_t cost = rng.below(4);
        const Decision d = g.try_acquire(when, cost);
        REQUIRE(tb.try_acquire(when, cost) == d);
        REQUIRE(ag.try_acquire(when, cost) == d);
        REQUIRE(atb.try_acquire(when, cost) == d);
        REQUIRE(tb.state().origin + tb.state().missing == g.state().tat);
    }
}

TEMPLATE_TEST_CASE("bucket limiters: a change up and a change down", "[set_quota]", tally::Gcra, tally::TokenBucket,
                   tally::AtomicGcra, tally::AtomicTokenBucket) {
    using L = TestType;
    const std::uint64_t t = 10 * kSec;
    SECTION("up: spent units stay spent, the new rate applies from now") {
        L lim(Quota::per_second(10));
        for (int i = 0; i < 10; ++i) REQUIRE(lim.try_acquire(t).allowed);
        CHECK_FALSE(lim.try_acquire(t).allowed);
        lim.set_quota(Quota::per_second(100), t);
        CHECK(lim.try_acquire(t, 0) == Decision{true, 90, 0, 100 * kMs});  // 10 spent of 100
        CHECK(lim.try_acquire(t + 10 * kMs - 1, 0).remaining == 90);
        CHECK(lim.try_acquire(t + 10 * kMs, 0).remaining == 91);  // one new interval: 10 ms
        CHECK(lim.try_acquire(t + 100 * kMs, 0) == Decision{true, 100, 0, 0});
    }
    SECTION("down, debt within the new burst") {
        L lim(Quota::per_second(10));
        REQUIRE(lim.try_acquire(t, 3).allowed);
        lim.set_quota(Quota::per_second(5), t);
        CHECK(lim.try_acquire(t, 0) == Decision{true, 2, 0, 600 * kMs});  // 3 spent of 5, 200 ms each
    }
    SECTION("down, debt above the new burst: the bucket stays empty until it is repaid") {
        L lim(Quota::per_second(10));
        REQUIRE(lim.try_acquire(t, 8).allowed);
        lim.set_quota(Quota::per_second(5), t);
        const Decision d = lim.try_acquire(t, 1);
        CHECK_FALSE(d.allowed);
        CHECK(d.remaining == 0);
        CHECK(d.retry_after_ns == 800 * kMs);   // debt 8 -> 4 at 5/s
        CHECK(d.reset_after_ns == 1600 * kMs);  // debt 8 -> 0
        CHECK_FALSE(lim.try_acquire(t + 800 * kMs - 1, 1).allowed);
        CHECK(lim.try_acquire(t + 800 * kMs, 1).allowed);
    }
    SECTION("a round trip through a smaller burst at one instant gains nothing") {
        L lim(Quota::per_second(10));
        for (int i = 0; i < 10; ++i) REQUIRE(lim.try_acquire(t).allowed);
        lim.set_quota(Quota::per_second(10).with_burst(5), t);
        lim.set_quota(Quota::per_second(10), t);
        CHECK(lim.try_acquire(t, 0).remaining == 0);
        CHECK_FALSE(lim.try_acquire(t).allowed);
    }
    SECTION("a fresh limiter stays fresh") {
        L lim(Quota::per_second(10));
        lim.set_quota(Quota::per_second(3).with_burst(4), t);
        CHECK(lim.try_acquire(t, 0) == Decision{true, 4, 0, 0});
        CHECK(lim.try_acquire(0, 0) == Decision{true, 4, 0, 0});
    }
    SECTION("a bad quota throws and changes nothing") {
        L lim(Quota::per_second(10));
        REQUIRE(lim.try_acquire(t, 4).allowed);
        CHECK_THROWS_AS(lim.set_quota(Quota{0, kSec}, t), std::invalid_argument);
        CHECK(lim.quota() == Quota::per_second(10));
        CHECK(lim.try_acquire(t, 0).remaining == 6);
    }
}

TEST_CASE("set_quota names the call in its message", "[set_quota]") {
    const Quota bad{5, 0};
    const std::string tail = ": window_ns 0 is out of range [1, 4611686018427387904]";
    tally::Gcra g(Quota::per_second(1));
    tally::AtomicGcra ag(Quota::per_second(1));
    tally::TokenBucket tb(Quota::per_second(1));
    tally::AtomicTokenBucket atb(Quota::per_second(1));
    tally::FixedWindowLimiter fw(Quota::per_second(1));
    tally::SlidingWindowLimiter<> sw(Quota::per_second(1));
    tally::SlidingWindowLimiter<std::uint16_t, 11> sw16(Quota::per_second(1));
    tally::SlidingLogLimiter log(Quota::per_second(1));
    CHECK_THROWS_WITH(g.set_quota(bad, 0), "tally::Gcra::set_quota" + tail);
    CHECK_THROWS_WITH(ag.set_quota(bad, 0), "tally::AtomicGcra::set_quota" + tail);
    CHECK_THROWS_WITH(tb.set_quota(bad, 0), "tally::TokenBucket::set_quota" + tail);
    CHECK_THROWS_WITH(atb.set_quota(bad, 0), "tally::AtomicTokenBucket::set_quota" + tail);
    CHECK_THROWS_WITH(fw.set_quota(bad, 0), "tally::FixedWindowLimiter::set_quota" + tail);
    CHECK_THROWS_WITH(sw.set_quota(bad, 0), "tally::SlidingWindowLimiter::set_quota" + tail);
    CHECK_THROWS_WITH(log.set_quota(bad, 0), "tally::SlidingLogLimiter::set_quota" + tail);
    CHECK_THROWS_WITH(sw16.set_quota(Quota::per_second(40000), 0),
                      "tally::SlidingWindowLimiter::set_quota: limit 40000 is out of range [1, 32767]");
    CHECK(sw16.quota() == Quota::per_second(1));
}

TEST_CASE("negative control: clamping the debt to the new burst mints capacity", "[set_quota][control]") {
    // Spend 10 under a burst of 10, move to a burst of 5 and back at the same
    // instant: the documented rule leaves 0 available; clamping gives 5 back.
    const std::uint64_t t = 10 * kSec;
    const Quota big = Quota::per_second(10), small = Quota::per_second(10).with_burst(5);
    RefBucket ref{big};
    ClampedBucket clamped{{big}};
    for (int i = 0; i < 10; ++i) {
        REQUIRE(ref.acquire(t, 1).allowed);
        REQUIRE(clamped.acquire(t, 1).allowed);
    }
    ref.set_quota(small, t);
    ref.set_quota(big, t);
    clamped.set_quota(small, t);
    clamped.set_quota(big, t);
    std::uint64_t ref_more = 0, clamped_more = 0;
    for (int i = 0; i < 20; ++i) {
        ref_more += ref.acquire(t, 1).allowed ? 1 : 0;
        clamped_more += clamped.acquire(t, 1).allowed ? 1 : 0;
    }
    CHECK(ref_more == 0);
    CHECK(clamped_more == 5);  // 15 units at one instant under a burst of 10
    // And the library follows the reference, not the clamp.
    tally::Gcra g(big);
    for (int i = 0; i < 10; ++i) REQUIRE(g.try_acquire(t).allowed);
    g.set_quota(small, t);
    g.set_quota(big, t);
    CHECK_FALSE(g.try_acquire(t).allowed);
}

namespace {

// Rebasing onto an equal quota changes no decision at now or later.
template <class L>
void check_equal_rebase_is_identity(const Quota& q, std::uint64_t seed) {
    const L policy(q);
    tally::test::Rng rng(seed);
    for (int round = 0; round < 200; ++round) {
        typename L::State s = policy.fresh_state();
        std::uint64_t t = 1000 + rng.below(10 * q.window_ns);
        const int n = static_cast<int>(rng.below(30));
        for (int i = 0; i < n; ++i) {
            t += rng.below(q.window_ns / 5 + 1);
            (void)policy.try_acquire(s, t, rng.below(3));
        }
        t += rng.below(q.window_ns / 3 + 1);
        typename L::State a = s, b = policy.rebase_state(s, policy, t);
        std::uint64_t u = t;
        for (int i = 0; i < 40; ++i) {
            const std::uint64_t c = rng.below(4);
            REQUIRE(policy.try_acquire(a, u, c) == policy.try_acquire(b, u, c));
            u += rng.below(q.window_ns / 4 + 1);
        }
    }
}

}  // namespace

TEST_CASE("rebase_state onto an equal quota changes no decision", "[set_quota][keyed]") {
    const Quota q = Quota::per(10, 1000ns).with_burst(4);
    check_equal_rebase_is_identity<tally::Gcra>(q, 1);
    check_equal_rebase_is_identity<tally::TokenBucket>(q, 2);
    check_equal_rebase_is_identity<tally::FixedWindowLimiter>(q, 3);
    check_equal_rebase_is_identity<tally::SlidingWindowLimiter<>>(q, 4);
    check_equal_rebase_is_identity<tally::SlidingWindowLimiter<std::uint16_t, 2>>(q, 5);
    check_equal_rebase_is_identity<tally::SlidingWindowLimiter<std::uint32_t, 8>>(Quota::per(10, 999ns), 6);
}

TEST_CASE("rebase_state: a key never has more at the change than the new quota allows", "[set_quota][keyed]") {
    // Buckets: available after = max(0, b_new - (b_old - available before)).
    // Windows: available after = max(0, limit_new - count in the window).
    const Quota pool[] = {Quota::per(10, 1000ns).with_burst(4), Quota::per(3, 1000ns), Quota::per(50, 1000ns),
                          Quota::per(20, 4000ns).with_burst(30), Quota::per(10, 250ns)};
    tally::test::Rng rng(5);
    for (int round = 0; round < 2000; ++round) {
        const Quota a = pool[rng.below(5)], b = pool[rng.below(5)];
        const tally::Gcra ga(a), gb(b);
        const tally::FixedWindowLimiter fa(a), fb(b);
        tally::Gcra::State gs{};
        tally::FixedWindowLimiter::State fs{};
        std::uint64_t t = 10'000 + rng.below(10'000);
        std::uint64_t in_window = 0, window = 0;
        const int n = static_cast<int>(rng.below(40));
        for (int i = 0; i < n; ++i) {
            t += rng.below(200);
            const std::uint64_t c = rng.below(3);
            (void)ga.try_acquire(gs, t, c);
            if (fa.try_acquire(fs, t, c).allowed) {
                if (t / a.window_ns != window) in_window = 0;
                window = t / a.window_ns;
                in_window += c;
            }
        }
        t += rng.below(300);
        if (t / a.window_ns != window) in_window = 0;
        tally::Gcra::State g0 = gs;
        const std::uint64_t before = ga.try_acquire(g0, t, 0).remaining;
        tally::Gcra::State g1 = gb.rebase_state(gs, ga, t);
        const std::uint64_t spent = a.capacity() - before;
        CHECK(gb.try_acquire(g1, t, 0).remaining == (spent >= b.capacity() ? 0 : b.capacity() - spent));
        tally::FixedWindowLimiter::State f1 = fb.rebase_state(fs, fa, t);
        CHECK(fb.try_acquire(f1, t, 0).remaining == (in_window >= b.limit ? 0 : b.limit - in_window));
    }
}

TEST_CASE("FixedWindowLimiter: set_quota keeps the count of the current window", "[set_quota][fixed_window]") {
    SECTION("up, to a longer window: the count stays until the new window ends") {
        tally::FixedWindowLimiter lim(Quota::per_second(10));
        for (int i = 0; i < 7; ++i) REQUIRE(lim.allow(1500 * kMs));
        lim.set_quota(Quota::per_minute(100), 1500 * kMs);
        CHECK(lim.try_acquire(1500 * kMs, 0) == Decision{true, 93, 0, 60 * kSec - 1500 * kMs});
        CHECK(lim.try_acquire(30 * kSec, 0).remaining == 93);
        CHECK(lim.try_acquire(60 * kSec, 0).remaining == 100);
    }
    SECTION("down: a count above the new limit admits nothing until the boundary") {
        tally::FixedWindowLimiter lim(Quota::per_second(10));
        for (int i = 0; i < 7; ++i) REQUIRE(lim.allow(1500 * kMs));
        lim.set_quota(Quota::per_second(5), 1500 * kMs);
        const Decision d = lim.try_acquire(1500 * kMs, 1);
        CHECK(d == Decision{false, 0, 500 * kMs, 500 * kMs});
        lim.set_quota(Quota::per_second(10), 1600 * kMs);  // and back: still 7 counted
        CHECK(lim.try_acquire(1600 * kMs, 0).remaining == 3);
        CHECK(lim.try_acquire(2 * kSec, 0).remaining == 10);
    }
    SECTION("an ended window's count is gone") {
        tally::FixedWindowLimiter lim(Quota::per_second(10));
        for (int i = 0; i < 7; ++i) REQUIRE(lim.allow(1500 * kMs));
        lim.set_quota(Quota::per_minute(100), 2500 * kMs);
        CHECK(lim.try_acquire(2500 * kMs, 0) == Decision{true, 100, 0, 0});
    }
    SECTION("a stale now_ns keeps the count in the window it was counted in") {
        tally::FixedWindowLimiter lim(Quota::per_second(10));
        for (int i = 0; i < 7; ++i) REQUIRE(lim.allow(5500 * kMs));
        lim.set_quota(Quota::per(10, 2s), 3 * kSec);  // stale: the count is in [5 s, 6 s)
        CHECK(lim.try_acquire(5500 * kMs, 0).remaining == 3);
        CHECK(lim.try_acquire(5999 * kMs, 0).remaining == 3);  // new window [4 s, 6 s)
        CHECK(lim.try_acquire(6 * kSec, 0).remaining == 10);
    }
}

TEST_CASE("SlidingLogLimiter: set_quota keeps the log", "[set_quota][sliding_log]") {
    tally::SlidingLogLimiter lim(Quota::per_second(10));
    for (std::uint64_t i = 0; i < 8; ++i) REQUIRE(lim.allow(kSec + i * 100 * kMs));  // 1.0 .. 1.7 s
    lim.set_quota(Quota::per_second(5), 1750 * kMs);
    Decision d = lim.try_acquire(1750 * kMs, 1);
    CHECK_FALSE(d.allowed);
    CHECK(d.remaining == 0);
    CHECK(d.retry_after_ns == 550 * kMs);  // 4 entries must leave: the 4th (1.3 s) leaves at 2.3 s
    CHECK_FALSE(lim.try_acquire(2300 * kMs - 1, 1).allowed);
    CHECK(lim.try_acquire(2300 * kMs, 1).allowed);           // log: 1.4 .. 1.7 s and 2.3 s
    CHECK(lim.try_acquire(2400 * kMs, 0).remaining == 1);    // 1.4 s left
    lim.set_quota(Quota::per_second(20), 2400 * kMs);         // up: the 4 still in the window stay
    CHECK(lim.try_acquire(2400 * kMs, 0).remaining == 16);
    // A shorter window forgets what lies outside it: only 2.3 s is in (2.2, 2.4].
    lim.set_quota(Quota::per(20, 200ms), 2400 * kMs);
    CHECK(lim.try_acquire(2400 * kMs, 0).remaining == 19);
}

namespace {

// SlidingWindowLimiter oracle: the rebased ring is the new policy's fresh
// ring with every admitted request still in the old ring added at the last
// instant of its old bucket (capped at the change time).
template <class SW>
void check_sliding_rebase(const Quota& a, const Quota& b, std::uint64_t seed) {
    INFO("from " << a.limit << "/" << a.window_ns << " to " << b.limit << "/" << b.window_ns << " seed " << seed);
    tally::test::Rng rng(seed);
    SW lim(a);
    const SW pa(a), pb(b);
    struct Hit {
        std::uint64_t t, cost;
    };
    std::vector<Hit> log;
    std::uint64_t t = 50 * a.window_ns + rng.below(a.window_ns);
    const int n = static_cast<int>(rng.below(80));
    for (int i = 0; i < n; ++i) {
        t += rng.below(a.window_ns / 6 + 1);
        const std::uint64_t c = 1 + rng.below(2);
        if (lim.try_acquire(t, c).allowed) log.push_back({t, c});
    }
    t += rng.below(a.window_ns / 2 + 1);
    typename SW::State want{};
    const std::uint64_t ob = pa.bucket_ns(), newest = t / ob;
    for (const Hit& h : log) {
        const std::uint64_t bucket = h.t / ob;
        constexpr std::uint64_t slots = sizeof(typename SW::State{}.slots) / sizeof(typename SW::Counter::slot_type);
        if (newest - bucket >= slots) continue;  // already out of the old ring
        const std::uint64_t end = (bucket + 1) * ob - 1;
        pb.counter().add(want, end < t ? end : t, static_cast<typename SW::Counter::slot_type>(h.cost));
    }
    pb.counter().add(want, t, 0);
    lim.set_quota(b, t);
    CHECK(lim.quota() == b);
    std::uint64_t u = t;
    for (int i = 0; i < 60; ++i) {
        const std::uint64_t c = rng.below(3);
        REQUIRE(lim.try_acquire(u, c) == pb.try_acquire(want, u, c));
        u += rng.below(b.window_ns / 5 + 1);
    }
}

}  // namespace

TEST_CASE("SlidingWindowLimiter: set_quota equals the ring rebuilt from the log", "[set_quota][sliding_window]") {
    using SW = tally::SlidingWindowLimiter<>;
    const Quota pool[] = {Quota::per(20, 1000ns), Quota::per(50, 2000ns), Quota::per(8, 500ns),
                          Quota::per(30, 1700ns), Quota::per(20, 1000ns)};
    std::uint64_t seed = 1;
    for (const Quota& a : pool)
        for (const Quota& b : pool)
            for (int k = 0; k < 8; ++k) check_sliding_rebase<SW>(a, b, seed++);
    for (int k = 0; k < 8; ++k)
        check_sliding_rebase<tally::SlidingWindowLimiter<std::uint16_t, 2>>(pool[k % 3], pool[(k + 1) % 3], seed++);
}

TEST_CASE("SlidingWindowLimiter: a change up and a change down", "[set_quota][sliding_window]") {
    // 11 slots: buckets of 100 ms for a 1 s window, 200 ms for 2 s.
    tally::SlidingWindowLimiter<> lim(Quota::per_second(10));
    for (int i = 0; i < 6; ++i) REQUIRE(lim.allow(10 * kSec + 50 * kMs));  // bucket [10.0, 10.1)
    lim.set_quota(Quota::per(20, 2s), 10'050 * kMs);
    // The 6 land in the new bucket holding 10.0999 s: [10.0, 10.2).
    CHECK(lim.try_acquire(10'050 * kMs, 0).remaining == 14);
    CHECK(lim.try_acquire(11 * kSec, 0).remaining == 14);
    {
        auto later = lim;  // (a peek advances the ring, so look ahead on a copy)
        CHECK(later.try_acquire(12 * kSec - 1, 0).remaining == 14);
    }
    lim.set_quota(Quota::per_second(4), 11 * kSec);  // down: 6 > 4
    const Decision d = lim.try_acquire(11 * kSec, 1);
    CHECK_FALSE(d.allowed);
    CHECK(d.remaining == 0);
    // The 6 sit at 10.1999 s (the end of their 200 ms bucket), in the new
    // bucket [10.1, 10.2): they weigh fully until 11.1 s and are gone at 11.2 s.
    CHECK(lim.try_acquire(11'100 * kMs, 0).remaining == 0);
    CHECK(lim.try_acquire(11'150 * kMs, 0).remaining == 1);  // half of 6 still weighed in
    CHECK(lim.try_acquire(11'200 * kMs, 0).remaining == 4);
}

TEST_CASE("atomic forms near the end of the clock: set_quota never wraps and admits no more than Gcra",
          "[set_quota][gcra]") {
    constexpr std::uint64_t kMax = ~std::uint64_t{0};
    const Quota pool[] = {Quota::per(1, 1ns), Quota::per(3, 7ns).with_burst(5), Quota::per(1, 2ns).with_burst(40)};
    tally::test::Rng rng(4);
    for (int round = 0; round < 200; ++round) {
        Quota q = pool[rng.below(3)];
        tally::Gcra g(q);
        tally::AtomicGcra a(q);
        tally::AtomicTokenBucket b(q);
        std::uint64_t t = kMax - rng.below(400), got_g = 0, got_a = 0, got_b = 0;
        for (int i = 0; i < 300; ++i) {
            if (rng.below(10) == 0) {
                q = pool[rng.below(3)];
                g.set_quota(q, t);
                a.set_quota(q, t);
                b.set_quota(q, t);
            }
            const std::uint64_t cost = rng.below(3);
            const Decision dg = g.try_acquire(t, cost), da = a.try_acquire(t, cost), db = b.try_acquire(t, cost);
            REQUIRE(da == db);
            REQUIRE(da.remaining <= q.capacity());
            got_g += dg.allowed ? cost : 0;
            got_a += da.allowed ? cost : 0;
            got_b += db.allowed ? cost : 0;
            REQUIRE(got_a <= got_g);
            REQUIRE(got_b == got_a);
            if (t < kMax) t += rng.below(2);
        }
    }
}
