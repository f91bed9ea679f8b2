// TDigest add / quantile / merge next to, in the same run: an exact
// sort-based baseline (collect the values, sort, index), and for quantile and
// cdf the linear walk over the centroids that answered queries before the
// cumulative-weight view (same answers, bit for bit).
#include <tally/sketch/quantiles/tdigest.hpp>

#include <benchmark/benchmark.h>

#include "bench_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <numbers>
#include <vector>

namespace {

using tally::bench::quick;

// Latency-like values: lognormal, from a fixed SplitMix64 stream.
std::vector<double> latencies(std::size_t n, std::uint64_t seed) {
    std::vector<double> v(n);
    std::uint64_t s = seed;
    auto next = [&] {
        std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return static_cast<double>((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
    };
    for (double& x : v) {
        const double u1 = std::max(next(), 1e-300), u2 = next();
        x = std::exp(0.5 * std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2) + 3);
    }
    return v;
}

const std::vector<double>& data() {
    static const std::vector<double> v = latencies(std::size_t{1} << 20, 42);
    return v;
}

// The same latencies logged in whole milliseconds (median 20 ms): tied data,
// every value a few hundred times or more.
const std::vector<double>& data_ms() {
    static const std::vector<double> v = [] {
        std::vector<double> r = data();
        for (double& x : r) x = std::round(x);
        return r;
    }();
    return v;
}

const std::vector<double>& sorted_data() {
    static const std::vector<double> s = [] {
        std::vector<double> v = data();
        std::sort(v.begin(), v.end());
        return v;
    }();
    return s;
}

// The knots of the interpolated quantile function, walked from the left on
// every query (the pre-view algorithm).
struct LinearWalk {
    std::vector<double> pos, val;
    double n = 0;
    explicit LinearWalk(tally::TDigest& d) : n(d.total()) {
        const auto cs = d.centroids();
        double prev = 0, w_before = 0;
        auto emit = [&](double p, double v) {
            p = std::clamp(p, prev, n);
            prev = p;
            pos.push_back(p);
            val.push_back(v);
        };
        emit(0, d.min());
        for (std::size_t i = 0; i < cs.size(); ++i) {
            const double half = cs[i].weight / 2;
            if (cs[i].weight <= 1) {
                emit(w_before, cs[i].mean);
                emit(w_before + cs[i].weight, cs[i].mean);
            } else {
                if (i == 0) emit(std::min(1.0, half), d.min());
                emit(w_before + half, cs[i].mean);
                if (i + 1 == cs.size()) emit(n - std::min(1.0, half), d.max());
            }
            w_before += cs[i].weight;
        }
        emit(n, d.max());
    }
    double quantile(double q) const {
        const double r = q * n;
        double pp = 0, pv = val[0];
        for (std::size_t i = 0; i < pos.size(); ++i) {
            if (pos[i] >= r) return (i == 0 || pos[i] <= pp) ? val[i] : pv + (val[i] - pv) * ((r - pp) / (pos[i] - pp));
            pp = pos[i];
            pv = val[i];
        }
        return val.back();
    }
    double cdf(double x) const {
        if (x < val.front()) return 0;
        if (x >= val.back()) return 1;
        double pp = 0, pv = val[0];
        for (std::size_t i = 0; i < pos.size(); ++i) {
            if (val[i] > x) return (pp + (pos[i] - pp) * std::min(std::max((x - pv) / (val[i] - pv), 0.0), 1.0)) / n;
            pp = pos[i];
            pv = val[i];
        }
        return 1;
    }
};

template <bool Cdf>
void BM_linear_walk_baseline(benchmark::State& state) {
    const auto& v = data();
    tally::TDigest d(static_cast<double>(state.range(0)));
    for (double x : v) d.add(x);
    const LinearWalk walk(d);
    static constexpr double qs[8] = {0.5, 0.9, 0.99, 0.999, 0.01, 0.25, 0.75, 0.95};
    std::size_t i = 0;
    double sink = 0;
    for (auto _ : state) {
        if constexpr (Cdf) {
            sink += walk.cdf(v[i]);
            i = (i + 1) & 1023;
        } else {
            sink += walk.quantile(qs[i++ & 7]);
        }
    }
    benchmark::DoNotOptimize(sink);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}


// Worst rank error |F_exact(quantile(q)) - q| over q = 0.001 .. 0.999.
double max_rank_error(tally::TDigest& d) {
    const auto& sorted = sorted_data();
    double worst = 0;
    for (int i = 1; i <= 999; ++i) {
        const double q = i / 1000.0;
        const double f =
            static_cast<double>(std::upper_bound(sorted.begin(), sorted.end(), d.quantile(q)) - sorted.begin()) /
            static_cast<double>(sorted.size());
        worst = std::max(worst, std::fabs(f - q));
    }
    return worst;
}

// Amortized add, buffer passes included; Tied: the whole-millisecond data.
template <bool Tied = false>
void BM_add(benchmark::State& state) {
    const auto& v = Tied ? data_ms() : data();
    tally::TDigest d(static_cast<double>(state.range(0)));
    std::size_t i = 0;
    for (auto _ : state) {
        d.add(v[i]);
        i = (i + 1) & (v.size() - 1);
    }
    benchmark::DoNotOptimize(d.total());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["bytes"] = static_cast<double>(d.memory_bytes());
}

template <bool Tied = false>
void BM_quantile(benchmark::State& state) {
    const auto& v = Tied ? data_ms() : data();
    tally::TDigest d(static_cast<double>(state.range(0)));
    for (double x : v) d.add(x);
    d.flush();
    static constexpr double qs[8] = {0.5, 0.9, 0.99, 0.999, 0.01, 0.25, 0.75, 0.95};
    std::size_t i = 0;
    double sink = 0;
    for (auto _ : state) {
        sink += d.quantile(qs[i++ & 7]);
    }
    benchmark::DoNotOptimize(sink);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["centroids"] = static_cast<double>(d.centroids().size());
    if (!Tied) state.counters["rank_err"] = max_rank_error(d);
}

void BM_cdf(benchmark::State& state) {
    const auto& v = data();
    tally::TDigest d(static_cast<double>(state.range(0)));
    for (double x : v) d.add(x);
    d.flush();
    std::size_t i = 0;
    double sink = 0;
    for (auto _ : state) {
        sink += d.cdf(v[i]);
        i = (i + 1) & 1023;
    }
    benchmark::DoNotOptimize(sink);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

// Merging one shard digest (~100 centroids) into an accumulator.
void BM_merge(benchmark::State& state) {
    const auto& v = data();
    const double c = static_cast<double>(state.range(0));
    tally::TDigest shard(c), acc(c);
    for (std::size_t i = 0; i < v.size() / 2; ++i) shard.add(v[i]);
    for (std::size_t i = v.size() / 2; i < v.size(); ++i) acc.add(v[i]);
    shard.flush();
    acc.flush();
    for (auto _ : state) {
        acc.merge(shard);
    }
    benchmark::DoNotOptimize(acc.total());
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

// Exact baseline: collect n values, sort, read p50, p99, p99.9. Reported per
// value, comparable with BM_add (plus a few quantile reads per batch).
void BM_sort_baseline(benchmark::State& state) {
    const auto& v = data();
    const auto n = static_cast<std::size_t>(state.range(0));
    std::vector<double> buf;
    std::size_t start = 0;
    double sink = 0;
    for (auto _ : state) {
        buf.clear();
        for (std::size_t i = 0; i < n; ++i) buf.push_back(v[(start + i) & (v.size() - 1)]);
        std::sort(buf.begin(), buf.end());
        for (double q : {0.5, 0.99, 0.999})
            sink += buf[static_cast<std::size_t>(std::ceil(q * static_cast<double>(n))) - 1];
        start += 4097;
    }
    benchmark::DoNotOptimize(sink);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
    state.counters["bytes"] = static_cast<double>(n * sizeof(double));
}

// Exact baseline quantile: index into an already sorted vector.
void BM_sorted_quantile_baseline(benchmark::State& state) {
    const auto& s = sorted_data();
    static constexpr double qs[8] = {0.5, 0.9, 0.99, 0.999, 0.01, 0.25, 0.75, 0.95};
    std::size_t i = 0;
    double sink = 0;
    for (auto _ : state) {
        const double q = qs[i++ & 7];
        sink += s[static_cast<std::size_t>(std::ceil(q * static_cast<double>(s.size()))) - 1];
    }
    benchmark::DoNotOptimize(sink);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

[[maybe_unused]] const int registered = [] {
    const double t = quick() ? 0.1 : 0.5;
    for (long c : {100L, 200L}) {
        benchmark::RegisterBenchmark("BM_add", BM_add<>)->Arg(c)->MinTime(t);
        benchmark::RegisterBenchmark("BM_quantile", BM_quantile<>)->Arg(c)->MinTime(t);
        benchmark::RegisterBenchmark("BM_quantile_linear_walk_baseline", BM_linear_walk_baseline<false>)
            ->Arg(c)
            ->MinTime(t);
    }
    benchmark::RegisterBenchmark("BM_add_ms", BM_add<true>)->Arg(100)->MinTime(t);
    benchmark::RegisterBenchmark("BM_quantile_ms", BM_quantile<true>)->Arg(100)->MinTime(t);
    benchmark::RegisterBenchmark("BM_cdf", BM_cdf)->Arg(100)->MinTime(t);
    benchmark::RegisterBenchmark("BM_cdf_linear_walk_baseline", BM_linear_walk_baseline<true>)->Arg(100)->MinTime(t);
    benchmark::RegisterBenchmark("BM_merge", BM_merge)->Arg(100)->Arg(200)->MinTime(t);
    benchmark::RegisterBenchmark("BM_sort_baseline", BM_sort_baseline)->Arg(quick() ? 1 << 16 : 1 << 20)->MinTime(t);
    benchmark::RegisterBenchmark("BM_sorted_quantile_baseline", BM_sorted_quantile_baseline)->MinTime(t);
    return 0;
}();

}  // namespace

BENCHMARK_MAIN();
