// ConcurrencyLimiter: try_acquire + success uncontended, for each algorithm,
// against a std::mutex + counter limiter doing the same job with the same
// algorithm (acquire: lock, check inflight < limit, ++; success: lock, --,
// fold the sample; BM_mutex_baseline is Gradient2's, the headline pair);
// each algorithm's on_sample alone; the floor (two bare atomic
// read-modify-writes and on_sample); and one limiter shared by 2 threads,
// against the mutex baseline shared the same way.
//
// RTTs come from a fixed table (1 us .. 10 ms), so on_sample sees varied
// samples rather than a constant the branch predictor learns.
#include <benchmark/benchmark.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

#include "bench_support.hpp"
#include "tally/limit/concurrency.hpp"

namespace {

const double kMinTime = tally::bench::quick() ? 0.05 : 0.5;

const std::array<std::uint64_t, 256>& rtts() {
    static const std::array<std::uint64_t, 256> table = [] {
        std::array<std::uint64_t, 256> t{};
        std::uint64_t s = 42;
        for (auto& x : t) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            x = 1000 + (s >> 33) % 10'000'000;
        }
        return t;
    }();
    return table;
}

// The plain way: a mutex around a counter and the algorithm.
template <class Algorithm>
class MutexLimiter {
  public:
    bool try_acquire(int& inflight_out) {
        std::lock_guard<std::mutex> lk(m_);
        if (inflight_ >= alg_.limit()) return false;
        inflight_out = ++inflight_;
        return true;
    }
    void success(std::uint64_t start, std::uint64_t now, int inflight) {
        std::lock_guard<std::mutex> lk(m_);
        --inflight_;
        alg_.on_sample(start, now - start, inflight, false);
    }

  private:
    std::mutex m_;
    int inflight_ = 0;
    Algorithm alg_;
};

template <class Algorithm>
void BM_acquire_success(benchmark::State& state) {
    tally::ConcurrencyLimiter<Algorithm> lim;
    const auto& r = rtts();
    std::uint64_t now = 1'000'000'000;
    std::size_t i = 0;
    for (auto _ : state) {
        // as a caller writes it; an uncontended limiter never refuses here
        if (auto p = lim.try_acquire(now))
            p.success(now + r[i++ & 255]);
        else
            state.SkipWithError("refused");
        now += 1000;
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

template <class Algorithm>
void BM_mutex_baseline(benchmark::State& state) {
    MutexLimiter<Algorithm> lim;
    const auto& r = rtts();
    std::uint64_t now = 1'000'000'000;
    std::size_t i = 0;
    for (auto _ : state) {
        int inflight = 0;
        if (lim.try_acquire(inflight)) lim.success(now, now + r[i++ & 255], inflight);
        now += 1000;
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

// The least any limiter can cost under the rules it keeps (one atomic
// read-modify-write to acquire, one to release, every sample folded exactly):
// those two instructions on one counter and the algorithm's on_sample, with
// no check, lock or publication. Half the mutex baseline below this is out
// of reach.
template <class Algorithm>
void BM_floor(benchmark::State& state) {
    std::atomic<int> inflight{0};
    Algorithm alg;
    // the limiter's algorithm lives in memory shared by threads: so does
    // this one (its address escapes, and DoNotOptimize's memory clobber
    // below makes every sample load and store its state)
    benchmark::DoNotOptimize(&alg);
    const auto& r = rtts();
    std::uint64_t now = 1'000'000'000;
    std::size_t i = 0;
    for (auto _ : state) {
        const int n = inflight.fetch_add(1, std::memory_order_acq_rel) + 1;
        inflight.fetch_sub(1, std::memory_order_acq_rel);
        benchmark::DoNotOptimize(alg.on_sample(now, r[i++ & 255], n, false));
        now += 1000;
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

template <class Algorithm>
void BM_on_sample(benchmark::State& state) {
    Algorithm alg;
    const auto& r = rtts();
    std::uint64_t now = 1'000'000'000;
    std::size_t i = 0;
    for (auto _ : state) {
        const std::uint64_t rtt = r[i & 255];
        benchmark::DoNotOptimize(alg.on_sample(now, rtt, static_cast<int>(i & 63), (i & 127) == 0));
        ++i;
        now += 1000;
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

tally::ConcurrencyLimiter<tally::Gradient2>& shared_limiter() {
    static tally::ConcurrencyLimiter<tally::Gradient2> lim(tally::Gradient2({.max_concurrency = 1000}));
    return lim;
}
MutexLimiter<tally::Gradient2>& shared_mutex() {
    static MutexLimiter<tally::Gradient2> lim;
    return lim;
}

void BM_shared_limiter(benchmark::State& state) {
    auto& lim = shared_limiter();
    const auto& r = rtts();
    std::uint64_t now = 1'000'000'000 + static_cast<std::uint64_t>(state.thread_index()) * 7;
    std::size_t i = static_cast<std::size_t>(state.thread_index()) * 17;
    for (auto _ : state) {
        // two callers never reach the limit of 20
        if (auto p = lim.try_acquire(now))
            p.success(now + r[i++ & 255]);
        else
            state.SkipWithError("refused");
        now += 1000;
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void BM_shared_mutex_baseline(benchmark::State& state) {
    auto& lim = shared_mutex();
    const auto& r = rtts();
    std::uint64_t now = 1'000'000'000 + static_cast<std::uint64_t>(state.thread_index()) * 7;
    std::size_t i = static_cast<std::size_t>(state.thread_index()) * 17;
    for (auto _ : state) {
        int inflight = 0;
        if (lim.try_acquire(inflight)) lim.success(now, now + r[i++ & 255], inflight);
        now += 1000;
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

}  // namespace

BENCHMARK_TEMPLATE(BM_acquire_success, tally::Gradient2)->Name("BM_limiter_gradient2")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_acquire_success, tally::Vegas)->Name("BM_limiter_vegas")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_acquire_success, tally::Aimd)->Name("BM_limiter_aimd")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_acquire_success, tally::FixedConcurrency)->Name("BM_limiter_fixed")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_mutex_baseline, tally::Gradient2)->Name("BM_mutex_baseline")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_mutex_baseline, tally::Vegas)->Name("BM_mutex_baseline_vegas")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_mutex_baseline, tally::Aimd)->Name("BM_mutex_baseline_aimd")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_mutex_baseline, tally::FixedConcurrency)->Name("BM_mutex_baseline_fixed")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_floor, tally::Gradient2)->Name("BM_floor_gradient2")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_floor, tally::Vegas)->Name("BM_floor_vegas")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_floor, tally::Aimd)->Name("BM_floor_aimd")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_on_sample, tally::Aimd)->Name("BM_on_sample_aimd")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_on_sample, tally::Gradient2)->Name("BM_on_sample_gradient2")->MinTime(kMinTime);
BENCHMARK_TEMPLATE(BM_on_sample, tally::Vegas)->Name("BM_on_sample_vegas")->MinTime(kMinTime);
BENCHMARK(BM_shared_limiter)->Threads(1)->Threads(2)->UseRealTime()->MinTime(kMinTime);
BENCHMARK(BM_shared_mutex_baseline)->Threads(1)->Threads(2)->UseRealTime()->MinTime(kMinTime);
BENCHMARK_MAIN();
