// TopK add next to an exact std::unordered_map counter in the same run.
//
// Keys: a fixed Zipf(1.0) stream over 10^6 distinct keys (2^20 items, cycled);
// the string variant uses the same ranks as "user:<rank>" strings (6 to 12
// bytes: held in the slot), the long-string variant "tenant-0042/user:<rank>"
// (18 to 24 bytes: held in the string arena), built before timing. Sizes: TopK(k) for k = 100 and 1000, and two memory budgets
// (9000 bytes, 72 KiB). Accuracy after one pass of the whole stream:
//   bytes          memory_bytes() at the end
//   k              the guarantee's k: every item above N/k is held
//   err_bound_N    error_bound() / N, the largest error of any estimate
//   recall10/100   fraction of the true top-10 / top-100 items held
//   heavy_missing  items above N/k that are not held (always 0)
#include <tally/sketch/frequency/top_k.hpp>

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

std::vector<std::string> make_string_keys(const std::string& prefix) {
    std::vector<std::string> out;
    out.reserve(stream_len);
    for (const auto k : zipf_keys()) out.push_back(prefix + std::to_string(k));
    return out;
}
const std::vector<std::string>& string_keys() {
    static const std::vector<std::string> keys = make_string_keys("user:");
    return keys;
}
const std::vector<std::string>& long_string_keys() {
    static const std::vector<std::string> keys = make_string_keys("tenant-0042/user:");
    return keys;
}

template <class T>
tally::TopK<T> make(std::int64_t size_arg) {
    // Positive: TopK(k). Negative: a memory budget of -size_arg bytes.
    return size_arg > 0 ? tally::TopK<T>(static_cast<std::size_t>(size_arg))
                        : tally::TopK<T>::with_memory(static_cast<std::size_t>(-size_arg));
}

template <class T>
void accuracy_counters(benchmark::State& state, const std::vector<T>& keys) {
    auto top = make<T>(state.range(0));
    std::unordered_map<T, std::uint64_t> truth;
    for (const auto& x : keys) top.add(x), ++truth[x];
    std::vector<std::pair<T, std::uint64_t>> by_count(truth.begin(), truth.end());
    std::sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    auto recall = [&](std::size_t want) {
        std::size_t found = 0;
        for (std::size_t i = 0; i < want; ++i) found += top.contains(by_count[i].first);
        return static_cast<double>(found) / static_cast<double>(want);
    };
    std::size_t heavy_missing = 0;
    for (const auto& [item, f] : by_count)
        if (f * top.k() > keys.size()) heavy_missing += !top.contains(item);
    state.counters["k"] = static_cast<double>(top.k());
    state.counters["err_bound_N"] = static_cast<double>(top.error_bound()) / static_cast<double>(keys.size());
    state.counters["recall10"] = recall(10);
    state.counters["recall100"] = recall(100);
    state.counters["heavy_missing"] = static_cast<double>(heavy_missing);
    state.counters["bytes"] = static_cast<double>(top.memory_bytes());
}

template <class T>
void BM_top_k_add(benchmark::State& state, const std::vector<T>* keys) {
    auto top = make<T>(state.range(0));
    std::size_t i = 0;
    for (auto _ : state) {
        top.add((*keys)[i]);
        i = (i + 1) & (stream_len - 1);
    }
    benchmark::DoNotOptimize(top.total());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    accuracy_counters(state, *keys);
}

// Baseline: count everything exactly (memory grows with the distinct keys;
// picking the top items at read time is not timed here).
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
    state.counters["err_bound_N"] = 0;
    state.counters["recall10"] = 1;
    state.counters["recall100"] = 1;
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = tally::bench::quick();
    const auto* ints = &zipf_keys();
    const std::int64_t sizes[] = {100, 1000, -9000, -72 * 1024};  // k, or -bytes
    benchmark::RegisterBenchmark("BM_unordered_map_baseline", BM_unordered_map_baseline<std::uint64_t>, ints);
    for (const std::int64_t s : sizes)
        benchmark::RegisterBenchmark("BM_top_k_add", BM_top_k_add<std::uint64_t>, ints)->Arg(s);
    if (!quick) {
        const auto* strings = &string_keys();
        benchmark::RegisterBenchmark("BM_unordered_map_baseline_string", BM_unordered_map_baseline<std::string>,
                                     strings);
        for (const std::int64_t s : sizes)
            benchmark::RegisterBenchmark("BM_top_k_add_string", BM_top_k_add<std::string>, strings)->Arg(s);
        const auto* long_strings = &long_string_keys();
        benchmark::RegisterBenchmark("BM_unordered_map_baseline_long_string", BM_unordered_map_baseline<std::string>,
                                     long_strings);
        benchmark::RegisterBenchmark("BM_top_k_add_long_string", BM_top_k_add<std::string>, long_strings)->Arg(100);
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
