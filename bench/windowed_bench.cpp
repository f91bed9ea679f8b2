// Windowed<S, Slots> against the bare sketch (add) and against the naive
// window that merges every bucket per query (view), in one binary.
//
//   bench_windowed --benchmark_min_time=0.1
//
// Buckets are 2^20 ns wide. Add rows advance time 64 ns or 1 ns per add (a
// roll every 2^14 or 2^20 adds); view rows 64 ns per add.
// View rows time only the view (manual timing around it); the Q adds between
// two views run outside the timed region.
#include <benchmark/benchmark.h>

#include <tally/sketch/distinct/hyperloglog.hpp>
#include <tally/sketch/quantiles/tdigest.hpp>
#include <tally/window/windowed.hpp>

#include <chrono>
#include <cstdint>
#include <vector>

#include "bench_support.hpp"

namespace {

using u64 = std::uint64_t;
constexpr u64 bucket_ns = u64{1} << 20;
constexpr u64 tick = 64;

struct Hll {
    using S = tally::HyperLogLog;
    static S make() { return S(12); }
    static void add(S& s, u64 key) { s.add(key); }
    template <class Win>
    static void add(Win& w, u64 t, u64 key) {
        w.add(t, key);
    }
};

struct Td {
    using S = tally::TDigest;
    static S make() { return S(100); }
    static double value(u64 key) { return static_cast<double>(key & 0xfffff) * 0.001; }
    static void add(S& s, u64 key) { s.add(value(key)); }
    template <class Win>
    static void add(Win& w, u64 t, u64 key) {
        w.add(t, value(key));
    }
};

// The straightforward window: the same ring, and a query merges every bucket.
template <class S, std::size_t Slots>
class Naive {
  public:
    Naive(u64 width, const S& proto) : width_(width), proto_(proto), ring_(Slots, proto), out_(proto) {}
    template <class... A>
    void add(u64 now, A&&... a) {
        const u64 b = now / width_;
        if (b > newest_) roll(b);
        if (newest_ - b < Slots) ring_[b % Slots].add(std::forward<A>(a)...);
    }
    const S& view(u64 now) {
        const u64 b = now / width_;
        if (b > newest_) roll(b);
        out_ = ring_[0];
        for (std::size_t i = 1; i < Slots; ++i) out_.merge(ring_[i]);
        return out_;
    }

  private:
    void roll(u64 b) {
        for (u64 i = newest_ + 1; i <= b && i <= newest_ + Slots; ++i) ring_[i % Slots] = proto_;
        newest_ = b;
    }
    u64 width_;
    u64 newest_ = 0;
    S proto_;
    std::vector<S> ring_;
    S out_;
};

// The bare sketch, started afresh every PerBucket adds (as each bucket of a
// window is); PerBucket = 0: one sketch for the whole run.
template <class K, std::size_t PerBucket>
void BM_BareAdd(benchmark::State& state) {
    const auto& keys = tally::bench::zipf_keys();
    const typename K::S proto = K::make();
    typename K::S s = proto;
    std::size_t i = 0;
    for (auto _ : state) {
        K::add(s, keys[i++ & (tally::bench::stream_len - 1)] * 0x9e3779b97f4a7c15ull);
        if (PerBucket != 0 && i % PerBucket == 0) s = proto;
    }
    benchmark::DoNotOptimize(&s);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

template <class K, class Win, u64 Tick>
void BM_WindowAdd(benchmark::State& state) {
    const auto& keys = tally::bench::zipf_keys();
    Win w(bucket_ns, K::make());
    std::size_t i = 0;
    u64 t = 0;
    for (auto _ : state) {
        K::add(w, t += Tick, keys[i++ & (tally::bench::stream_len - 1)] * 0x9e3779b97f4a7c15ull);
    }
    benchmark::DoNotOptimize(&w);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

// Q adds (untimed), then one timed view.
template <class K, class Win, int Q>
void BM_View(benchmark::State& state) {
    const auto& keys = tally::bench::zipf_keys();
    Win w(bucket_ns, K::make());
    std::size_t i = 0;
    u64 t = 0;
    // Fill the whole window first, so every bucket holds data.
    while (t < (Win::slot_count + 1) * bucket_ns)
        K::add(w, t += tick * 16, keys[i++ & (tally::bench::stream_len - 1)] * 0x9e3779b97f4a7c15ull);
    for (auto _ : state) {
        for (int q = 0; q < Q; ++q)
            K::add(w, t += tick, keys[i++ & (tally::bench::stream_len - 1)] * 0x9e3779b97f4a7c15ull);
        const auto t0 = std::chrono::steady_clock::now();
        const auto& v = w.view(t);
        benchmark::DoNotOptimize(&v);
        const auto t1 = std::chrono::steady_clock::now();
        state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    }
}

template <class S, std::size_t Slots>
struct NaiveWinBaseline : Naive<S, Slots> {
    static constexpr std::size_t slot_count = Slots;
    using Naive<S, Slots>::Naive;
};

}  // namespace

// Add rows: 2^14 adds per bucket (Tick 64) and 2^20 (Tick 1), each beside the
// bare sketch restarted at the same period, and the bare sketch never restarted.
#define TALLY_ADD_ROWS(K, S)                                                  \
    BENCHMARK_TEMPLATE(BM_BareAdd, K, 0);                                     \
    BENCHMARK_TEMPLATE(BM_BareAdd, K, 16384);                                 \
    BENCHMARK_TEMPLATE(BM_WindowAdd, K, tally::Windowed<S, 8>, 64);           \
    BENCHMARK_TEMPLATE(BM_WindowAdd, K, tally::Windowed<S, 61>, 64);          \
    BENCHMARK_TEMPLATE(BM_BareAdd, K, 1048576);                               \
    BENCHMARK_TEMPLATE(BM_WindowAdd, K, tally::Windowed<S, 8>, 1);            \
    BENCHMARK_TEMPLATE(BM_WindowAdd, K, tally::Windowed<S, 61>, 1);

TALLY_ADD_ROWS(Hll, tally::HyperLogLog)
TALLY_ADD_ROWS(Td, tally::TDigest)

#define TALLY_VIEW_ROWS(K, S, SLOTS)                                                          \
    BENCHMARK_TEMPLATE(BM_View, K, tally::Windowed<S, SLOTS>, 1)->UseManualTime();           \
    BENCHMARK_TEMPLATE(BM_View, K, NaiveWinBaseline<S, SLOTS>, 1)->UseManualTime();                   \
    BENCHMARK_TEMPLATE(BM_View, K, tally::Windowed<S, SLOTS>, 1000)->UseManualTime();        \
    BENCHMARK_TEMPLATE(BM_View, K, NaiveWinBaseline<S, SLOTS>, 1000)->UseManualTime();

TALLY_VIEW_ROWS(Hll, tally::HyperLogLog, 8)
TALLY_VIEW_ROWS(Hll, tally::HyperLogLog, 61)
TALLY_VIEW_ROWS(Td, tally::TDigest, 8)
TALLY_VIEW_ROWS(Td, tally::TDigest, 61)

BENCHMARK_MAIN();
