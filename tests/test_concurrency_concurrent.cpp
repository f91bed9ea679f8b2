// ConcurrencyLimiter under contention (run under TSan in CI): 2 and 8
// threads share one limiter whose algorithm moves the limit on every sample.
// A shadow count, raised after a grant and lowered before the release, must
// never exceed the largest limit the algorithm can set, nor the in-flight
// count at a grant the limit in force; every success and drop reaches the
// algorithm (none lost, however the folds interleave), and every permit comes
// back at the end.
#include <tally/limit/concurrency.hpp>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "catch.hpp"
#include "test_support.hpp"

namespace {

// The limit cycles 1..max as samples arrive, so grants race with changes.
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

void run_limiter(int threads) {
    tally::ConcurrencyLimiter<Cycling> lim;
    std::atomic<int> live{0}, max_live{0};
    std::atomic<std::uint64_t> verdicts{0}, granted{0};
    std::atomic<bool> bad_start{false};
    const int iters = static_cast<int>(tally::test::big(200'000, 20'000));
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
        ts.emplace_back([&, t] {
            tally::test::Rng rng(static_cast<std::uint64_t>(t) + 1);
            for (int i = 0; i < iters; ++i) {
                auto p = lim.try_acquire(static_cast<std::uint64_t>(i));
                if (!p) continue;
                granted.fetch_add(1, std::memory_order_relaxed);
                if (p.inflight_at_start() > Cycling::max || p.inflight_at_start() < 1) bad_start = true;
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
    CHECK(max_live.load() <= Cycling::max);
    CHECK(granted.load() > 0);
    CHECK(lim.inflight() == 0);
    const Cycling alg = lim.algorithm();
    CHECK(alg.samples == verdicts.load());
    CHECK(lim.limit() == alg.limit());
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
