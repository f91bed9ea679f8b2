// Gcra and AtomicGcra: against a textbook GCRA (virtual scheduling) written
// independently in scaled 128-bit time, burst tau = T*(b-1), exact long-run
// rate, extremes, and time going backwards.
#include <cstdint>
#include <limits>
#include <vector>

#include "catch.hpp"
#include "tally/limit/gcra.hpp"
#include "test_support.hpp"

using tally::Decision;
using tally::Quota;

namespace {

__extension__ typedef unsigned __int128 u128;
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

// ITU-T I.371 virtual scheduling, in time units of 1/limit ns so that the
// emission interval T = window_ns/limit is the integer window_ns. Arrival
// times are read on the emission grid (floor(t/T)*T), as Gcra documents.
struct TextbookGcra {
    u128 limit, window, b;
    u128 tat = 0;  // scaled
    explicit TextbookGcra(const Quota& q) : limit(q.limit), window(q.window_ns), b(q.capacity()) {}
    bool conform(std::uint64_t t, std::uint64_t cost) {
        const u128 T = window;
        const u128 a = (u128(t) * limit / window) * T;  // arrival on the grid, scaled
        const u128 tau = (b - 1) * T;
        if (cost == 0) return true;
        if (cost > b) return false;
        const u128 start = tat > a ? tat : a;
        if (start + u128(cost) * T - a > tau + T) return false;  // TAT' - t <= tau + T
        tat = start + u128(cost) * T;
        return true;
    }
};

u128 grid(const Quota& q, std::uint64_t t) { return u128(t) * q.limit / q.window_ns; }

}  // namespace

TEST_CASE("Gcra matches textbook GCRA on random streams", "[gcra]") {
    const Quota quotas[] = {Quota::per_second(3),
                            Quota::per_second(100).with_burst(7),
                            Quota::per(7, std::chrono::nanoseconds(1000)).with_burst(20),
                            Quota::per_day(std::uint64_t{1} << 40),
                            Quota{std::uint64_t{1} << 40, std::uint64_t{1} << 62, std::uint64_t{1} << 40},
                            Quota{999'983, 1'000'000'007, 13}};
    std::uint64_t seed = 100;
    for (const Quota& q : quotas) {
        INFO("quota " << q.limit << "/" << q.window_ns << " burst " << q.burst);
        tally::Gcra g(q);
        TextbookGcra ref(q);
        tally::test::Rng rng(seed++);
        const std::uint64_t T = q.window_ns / q.limit + 1;
        std::uint64_t t = rng.below(std::uint64_t{1} << 62);
        const std::size_t steps = tally::test::big(20000, 3000);
        for (std::size_t i = 0; i < steps; ++i) {
            t += rng.below(3) == 0 ? rng.below(T * 4) : rng.below(T / 2 + 1);
            const std::uint64_t cap = q.capacity();
            const std::uint64_t cost = rng.below(8) == 0 ? rng.below(cap + 2) : 1 + rng.below(3);
            const bool want = ref.conform(t, cost);
            const Decision d = g.try_acquire(t, cost);
            REQUIRE(d.allowed == want);
            REQUIRE(u128(g.state().tat) * q.window_ns == ref.tat);
        }
    }
}

TEST_CASE("Gcra burst: b at one instant after idle, tau = T*(b-1)", "[gcra]") {
    // T = 100 ms, b = 5, tau = 400 ms.
    tally::Gcra g(Quota::per_second(10).with_burst(5));
    const std::uint64_t t0 = 50'000'000'000;  // on the grid (multiple of T)
    for (int i = 0; i < 5; ++i) {
        const Decision d = g.try_acquire(t0);
        REQUIRE(d.allowed);
        CHECK(d.remaining == static_cast<std::uint64_t>(4 - i));
        CHECK(d.reset_after_ns == 100'000'000ull * static_cast<std::uint64_t>(i + 1));
    }
    const Decision d = g.try_acquire(t0);
    CHECK_FALSE(d.allowed);
    CHECK(d.retry_after_ns == 100'000'000);
    // TAT = t0 + 5T: exactly tau + T ahead of t0.
    CHECK(u128(g.state().tat) * 100'000'000 == u128(t0) + 500'000'000);
    // Then one per T; a cost-2 request waits for two.
    CHECK(g.allow(t0 + 100'000'000));
    CHECK_FALSE(g.allow(t0 + 199'999'999));
    CHECK(g.try_acquire(t0 + 200'000'000, 2).retry_after_ns == 100'000'000);
    CHECK(g.try_acquire(t0 + 300'000'000, 2).allowed);
    // Burst larger than the per-window limit.
    tally::Gcra big(Quota::per_second(2).with_burst(50));
    int n = 0;
    while (big.allow(kMax / 2)) ++n;
    CHECK(n == 50);
}

TEST_CASE("Gcra long-run rate is exact (no drift)", "[gcra]") {
    // 3 per second: T = 333,333,333.3 ns. Greedy demand for 1000 s admits
    // exactly b + index(end) - index(start).
    for (const Quota& q : {Quota::per_second(3), Quota::per_minute(7).with_burst(2), Quota{977, 1'000'003, 0}}) {
        tally::Gcra g(q);
        tally::test::Rng rng(5);
        const std::uint64_t start = 123'456'789;
        const std::uint64_t step = q.window_ns / q.limit / 2;
        std::uint64_t t = start, admitted = 0;
        while (g.allow(start)) ++admitted;
        CHECK(admitted == q.capacity());
        for (int i = 0; i < 6000; ++i) {
            t += 1 + rng.below(step);
            while (g.allow(t)) ++admitted;
        }
        CHECK(u128(admitted) == q.capacity() + grid(q, t) - grid(q, start));
        CHECK(grid(q, t) - grid(q, start) > 1000);
    }
}

TEST_CASE("Gcra extremes: limit 2^40, windows of years, the end of the clock", "[gcra]") {
    const std::uint64_t l = std::uint64_t{1} << 40;
    {
        const Quota q{l, std::uint64_t{1} << 62, l};  // T = 2^22 ns, window 146 years
        tally::Gcra g(q);
        const std::uint64_t t = (std::uint64_t{1} << 63) + 12345;
        const Decision d = g.try_acquire(t, l);
        CHECK(d.allowed);
        CHECK(d.remaining == 0);
        // Full again after 2^40 grid instants.
        CHECK(d.reset_after_ns == ((t >> 22) + l) * (std::uint64_t{1} << 22) - t);
        const Decision e = g.try_acquire(t, 1);
        CHECK_FALSE(e.allowed);
        CHECK(e.retry_after_ns == ((t >> 22) + 1) * (std::uint64_t{1} << 22) - t);
        CHECK(g.allow(t + e.retry_after_ns));
    }
    {
        const Quota q{l, l, 0};  // one per nanosecond, index(t) == t
        tally::Gcra g(q);
        CHECK(g.try_acquire(kMax - l, l).allowed);  // index reaches 2^64 - 1
        CHECK_FALSE(g.try_acquire(kMax, 1).allowed);
        const Decision d = g.try_acquire(kMax, 1);
        CHECK(d.retry_after_ns == tally::never);  // past the end of the clock: denied, not wrapped
        CHECK(d.remaining == 0);
    }
    {
        const Quota q{1, std::uint64_t{1} << 62, 0};  // one per 146 years
        tally::Gcra g(q);
        CHECK(g.allow(5));
        const Decision d = g.try_acquire(6);
        CHECK(d.retry_after_ns == (std::uint64_t{1} << 62) - 6);
        CHECK(g.allow(std::uint64_t{1} << 62));
    }
}

TEST_CASE("Gcra: time going backwards never moves TAT back nor mints", "[gcra][clock]") {
    const Quota q = Quota::per(10, std::chrono::nanoseconds(1000)).with_burst(4);
    tally::Gcra g(q);
    tally::test::Rng rng(9);
    std::uint64_t t = 100'000, prev_tat = 0;
    for (int i = 0; i < 20000; ++i) {
        t += rng.below(60);
        const std::uint64_t when = rng.below(4) == 0 ? t - rng.below(5000) : t;
        const std::uint64_t cost = rng.below(3);
        tally::Gcra twin = g;
        const Decision stale = twin.try_acquire(when, 0);
        const Decision fresh = tally::Gcra(g).try_acquire(t, 0);
        REQUIRE(stale.remaining <= fresh.remaining);
        (void)g.try_acquire(when, cost);
        REQUIRE(g.state().tat >= prev_tat);
        prev_tat = g.state().tat;
    }
    // The classic bug: a late request must not re-open capacity already
    // refilled up to the origin.
    tally::Gcra h(Quota::per(1, std::chrono::nanoseconds(100)).with_burst(1));
    CHECK(h.allow(1000));
    CHECK_FALSE(h.allow(950));  // 50 ns earlier: the token was not there yet
    CHECK_FALSE(h.allow(1050));
    CHECK(h.allow(1100));
}

TEST_CASE("AtomicGcra serial decisions equal Gcra's", "[gcra][atomic]") {
    const Quota q = Quota::per(5, std::chrono::nanoseconds(700)).with_burst(3);
    tally::Gcra g(q);
    tally::AtomicGcra a(q);
    tally::test::Rng rng(21);
    std::uint64_t t = 1;
    for (int i = 0; i < 20000; ++i) {
        t += rng.below(200);
        const std::uint64_t when = rng.below(5) == 0 ? t - (t > 300 ? rng.below(300) : 0) : t;
        const std::uint64_t cost = rng.below(10) == 0 ? rng.below(8) : rng.below(2) + 1;
        REQUIRE(a.try_acquire(when, cost) == g.try_acquire(when, cost));
        REQUIRE(a.state().tat == g.state().tat);
    }
    CHECK(a.quota() == q);
}
