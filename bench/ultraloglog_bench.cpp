// UltraLogLog: add (by hash and by u64 item), the add-only estimate, merge,
// and the estimate after a merge, each next to HyperLogLog at the same
// precision in the same binary (the rows named *_hyperloglog_baseline): the
// sketch UltraLogLog replaces is the baseline.
#include <tally/sketch/distinct/hyperloglog.hpp>
#include <tally/sketch/distinct/ultraloglog.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "bench_support.hpp"

namespace {

using tally::HyperLogLog;
using tally::UllEstimator;
using tally::UltraLogLog;

// The hash stream of bench_hyperloglog's BM_add_hash: an LCG, so the loop
// costs the update alone.
template <class S>
void add_hash_loop(benchmark::State& state) {
    S s(static_cast<int>(state.range(0)));
    std::uint64_t x = 0x9e3779b97f4a7c15ull;
    for (auto _ : state) {
        s.add_hash(x);
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    }
    benchmark::DoNotOptimize(s.estimate());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
void BM_add_hash(benchmark::State& state) {
    add_hash_loop<UltraLogLog>(state);
}
void BM_add_hash_hyperloglog_baseline(benchmark::State& state) {
    add_hash_loop<HyperLogLog>(state);
}

// Items through tally::Hasher (distinct u64 keys).
template <class S>
void add_u64_loop(benchmark::State& state) {
    S s(static_cast<int>(state.range(0)));
    std::uint64_t i = 0;
    for (auto _ : state) s.add(i++);
    benchmark::DoNotOptimize(s.estimate());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
void BM_add_u64(benchmark::State& state) {
    add_u64_loop<UltraLogLog>(state);
}
void BM_add_u64_hyperloglog_baseline(benchmark::State& state) {
    add_u64_loop<HyperLogLog>(state);
}

// A Zipf stream: mostly repeated keys, as in real traffic.
template <class S>
void add_zipf_loop(benchmark::State& state) {
    S s(static_cast<int>(state.range(0)));
    const auto& keys = tally::bench::zipf_keys();
    std::size_t i = 0;
    for (auto _ : state) s.add(keys[i++ & (tally::bench::stream_len - 1)]);
    benchmark::DoNotOptimize(s.estimate());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
void BM_add_zipf(benchmark::State& state) {
    add_zipf_loop<UltraLogLog>(state);
}
void BM_add_zipf_hyperloglog_baseline(benchmark::State& state) {
    add_zipf_loop<HyperLogLog>(state);
}

template <class S>
S filled(int p, std::uint64_t n, std::uint64_t salt) {
    S s(p);
    for (std::uint64_t i = 0; i < n; ++i) s.add(i ^ salt);
    return s;
}

// estimate() of an add-only sketch (martingale / HIP: O(1)), m and 10 m items.
template <class S>
void estimate_loop(benchmark::State& state) {
    const int p = static_cast<int>(state.range(0));
    const S s = filled<S>(p, std::uint64_t{10} << p, 0);
    for (auto _ : state) benchmark::DoNotOptimize(s.estimate());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
void BM_estimate(benchmark::State& state) {
    estimate_loop<UltraLogLog>(state);
}
void BM_estimate_hyperloglog_baseline(benchmark::State& state) {
    estimate_loop<HyperLogLog>(state);
}

// merge of two sketches of 10 m items each (the target's registers stay the
// union, so every iteration does the whole register pass).
template <class S>
void merge_loop(benchmark::State& state) {
    const int p = static_cast<int>(state.range(0));
    S a = filled<S>(p, std::uint64_t{10} << p, 1);
    const S b = filled<S>(p, std::uint64_t{10} << p, 2);
    for (auto _ : state) {
        a.merge(b);
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
void BM_merge(benchmark::State& state) {
    merge_loop<UltraLogLog>(state);
}
void BM_merge_hyperloglog_baseline(benchmark::State& state) {
    merge_loop<HyperLogLog>(state);
}

// merge, then estimate(): UltraLogLog's FGRA, HyperLogLog's Ertl estimate
// (both rebuild their register histogram after the merge).
template <class S>
void merge_estimate_loop(benchmark::State& state) {
    const int p = static_cast<int>(state.range(0));
    S a = filled<S>(p, std::uint64_t{10} << p, 1);
    const S b = filled<S>(p, std::uint64_t{10} << p, 2);
    for (auto _ : state) {
        a.merge(b);
        benchmark::DoNotOptimize(a.estimate());
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
void BM_merge_estimate(benchmark::State& state) {
    merge_estimate_loop<UltraLogLog>(state);
}
void BM_merge_estimate_hyperloglog_baseline(benchmark::State& state) {
    merge_estimate_loop<HyperLogLog>(state);
}

// The ML estimate of a merged sketch (no HyperLogLog counterpart here).
void BM_merge_estimate_ml(benchmark::State& state) {
    const int p = static_cast<int>(state.range(0));
    UltraLogLog a = filled<UltraLogLog>(p, std::uint64_t{10} << p, 1);
    const UltraLogLog b = filled<UltraLogLog>(p, std::uint64_t{10} << p, 2);
    for (auto _ : state) {
        a.merge(b);
        benchmark::DoNotOptimize(a.estimate(UllEstimator::ml));
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

}  // namespace

BENCHMARK(BM_add_hash)->Arg(10)->Arg(12)->Arg(14)->Arg(16);
BENCHMARK(BM_add_hash_hyperloglog_baseline)->Arg(10)->Arg(12)->Arg(14)->Arg(16);
BENCHMARK(BM_add_u64)->Arg(12)->Arg(14);
BENCHMARK(BM_add_u64_hyperloglog_baseline)->Arg(12)->Arg(14);
BENCHMARK(BM_add_zipf)->Arg(12);
BENCHMARK(BM_add_zipf_hyperloglog_baseline)->Arg(12);
BENCHMARK(BM_estimate)->Arg(12);
BENCHMARK(BM_estimate_hyperloglog_baseline)->Arg(12);
BENCHMARK(BM_merge)->Arg(4)->Arg(8)->Arg(12)->Arg(16)->Arg(18);
BENCHMARK(BM_merge_hyperloglog_baseline)->Arg(4)->Arg(8)->Arg(12)->Arg(16)->Arg(18);
BENCHMARK(BM_merge_estimate)->Arg(12)->Arg(16);
BENCHMARK(BM_merge_estimate_hyperloglog_baseline)->Arg(12)->Arg(16);
BENCHMARK(BM_merge_estimate_ml)->Arg(12);

BENCHMARK_MAIN();
