// ArrayOfDoublesSketch: add (3 values), the union of 16 sketches and the
// merge loop over them, intersection and A-not-B of two, next to same-run
// baselines that answer the same questions exactly with a plain
// std::unordered_map<key, std::array<double, 3>>; and ThetaSketch's merge
// loop beside its span union.
#include <tally/sketch/distinct/theta.hpp>
#include <tally/sketch/distinct/tuple.hpp>

#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "bench_support.hpp"

namespace {

using tally::ArrayOfDoublesSketch;
using Row = std::array<double, 3>;
using Map = std::unordered_map<std::uint64_t, Row>;

std::uint64_t key(std::uint64_t i) { return tally::detail::mix64(i); }

void BM_tuple_add(benchmark::State& state) {
    ArrayOfDoublesSketch s(static_cast<int>(state.range(0)), 3);
    std::uint64_t i = 0;
    double v[3] = {1, 2, 3};
    for (auto _ : state) {
        v[0] = static_cast<double>(i & 15);
        s.add(i++, std::span<const double>(v, 3));
    }
    benchmark::DoNotOptimize(s.num_retained());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

// Baseline: the exact per-key sums.
void BM_add_unordered_map_baseline(benchmark::State& state) {
    Map m;
    std::uint64_t i = 0;
    for (auto _ : state) {
        Row& r = m[key(i)];
        r[0] += static_cast<double>(i & 15);
        r[1] += 2;
        r[2] += 3;
        ++i;
        if (m.size() >= (std::size_t{1} << 20)) m.clear();  // bounded memory; rehashes are part of the cost
    }
    benchmark::DoNotOptimize(m.size());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

// 16 shards of n / 16 distinct keys each (lg_k 12).
struct Shards {
    std::vector<ArrayOfDoublesSketch> sketches;
    std::vector<Map> maps;
    std::vector<tally::ThetaSketch> theta;
};

const Shards& shards(std::uint64_t n) {
    static std::unordered_map<std::uint64_t, Shards> cache;
    auto& s = cache[n];
    if (!s.sketches.empty()) return s;
    for (std::uint64_t j = 0; j < 16; ++j) {
        ArrayOfDoublesSketch a(12, 3);
        tally::ThetaSketch t(12);
        Map m;
        for (std::uint64_t i = j * (n / 16); i < (j + 1) * (n / 16); ++i) {
            const double v[3] = {1.0, static_cast<double>(i & 7), 0.5};
            a.add(i, std::span<const double>(v, 3));
            t.add(i);
            Row& r = m[key(i)];
            for (int c = 0; c < 3; ++c) r[static_cast<std::size_t>(c)] += v[c];
        }
        s.sketches.push_back(std::move(a));
        s.theta.push_back(std::move(t));
        s.maps.push_back(std::move(m));
    }
    return s;
}

void BM_tuple_union16(benchmark::State& state) {
    const auto& s = shards(static_cast<std::uint64_t>(state.range(0)));
    for (auto _ : state) {
        const auto u = tally::tuple_union(std::span<const ArrayOfDoublesSketch>(s.sketches));
        benchmark::DoNotOptimize(u.column_sum_estimate(0));
    }
}

void BM_tuple_merge_loop16(benchmark::State& state) {
    const auto& s = shards(static_cast<std::uint64_t>(state.range(0)));
    for (auto _ : state) {
        ArrayOfDoublesSketch u(12, 3);
        for (const auto& x : s.sketches) u.merge(x);
        benchmark::DoNotOptimize(u.column_sum_estimate(0));
    }
}

// Baseline: the exact union of the per-key sums.
void BM_union16_unordered_map_baseline(benchmark::State& state) {
    const auto& s = shards(static_cast<std::uint64_t>(state.range(0)));
    for (auto _ : state) {
        Map u;
        for (const auto& m : s.maps)
            for (const auto& [k, r] : m) {
                Row& d = u[k];
                for (std::size_t c = 0; c < 3; ++c) d[c] += r[c];
            }
        benchmark::DoNotOptimize(u.size());
    }
}

void BM_theta_merge_loop16(benchmark::State& state) {
    const auto& s = shards(static_cast<std::uint64_t>(state.range(0)));
    for (auto _ : state) {
        tally::ThetaSketch u(12);
        for (const auto& x : s.theta) u.merge(x);
        benchmark::DoNotOptimize(u.estimate());
    }
}

void BM_theta_union16_span(benchmark::State& state) {
    const auto& s = shards(static_cast<std::uint64_t>(state.range(0)));
    for (auto _ : state) benchmark::DoNotOptimize(tally::theta_union(std::span<const tally::ThetaSketch>(s.theta)).estimate());
}

// Two sketches of n keys, half shared.
struct Pair {
    ArrayOfDoublesSketch a{12, 3}, b{12, 3};
    Map ma, mb;
};

const Pair& pair_of(std::uint64_t n) {
    static std::unordered_map<std::uint64_t, Pair> cache;
    auto& p = cache[n];
    if (p.a.num_retained() != 0) return p;
    for (std::uint64_t i = 0; i < n; ++i) {
        const double v[3] = {1.0, 2.0, 3.0};
        p.a.add(i, std::span<const double>(v, 3));
        p.b.add(i + n / 2, std::span<const double>(v, 3));
        p.ma[key(i)] = {1.0, 2.0, 3.0};
        p.mb[key(i + n / 2)] = {1.0, 2.0, 3.0};
    }
    return p;
}

void BM_tuple_intersection(benchmark::State& state) {
    const auto& p = pair_of(static_cast<std::uint64_t>(state.range(0)));
    for (auto _ : state) benchmark::DoNotOptimize(tally::tuple_intersection(p.a, p.b, tally::TupleSum{}).estimate());
}

void BM_intersection_unordered_map_baseline(benchmark::State& state) {
    const auto& p = pair_of(static_cast<std::uint64_t>(state.range(0)));
    for (auto _ : state) {
        Map x;
        for (const auto& [k, r] : p.ma)
            if (const auto it = p.mb.find(k); it != p.mb.end()) x[k] = {r[0] + it->second[0], r[1] + it->second[1], r[2] + it->second[2]};
        benchmark::DoNotOptimize(x.size());
    }
}

void BM_tuple_a_not_b(benchmark::State& state) {
    const auto& p = pair_of(static_cast<std::uint64_t>(state.range(0)));
    for (auto _ : state) benchmark::DoNotOptimize(tally::tuple_a_not_b(p.a, p.b).estimate());
}

void BM_a_not_b_unordered_map_baseline(benchmark::State& state) {
    const auto& p = pair_of(static_cast<std::uint64_t>(state.range(0)));
    for (auto _ : state) {
        Map d;
        for (const auto& [k, r] : p.ma)
            if (!p.mb.count(k)) d[k] = r;
        benchmark::DoNotOptimize(d.size());
    }
}

void BM_tuple_to_datasketches(benchmark::State& state) {
    const auto& p = pair_of(100000);
    for (auto _ : state) benchmark::DoNotOptimize(p.a.to_datasketches().size());
}

void BM_tuple_from_datasketches(benchmark::State& state) {
    const auto image = pair_of(100000).a.to_datasketches();
    for (auto _ : state) benchmark::DoNotOptimize(ArrayOfDoublesSketch::from_datasketches(image).num_retained());
}

const bool registered = [] {
    std::vector<benchmark::internal::Benchmark*> all;
    all.push_back(benchmark::RegisterBenchmark("BM_tuple_add", BM_tuple_add)->Arg(12));
    all.push_back(benchmark::RegisterBenchmark("BM_add_unordered_map_baseline", BM_add_unordered_map_baseline));
    const std::int64_t n = tally::bench::quick() ? 1000000 : 10000000;
    for (auto* f : {benchmark::RegisterBenchmark("BM_tuple_union16", BM_tuple_union16),
                    benchmark::RegisterBenchmark("BM_tuple_merge_loop16", BM_tuple_merge_loop16),
                    benchmark::RegisterBenchmark("BM_union16_unordered_map_baseline", BM_union16_unordered_map_baseline),
                    benchmark::RegisterBenchmark("BM_theta_merge_loop16", BM_theta_merge_loop16),
                    benchmark::RegisterBenchmark("BM_theta_union16_span", BM_theta_union16_span)}) {
        f->Arg(n)->Unit(benchmark::kMicrosecond);
        all.push_back(f);
    }
    for (auto* f : {benchmark::RegisterBenchmark("BM_tuple_intersection", BM_tuple_intersection),
                    benchmark::RegisterBenchmark("BM_intersection_unordered_map_baseline",
                                                 BM_intersection_unordered_map_baseline),
                    benchmark::RegisterBenchmark("BM_tuple_a_not_b", BM_tuple_a_not_b),
                    benchmark::RegisterBenchmark("BM_a_not_b_unordered_map_baseline", BM_a_not_b_unordered_map_baseline)}) {
        f->Arg(100000)->Unit(benchmark::kMicrosecond);
        all.push_back(f);
    }
    all.push_back(benchmark::RegisterBenchmark("BM_tuple_to_datasketches", BM_tuple_to_datasketches));
    all.push_back(benchmark::RegisterBenchmark("BM_tuple_from_datasketches", BM_tuple_from_datasketches));
    if (tally::bench::quick())
        for (auto* b : all) b->MinTime(0.1);
    return true;
}();

}  // namespace

BENCHMARK_MAIN();
