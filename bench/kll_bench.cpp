// KllSketch<double> add / quantile / rank / 16-shard merge at k = 200 on 2^20
// uniform doubles, next to, in the same run, the exact baseline "sort
// everything": collect the values, sort them, answer a quantile by indexing
// and a rank by binary search, merge by concatenating (then sorting).
#include <tally/sketch/quantiles/kll.hpp>

#include <benchmark/benchmark.h>

#include "bench_support.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace {

constexpr std::size_t stream = std::size_t{1} << 20;

std::vector<double> uniform(std::size_t n, std::uint64_t seed) {
    std::vector<double> v(n);
    std::uint64_t s = seed;
    for (double& x : v) {
        std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        x = static_cast<double>((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
    }
    return v;
}

const std::vector<double>& data() {
    static const std::vector<double> v = uniform(stream, 42);
    return v;
}
const std::vector<double>& probes() {
    static const std::vector<double> v = uniform(4096, 7);
    return v;
}

// ---- KllSketch ----------------------------------------------------------------

void BM_kll_add(benchmark::State& state) {
    const auto& v = data();
    const auto k = static_cast<std::uint16_t>(state.range(0));
    for (auto _ : state) {
        tally::KllSketch<double> s(k);
        for (double x : v) s.add(x);
        benchmark::DoNotOptimize(s.num_retained());
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * v.size()));
}
BENCHMARK(BM_kll_add)->Arg(200)->Unit(benchmark::kMillisecond);

// quantile on a sketch already queried once (the sorted view is built)
void BM_kll_quantile(benchmark::State& state) {
    tally::KllSketch<double> s(static_cast<std::uint16_t>(state.range(0)));
    for (double x : data()) s.add(x);
    (void)s.quantile(0.5);
    const auto& r = probes();
    std::size_t i = 0;
    double sink = 0;
    for (auto _ : state) {
        sink += s.quantile(r[i]);
        i = (i + 1) & 4095;
    }
    benchmark::DoNotOptimize(sink);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_kll_quantile)->Arg(200);

void BM_kll_rank(benchmark::State& state) {
    tally::KllSketch<double> s(static_cast<std::uint16_t>(state.range(0)));
    for (double x : data()) s.add(x);
    (void)s.rank(0.5);
    const auto& r = probes();
    std::size_t i = 0;
    double sink = 0;
    for (auto _ : state) {
        sink += s.rank(r[i]);
        i = (i + 1) & 4095;
    }
    benchmark::DoNotOptimize(sink);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_kll_rank)->Arg(200);

// one merge of a 16-way merge: 16 shards of 2^16 items each into an empty sketch
void BM_kll_merge16(benchmark::State& state) {
    const auto k = static_cast<std::uint16_t>(state.range(0));
    std::vector<tally::KllSketch<double>> shards;
    for (std::uint64_t j = 0; j < 16; ++j) shards.emplace_back(k, 100 + j);
    const auto& v = data();
    for (std::size_t i = 0; i < v.size(); ++i) shards[i % 16].add(v[i]);
    for (auto _ : state) {
        tally::KllSketch<double> m(k);
        for (const auto& s : shards) m.merge(s);
        benchmark::DoNotOptimize(m.num_retained());
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * 16));
}
BENCHMARK(BM_kll_merge16)->Arg(200);

// ---- baseline: sort everything ---------------------------------------------

void BM_sort_baseline_add(benchmark::State& state) {
    const auto& v = data();
    for (auto _ : state) {
        std::vector<double> all;
        for (double x : v) all.push_back(x);
        std::sort(all.begin(), all.end());  // paid once before the first query
        benchmark::DoNotOptimize(all.data());
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * v.size()));
}
BENCHMARK(BM_sort_baseline_add)->Unit(benchmark::kMillisecond);

void BM_sort_baseline_quantile(benchmark::State& state) {
    std::vector<double> all = data();
    std::sort(all.begin(), all.end());
    const auto& r = probes();
    std::size_t i = 0;
    double sink = 0;
    for (auto _ : state) {
        const auto pos = static_cast<std::size_t>(r[i] * static_cast<double>(all.size() - 1));
        sink += all[pos];
        i = (i + 1) & 4095;
    }
    benchmark::DoNotOptimize(sink);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_sort_baseline_quantile);

void BM_sort_baseline_rank(benchmark::State& state) {
    std::vector<double> all = data();
    std::sort(all.begin(), all.end());
    const auto& r = probes();
    std::size_t i = 0;
    double sink = 0;
    for (auto _ : state) {
        sink += static_cast<double>(std::upper_bound(all.begin(), all.end(), r[i]) - all.begin()) /
                static_cast<double>(all.size());
        i = (i + 1) & 4095;
    }
    benchmark::DoNotOptimize(sink);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_sort_baseline_rank);

// a 16-way merge of sorted shards: concatenate and sort again (per merge)
void BM_sort_baseline_merge16(benchmark::State& state) {
    std::vector<std::vector<double>> shards(16);
    const auto& v = data();
    for (std::size_t i = 0; i < v.size(); ++i) shards[i % 16].push_back(v[i]);
    for (auto& s : shards) std::sort(s.begin(), s.end());
    for (auto _ : state) {
        std::vector<double> m;
        for (const auto& s : shards) {
            const auto mid = static_cast<std::ptrdiff_t>(m.size());
            m.insert(m.end(), s.begin(), s.end());
            std::inplace_merge(m.begin(), m.begin() + mid, m.end());
        }
        benchmark::DoNotOptimize(m.data());
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * 16));
}
BENCHMARK(BM_sort_baseline_merge16)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
