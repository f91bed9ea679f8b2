// BloomFilter (one cache line per key, SIMD) next to a classic unblocked
// Bloom filter (k independent positions over the whole array) in the same
// run, both at 1% for 100K keys (126 KB: in L2) and 10M keys (12.6 MB).
//
// Rows, each BM_<impl>/<op>/<keys>:
//   BM_bloom               add(key) / contains(key): hashes the u64 key
//                          (tally::hash_of) and probes, one key per call
//   BM_bloom32             BM_bloom on BloomFilter<32> (32-byte blocks, k = 8
//                          at 1%: one 256-bit word per key)
//   BM_bloom_hashed        add_hash / contains_hash of precomputed hashes:
//                          the filter alone, one key per call
//   BM_bloom32_hashed      BM_bloom_hashed on BloomFilter<32>
//   BM_bloom_batch         add_hashes / contains_hashes of precomputed hashes,
//                          256 per call (SIMD dispatch once per call,
//                          prefetch when the filter is larger than L2)
//   BM_bloom_scalar        BM_bloom on the portable kernel (not in quick mode)
//   BM_bloom_seeded        BM_bloom on a filter with a seed (keys remixed per
//                          filter; one out-of-line call per key; not in quick mode)
//   BM_line_probe_floor    precomputed hash -> block index -> one bit of that
//                          line read (or set): the least any one-line filter
//                          can do per key, to read BM_bloom_hashed against
//   BM_hash_line_probe_floor   the same, hashing the u64 key first: the
//                          floor under BM_bloom
//   BM_classic_bloom_baseline   the textbook filter, hashing like BM_bloom
// At 100M keys (126 MB, several times any L3) only the one-key-per-call rows
// run (BM_bloom, BM_bloom32 and BM_hash_line_probe_floor), and only outside
// quick mode.
// scripts/bench_summary.py pairs each row with the classic baseline of the
// same <op>/<keys>. Counters: bits_per_item and the fpp measured on 1M keys
// that were never added.
#include <tally/sketch/membership/bloom_filter.hpp>

#include <benchmark/benchmark.h>

#include "bench_support.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr double target_fpp = 0.01;
constexpr std::uint64_t miss_base = std::uint64_t{1} << 40;  // probes never added
constexpr std::uint64_t fpp_probes = 1'000'000;

// Baseline: the textbook filter. m = -n ln(p) / ln(2)^2 bits, k = round(m/n ln 2)
// positions h1 + i*h2 (Kirsch & Mitzenmacher) spread over the whole array, so
// a key touches up to k cache lines.
class ClassicBloom {
  public:
    ClassicBloom(std::size_t n, double p) {
        const double m = std::ceil(-static_cast<double>(n) * std::log(p) / (std::log(2.0) * std::log(2.0)));
        bits_ = static_cast<std::uint64_t>(m);
        k_ = static_cast<unsigned>(std::lround(m / static_cast<double>(n) * std::log(2.0)));
        words_.assign((bits_ + 63) / 64, 0);
    }
    void add(std::uint64_t key) noexcept {
        const std::uint64_t h = tally::hash_of(key);
        std::uint64_t a = h, b = (h >> 32) | (h << 32) | 1;
        for (unsigned i = 0; i < k_; ++i, a += b) {
            const std::uint64_t bit = pos(a);
            words_[bit >> 6] |= std::uint64_t{1} << (bit & 63);
        }
    }
    bool contains(std::uint64_t key) const noexcept {
        const std::uint64_t h = tally::hash_of(key);
        std::uint64_t a = h, b = (h >> 32) | (h << 32) | 1;
        for (unsigned i = 0; i < k_; ++i, a += b) {
            const std::uint64_t bit = pos(a);
            if ((words_[bit >> 6] & (std::uint64_t{1} << (bit & 63))) == 0) return false;
        }
        return true;
    }
    double bits_per_item(std::size_t n) const noexcept { return static_cast<double>(bits_) / static_cast<double>(n); }

  private:
    std::uint64_t pos(std::uint64_t a) const noexcept {
        return static_cast<std::uint64_t>((static_cast<tally::detail::uint128>(a) * bits_) >> 64);
    }
    std::uint64_t bits_ = 0;
    unsigned k_ = 0;
    std::vector<std::uint64_t> words_;
};

// A filter with a seed other than 0, as Seed::random() gives.
template <std::size_t BlockBytes>
struct SeededBloom : tally::BloomFilter<BlockBytes> {
    SeededBloom(std::size_t n, double p) : tally::BloomFilter<BlockBytes>(n, p, tally::Seed{0x9e3779b97f4a7c15ull}) {}
};

template <class F>
double measure_fpp(const F& f) {
    std::uint64_t fp = 0;
    for (std::uint64_t i = 0; i < fpp_probes; ++i) fp += f.contains(miss_base + i) ? 1 : 0;
    return static_cast<double>(fp) / static_cast<double>(fpp_probes);
}

template <class F>
double bits_per_item(const F& f, std::size_t n) {
    if constexpr (std::is_same_v<F, ClassicBloom>)
        return f.bits_per_item(n);
    else
        return f.bits_per_item();
}

// Filters holding keys [0, n) are built once per size, with their measured
// fpp, and shared by every row of that size.
template <class F>
struct Filled {
    F filter;
    double fpp;
    double bits_per_item;
};
template <class F>
const Filled<F>& filled(std::size_t n) {
    static std::map<std::size_t, std::unique_ptr<Filled<F>>> cache;
    auto& slot = cache[n];
    if (!slot) {
        F f(n, target_fpp);
        for (std::uint64_t i = 0; i < n; ++i) f.add(i);
        const double fpp = measure_fpp(f);
        const double bpi = bits_per_item(f, n);
        slot = std::make_unique<Filled<F>>(Filled<F>{std::move(f), fpp, bpi});
    }
    return *slot;
}

enum class Op { add, hit, miss };

// hash_of(key) for the n keys an op walks (0.. for add and hits, miss_base..
// for misses), plus 256 more that wrap around, so that a batch of 256 can
// start anywhere in [0, n). Built once per (n, op), outside timed loops.
const std::vector<std::uint64_t>& hashes_for(std::size_t n, Op op) {
    static std::map<std::pair<std::size_t, bool>, std::vector<std::uint64_t>> cache;
    const bool miss = op == Op::miss;
    auto& v = cache[{n, miss}];
    if (v.empty()) {
        const std::uint64_t first = miss ? miss_base : 0;
        v.resize(n + 256);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = tally::hash_of(first + i % n);
    }
    return v;
}

template <class F>
void run(benchmark::State& state, std::size_t n, Op op, bool scalar = false) {
    const auto& ref = filled<F>(n);
    if (op == Op::add) {
        F f(n, target_fpp);
        if constexpr (!std::is_same_v<F, ClassicBloom>) tally::detail::bloom_force_scalar(f, scalar);
        std::uint64_t key = 0;
        for (auto _ : state) {
            f.add(key);
            if (++key == n) key = 0;  // the filter never holds more than n keys
        }
        benchmark::DoNotOptimize(f);
    } else {
        F copy = ref.filter;  // a private copy so that force_scalar does not leak
        if constexpr (!std::is_same_v<F, ClassicBloom>) tally::detail::bloom_force_scalar(copy, scalar);
        const F& f = copy;
        std::uint64_t key = op == Op::hit ? 0 : miss_base;
        const std::uint64_t first = key, last = key + n;
        std::uint64_t found = 0;
        for (auto _ : state) {
            found += f.contains(key) ? 1 : 0;
            if (++key == last) key = first;
        }
        benchmark::DoNotOptimize(found);
        if (op == Op::hit && found != static_cast<std::uint64_t>(state.iterations()))
            state.SkipWithError("false negative");
    }
    state.counters["bits_per_item"] = ref.bits_per_item;
    state.counters["fpp"] = ref.fpp;
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

// The filter alone: add_hash / contains_hash over precomputed hashes.
template <class F>
void run_hashed(benchmark::State& state, std::size_t n, Op op) {
    const auto& ref = filled<F>(n);
    const auto& hashes = hashes_for(n, op);
    F f = op == Op::add ? F(n, target_fpp) : ref.filter;
    std::size_t i = 0;
    std::uint64_t found = 0;
    for (auto _ : state) {
        if (op == Op::add)
            f.add_hash(hashes[i]);
        else
            found += f.contains_hash(hashes[i]) ? 1 : 0;
        if (++i == n) i = 0;
    }
    benchmark::DoNotOptimize(found);
    benchmark::DoNotOptimize(f);
    if (op == Op::hit && found != static_cast<std::uint64_t>(state.iterations())) state.SkipWithError("false negative");
    state.counters["bits_per_item"] = ref.bits_per_item;
    state.counters["fpp"] = ref.fpp;
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

// The batch API over precomputed hashes, 256 per call.
void run_batch(benchmark::State& state, std::size_t n, Op op) {
    using F = tally::BloomFilter<>;
    const auto& ref = filled<F>(n);
    const auto& hashes = hashes_for(n, op);
    F f = op == Op::add ? F(n, target_fpp) : ref.filter;
    constexpr std::size_t chunk = 256;
    bool out[chunk];
    std::size_t i = 0;
    std::uint64_t found = 0;
    for (auto _ : state) {
        const std::span<const std::uint64_t> batch(hashes.data() + i, chunk);
        if (op == Op::add)
            f.add_hashes(batch);
        else
            found += f.contains_hashes(batch, out);
        i += chunk;
        if (i >= n) i -= n;
    }
    benchmark::DoNotOptimize(found);
    benchmark::DoNotOptimize(f);
    if (op == Op::hit && found != static_cast<std::uint64_t>(state.iterations()) * chunk)
        state.SkipWithError("false negative");
    state.counters["bits_per_item"] = ref.bits_per_item;
    state.counters["fpp"] = ref.fpp;
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * chunk));
}

// The floor: the same block count and fastrange as the filter, then one bit
// of the line read (or set). Anything that touches one line per key pays this.
// With hash_key, the key is hashed in the loop (as BM_bloom does) instead of
// read from the precomputed array.
void run_floor(benchmark::State& state, std::size_t n, Op op, bool hash_key) {
    struct alignas(64) Line {
        std::uint64_t w[8];
    };
    const auto& ref = filled<tally::BloomFilter<>>(n);
    static const std::vector<std::uint64_t> none;
    const auto& hashes = hash_key ? none : hashes_for(n, op);
    const std::uint64_t nlines = ref.filter.bit_bytes() / sizeof(Line);
    std::vector<Line> lines(nlines, Line{{~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull}});
    const std::uint64_t first_key = op == Op::miss ? miss_base : 0;
    std::size_t i = 0;
    std::uint64_t found = 0;
    for (auto _ : state) {
        const std::uint64_t h = hash_key ? tally::hash_of(first_key + i) : hashes[i];
        Line& line = lines[static_cast<std::size_t>((static_cast<tally::detail::uint128>(h) * nlines) >> 64)];
        if (op == Op::add)
            line.w[h & 7] |= std::uint64_t{1} << ((h >> 3) & 63);
        else
            found += (line.w[h & 7] >> ((h >> 3) & 63)) & 1;
        if (++i == n) i = 0;
    }
    benchmark::DoNotOptimize(found);
    benchmark::DoNotOptimize(lines.data());
    benchmark::ClobberMemory();
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

std::string size_name(std::size_t n) {
    return n >= 1'000'000 ? std::to_string(n / 1'000'000) + "M" : std::to_string(n / 1000) + "K";
}

void register_all() {
    // Quick mode (scripts/bench headline): both sizes, without the scalar rows.
    const bool quick = tally::bench::quick();
    const std::pair<const char*, Op> ops[] = {{"add", Op::add}, {"contains_hit", Op::hit}, {"contains_miss", Op::miss}};
    for (std::size_t n : {std::size_t{100'000}, std::size_t{10'000'000}, std::size_t{100'000'000}}) {
        const std::string s = size_name(n);
        const bool huge = n == 100'000'000;
        if (huge && quick) continue;
        for (const auto& [op_name, op] : ops) {
            const std::string suffix = std::string("/") + op_name + "/" + s;
            const Op o = op;
            if (huge) {  // one key per call only: no precomputed hash arrays of 800 MB
                benchmark::RegisterBenchmark(("BM_bloom" + suffix).c_str(),
                                             [n, o](benchmark::State& st) { run<tally::BloomFilter<>>(st, n, o); });
                benchmark::RegisterBenchmark(("BM_bloom32" + suffix).c_str(),
                                             [n, o](benchmark::State& st) { run<tally::BloomFilter<32>>(st, n, o); });
                benchmark::RegisterBenchmark(("BM_hash_line_probe_floor" + suffix).c_str(),
                                             [n, o](benchmark::State& st) { run_floor(st, n, o, true); });
                continue;
            }
            benchmark::RegisterBenchmark(("BM_bloom" + suffix).c_str(),
                                         [n, o](benchmark::State& st) { run<tally::BloomFilter<>>(st, n, o); });
            benchmark::RegisterBenchmark(("BM_bloom32" + suffix).c_str(),
                                         [n, o](benchmark::State& st) { run<tally::BloomFilter<32>>(st, n, o); });
            benchmark::RegisterBenchmark(("BM_bloom_hashed" + suffix).c_str(),
                                         [n, o](benchmark::State& st) { run_hashed<tally::BloomFilter<>>(st, n, o); });
            benchmark::RegisterBenchmark(("BM_bloom32_hashed" + suffix).c_str(), [n, o](benchmark::State& st) {
                run_hashed<tally::BloomFilter<32>>(st, n, o);
            });
            benchmark::RegisterBenchmark(("BM_bloom_batch" + suffix).c_str(),
                                         [n, o](benchmark::State& st) { run_batch(st, n, o); });
            if (!quick) {
                benchmark::RegisterBenchmark(("BM_bloom_scalar" + suffix).c_str(), [n, o](benchmark::State& st) {
                    run<tally::BloomFilter<>>(st, n, o, true);
                });
                benchmark::RegisterBenchmark(("BM_bloom_seeded" + suffix).c_str(), [n, o](benchmark::State& st) {
                    run<SeededBloom<tally::cache_line_size>>(st, n, o);
                });
            }
            benchmark::RegisterBenchmark(("BM_line_probe_floor" + suffix).c_str(),
                                         [n, o](benchmark::State& st) { run_floor(st, n, o, false); });
            benchmark::RegisterBenchmark(("BM_hash_line_probe_floor" + suffix).c_str(),
                                         [n, o](benchmark::State& st) { run_floor(st, n, o, true); });
            benchmark::RegisterBenchmark(("BM_classic_bloom_baseline" + suffix).c_str(),
                                         [n, o](benchmark::State& st) { run<ClassicBloom>(st, n, o); });
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::AddCustomContext("bloom_simd", tally::detail::bloom_simd_name<tally::BloomFilter<>::block_bits>());
    register_all();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
