// ThetaSketch: add, building a sketch of n distinct items, and the set
// operations (union of 16, intersection and A-not-B of two sketches of n
// items, half of them shared), next to same-run baselines that answer the
// same questions exactly with std::unordered_set and set algebra on it.
#include <tally/sketch/distinct/theta.hpp>

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <unordered_set>
#include <vector>

#include "bench_support.hpp"

namespace {

using tally::ThetaSketch;
using tally::bench::quick;

std::uint64_t key(std::uint64_t set, std::uint64_t i) { return tally::detail::mix64(set * 0x100000000ull + i); }

// Set j holds the keys j * n/2 .. j * n/2 + n - 1 (neighbours share half).
std::uint64_t member(std::uint64_t j, std::uint64_t n, std::uint64_t i) { return key(0, j * (n / 2) + i); }

void BM_theta_add(benchmark::State& state) {
    ThetaSketch s(static_cast<int>(state.range(0)));
    std::uint64_t i = 0;
    for (auto _ : state) s.add(i++);
    benchmark::DoNotOptimize(s.num_retained());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["rel_err"] = std::fabs(s.estimate() / static_cast<double>(i) - 1);
}

void BM_theta_add_hash(benchmark::State& state) {
    ThetaSketch s(static_cast<int>(state.range(0)));
    std::uint64_t x = 0x9e3779b97f4a7c15ull;
    for (auto _ : state) {
        s.add_hash(x);
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    }
    benchmark::DoNotOptimize(s.num_retained());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

// n distinct items into a new sketch (lg_k 12), then the estimate.
void BM_theta_distinct(benchmark::State& state) {
    const auto n = static_cast<std::uint64_t>(state.range(0));
    double est = 0;
    for (auto _ : state) {
        ThetaSketch s(12);
        for (std::uint64_t i = 0; i < n; ++i) s.add(i);
        est = s.estimate();
        benchmark::DoNotOptimize(est);
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
    state.counters["rel_err"] = std::fabs(est / static_cast<double>(n) - 1);
}

// Baseline: the exact count, std::unordered_set of the items.
void BM_unordered_set_baseline(benchmark::State& state) {
    const auto n = static_cast<std::uint64_t>(state.range(0));
    for (auto _ : state) {
        std::unordered_set<std::uint64_t> set;
        for (std::uint64_t i = 0; i < n; ++i) set.insert(i);
        benchmark::DoNotOptimize(set.size());
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

std::vector<ThetaSketch> sketches(std::uint64_t count, std::uint64_t n) {
    std::vector<ThetaSketch> v;
    for (std::uint64_t j = 0; j < count; ++j) {
        ThetaSketch s(12);
        for (std::uint64_t i = 0; i < n; ++i) s.add(member(j, n, i));
        v.push_back(std::move(s));
    }
    return v;
}

std::vector<std::unordered_set<std::uint64_t>> sets(std::uint64_t count, std::uint64_t n) {
    std::vector<std::unordered_set<std::uint64_t>> v(count);
    for (std::uint64_t j = 0; j < count; ++j)
        for (std::uint64_t i = 0; i < n; ++i) v[j].insert(member(j, n, i));
    return v;
}

// One operation per iteration; items = the input items the answer covers.
void BM_theta_union16(benchmark::State& state) {
    const auto n = static_cast<std::uint64_t>(state.range(0));
    const auto in = sketches(16, n);
    for (auto _ : state) benchmark::DoNotOptimize(tally::theta_union(std::span<const ThetaSketch>(in)).estimate());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * 16 * n));
    state.counters["rel_err"] =
        std::fabs(tally::theta_union(std::span<const ThetaSketch>(in)).estimate() / static_cast<double>(17 * n / 2) - 1);
}

void BM_union16_unordered_set_baseline(benchmark::State& state) {
    const auto n = static_cast<std::uint64_t>(state.range(0));
    const auto in = sets(16, n);
    for (auto _ : state) {
        std::unordered_set<std::uint64_t> u(in[0]);
        for (std::size_t j = 1; j < in.size(); ++j) u.insert(in[j].begin(), in[j].end());
        benchmark::DoNotOptimize(u.size());
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * 16 * n));
}

void BM_theta_intersection(benchmark::State& state) {
    const auto n = static_cast<std::uint64_t>(state.range(0));
    const auto in = sketches(2, n);
    for (auto _ : state) benchmark::DoNotOptimize(tally::theta_intersection(in[0], in[1]).estimate());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * 2 * n));
    state.counters["rel_err"] =
        std::fabs(tally::theta_intersection(in[0], in[1]).estimate() / static_cast<double>(n / 2) - 1);
}

void BM_intersection_unordered_set_baseline(benchmark::State& state) {
    const auto n = static_cast<std::uint64_t>(state.range(0));
    const auto in = sets(2, n);
    for (auto _ : state) {
        std::unordered_set<std::uint64_t> x;
        for (const auto k : in[0])
            if (in[1].count(k) != 0) x.insert(k);
        benchmark::DoNotOptimize(x.size());
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * 2 * n));
}

void BM_theta_a_not_b(benchmark::State& state) {
    const auto n = static_cast<std::uint64_t>(state.range(0));
    const auto in = sketches(2, n);
    for (auto _ : state) benchmark::DoNotOptimize(tally::theta_a_not_b(in[0], in[1]).estimate());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * 2 * n));
    state.counters["rel_err"] =
        std::fabs(tally::theta_a_not_b(in[0], in[1]).estimate() / static_cast<double>(n / 2) - 1);
}

void BM_a_not_b_unordered_set_baseline(benchmark::State& state) {
    const auto n = static_cast<std::uint64_t>(state.range(0));
    const auto in = sets(2, n);
    for (auto _ : state) {
        std::unordered_set<std::uint64_t> d;
        for (const auto k : in[0])
            if (in[1].count(k) == 0) d.insert(k);
        benchmark::DoNotOptimize(d.size());
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * 2 * n));
}

void BM_theta_to_datasketches(benchmark::State& state) {
    const auto in = sketches(1, 1000000);
    const bool compressed = state.range(0) != 0;
    std::size_t bytes = 0;
    for (auto _ : state) {
        const auto b = in[0].to_datasketches(compressed);
        bytes = b.size();
        benchmark::DoNotOptimize(b.data());
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
    state.counters["image_bytes"] = static_cast<double>(bytes);
}

void BM_theta_from_datasketches(benchmark::State& state) {
    const auto in = sketches(1, 1000000);
    const auto image = in[0].to_datasketches(state.range(0) != 0);
    for (auto _ : state) benchmark::DoNotOptimize(ThetaSketch::from_datasketches(image).estimate());
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * image.size()));
}

[[maybe_unused]] const bool registered = [] {
    std::vector<benchmark::internal::Benchmark*> all;
    all.push_back(benchmark::RegisterBenchmark("BM_theta_add", BM_theta_add)->Arg(12)->Arg(16));
    all.push_back(benchmark::RegisterBenchmark("BM_theta_add_hash", BM_theta_add_hash)->Arg(12));
    auto* base = benchmark::RegisterBenchmark("BM_unordered_set_baseline", BM_unordered_set_baseline);
    auto* theta = benchmark::RegisterBenchmark("BM_theta_distinct", BM_theta_distinct);
    for (std::int64_t n : {10000, 1000000}) {
        base->Arg(n);
        theta->Arg(n);
    }
    all.push_back(base);
    all.push_back(theta);
    for (auto* f : {benchmark::RegisterBenchmark("BM_theta_union16", BM_theta_union16),
                    benchmark::RegisterBenchmark("BM_union16_unordered_set_baseline", BM_union16_unordered_set_baseline),
                    benchmark::RegisterBenchmark("BM_theta_intersection", BM_theta_intersection),
                    benchmark::RegisterBenchmark("BM_intersection_unordered_set_baseline",
                                                 BM_intersection_unordered_set_baseline),
                    benchmark::RegisterBenchmark("BM_theta_a_not_b", BM_theta_a_not_b),
                    benchmark::RegisterBenchmark("BM_a_not_b_unordered_set_baseline", BM_a_not_b_unordered_set_baseline)}) {
        f->Arg(100000)->Unit(benchmark::kMicrosecond);
        all.push_back(f);
    }
    all.push_back(benchmark::RegisterBenchmark("BM_theta_to_datasketches", BM_theta_to_datasketches)->Arg(0)->Arg(1));
    all.push_back(benchmark::RegisterBenchmark("BM_theta_from_datasketches", BM_theta_from_datasketches)->Arg(0)->Arg(1));
    if (quick())
        for (auto* b : all) b->MinTime(0.1);
    return true;
}();

}  // namespace

BENCHMARK_MAIN();
