// ConcurrencyLimiter under contention (run under TSan in CI): 2 and 8
// threads share one limiter whose algorithm moves the limit as samples
// arrive. Every permit's in-flight count at its grant must not exceed the
// limit in force then (the limit its admission was checked against,
// limit_at_start()), and that limit must be the one in force: with a limit
// that only falls, no lower than what limit() read after the grant and no
// higher than what it read before the acquire. A shadow count, raised after
// a grant and lowered before the release, never exceeds the largest limit
// the algorithm can set; every success and drop reaches the algorithm (none
// lost, however the folds interleave), and every permit comes back.
#include <tally/limit/concurrency.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <thread>
#include <vector>

#include "catch.hpp"
#include "test_support.hpp"

namespace {

// The limit cycles 1..max as samples arrive, so grants race with changes
// both ways.
struct Cycling {
    struct Options {};
    Cycling() = default;
    explicit Cycling(Options) {}
    static constexpr int max = 16;
    std::uint64_t samples = 0;
    std::uint64_t drops = 0;
    int limit_ = max;
    int on_sample(std::uint64_t, std::uint64_t, int, bool dropped) noexcept {
        ++samples;
        drops += dropped ? 1 : 0;
        limit_ = 1 + static_cast<int>(samples % max);
        return limit_;
    }
    [[nodiscard]] int limit() const noexcept { return limit_; }
};

// The limit falls by one every `step` samples, from max to 1.
struct Falling {
    struct Options {};
    Falling() = default;
    explicit Falling(Options) {}
    static constexpr int max = 48;
    static constexpr std::uint64_t step = 16;
    std::uint64_t samples = 0;
    int limit_ = max;
    int on_sample(std::uint64_t, std::uint64_t, int, bool) noexcept {
        ++samples;
        limit_ = std::max(1, max - static_cast<int>(samples / step));
        return limit_;
    }
    [[nodiscard]] int limit() const noexcept { return limit_; }
};

// Lowest and highest values seen by several threads.
struct Range {
    std::atomic<int> lo{1 << 30}, hi{-(1 << 30)};
    void add(int v) {
        for (int m = lo.load(); v < m && !lo.compare_exchange_weak(m, v);) {
        }
        for (int m = hi.load(); v > m && !hi.compare_exchange_weak(m, v);) {
        }
    }
};

void run_limiter(int threads) {
    tally::ConcurrencyLimiter<Cycling> lim;
    std::atomic<int> live{0}, max_live{0};
    std::atomic<std::uint64_t> verdicts{0}, granted{0};
    std::atomic<bool> bad_start{false}, over_limit{false};
    std::atomic<unsigned> limits_seen{0};  // bit l: some permit was granted under limit l
    const int iters = static_cast<int>(tally::test::big(200'000, 20'000));
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
        ts.emplace_back([&, t] {
            tally::test::Rng rng(static_cast<std::uint64_t>(t) + 1);
            for (int i = 0; i < iters; ++i) {
                auto p = lim.try_acquire(static_cast<std::uint64_t>(i));
                if (!p) continue;
                granted.fetch_add(1, std::memory_order_relaxed);
                const int at = p.inflight_at_start(), limit = p.limit_at_start();
                if (at < 1 || limit < 1 || limit > Cycling::max) bad_start = true;
                if (at > limit) over_limit = true;
                if (limit >= 1 && limit <= Cycling::max) limits_seen.fetch_or(1u << limit, std::memory_order_relaxed);
                const int now = live.fetch_add(1) + 1;
                for (int m = max_live.load(); now > m && !max_live.compare_exchange_weak(m, now);) {
                }
                if (rng.next() % 8 == 0) std::this_thread::yield();
                live.fetch_sub(1);
                switch (rng.next() % 4) {
                    case 0:
                        p.ignore();
                        break;
                    case 1:
                        p.dropped(static_cast<std::uint64_t>(i) + 5);
                        verdicts.fetch_add(1);
                        break;
                    case 2:
                        break;  // destroyed without a verdict: ignored
                    default:
                        p.success(static_cast<std::uint64_t>(i) + 3);
                        verdicts.fetch_add(1);
                        break;
                }
            }
        });
    }
    for (auto& t : ts) t.join();
    CHECK(!bad_start);
    CHECK(!over_limit);
    // The limit moved under the grants: permits were granted under several
    // of the limits 1..16.
    CHECK(std::popcount(limits_seen.load()) >= Cycling::max / 4);
    CHECK(max_live.load() <= Cycling::max);
    CHECK(granted.load() > 0);
    CHECK(lim.inflight() == 0);
    const Cycling alg = lim.algorithm();
    CHECK(alg.samples == verdicts.load());
    CHECK(lim.limit() == alg.limit());
}

void run_falling(int threads) {
    tally::ConcurrencyLimiter<Falling> lim;
    std::atomic<bool> over_limit{false}, stale{false}, bad{false};
    std::atomic<std::uint64_t> verdicts{0};
    Range limits;
    const int iters = static_cast<int>(tally::test::big(100'000, 10'000));
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
        ts.emplace_back([&, t] {
            tally::test::Rng rng(static_cast<std::uint64_t>(t) + 11);
            std::vector<tally::ConcurrencyLimiter<Falling>::Permit> held;
            for (int i = 0; i < iters; ++i) {
                // The limit in force before the acquire and after the grant
                // bracket the one the grant used: limits only fall.
                const int before = lim.limit();
                auto p = lim.try_acquire(static_cast<std::uint64_t>(i));
                const int after = lim.limit();
                if (p) {
                    const int at = p.inflight_at_start(), limit = p.limit_at_start();
                    if (at < 1 || limit < 1 || limit > Falling::max) bad = true;
                    if (at > limit) over_limit = true;
                    if (limit > before || limit < after) stale = true;
                    limits.add(limit);
                    held.push_back(std::move(p));
                }
                // Hold up to 3 permits, so that grants meet a count near the
                // limit; release them in a random order with mixed verdicts.
                while (!held.empty() && (held.size() > 3 || rng.next() % 2 == 0)) {
                    const std::size_t k = static_cast<std::size_t>(rng.next() % held.size());
                    std::swap(held[k], held.back());
                    if (rng.next() % 4 == 0) {
                        held.back().ignore();
                    } else {
                        held.back().success(static_cast<std::uint64_t>(i) + 2);
                        verdicts.fetch_add(1, std::memory_order_relaxed);
                    }
                    held.pop_back();
                }
            }
            for (auto& p : held) {
                p.success(static_cast<std::uint64_t>(iters) + 2);
                verdicts.fetch_add(1, std::memory_order_relaxed);
            }
        });
    }
    for (auto& t : ts) t.join();
    CHECK(!bad);
    CHECK(!over_limit);
    CHECK(!stale);
    // The limit fell through the run: from the top to the bottom.
    CHECK(limits.hi.load() == Falling::max);
    CHECK(limits.lo.load() == 1);
    CHECK(lim.inflight() == 0);
    const Falling alg = lim.algorithm();
    CHECK(alg.samples == verdicts.load());
    CHECK(lim.limit() == 1);
}

}  // namespace

TEST_CASE("ConcurrencyLimiter under 2 and 8 threads never admits more than the limit", "[concurrency][threads]") {
    SECTION("2 threads") {
        run_limiter(2);
    }
    SECTION("8 threads") {
        run_limiter(8);
    }
}

TEST_CASE("ConcurrencyLimiter under 2 and 8 threads: each grant is checked against the limit in force",
          "[concurrency][threads]") {
    SECTION("2 threads") {
        run_falling(2);
    }
    SECTION("8 threads") {
        run_falling(8);
    }
}

TEST_CASE("ConcurrencyLimiter with a fixed limit: the in-flight count never passes it", "[concurrency][threads]") {
    for (int threads : {2, 8}) {
        tally::ConcurrencyLimiter<tally::FixedConcurrency> lim(tally::FixedConcurrency({.limit = 3}));
        std::atomic<int> live{0}, max_live{0};
        const int iters = static_cast<int>(tally::test::big(200'000, 20'000));
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t)
            ts.emplace_back([&] {
                for (int i = 0; i < iters; ++i) {
                    auto p = lim.try_acquire(0);
                    if (!p) continue;
                    const int now = live.fetch_add(1) + 1;
                    for (int m = max_live.load(); now > m && !max_live.compare_exchange_weak(m, now);) {
                    }
                    live.fetch_sub(1);
                    p.success(1);
                }
            });
        for (auto& t : ts) t.join();
        CHECK(max_live.load() <= 3);
        CHECK(max_live.load() >= 1);
        CHECK(lim.inflight() == 0);
    }
}

TEST_CASE("PartitionedConcurrencyLimiter under 8 threads: shares held, borrowing within the limit",
          "[concurrency][threads]") {
    tally::PartitionedConcurrencyLimiter<tally::FixedConcurrency> lim({0.5, 0.25, 0.25},
                                                                      tally::FixedConcurrency({.limit = 8}));
    std::atomic<int> live[3] = {0, 0, 0};
    std::atomic<bool> over{false};
    const int iters = static_cast<int>(tally::test::big(100'000, 10'000));
    std::vector<std::thread> ts;
    for (int t = 0; t < 8; ++t)
        ts.emplace_back([&, t] {
            const std::size_t part = static_cast<std::size_t>(t % 3);
            for (int i = 0; i < iters; ++i) {
                auto p = lim.try_acquire(part, 0);
                if (!p) continue;
                const int mine = live[part].fetch_add(1) + 1;
                // A partition is over its share only by borrowing, which needs
                // total < limit at the grant; its own count can never pass
                // the limit plus nothing: every one of its permits beyond the
                // share was granted under the limit.
                if (mine > 8) over = true;
                live[part].fetch_sub(1);
                p.success(1);
            }
        });
    for (auto& t : ts) t.join();
    CHECK(!over);
    CHECK(lim.inflight() == 0);
    for (std::size_t p = 0; p < 3; ++p) CHECK(lim.inflight(p) == 0);
}

TEST_CASE("acquire_for under 8 threads: every waiter served, never more than the limit in flight",
          "[concurrency][threads]") {
    for (auto order : {tally::WaitOrder::fifo, tally::WaitOrder::lifo}) {
        tally::ConcurrencyLimiter<tally::FixedConcurrency> lim(tally::FixedConcurrency({.limit = 2}), order);
        std::atomic<int> live{0}, max_live{0}, served{0};
        const int per_thread = static_cast<int>(tally::test::big(2000, 300));
        std::vector<std::thread> ts;
        for (int t = 0; t < 8; ++t)
            ts.emplace_back([&] {
                for (int i = 0; i < per_thread; ++i) {
                    auto p = lim.acquire_for(60'000'000'000ULL);
                    if (!p) continue;
                    const int now = live.fetch_add(1) + 1;
                    for (int m = max_live.load(); now > m && !max_live.compare_exchange_weak(m, now);) {
                    }
                    live.fetch_sub(1);
                    served.fetch_add(1);
                    p.success(tally::SteadyClock::now_ns());
                }
            });
        for (auto& t : ts) t.join();
        CHECK(served.load() == 8 * per_thread);
        CHECK(max_live.load() <= 2);
        CHECK(lim.inflight() == 0);
        CHECK(lim.waiters() == 0);
    }
}

TEST_CASE("ConcurrencyLimiter's fold numbers wrap at 2^32 without losing the lock or a sample",
          "[concurrency][threads]") {
    using Core = tally::detail::ConcurrencyCore<Cycling>;
    SECTION("one thread: every release folds at once, across the wrap") {
        Core core(Cycling{}, tally::WaitOrder::fifo, 0xffffffffu - 5);
        for (std::uint64_t i = 1; i <= 12; ++i) {
            const tally::detail::ConcurrencyGrant g = core.try_acquire();
            REQUIRE(g.inflight == 1);
            core.release_sample({i, 1, g.inflight, false});
            // Cycling's limit after i samples: folded by this release, not
            // queued behind a lock that looks held.
            REQUIRE(core.limit() == 1 + static_cast<int>(i % Cycling::max));
            REQUIRE(core.inflight() == 0);
        }
        CHECK(core.algorithm().samples == 12);
    }
    SECTION("2 and 8 threads") {
        for (int threads : {2, 8}) {
            Core core(Cycling{}, tally::WaitOrder::fifo, 0xffffffffu - 20);
            std::atomic<std::uint64_t> verdicts{0};
            std::atomic<bool> over{false};
            const int iters = static_cast<int>(tally::test::big(20'000, 2'000));
            std::vector<std::thread> ts;
            for (int t = 0; t < threads; ++t)
                ts.emplace_back([&, t] {
                    tally::test::Rng rng(static_cast<std::uint64_t>(t) + 101);
                    for (int i = 0; i < iters; ++i) {
                        const tally::detail::ConcurrencyGrant g = core.try_acquire();
                        if (!g.inflight) continue;
                        if (g.inflight > g.limit) over = true;
                        if (rng.next() % 4 == 0) {
                            core.release_ignore();
                        } else {
                            core.release_sample({static_cast<std::uint64_t>(i), 3, g.inflight, rng.next() % 2 == 0});
                            verdicts.fetch_add(1, std::memory_order_relaxed);
                        }
                    }
                });
            for (auto& t : ts) t.join();
            CHECK(!over);
            CHECK(core.inflight() == 0);
            // A fold applies at most 65 samples (its own and a full queue),
            // so more than 65 x 21 samples took more than 21 folds: the
            // numbers wrapped.
            REQUIRE(verdicts.load() > 65 * 21);
            const Cycling alg = core.algorithm();
            CHECK(alg.samples == verdicts.load());
            CHECK(core.limit() == alg.limit());
        }
    }
}
