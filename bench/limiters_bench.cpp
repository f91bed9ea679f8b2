// try_acquire cost of each limiter (single thread, caller-supplied now), the
// atomic variants uncontended and with 2 threads, and a std::mutex-guarded
// TokenBucket as the same-run baseline. Also: the price of a runtime quota in
// the atomic forms (against a fixed-quota CAS word), DryRun's overhead, and
// acquire_all over three limiters against three separate calls.
//
// The clock advances 500 ns per call against 1 unit per 1000 ns, so about
// half the calls are admitted (both paths are measured).
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>

#include "bench_support.hpp"
#include "tally/limit/acquire_all.hpp"
#include "tally/limit/dry_run.hpp"
#include "tally/limit/fixed_window.hpp"
#include "tally/limit/gcra.hpp"
#include "tally/limit/sliding_log.hpp"
#include "tally/limit/sliding_window.hpp"
#include "tally/limit/token_bucket.hpp"

namespace {

const tally::Quota kQuota = tally::Quota::per(1000, std::chrono::milliseconds(1)).with_burst(100);
constexpr std::uint64_t kStep = 500;
// scripts/bench sets TALLY_BENCH_QUICK=1 for the headline run (~15 s budget).
const double kMinTime = tally::bench::quick() ? 0.05 : 0.5;

template <class L>
void BM_single(benchmark::State& state) {
    L lim(kQuota);
    std::uint64_t now = 1'000'000'000, admitted = 0;
    for (auto _ : state) {
        const tally::Decision d = lim.try_acquire(now);
        admitted += d.allowed;
        benchmark::DoNotOptimize(d);
        now += kStep;
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["admitted"] = static_cast<double>(admitted) / static_cast<double>(state.iterations());
}

template <class L>
void BM_allow(benchmark::State& state) {
    L lim(kQuota);
    std::uint64_t now = 1'000'000'000;
    for (auto _ : state) {
        benchmark::DoNotOptimize(lim.allow(now));
        now += kStep;
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

// One shared limiter per type; each thread runs its own clock (a shared
// clock would dominate), so threads' timestamps interleave as on a server.
template <class A>
A& shared() {
    static A a(kQuota);
    return a;
}

template <class A>
void BM_shared(benchmark::State& state) {
    A& lim = shared<A>();
    std::uint64_t now = 1'000'000'000 + static_cast<std::uint64_t>(state.thread_index()) * 3;
    for (auto _ : state) {
        benchmark::DoNotOptimize(lim.try_acquire(now));
        now += kStep * static_cast<std::uint64_t>(state.threads());
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

struct MutexTokenBucket {
    explicit MutexTokenBucket(const tally::Quota& q) : tb(q) {}
    tally::Decision try_acquire(std::uint64_t now) {
        std::lock_guard<std::mutex> lock(m);
        return tb.try_acquire(now);
    }
    std::mutex m;
    tally::TokenBucket tb;
};

void BM_mutex_token_bucket_baseline(benchmark::State& state) { BM_shared<MutexTokenBucket>(state); }

// Baseline for AtomicGcra: the same GCRA on one CAS word with the quota fixed
// at construction (no sequence counter, no policy loads).
struct FixedQuotaAtomicGcra {
    explicit FixedQuotaAtomicGcra(const tally::Quota& q) : grid(q) {}
    tally::Decision try_acquire(std::uint64_t now) noexcept {
        std::uint64_t tat = word.load(std::memory_order_relaxed);
        for (;;) {
            std::uint64_t next;
            const tally::Decision d = grid.gcra(tat, now, 1, next);
            if (next == tat) return d;
            if (word.compare_exchange_weak(tat, next, std::memory_order_relaxed, std::memory_order_relaxed)) return d;
        }
    }
    alignas(128) std::atomic<std::uint64_t> word{0};
    tally::EmissionGrid grid;
};

void BM_atomic_gcra_fixed_quota_baseline(benchmark::State& state) { BM_shared<FixedQuotaAtomicGcra>(state); }

// Three limits per request: acquire_all against three separate try_acquire
// calls (which do not give all-or-nothing).
void BM_acquire_all_3(benchmark::State& state) {
    tally::Gcra a(kQuota);
    tally::FixedWindowLimiter b(kQuota);
    tally::SlidingWindowLimiter<> c(kQuota);
    std::uint64_t now = 1'000'000'000;
    for (auto _ : state) {
        benchmark::DoNotOptimize(tally::acquire_all(now, 1, a, b, c));
        now += kStep;
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void BM_acquire_all_3_as_three_calls_baseline(benchmark::State& state) {
    tally::Gcra a(kQuota);
    tally::FixedWindowLimiter b(kQuota);
    tally::SlidingWindowLimiter<> c(kQuota);
    std::uint64_t now = 1'000'000'000;
    for (auto _ : state) {
        benchmark::DoNotOptimize(a.try_acquire(now));
        benchmark::DoNotOptimize(b.try_acquire(now));
        benchmark::DoNotOptimize(c.try_acquire(now));
        now += kStep;
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

}  // namespace

BENCHMARK_TEMPLATE(BM_single, tally::FixedWindowLimiter)->Name("BM_fixed_window")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_single, tally::SlidingWindowLimiter<>)->Name("BM_sliding_window_11")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_single, tally::SlidingWindowLimiter<std::uint32_t, 2>)->Name("BM_sliding_window_2")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_single, tally::SlidingLogLimiter)->Name("BM_sliding_log")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_single, tally::TokenBucket)->Name("BM_token_bucket")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_single, tally::Gcra)->Name("BM_gcra")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_allow, tally::FixedWindowLimiter)->Name("BM_fixed_window_allow")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_allow, tally::SlidingWindowLimiter<>)->Name("BM_sliding_window_11_allow")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_allow, tally::SlidingWindowLimiter<std::uint32_t, 2>)->Name("BM_sliding_window_2_allow")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_allow, tally::SlidingLogLimiter)->Name("BM_sliding_log_allow")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_allow, tally::TokenBucket)->Name("BM_token_bucket_allow")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_allow, tally::Gcra)->Name("BM_gcra_allow")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_shared, tally::AtomicGcra)->Name("BM_atomic_gcra")->Threads(1)->Threads(2)->UseRealTime()->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_shared, tally::AtomicTokenBucket)
    ->Name("BM_atomic_token_bucket")
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime()
    ->MinTime(kMinTime);
BENCHMARK(BM_atomic_gcra_fixed_quota_baseline)->Threads(1)->Threads(2)->UseRealTime()->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_single, tally::DryRun<tally::Gcra>)->Name("BM_dry_run_gcra")->MinTime(kMinTime);
BENCHMARK(BM_acquire_all_3)->MinTime(kMinTime);
BENCHMARK(BM_acquire_all_3_as_three_calls_baseline)->MinTime(kMinTime);
BENCHMARK(BM_mutex_token_bucket_baseline)->Threads(1)->Threads(2)->UseRealTime()->MinTime(kMinTime);

BENCHMARK_MAIN();
