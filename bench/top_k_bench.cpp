// TopK (Space-Saving) add next to an exact std::unordered_map counter in the same run.
//
// Keys: a fixed Zipf(1.0) stream over 10^6 distinct keys (2^20 items, cycled);
// the string variant uses the same ranks as "user:<rank>" strings, built
// before timing. Accuracy after one pass of the whole stream:
//   rel_err  mean (count - truth) / truth over the 10 largest reported entries
//   recall   fraction of the true top-(k/10) items that are monitored
//   heavy_missing  items above N/k that are not monitored (always 0)
#include <tally/sketch/top_k.hpp>

#include <benchmark/benchmark.h>

#include "bench_support.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

using tally::bench::stream_len;
using tally::bench::zipf_keys;

const std::vector<std::string>& string_keys() {
    static const std::vector<std::string> keys = [] {
        std::vector<std::string> out;
        out.reserve(stream_len);
        for (const auto k : zipf_keys()) out.push_back("user:" + std::to_string(k));
        return out;
    }();
    return keys;
}

template <class T>
void accuracy_counters(benchmark::State& state, const std::vector<T>& keys, std::size_t k) {
    tally::TopK<T> top(k);
    std::unordered_map<T, std::uint64_t> truth;
    for (const auto& x : keys) top.add(x), ++truth[x];
    std::vector<std::pair<T, std::uint64_t>> by_count(truth.begin(), truth.end());
    std::sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    double rel = 0;
    const auto best = top.top(10);
    for (const auto& e : best)
        rel += static_cast<double>(e.count - truth[e.item]) / static_cast<double>(truth[e.item]);
    std::size_t found = 0;
    const std::size_t want = std::max<std::size_t>(1, k / 10);
    for (std::size_t i = 0; i < want; ++i) found += top.contains(by_count[i].first);
    std::size_t heavy_missing = 0;
    for (const auto& [item, f] : by_count)
        if (f * k > keys.size()) heavy_missing += !top.contains(item);
    state.counters["rel_err"] = rel / static_cast<double>(best.size());
    state.counters["recall"] = static_cast<double>(found) / static_cast<double>(want);
    state.counters["heavy_missing"] = static_cast<double>(heavy_missing);
    state.counters["bytes"] = static_cast<double>(top.memory_bytes());
}

template <class T>
void BM_top_k_add(benchmark::State& state, const std::vector<T>* keys) {
    const auto k = static_cast<std::size_t>(state.range(0));
    tally::TopK<T> top(k);
    std::size_t i = 0;
    for (auto _ : state) {
        top.add((*keys)[i]);
        i = (i + 1) & (stream_len - 1);
    }
    benchmark::DoNotOptimize(top.total());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    accuracy_counters(state, *keys, k);
}

// Baseline: count everything exactly, then pick the top k (memory grows with
// the distinct keys; the selection at read time is not timed here).
template <class T>
void BM_unordered_map_baseline(benchmark::State& state, const std::vector<T>* keys) {
    std::unordered_map<T, std::uint64_t> counts;
    std::size_t i = 0;
    for (auto _ : state) {
        ++counts[(*keys)[i]];
        i = (i + 1) & (stream_len - 1);
    }
    benchmark::DoNotOptimize(counts.size());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["rel_err"] = 0;
    state.counters["recall"] = 1;
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = tally::bench::quick();
    const auto* ints = &zipf_keys();
    benchmark::RegisterBenchmark("BM_unordered_map_baseline", BM_unordered_map_baseline<std::uint64_t>, ints);
    for (const std::int64_t k : {100, 1000})
        benchmark::RegisterBenchmark("BM_top_k_add", BM_top_k_add<std::uint64_t>, ints)->Arg(k);
    if (!quick) {
        const auto* strings = &string_keys();
        benchmark::RegisterBenchmark("BM_unordered_map_baseline_string", BM_unordered_map_baseline<std::string>,
                                     strings);
        for (const std::int64_t k : {100, 1000})
            benchmark::RegisterBenchmark("BM_top_k_add_string", BM_top_k_add<std::string>, strings)->Arg(k);
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
