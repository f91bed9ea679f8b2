// HyperLogLog: add (u64 and 16-byte strings), estimate, merge, Redis and
// DataSketches export/import, next to same-run baselines: an exact
// std::unordered_set, a plain register-max add without the HIP/histogram
// bookkeeping, and Ertl's estimate recomputed from all registers (O(m)).
#include <tally/sketch/distinct/hyperloglog.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "bench_support.hpp"

namespace {

using tally::HyperLogLog;

using tally::bench::quick;

// 16-byte keys, 64K of them, so the loop is not one hot key.
const std::vector<std::string>& keys16() {
    static const std::vector<std::string> keys = [] {
        std::vector<std::string> v;
        v.reserve(65536);
        for (std::uint64_t i = 0; i < 65536; ++i) {
            char buf[17];
            std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(tally::detail::mix64(i)));
            v.emplace_back(buf, 16);
        }
        return v;
    }();
    return keys;
}

void BM_add_u64(benchmark::State& state) {
    HyperLogLog h(static_cast<int>(state.range(0)));
    std::uint64_t i = 0;
    for (auto _ : state) h.add(i++);
    benchmark::DoNotOptimize(h.registers().data());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["rel_err"] = std::fabs(h.estimate() / static_cast<double>(i) - 1);
}

void BM_add_hash(benchmark::State& state) {
    HyperLogLog h(static_cast<int>(state.range(0)));
    std::uint64_t x = 0x9e3779b97f4a7c15ull;
    for (auto _ : state) {
        h.add_hash(x);
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    }
    benchmark::DoNotOptimize(h.registers().data());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void BM_add_u64_datasketches_mode(benchmark::State& state) {
    HyperLogLog h(static_cast<int>(state.range(0)), tally::HllHashMode::datasketches);
    std::uint64_t i = 0;
    for (auto _ : state) h.add(i++);
    benchmark::DoNotOptimize(h.registers().data());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["rel_err"] = std::fabs(h.estimate() / static_cast<double>(i) - 1);
}

// A fresh p = 14 sketch fed range(0) distinct items per iteration: sparse
// inserts while n <= 4096 (the break-even), then the dense path.
void BM_add_u64_fresh(benchmark::State& state) {
    const auto n = static_cast<std::uint64_t>(state.range(0));
    std::uint64_t base = 0;
    for (auto _ : state) {
        HyperLogLog h(14);
        for (std::uint64_t i = 0; i < n; ++i) h.add(base + i);
        base += n;
        benchmark::DoNotOptimize(h.estimate());
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

// Baseline: the register update alone (index, rank, max), no histogram and
// no HIP accumulator: what add_hash did before the HIP estimator.
struct PlainRegisters {
    int p;
    std::vector<std::uint8_t> r;
    explicit PlainRegisters(int precision) : p(precision), r(std::size_t{1} << precision, 0) {}
    void add_hash(std::uint64_t hash) noexcept {
        const auto index = static_cast<std::size_t>(hash >> (64 - p));
        const auto rank =
            static_cast<std::uint8_t>(std::countl_zero((hash << p) | (std::uint64_t{1} << (p - 1))) + 1);
        if (rank > r[index]) r[index] = rank;
    }
};

void BM_add_hash_plain_baseline(benchmark::State& state) {
    PlainRegisters h(static_cast<int>(state.range(0)));
    std::uint64_t x = 0x9e3779b97f4a7c15ull;
    for (auto _ : state) {
        h.add_hash(x);
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    }
    benchmark::DoNotOptimize(h.r.data());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

// Adds the 65536 distinct 16-byte keys round-robin to `h`.
void add_string16(benchmark::State& state, HyperLogLog h) {
    const auto& keys = keys16();
    std::size_t i = 0;
    for (auto _ : state) {
        h.add(std::string_view(keys[i]));
        i = (i + 1) & 65535;
    }
    benchmark::DoNotOptimize(h.registers().data());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    const double truth = static_cast<double>(std::min<std::uint64_t>(state.iterations(), 65536));
    state.counters["rel_err"] = std::fabs(h.estimate() / truth - 1);
}

void BM_add_string16(benchmark::State& state) { add_string16(state, HyperLogLog(static_cast<int>(state.range(0)))); }

void BM_add_string16_redis_mode(benchmark::State& state) { add_string16(state, HyperLogLog::redis_compatible()); }

void BM_add_string16_datasketches_mode(benchmark::State& state) {
    add_string16(state, HyperLogLog(static_cast<int>(state.range(0)), tally::HllHashMode::datasketches));
}

// Baseline: the exact answer, std::unordered_set of the 64-bit items.
void BM_unordered_set_baseline(benchmark::State& state) {
    const auto n = static_cast<std::uint64_t>(state.range(0));
    for (auto _ : state) {
        std::unordered_set<std::uint64_t> set;
        for (std::uint64_t i = 0; i < n; ++i) set.insert(i);
        benchmark::DoNotOptimize(set.size());
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
    state.counters["rel_err"] = 0;
}

// The same workload through the sketch (p = 14), for the ratio.
void BM_hll_distinct(benchmark::State& state) {
    const auto n = static_cast<std::uint64_t>(state.range(0));
    double est = 0;
    for (auto _ : state) {
        HyperLogLog h(14);
        for (std::uint64_t i = 0; i < n; ++i) h.add(i);
        est = h.estimate();
        benchmark::DoNotOptimize(est);
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
    state.counters["bytes_per_item"] = 16384.0 / static_cast<double>(n);
    state.counters["rel_err"] = std::fabs(est / static_cast<double>(n) - 1);
}

void BM_estimate(benchmark::State& state) {
    const int p = static_cast<int>(state.range(0));
    HyperLogLog h(p);
    const std::uint64_t n = std::uint64_t{5} << p;
    for (std::uint64_t i = 0; i < n; ++i) h.add(i);
    double e = 0;
    for (auto _ : state) {
        e = h.estimate();
        benchmark::DoNotOptimize(e);
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["rel_err"] = std::fabs(e / static_cast<double>(n) - 1);
}

// Baseline: Ertl's estimate recomputed from all m registers on every call.
void BM_estimate_ertl_from_registers_baseline(benchmark::State& state) {
    const int p = static_cast<int>(state.range(0));
    HyperLogLog h(p);
    const std::uint64_t n = std::uint64_t{5} << p;
    for (std::uint64_t i = 0; i < n; ++i) h.add(i);
    double e = 0;
    for (auto _ : state) {
        std::uint32_t c[64] = {};
        for (const std::uint8_t r : h.registers()) ++c[r];
        const int q = 64 - p;
        const double m = static_cast<double>(h.register_count());
        double z = m * tally::detail::hll_tau((m - c[q + 1]) / m);
        for (int k = q; k >= 1; --k) z = (z + c[k]) * 0.5;
        e = HyperLogLog::alpha_inf * m * m / (z + m * tally::detail::hll_sigma(c[0] / m));
        benchmark::DoNotOptimize(e);
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["rel_err"] = std::fabs(e / static_cast<double>(n) - 1);
}

// Ertl's estimate from the histogram kept on add (what a merged sketch answers).
void BM_estimate_ertl(benchmark::State& state) {
    const int p = static_cast<int>(state.range(0));
    HyperLogLog h(p);
    const std::uint64_t n = std::uint64_t{5} << p;
    for (std::uint64_t i = 0; i < n; ++i) h.add(i);
    h.merge(HyperLogLog(p).merge(h));
    double e = 0;
    for (auto _ : state) {
        e = h.estimate();
        benchmark::DoNotOptimize(e);
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["rel_err"] = std::fabs(e / static_cast<double>(n) - 1);
}

void BM_to_datasketches(benchmark::State& state) {
    HyperLogLog h(12, tally::HllHashMode::datasketches);
    for (std::uint64_t i = 0; i < 100000; ++i) h.add(i);
    const auto type = static_cast<tally::DataSketchesHll>(state.range(0));
    for (auto _ : state) {
        auto b = h.to_datasketches(type);
        benchmark::DoNotOptimize(b.data());
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void BM_from_datasketches(benchmark::State& state) {
    HyperLogLog h(12, tally::HllHashMode::datasketches);
    for (std::uint64_t i = 0; i < 100000; ++i) h.add(i);
    const auto bytes = h.to_datasketches(static_cast<tally::DataSketchesHll>(state.range(0)));
    for (auto _ : state) {
        HyperLogLog back = HyperLogLog::from_datasketches(bytes);
        benchmark::DoNotOptimize(back.registers().data());
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void BM_merge(benchmark::State& state) {
    const int p = static_cast<int>(state.range(0));
    HyperLogLog a(p), b(p);
    for (std::uint64_t i = 0; i < 100000; ++i) (i & 1 ? a : b).add(i);
    for (auto _ : state) {
        a.merge(b);
        benchmark::DoNotOptimize(a.registers().data());
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * a.register_count()));
}

// The register-wise max alone on two plain arrays: what merge costs without
// any estimator bookkeeping (the histogram is rebuilt on the next query).
void BM_merge_plain_baseline(benchmark::State& state) {
    const int p = static_cast<int>(state.range(0));
    HyperLogLog a(p), b(p);
    for (std::uint64_t i = 0; i < 100000; ++i) (i & 1 ? a : b).add(i);
    std::vector<std::uint8_t> ra(a.registers().begin(), a.registers().end());
    const std::vector<std::uint8_t> rb(b.registers().begin(), b.registers().end());
    for (auto _ : state) {
        std::uint8_t* x = ra.data();
        const std::uint8_t* y = rb.data();
        const std::size_t m = ra.size();
        for (std::size_t i = 0; i < m; ++i) x[i] = x[i] < y[i] ? y[i] : x[i];
        benchmark::DoNotOptimize(ra.data());
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * ra.size()));
}

// One merge followed by one estimate: the merge plus the one histogram rebuild.
void BM_merge_then_estimate(benchmark::State& state) {
    const int p = static_cast<int>(state.range(0));
    HyperLogLog a(p), b(p);
    for (std::uint64_t i = 0; i < 100000; ++i) (i & 1 ? a : b).add(i);
    for (auto _ : state) {
        a.merge(b);
        benchmark::DoNotOptimize(a.estimate());
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void BM_to_redis(benchmark::State& state) {
    HyperLogLog h = HyperLogLog::redis_compatible();
    for (std::uint64_t i = 0; i < 100000; ++i) h.add(i);
    for (auto _ : state) {
        std::string s = h.to_redis();
        benchmark::DoNotOptimize(s.data());
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void BM_from_redis(benchmark::State& state) {
    HyperLogLog h = HyperLogLog::redis_compatible();
    for (std::uint64_t i = 0; i < 100000; ++i) h.add(i);
    const std::string s = h.to_redis();
    for (auto _ : state) {
        HyperLogLog back = HyperLogLog::from_redis(s);
        benchmark::DoNotOptimize(back.registers().data());
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

const bool registered = [] {
    // Quick mode (scripts/bench headline run): shorter runs, no 1M-item sizes.
    std::vector<benchmark::internal::Benchmark*> all{
        benchmark::RegisterBenchmark("BM_add_u64", BM_add_u64)->Arg(12)->Arg(14),
        benchmark::RegisterBenchmark("BM_add_u64_datasketches_mode", BM_add_u64_datasketches_mode)->Arg(12)->Arg(14),
        benchmark::RegisterBenchmark("BM_add_u64_fresh", BM_add_u64_fresh)->Arg(100)->Arg(4096)->Arg(10000000),
        benchmark::RegisterBenchmark("BM_add_hash", BM_add_hash)->Arg(12)->Arg(14),
        benchmark::RegisterBenchmark("BM_add_hash_plain_baseline", BM_add_hash_plain_baseline)->Arg(12)->Arg(14),
        benchmark::RegisterBenchmark("BM_add_string16", BM_add_string16)->Arg(12)->Arg(14),
        benchmark::RegisterBenchmark("BM_add_string16_redis_mode", BM_add_string16_redis_mode),
        benchmark::RegisterBenchmark("BM_add_string16_datasketches_mode", BM_add_string16_datasketches_mode)
            ->Arg(12)
            ->Arg(14),
        benchmark::RegisterBenchmark("BM_estimate", BM_estimate)->Arg(12)->Arg(14),
        benchmark::RegisterBenchmark("BM_estimate_ertl", BM_estimate_ertl)->Arg(12)->Arg(14),
        benchmark::RegisterBenchmark("BM_estimate_ertl_from_registers_baseline",
                                     BM_estimate_ertl_from_registers_baseline)->Arg(12)->Arg(14),
        benchmark::RegisterBenchmark("BM_merge", BM_merge)->Arg(12)->Arg(14),
        benchmark::RegisterBenchmark("BM_merge_plain_baseline", BM_merge_plain_baseline)->Arg(12)->Arg(14),
        benchmark::RegisterBenchmark("BM_merge_then_estimate", BM_merge_then_estimate)->Arg(12)->Arg(14),
        benchmark::RegisterBenchmark("BM_to_redis", BM_to_redis),
        benchmark::RegisterBenchmark("BM_from_redis", BM_from_redis),
        benchmark::RegisterBenchmark("BM_to_datasketches", BM_to_datasketches)->Arg(0)->Arg(1)->Arg(2),
        benchmark::RegisterBenchmark("BM_from_datasketches", BM_from_datasketches)->Arg(0)->Arg(1)->Arg(2),
    };
    auto* base = benchmark::RegisterBenchmark("BM_unordered_set_baseline", BM_unordered_set_baseline);
    auto* hll = benchmark::RegisterBenchmark("BM_hll_distinct", BM_hll_distinct);
    for (std::int64_t n : {10000, 1000000}) {  // both in quick mode too: the README quotes 10^6
        base->Arg(n);
        hll->Arg(n);
    }
    all.push_back(base);
    all.push_back(hll);
    if (quick())
        for (auto* b : all) b->MinTime(0.1);
    return true;
}();

}  // namespace

BENCHMARK_MAIN();
