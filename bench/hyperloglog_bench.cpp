// HyperLogLog: add (u64 and 16-byte strings), estimate, merge, to_redis, next
// to an exact std::unordered_set baseline in the same run.
#include <tally/sketch/hyperloglog.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace {

using tally::HyperLogLog;

bool quick() { return std::getenv("TALLY_BENCH_QUICK") != nullptr; }

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
        benchmark::RegisterBenchmark("BM_add_hash", BM_add_hash)->Arg(12)->Arg(14),
        benchmark::RegisterBenchmark("BM_add_string16", BM_add_string16)->Arg(12)->Arg(14),
        benchmark::RegisterBenchmark("BM_add_string16_redis_mode", BM_add_string16_redis_mode),
        benchmark::RegisterBenchmark("BM_estimate", BM_estimate)->Arg(12)->Arg(14),
        benchmark::RegisterBenchmark("BM_merge", BM_merge)->Arg(14),
        benchmark::RegisterBenchmark("BM_to_redis", BM_to_redis),
        benchmark::RegisterBenchmark("BM_from_redis", BM_from_redis),
    };
    auto* base = benchmark::RegisterBenchmark("BM_unordered_set_baseline", BM_unordered_set_baseline);
    auto* hll = benchmark::RegisterBenchmark("BM_hll_distinct", BM_hll_distinct);
    for (std::int64_t n : {10000, 1000000}) {
        if (quick() && n > 10000) continue;
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
