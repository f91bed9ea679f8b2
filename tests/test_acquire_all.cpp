// acquire_all: all or nothing across several local limiters. The oracle: a
// call is admitted iff every limiter, asked alone at that instant, would
// admit it; then each is charged exactly once, otherwise none is. A naive
// "acquire one by one" helper fails the same check (negative control).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <tuple>

#include "catch.hpp"
#include "tally/limit/acquire_all.hpp"
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

// The bug users report: stop at the first denial, leaving earlier limits charged.
template <class... Ls>
bool naive_acquire_all(std::uint64_t now, std::uint64_t cost, Ls&... ls) {
    return (ls.allow(now, cost) && ...);
}

// What each limiter has at now (a peek on a copy).
template <class L>
Decision peek(const L& l, std::uint64_t now) {
    L c = l;
    return c.try_acquire(now, 0);
}

using User = tally::Gcra;
using Tenant = tally::FixedWindowLimiter;
using Global = tally::SlidingWindowLimiter<>;
using Exact = tally::SlidingLogLimiter;

}  // namespace

TEST_CASE("acquire_all equals the all-or-nothing oracle on random streams", "[acquire_all]") {
    const Quota qu = Quota::per(5, 1000ns).with_burst(3), qt = Quota::per(12, 2000ns), qg = Quota::per(20, 1500ns),
                qe = Quota::per(9, 900ns);
    User u(qu);
    Tenant te(qt);
    Global g(qg);
    Exact e(qe);
    // The oracle: shadows charged only when every one admits on its own.
    User su(qu);
    Tenant st(qt);
    Global sg(qg);
    Exact se(qe);
    tally::test::Rng rng(3);
    std::uint64_t t = 100'000, admitted = 0, denied = 0;
    for (std::size_t i = 0; i < tally::test::big(30000, 5000); ++i) {
        t += rng.below(3) == 0 ? rng.below(600) : rng.below(40);
        const std::uint64_t cost = rng.below(8) == 0 ? rng.below(14) : 1 + rng.below(2);
        const Decision du = peek(su, t), dt = peek(st, t), dg = peek(sg, t), de = peek(se, t);
        User cu = su;
        Tenant ct = st;
        Global cg = sg;
        Exact ce = se;
        const Decision au = cu.try_acquire(t, cost), at = ct.try_acquire(t, cost), ag = cg.try_acquire(t, cost),
                       ae = ce.try_acquire(t, cost);
        const bool all = au.allowed && at.allowed && ag.allowed && ae.allowed;
        const Decision d = tally::acquire_all(t, cost, u, te, g, e);
        REQUIRE(d.allowed == all);
        if (all) {
            ++admitted;
            su = cu, st = ct, sg = cg, se = ce;
            REQUIRE(d.remaining == std::min({au.remaining, at.remaining, ag.remaining, ae.remaining}));
            REQUIRE(d.reset_after_ns ==
                    std::max({au.reset_after_ns, at.reset_after_ns, ag.reset_after_ns, ae.reset_after_ns}));
            REQUIRE(d.retry_after_ns == 0);
        } else {
            ++denied;
            std::uint64_t retry = 0;
            for (const Decision& x : {au, at, ag, ae})
                if (!x.allowed && x.retry_after_ns > retry) retry = x.retry_after_ns;
            REQUIRE(d.retry_after_ns == retry);
            REQUIRE(d.remaining == std::min({du.remaining, dt.remaining, dg.remaining, de.remaining}));
            REQUIRE(d.reset_after_ns ==
                    std::max({du.reset_after_ns, dt.reset_after_ns, dg.reset_after_ns, de.reset_after_ns}));
        }
        // Every limiter is exactly its shadow: charged once when admitted, not at all when denied.
        REQUIRE(peek(u, t) == peek(su, t));
        REQUIRE(peek(te, t) == peek(st, t));
        REQUIRE(peek(g, t) == peek(sg, t));
        REQUIRE(peek(e, t) == peek(se, t));
        REQUIRE(e.count(t) == se.count(t));
    }
    CHECK(admitted > 1000);
    CHECK(denied > 1000);
}

TEST_CASE("acquire_all: retry_after_ns is exact for the combination", "[acquire_all]") {
    const Quota qu = Quota::per(5, 1000ns).with_burst(3), qt = Quota::per(12, 2000ns), qg = Quota::per(20, 1500ns);
    tally::test::Rng rng(8);
    int checked = 0;
    for (int round = 0; round < 3000; ++round) {
        User u(qu);
        Tenant te(qt);
        Global g(qg);
        std::uint64_t t = 10'000 + rng.below(5000);
        const int n = static_cast<int>(rng.below(40));
        for (int i = 0; i < n; ++i) {
            t += rng.below(80);
            (void)tally::acquire_all(t, 1 + rng.below(2), u, te, g);
        }
        const std::uint64_t cost = 1 + rng.below(3);
        const Decision d = tally::acquire_all(t, cost, u, te, g);
        if (d.allowed || d.retry_after_ns == tally::never) continue;
        ++checked;
        // No other traffic: at now + retry it passes, one nanosecond earlier it does not.
        User u1 = u, u2 = u;
        Tenant t1 = te, t2 = te;
        Global g1 = g, g2 = g;
        INFO("round " << round << " retry " << d.retry_after_ns);
        REQUIRE_FALSE(tally::acquire_all(t + d.retry_after_ns - 1, cost, u1, t1, g1).allowed);
        REQUIRE(tally::acquire_all(t + d.retry_after_ns, cost, u2, t2, g2).allowed);
    }
    CHECK(checked > 300);
}

TEST_CASE("acquire_all: a denied call charges no limiter; the naive way does (negative control)", "[acquire_all]") {
    const std::uint64_t t = 1'000'000'000;
    // per user 10/s has room; per tenant 2/s is spent.
    tally::Gcra user(Quota::per_second(10)), tenant(Quota::per_second(2));
    REQUIRE(tenant.allow(t, 2));
    const Decision before = peek(user, t);
    const Decision d = tally::acquire_all(t, 1, user, tenant);
    CHECK_FALSE(d.allowed);
    CHECK(d.remaining == 0);                   // the tightest: the tenant has none
    CHECK(d.retry_after_ns == 500'000'000);    // the tenant's, one unit at 2/s
    CHECK(peek(user, t) == before);            // the user limit was not charged
    CHECK(peek(user, t).remaining == 10);
    // The naive way charges the user limit for a request that was refused.
    tally::Gcra user2(Quota::per_second(10)), tenant2(Quota::per_second(2));
    REQUIRE(tenant2.allow(t, 2));
    CHECK_FALSE(naive_acquire_all(t, 1, user2, tenant2));
    CHECK(peek(user2, t).remaining == 9);  // the bug: charged though denied
    CHECK(peek(user2, t) != before);
}

TEST_CASE("acquire_all: admitted charges every limiter exactly once", "[acquire_all]") {
    const std::uint64_t t = 1'000'000'000;
    tally::Gcra a(Quota::per_second(10));
    tally::TokenBucket b(Quota::per_second(4));
    tally::FixedWindowLimiter c(Quota::per_second(6));
    const Decision d = tally::acquire_all(t, 2, a, b, c);
    CHECK(d.allowed);
    CHECK(d.remaining == 2);  // min(8, 2, 4)
    CHECK(peek(a, t).remaining == 8);
    CHECK(b.tokens(t) == 2);
    CHECK(peek(c, t).remaining == 4);
    // One limiter alone works as itself; cost 0 is a peek that charges nothing.
    tally::Gcra solo(Quota::per_second(3));
    CHECK(tally::acquire_all(t, 3, solo).allowed);
    CHECK_FALSE(tally::acquire_all(t, 1, solo).allowed);
    const std::uint64_t reset = std::max({peek(a, t).reset_after_ns, peek(b, t).reset_after_ns, peek(c, t).reset_after_ns});
    CHECK(reset == 1'000'000'000);  // the fixed window's boundary
    CHECK(tally::acquire_all(t, 0, a, b, c) == Decision{true, 2, 0, reset});
    CHECK(peek(a, t).remaining == 8);
    // A cost above one limit can never pass.
    CHECK(tally::acquire_all(t, 5, a, b, c).retry_after_ns == tally::never);
}
