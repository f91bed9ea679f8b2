// CountMin add/estimate next to an exact std::unordered_map counter in the same run.
//
// Keys: a fixed Zipf(1.0) stream over 10^6 distinct keys (2^20 items, cycled),
// hashed with tally::Hasher<std::uint64_t> inside add(). rel_err: mean
// (estimate - truth) / truth over the 100 most frequent keys after one pass
// of the whole stream; err_per_N: mean (estimate - truth) / N over all keys,
// to compare with the bound epsilon = e / width (reported as eps).
#include <tally/sketch/count_min.hpp>

#include <benchmark/benchmark.h>

#include "bench_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

using tally::bench::stream_len;
using tally::bench::zipf_keys;

const std::unordered_map<std::uint64_t, std::uint64_t>& exact_counts() {
    static const auto truth = [] {
        std::unordered_map<std::uint64_t, std::uint64_t> t;
        for (const auto k : zipf_keys()) ++t[k];
        return t;
    }();
    return truth;
}

template <class Sketch>
void accuracy_counters(benchmark::State& state, const Sketch& cm) {
    const auto& truth = exact_counts();
    std::vector<std::pair<std::uint64_t, std::uint64_t>> by_count(truth.begin(), truth.end());
    std::partial_sort(by_count.begin(), by_count.begin() + 100, by_count.end(),
                      [](const auto& a, const auto& b) { return a.second > b.second; });
    double rel = 0;
    for (std::size_t i = 0; i < 100; ++i)
        rel += static_cast<double>(cm.estimate(by_count[i].first) - by_count[i].second) /
               static_cast<double>(by_count[i].second);
    double abs_err = 0;
    for (const auto& [key, f] : truth) abs_err += static_cast<double>(cm.estimate(key) - f);
    state.counters["rel_err"] = rel / 100;
    state.counters["err_per_N"] = abs_err / static_cast<double>(truth.size()) / static_cast<double>(stream_len);
    state.counters["eps"] = cm.epsilon();
    state.counters["bytes"] = static_cast<double>(cm.memory_bytes());
}

void BM_count_min_add(benchmark::State& state, bool conservative) {
    const auto width = static_cast<std::size_t>(state.range(0));
    const auto& keys = zipf_keys();
    tally::CountMin<> cm(width, 4, {.conservative = conservative});
    std::size_t i = 0;
    for (auto _ : state) {
        cm.add(keys[i]);
        i = (i + 1) & (stream_len - 1);
    }
    benchmark::DoNotOptimize(cm.total());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    tally::CountMin<> fresh(width, 4, {.conservative = conservative});
    for (const auto k : keys) fresh.add(k);
    accuracy_counters(state, fresh);
}

void BM_count_min_estimate(benchmark::State& state) {
    const auto width = static_cast<std::size_t>(state.range(0));
    const auto& keys = zipf_keys();
    tally::CountMin<> cm(width, 4);
    for (const auto k : keys) cm.add(k);
    std::size_t i = 0;
    std::uint64_t sink = 0;
    for (auto _ : state) {
        sink += cm.estimate(keys[i]);
        i = (i + 1) & (stream_len - 1);
    }
    benchmark::DoNotOptimize(sink);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

// Baseline: the exact counter people write first (its memory grows with the
// number of distinct keys: ~1M keys here, tens of MB).
void BM_unordered_map_baseline(benchmark::State& state) {
    const auto& keys = zipf_keys();
    std::unordered_map<std::uint64_t, std::uint64_t> counts;
    std::size_t i = 0;
    for (auto _ : state) {
        ++counts[keys[i]];
        i = (i + 1) & (stream_len - 1);
    }
    benchmark::DoNotOptimize(counts.size());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["rel_err"] = 0;
    state.counters["distinct"] = static_cast<double>(counts.size());
}

}  // namespace

int main(int argc, char** argv) {
    (void)zipf_keys();
    (void)exact_counts();
    const bool quick = tally::bench::quick();
    benchmark::RegisterBenchmark("BM_unordered_map_baseline", BM_unordered_map_baseline);
    for (const std::int64_t width : {std::int64_t{2048}, std::int64_t{1} << 20}) {
        benchmark::RegisterBenchmark("BM_count_min_add", BM_count_min_add, false)->Arg(width);
        benchmark::RegisterBenchmark("BM_count_min_add_conservative", BM_count_min_add, true)->Arg(width);
        if (!quick) benchmark::RegisterBenchmark("BM_count_min_estimate", BM_count_min_estimate)->Arg(width);
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
