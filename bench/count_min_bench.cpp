// CountMin add/estimate next to, in the same run: an exact std::unordered_map
// counter; the textbook pairwise-independent Count-Min (one Carter-Wegman hash
// ((a x + b) mod 2^61-1) mod width per row, as Cormode & Muthukrishnan define
// it); and the double-hashed rows tally used before version 2 (h1 + i*h2 over
// the hash's 32-bit halves: fast, but rows not independent).
//
// Keys: a fixed Zipf(1.0) stream over 10^6 distinct keys (2^20 items, cycled),
// hashed with tally::Hasher<std::uint64_t> inside add(). rel_err: mean
// (estimate - truth) / truth over the 100 most frequent keys after one pass
// of the whole stream; err_per_N: mean (estimate - truth) / N over all keys,
// to compare with the bound epsilon = e / width (reported as eps).
#include <tally/detail/primitives.hpp>
#include <tally/sketch/frequency/count_min.hpp>

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

// Row i's column from fastrange32(h1 + i * h2), h1/h2 the 32-bit halves of
// the hash, saturating per row: tally's add up to format version 1, for the
// speed comparison (rows not independent: see docs/count_min.md).
class DoubleHashedCountMin {
  public:
    DoubleHashedCountMin(std::size_t width, std::size_t depth) : w_(width), d_(depth), cells_(width * depth) {}
    void add(std::uint64_t key) noexcept {
        const std::uint64_t h = tally::hash_of(key);
        std::uint32_t g = static_cast<std::uint32_t>(h);
        const std::uint32_t step = static_cast<std::uint32_t>(h >> 32);
        std::uint32_t* row = cells_.data();
        for (std::size_t i = 0; i < 4; ++i, row += w_, g += step) {
            std::uint32_t& cell = row[(static_cast<std::uint64_t>(g) * w_) >> 32];
            cell = tally::detail::sat_add(cell, 1u);  // as version 1 did, per row
        }
        total_ = tally::detail::sat_add(total_, std::uint64_t{1});
    }
    [[nodiscard]] std::uint64_t estimate(std::uint64_t key) const noexcept {
        const std::uint64_t h = tally::hash_of(key);
        std::uint32_t g = static_cast<std::uint32_t>(h);
        const std::uint32_t step = static_cast<std::uint32_t>(h >> 32);
        const std::uint32_t* row = cells_.data();
        std::uint32_t low = ~0u;
        for (std::size_t i = 0; i < d_; ++i, row += w_, g += step)
            low = std::min(low, row[(static_cast<std::uint64_t>(g) * w_) >> 32]);
        return low;
    }
    [[nodiscard]] std::uint64_t total() const noexcept { return total_; }
    [[nodiscard]] double epsilon() const noexcept { return 2.718281828459045 / static_cast<double>(w_); }
    [[nodiscard]] std::size_t memory_bytes() const noexcept { return cells_.size() * 4; }

  private:
    std::size_t w_, d_;
    std::uint64_t total_ = 0;
    std::vector<std::uint32_t> cells_;
};

// The textbook construction: per row h_i(x) = ((a_i x + b_i) mod p) mod width
// with p = 2^61 - 1 (Carter & Wegman 1979), applied to the item's 64-bit hash.
class TextbookCountMin {
  public:
    TextbookCountMin(std::size_t width, std::size_t depth) : w_(width), d_(depth), cells_(width * depth) {
        std::uint64_t s = 12345;
        for (std::size_t i = 0; i < depth; ++i) {
            a_[i] = 1 + tally::detail::mix64(s++) % (p - 1);
            b_[i] = tally::detail::mix64(s++) % p;
        }
    }
    void add(std::uint64_t key) noexcept {
        const std::uint64_t x = tally::hash_of(key) % p;
        std::uint32_t* row = cells_.data();
        for (std::size_t i = 0; i < 4; ++i, row += w_) row[cw(i, x) % w_] += 1;
        ++total_;
    }
    [[nodiscard]] std::uint64_t estimate(std::uint64_t key) const noexcept {
        const std::uint64_t x = tally::hash_of(key) % p;
        const std::uint32_t* row = cells_.data();
        std::uint32_t low = ~0u;
        for (std::size_t i = 0; i < d_; ++i, row += w_) low = std::min(low, row[cw(i, x) % w_]);
        return low;
    }
    [[nodiscard]] std::uint64_t total() const noexcept { return total_; }
    [[nodiscard]] double epsilon() const noexcept { return 2.718281828459045 / static_cast<double>(w_); }
    [[nodiscard]] std::size_t memory_bytes() const noexcept { return cells_.size() * 4; }

  private:
    static constexpr std::uint64_t p = (std::uint64_t{1} << 61) - 1;
    std::uint64_t cw(std::size_t i, std::uint64_t x) const noexcept {
        const tally::detail::uint128 v = static_cast<tally::detail::uint128>(a_[i]) * x + b_[i];
        std::uint64_t r = static_cast<std::uint64_t>(v & p) + static_cast<std::uint64_t>(v >> 61);
        r = (r & p) + (r >> 61);
        return r >= p ? r - p : r;
    }
    std::size_t w_, d_;
    std::uint64_t total_ = 0;
    std::uint64_t a_[8]{}, b_[8]{};
    std::vector<std::uint32_t> cells_;
};

template <class Sketch>
void BM_count_min_baseline(benchmark::State& state) {
    const auto width = static_cast<std::size_t>(state.range(0));
    const auto& keys = zipf_keys();
    Sketch cm(width, 4);
    std::size_t i = 0;
    for (auto _ : state) {
        cm.add(keys[i]);
        i = (i + 1) & (stream_len - 1);
    }
    benchmark::DoNotOptimize(cm.total());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    Sketch fresh(width, 4);
    for (const auto k : keys) fresh.add(k);
    accuracy_counters(state, fresh);
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
        benchmark::RegisterBenchmark("BM_count_min_add_textbook_baseline", BM_count_min_baseline<TextbookCountMin>)
            ->Arg(width);
        benchmark::RegisterBenchmark("BM_count_min_add_double_hashed_v1", BM_count_min_baseline<DoubleHashedCountMin>)
            ->Arg(width);
        benchmark::RegisterBenchmark("BM_count_min_add_conservative", BM_count_min_add, true)->Arg(width);
        if (!quick) benchmark::RegisterBenchmark("BM_count_min_estimate", BM_count_min_estimate)->Arg(width);
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
