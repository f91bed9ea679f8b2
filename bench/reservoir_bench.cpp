// Reservoir sampling: Algorithm L (tally::Reservoir, add per item and
// add_range) next to a textbook Algorithm R baseline in the same run, at
// k = 64, 1024 and 65536 over 10M items (1M in quick mode,
// TALLY_BENCH_QUICK=1). Also A-ExpJ (tally::WeightedReservoir) next to an
// A-Res baseline that draws a key for every item.
//
// Every run feeds the same vector of items, so the ratio to the baseline is
// the cost of the algorithm, not of producing items.
#include <tally/sketch/sampling/reservoir.hpp>
#include <tally/sketch/sampling/weighted_reservoir.hpp>

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <queue>
#include <string>
#include <vector>

#include "bench_support.hpp"

namespace {

using tally::bench::quick;

std::size_t stream_length() { return quick() ? 1'000'000 : 10'000'000; }

const std::vector<std::uint64_t>& items() {
    static const std::vector<std::uint64_t> v = [] {
        std::vector<std::uint64_t> out(stream_length());
        std::iota(out.begin(), out.end(), std::uint64_t{1});
        return out;
    }();
    return v;
}

void finish(benchmark::State& state, std::size_t k, std::size_t n) {
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
    state.counters["n_over_k"] = static_cast<double>(n) / static_cast<double>(k);
}

void BM_algorithm_l_add(benchmark::State& state) {
    const auto k = static_cast<std::size_t>(state.range(0));
    const auto& xs = items();
    std::uint64_t seed = 1;
    for (auto _ : state) {
        tally::Reservoir<std::uint64_t> r(k, seed++);
        for (auto x : xs) r.add(x);
        benchmark::DoNotOptimize(r.sample().data());
        benchmark::ClobberMemory();
    }
    finish(state, k, xs.size());
}

void BM_algorithm_l_add_range(benchmark::State& state) {
    const auto k = static_cast<std::size_t>(state.range(0));
    const auto& xs = items();
    std::uint64_t seed = 1;
    for (auto _ : state) {
        tally::Reservoir<std::uint64_t> r(k, seed++);
        r.add_range(xs);
        benchmark::DoNotOptimize(r.sample().data());
        benchmark::ClobberMemory();
    }
    finish(state, k, xs.size());
}

// Baseline: Vitter's Algorithm R as usually written, one bounded random
// draw per item after the first k (same generator, so only the algorithm differs).
void BM_algorithm_r_baseline(benchmark::State& state) {
    const auto k = static_cast<std::size_t>(state.range(0));
    const auto& xs = items();
    std::uint64_t seed = 1;
    for (auto _ : state) {
        tally::detail::ReservoirRng rng(seed++);
        std::vector<std::uint64_t> res;
        for (std::size_t i = 0; i < xs.size(); ++i) {
            if (i < k) {
                res.push_back(xs[i]);
            } else {
                const std::uint64_t j = rng.below(i + 1);
                if (j < k) res[static_cast<std::size_t>(j)] = xs[i];
            }
        }
        benchmark::DoNotOptimize(res.data());
        benchmark::ClobberMemory();
    }
    finish(state, k, xs.size());
}

double weight_of(std::uint64_t x) { return 1.0 + static_cast<double>(x % 16); }

void BM_weighted_a_expj_add(benchmark::State& state) {
    const auto k = static_cast<std::size_t>(state.range(0));
    const auto& xs = items();
    std::uint64_t seed = 1;
    for (auto _ : state) {
        tally::WeightedReservoir<std::uint64_t> r(k, seed++);
        for (auto x : xs) r.add(x, weight_of(x));
        benchmark::DoNotOptimize(r.sample().data());
        benchmark::ClobberMemory();
    }
    finish(state, k, xs.size());
}

// Baseline: A-Res, a key log(u)/w for every item and a min-heap of the k largest.
void BM_weighted_a_res_baseline(benchmark::State& state) {
    const auto k = static_cast<std::size_t>(state.range(0));
    const auto& xs = items();
    std::uint64_t seed = 1;
    using Entry = std::pair<double, std::uint64_t>;
    for (auto _ : state) {
        tally::detail::ReservoirRng rng(seed++);
        std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
        for (auto x : xs) {
            const double key = std::log(rng.uniform_open0()) / weight_of(x);
            if (heap.size() < k) {
                heap.emplace(key, x);
            } else if (key > heap.top().first) {
                heap.pop();
                heap.emplace(key, x);
            }
        }
        benchmark::DoNotOptimize(heap.top());
        benchmark::ClobberMemory();
    }
    finish(state, k, xs.size());
}

[[maybe_unused]] const bool registered = [] {
    for (std::int64_t k : {64, 1024, 65536}) {
        for (auto [name, fn] : {std::pair{"BM_algorithm_l_add", &BM_algorithm_l_add},
                                std::pair{"BM_algorithm_l_add_range", &BM_algorithm_l_add_range},
                                std::pair{"BM_algorithm_r_baseline", &BM_algorithm_r_baseline}}) {
            benchmark::RegisterBenchmark(name, fn)->Arg(k)->Unit(benchmark::kMillisecond);
        }
    }
    for (std::int64_t k : {1024}) {
        benchmark::RegisterBenchmark("BM_weighted_a_expj_add", BM_weighted_a_expj_add)->Arg(k)->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark("BM_weighted_a_res_baseline", BM_weighted_a_res_baseline)
            ->Arg(k)
            ->Unit(benchmark::kMillisecond);
    }
    return true;
}();

}  // namespace

BENCHMARK_MAIN();
