// AtomicGcra / AtomicTokenBucket under contention (run under TSan in CI):
// N threads share one limiter and one clock, with some timestamps stale. For
// every pair of admitted timestamps s <= e, the admissions in [s, e] must not
// exceed burst + index(e) - index(s) (index(t) = floor(t * limit / window)):
// the bound that holds for any serial order, so any lost update or torn CAS
// shows up as an excess.
//
// set_quota under contention: threads hammer while another thread changes the
// quota. Units spent stay spent across a change, so whatever the order, the
// admitted total is at most the largest burst used plus what each quota
// re-emits while it is in effect; at one instant (no re-emission) it is at
// most the largest burst, and the limiter's final debt equals the total.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <cstdint>
#include <thread>
#include <vector>

#include "catch.hpp"
#include "tally/limit/gcra.hpp"
#include "tally/limit/token_bucket.hpp"
#include "test_support.hpp"

using tally::Quota;

namespace {

std::int64_t grid_index(const Quota& q, std::uint64_t t) {
    __extension__ typedef unsigned __int128 u128;
    return static_cast<std::int64_t>(u128(t) * q.limit / q.window_ns);
}

// max over s <= e of (admissions in [s, e]) - (index(e) - index(s)), for
// sorted unit-cost admission times, in one pass. The quota allows burst.
std::int64_t max_excess(const std::vector<std::uint64_t>& all, const Quota& q) {
    std::int64_t best = std::numeric_limits<std::int64_t>::min(), worst = best;
    std::size_t first = 0;
    for (std::size_t p = 0; p < all.size(); ++p) {
        if (p == 0 || all[p] != all[p - 1]) first = p;
        best = std::max(best, grid_index(q, all[p]) - static_cast<std::int64_t>(first));
        if (p + 1 == all.size() || all[p + 1] != all[p])
            worst = std::max(worst, static_cast<std::int64_t>(p) - grid_index(q, all[p]) + best + 1);
    }
    return worst;
}

template <class A>
void hammer(const Quota& q, unsigned threads, std::uint64_t seed) {
    A lim(q);
    const std::uint64_t start = 1'000'000'000;
    std::atomic<std::uint64_t> clock{start};
    const std::size_t iters = tally::test::big(200000, 20000);
    std::vector<std::vector<std::uint64_t>> admitted(threads);
    std::vector<std::thread> pool;
    for (unsigned i = 0; i < threads; ++i) {
        pool.emplace_back([&, i] {
            tally::test::Rng rng(seed + i);
            auto& mine = admitted[i];
            mine.reserve(iters / 2);
            for (std::size_t k = 0; k < iters; ++k) {
                std::uint64_t now = clock.fetch_add(1, std::memory_order_relaxed);
                if (rng.below(4) == 0) now -= rng.below(8);  // a stale reading
                if (lim.allow(now)) mine.push_back(now);
            }
        });
    }
    for (auto& th : pool) th.join();
    std::vector<std::uint64_t> all;
    for (const auto& v : admitted) all.insert(all.end(), v.begin(), v.end());
    std::sort(all.begin(), all.end());
    const std::int64_t worst = max_excess(all, q);
    const auto b = static_cast<std::int64_t>(q.capacity());
    INFO("threads " << threads << " admitted " << all.size() << " worst excess " << worst);
    CHECK(worst <= b);
    const std::int64_t supply = grid_index(q, clock.load()) - grid_index(q, start);
    CHECK(static_cast<std::int64_t>(all.size()) <= supply + b);
    CHECK(static_cast<std::int64_t>(all.size()) >= supply / 2);  // not vacuous: most tokens are taken
}

}  // namespace

TEST_CASE("AtomicGcra: N threads never admit more than the quota", "[concurrent][gcra]") {
    const Quota q = Quota::per(1, std::chrono::nanoseconds(4)).with_burst(16);
    hammer<tally::AtomicGcra>(q, 2, 1);
    hammer<tally::AtomicGcra>(q, 4, 2);
    hammer<tally::AtomicGcra>(Quota::per(3, std::chrono::nanoseconds(10)), 4, 3);
}

TEST_CASE("AtomicTokenBucket: N threads never admit more than the quota", "[concurrent][token_bucket]") {
    const Quota q = Quota::per(1, std::chrono::nanoseconds(4)).with_burst(16);
    hammer<tally::AtomicTokenBucket>(q, 2, 4);
    hammer<tally::AtomicTokenBucket>(q, 4, 5);
    hammer<tally::AtomicTokenBucket>(Quota::per(7, std::chrono::nanoseconds(30)).with_burst(3), 4, 6);
}

namespace {

// Threads at one instant: no unit is re-emitted, so the debt only grows by
// admissions. Quotas with very different rates make a decision taken with
// one quota's grid on a word of another's admit far too much.
template <class A>
void quota_flips_at_one_instant(std::uint64_t seed) {
    const Quota qs[] = {Quota::per_second(1000).with_burst(40), Quota::per_second(10).with_burst(8),
                        Quota::per_minute(7).with_burst(25), Quota::per(3, std::chrono::nanoseconds(10))};
    const std::uint64_t t = 7'000'000'000'123;
    A lim(qs[0]);
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> total{0}, attempts{0};
    const unsigned threads = 4;
    const std::size_t changes = tally::test::big(400, 100);
    std::vector<std::thread> pool;
    for (unsigned i = 0; i < threads; ++i) {
        pool.emplace_back([&, i] {
            tally::test::Rng rng(seed + i);
            std::uint64_t mine = 0;
            while (!done.load(std::memory_order_relaxed)) {
                const std::uint64_t cost = 1 + rng.below(2);
                if (lim.allow(t, cost)) mine += cost;
                attempts.fetch_add(1, std::memory_order_relaxed);
            }
            total.fetch_add(mine, std::memory_order_relaxed);
        });
    }
    std::size_t last = 0;
    tally::test::Rng rng(seed + 100);
    // Pace the changes on the workers' progress: a few attempts between two.
    auto wait_for = [&](std::uint64_t n) {
        for (int spin = 0; attempts.load(std::memory_order_relaxed) < n; ++spin)
            if (spin % 64 == 63) std::this_thread::yield();
    };
    wait_for(100);
    for (std::size_t k = 0; k < changes; ++k) {
        last = rng.below(4);
        lim.set_quota(qs[last], t);
        wait_for(attempts.load(std::memory_order_relaxed) + 1 + rng.below(16));
    }
    done.store(true);
    for (auto& th : pool) th.join();
    const std::uint64_t admitted = total.load();
    const std::uint64_t cap = qs[last].capacity();
    INFO("admitted " << admitted << " final burst " << cap);
    CHECK(admitted <= 40);  // the largest burst
    CHECK(admitted > 0);
    CHECK(lim.quota() == qs[last]);
    // Every admitted unit is still owed: nothing was lost or minted.
    CHECK(lim.try_acquire(t, 0).remaining == (admitted >= cap ? 0 : cap - admitted));
    lim.set_quota(qs[0], t);
    CHECK(lim.try_acquire(t, 0).remaining == 40 - admitted);
}

// Time moves on: every attempt advances the shared clock by 1 ns, and a
// changer thread sets a random quota at the clock's current value. Workers'
// times may run ahead of a change (they decided under the old quota at a
// later time); the rebase then reads the debt at the change time, which only
// makes the bound tighter, so it holds with segments cut at the change times.
template <class A>
void quota_changes_over_time(std::uint64_t seed) {
    const Quota qs[] = {Quota::per(1, std::chrono::nanoseconds(40)).with_burst(12),
                        Quota::per(1, std::chrono::nanoseconds(100)).with_burst(4),
                        Quota::per(3, std::chrono::nanoseconds(70)).with_burst(20)};
    const std::uint64_t start = 1'000'000'000;
    A lim(qs[0]);
    REQUIRE(lim.allow(start));  // not fresh: every change below carries a debt
    std::atomic<std::uint64_t> clock{start + 1};
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> total{1};
    const unsigned threads = 3;
    std::vector<std::thread> pool;
    for (unsigned i = 0; i < threads; ++i) {
        pool.emplace_back([&] {
            std::uint64_t mine = 0;
            while (!done.load(std::memory_order_relaxed))
                if (lim.allow(clock.fetch_add(1, std::memory_order_relaxed))) ++mine;
            total.fetch_add(mine, std::memory_order_relaxed);
        });
    }
    struct Change {
        std::uint64_t at;
        std::size_t quota;
    };
    std::vector<Change> changes{{start, 0}};
    tally::test::Rng rng(seed);
    for (std::size_t k = tally::test::big(120, 40); k > 0; --k) {
        const std::size_t q = rng.below(3);
        const std::uint64_t at = clock.load(std::memory_order_relaxed);
        lim.set_quota(qs[q], at);
        changes.push_back({at, q});
        // Let the workers run for a while (a few hundred clock ticks).
        const std::uint64_t until = at + 50 + rng.below(200);
        for (int spin = 0; clock.load(std::memory_order_relaxed) < until; ++spin)
            if (spin % 64 == 63) std::this_thread::yield();
    }
    done.store(true);
    for (auto& th : pool) th.join();
    const std::uint64_t end = clock.load();
    std::int64_t supply = 0;  // units each quota re-emits while in effect
    for (std::size_t k = 0; k < changes.size(); ++k) {
        const std::uint64_t to = k + 1 < changes.size() ? changes[k + 1].at : end;
        const Quota& q = qs[changes[k].quota];
        supply += grid_index(q, to) - grid_index(q, changes[k].at);
    }
    const auto admitted = static_cast<std::int64_t>(total.load());
    INFO("admitted " << admitted << " supply " << supply << " changes " << changes.size());
    CHECK(admitted <= supply + 20);  // the largest burst
    CHECK(admitted >= supply / 4);   // not vacuous
}

}  // namespace

TEST_CASE("AtomicGcra / AtomicTokenBucket: set_quota at one instant under contention", "[concurrent][set_quota]") {
    quota_flips_at_one_instant<tally::AtomicGcra>(11);
    quota_flips_at_one_instant<tally::AtomicTokenBucket>(12);
}

TEST_CASE("AtomicGcra / AtomicTokenBucket: set_quota while time moves, under contention", "[concurrent][set_quota]") {
    quota_changes_over_time<tally::AtomicGcra>(21);
    quota_changes_over_time<tally::AtomicTokenBucket>(22);
}

TEST_CASE("the excess checker detects an over-admission (negative control)", "[concurrent]") {
    const Quota q = Quota::per(1, std::chrono::nanoseconds(4)).with_burst(3);
    CHECK(max_excess({100, 100, 100}, q) == 3);
    CHECK(max_excess({100, 100, 100, 100}, q) == 4);            // b + 1 at one instant
    CHECK(max_excess({100, 100, 100, 104, 108}, q) == 3);       // then one per T
    CHECK(max_excess({100, 100, 100, 104, 105, 108}, q) == 4);  // one too many
    CHECK(max_excess({0, 1000, 1000, 1000}, q) == 3);
}
