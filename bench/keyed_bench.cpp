// KeyedLimiter<uint64_t, Gcra>: ns per try_acquire at 1K, 64K, 1M and 16M
// keys (16M only without TALLY_BENCH_QUICK), uniform and Zipfian (theta 0.99)
// key streams, single and batch calls, next to
//   BM_unordered_map_baseline   std::unordered_map<uint64_t, Gcra>, same stream
//   BM_random_line_read_floor   one independent random 64-byte line read over
//                               an array the size of the table (the MLP floor)
//   BM_dependent_miss_floor     a dependent random line read (pointer chase):
//                               the latency of one miss, the single-path floor
// Names end in /<dist>/<keys> so scripts/bench_summary.py pairs each with the
// baseline of the same distribution and size. Key streams are precomputed.
#include <tally/limit/gcra.hpp>
#include <tally/limit/keyed.hpp>

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench_support.hpp"

namespace {

using Table = tally::KeyedLimiter<std::uint64_t, tally::Gcra>;

constexpr std::size_t stream_len = std::size_t{1} << 21;  // 16 MiB of keys, a power of two
constexpr std::size_t batch_len = 256;

const tally::Quota quota = tally::Quota::per_second(1000).with_burst(100);

std::uint64_t splitmix(std::uint64_t& s) {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Key of rank r: distinct, unrelated to the hash.
std::uint64_t key_of(std::uint64_t r) { return r * 0x2545f4914f6cdd1dull + 12345; }

// Zipf(theta) ranks in [0, n): Gray et al., "Quickly generating billion-record
// synthetic databases" (SIGMOD 1994), the generator YCSB uses.
std::vector<std::uint64_t> zipf_stream(std::size_t n, double theta, std::uint64_t seed) {
    double zetan = 0;
    for (std::size_t i = 1; i <= n; ++i) zetan += 1.0 / std::pow(static_cast<double>(i), theta);
    const double zeta2 = 1.0 + 1.0 / std::pow(2.0, theta);
    const double alpha = 1.0 / (1.0 - theta);
    const double eta = (1.0 - std::pow(2.0 / static_cast<double>(n), 1.0 - theta)) / (1.0 - zeta2 / zetan);
    std::vector<std::uint64_t> out(stream_len);
    for (auto& k : out) {
        const double u = static_cast<double>(splitmix(seed) >> 11) * 0x1.0p-53;
        const double uz = u * zetan;
        std::uint64_t r;
        if (uz < 1.0) {
            r = 0;
        } else if (uz < zeta2) {
            r = 1;
        } else {
            r = static_cast<std::uint64_t>(static_cast<double>(n) * std::pow(eta * u - eta + 1.0, alpha));
        }
        if (r >= n) r = n - 1;
        k = key_of(r);
    }
    return out;
}

std::vector<std::uint64_t> uniform_stream(std::size_t n, std::uint64_t seed) {
    std::vector<std::uint64_t> out(stream_len);
    for (auto& k : out) k = key_of(splitmix(seed) % n);
    return out;
}

struct Line {
    std::uint64_t w[8];
};

// Everything for one key count, built once and kept while that size runs.
struct Fixture {
    std::size_t n = 0;
    std::unique_ptr<Table> table;
    std::unique_ptr<std::unordered_map<std::uint64_t, tally::Gcra>> map;
    std::vector<std::uint64_t> uniform, zipf;
    std::vector<Line> lines;            // as many lines as the table has groups
    std::vector<std::uint32_t> line_idx;  // random line per stream position
};

Fixture& fixture(std::size_t n) {
    static Fixture f;
    if (f.n == n) return f;
    f = Fixture{};  // free the previous size first
    f.n = n;
    f.table = std::make_unique<Table>(quota, n + n / 4);  // 80% full: no active-key evictions
    for (std::size_t r = 0; r < n; ++r) f.table->try_acquire(key_of(r), 1);
    f.uniform = uniform_stream(n, 1);
    f.zipf = zipf_stream(n, 0.99, 2);
    f.lines.resize(f.table->group_count());
    for (std::size_t i = 0; i < f.lines.size(); ++i) f.lines[i].w[0] = i;
    std::uint64_t s = 3;
    f.line_idx.resize(stream_len);
    for (auto& i : f.line_idx) i = static_cast<std::uint32_t>(splitmix(s) % f.lines.size());
    return f;
}

std::unordered_map<std::uint64_t, tally::Gcra>& baseline_map(Fixture& f) {
    if (!f.map) {
        f.map = std::make_unique<std::unordered_map<std::uint64_t, tally::Gcra>>();
        f.map->reserve(f.n);
        for (std::size_t r = 0; r < f.n; ++r) f.map->emplace(key_of(r), tally::Gcra(quota));
    }
    return *f.map;
}

const std::vector<std::uint64_t>& stream(Fixture& f, bool zipf) { return zipf ? f.zipf : f.uniform; }

void BM_keyed_single(benchmark::State& state, std::size_t n, bool zipf) {
    Fixture& f = fixture(n);
    const auto& keys = stream(f, zipf);
    Table& t = *f.table;
    std::size_t i = 0;
    std::uint64_t now = 1'000'000'000, allowed = 0;
    for (auto _ : state) {
        allowed += t.try_acquire(keys[i], now).allowed;
        i = (i + 1) & (stream_len - 1);
        now += 64;
    }
    benchmark::DoNotOptimize(allowed);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["bytes_per_key"] = static_cast<double>(t.memory_bytes()) / static_cast<double>(n);
    state.counters["evictions"] = static_cast<double>(t.evictions());
}

void BM_keyed_batch(benchmark::State& state, std::size_t n, bool zipf) {
    Fixture& f = fixture(n);
    const auto& keys = stream(f, zipf);
    Table& t = *f.table;
    std::vector<tally::Decision> out(batch_len);
    std::size_t i = 0;
    std::uint64_t now = 1'000'000'000, allowed = 0;
    for (auto _ : state) {
        t.try_acquire_batch(std::span<const std::uint64_t>(keys.data() + i, batch_len), now, out);
        allowed += out[0].allowed;
        i = (i + batch_len) & (stream_len - 1);
        now += 64 * batch_len;
    }
    benchmark::DoNotOptimize(allowed);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch_len));
    state.counters["bytes_per_key"] = static_cast<double>(t.memory_bytes()) / static_cast<double>(n);
}

void BM_unordered_map_baseline(benchmark::State& state, std::size_t n, bool zipf) {
    Fixture& f = fixture(n);
    const auto& keys = stream(f, zipf);
    auto& m = baseline_map(f);
    std::size_t i = 0;
    std::uint64_t now = 1'000'000'000, allowed = 0;
    for (auto _ : state) {
        auto it = m.find(keys[i]);
        if (it == m.end()) it = m.emplace(keys[i], tally::Gcra(quota)).first;
        allowed += it->second.try_acquire(now).allowed;
        i = (i + 1) & (stream_len - 1);
        now += 64;
    }
    benchmark::DoNotOptimize(allowed);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    // libstdc++ node: next pointer + pair<key, Gcra>, rounded to malloc's 16
    // bytes, plus one bucket pointer per key (an estimate: no allocator hook).
    const std::size_t node = (sizeof(void*) + sizeof(std::pair<const std::uint64_t, tally::Gcra>) + 8 + 15) / 16 * 16;
    state.counters["bytes_per_key"] =
        static_cast<double>(m.size() * node + m.bucket_count() * sizeof(void*)) / static_cast<double>(n);
}

void BM_random_line_read_floor(benchmark::State& state, std::size_t n, bool) {
    Fixture& f = fixture(n);
    const Line* lines = f.lines.data();
    const std::uint32_t* idx = f.line_idx.data();
    std::size_t i = 0;
    std::uint64_t sum = 0;
    for (auto _ : state) {
        sum += lines[idx[i]].w[0];
        i = (i + 1) & (stream_len - 1);
    }
    benchmark::DoNotOptimize(sum);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["bytes_per_key"] =
        static_cast<double>(f.lines.size() * sizeof(Line)) / static_cast<double>(n);
}

void BM_dependent_miss_floor(benchmark::State& state, std::size_t n, bool) {
    Fixture& f = fixture(n);
    // A single random cycle through every line (Sattolo's shuffle): each read
    // depends on the previous one, so no two misses overlap.
    std::vector<std::uint32_t> perm(f.lines.size());
    std::iota(perm.begin(), perm.end(), 0u);
    std::uint64_t s = 9;
    for (std::size_t k = perm.size() - 1; k > 0; --k) std::swap(perm[k], perm[splitmix(s) % k]);
    for (std::size_t k = 0; k < perm.size(); ++k) f.lines[perm[k]].w[1] = perm[(k + 1) % perm.size()];
    std::uint64_t at = perm[0];
    for (auto _ : state) at = f.lines[at].w[1];
    benchmark::DoNotOptimize(at);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = tally::bench::quick();
    std::vector<std::size_t> sizes{1u << 10, 1u << 16, 1u << 20};
    if (!quick) sizes.push_back(1u << 24);
    for (const std::size_t n : sizes) {
        for (const bool zipf : {false, true}) {
            const std::string suffix = std::string(zipf ? "/zipf/" : "/uniform/") + std::to_string(n);
            benchmark::RegisterBenchmark(("BM_keyed_single" + suffix).c_str(), BM_keyed_single, n, zipf);
            benchmark::RegisterBenchmark(("BM_keyed_batch" + suffix).c_str(), BM_keyed_batch, n, zipf);
            benchmark::RegisterBenchmark(("BM_unordered_map_baseline" + suffix).c_str(), BM_unordered_map_baseline,
                                         n, zipf);
        }
        const std::string suffix = "/uniform/" + std::to_string(n);
        benchmark::RegisterBenchmark(("BM_random_line_read_floor" + suffix).c_str(), BM_random_line_read_floor, n,
                                     false);
        benchmark::RegisterBenchmark(("BM_dependent_miss_floor" + suffix).c_str(), BM_dependent_miss_floor, n,
                                     false);
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
