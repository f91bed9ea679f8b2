// AtomicGcra / AtomicTokenBucket under contention (run under TSan in CI):
// N threads share one limiter and one clock, with some timestamps stale. For
// every pair of admitted timestamps s <= e, the admissions in [s, e] must not
// exceed burst + index(e) - index(s) (index(t) = floor(t * limit / window)):
// the bound that holds for any serial order, so any lost update or torn CAS
// shows up as an excess.
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

TEST_CASE("the excess checker detects an over-admission (negative control)", "[concurrent]") {
    const Quota q = Quota::per(1, std::chrono::nanoseconds(4)).with_burst(3);
    CHECK(max_excess({100, 100, 100}, q) == 3);
    CHECK(max_excess({100, 100, 100, 100}, q) == 4);            // b + 1 at one instant
    CHECK(max_excess({100, 100, 100, 104, 108}, q) == 3);       // then one per T
    CHECK(max_excess({100, 100, 100, 104, 105, 108}, q) == 4);  // one too many
    CHECK(max_excess({0, 1000, 1000, 1000}, q) == 3);
}
