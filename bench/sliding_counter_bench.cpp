// SlidingCounter::allow() next to the textbook ring of sub-buckets (runtime n,
// std::vector<uint64_t>, O(n) sum, division, double) and a bare ring-counter
// loop (the floor: one increment of a ring slot per call), all in one run.
//
// Names: BM_allow<slot,total|sum,pow2|div>/<Slots>. The suffix after '/' is the
// slot count, so scripts/bench_summary.py compares each with
// BM_ring_baseline/<same n>.
//
// Time stream: `now` advances 1..7 ns per call (a fixed pseudo-random table),
// buckets are 1024 ns (pow2) or 1000 ns (div), so the ring rolls every ~250
// calls, as a hot key would. `limit` is above the arrival rate (every request
// admitted, the usual case); the `overload` variants set it to half the rate,
// so about half the calls are denied.
#include <tally/core/clock.hpp>
#include <tally/window/sliding_counter.hpp>

#include <benchmark/benchmark.h>

#include "bench_support.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using tally::bench::quick;

// benchmark 1.7.1's non-const DoNotOptimize uses an in/out "+m,r" asm operand
// that g++ 12 -O3 miscompiles here (the value read back is wrong); the const
// (input-only) overload is enough to keep a result alive.
template <class T>
void keep(const T& value) {
    benchmark::DoNotOptimize(value);
}

// 1..7 ns steps, average 4 (filled once by fill_steps() before any benchmark).
std::array<std::uint8_t, 4096> step_table;
void fill_steps() {
    std::uint64_t x = 0x9e3779b97f4a7c15ull;
    for (auto& s : step_table) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        s = static_cast<std::uint8_t>(1 + (x >> 33) % 7);
    }
}
const std::array<std::uint8_t, 4096>& steps() { return step_table; }

// Arrivals per window at 4 ns per call: window / 4.
std::uint64_t limit_for(std::uint64_t window_ns, bool overload) {
    const std::uint64_t rate = window_ns / 4;
    return overload ? rate / 2 : rate * 2;
}

// The textbook ring: a runtime-sized vector of buckets, advanced one bucket
// at a time, summed on every read, decided in double arithmetic.
class TextbookRing {
  public:
    TextbookRing(std::size_t n, std::uint64_t bucket_ns) : slots_(n, 0), bucket_ns_(bucket_ns) {}
    void advance(std::uint64_t b) {
        if (b > newest_) {
            const std::uint64_t n = slots_.size();
            for (std::uint64_t i = 1; i <= std::min(b - newest_, n); ++i) slots_[(newest_ + i) % n] = 0;
            newest_ = b;
        }
    }
    void add(std::uint64_t now_ns, std::uint64_t count) {
        const std::uint64_t b = now_ns / bucket_ns_;
        advance(b);
        const std::uint64_t n = slots_.size();
        if (newest_ - b < n) slots_[b % n] += count;
    }
    double estimate(std::uint64_t now_ns) {
        const std::uint64_t b = std::max(now_ns / bucket_ns_, newest_);
        advance(b);
        const std::uint64_t n = slots_.size();
        const std::uint64_t elapsed = now_ns / bucket_ns_ >= b ? now_ns % bucket_ns_ : 0;
        const double oldest = static_cast<double>(slots_[(b + 1) % n]);
        std::uint64_t sum = 0;
        for (const std::uint64_t s : slots_) sum += s;
        const std::uint64_t rest = sum - static_cast<std::uint64_t>(oldest);
        const double kept = static_cast<double>(bucket_ns_ - elapsed) / static_cast<double>(bucket_ns_);
        return static_cast<double>(rest) + oldest * kept;
    }
    bool allow(std::uint64_t now_ns, std::uint64_t limit) {
        if (estimate(now_ns) + 1.0 <= static_cast<double>(limit)) {
            add(now_ns, 1);
            return true;
        }
        return false;
    }

  private:
    std::vector<std::uint64_t> slots_;
    std::uint64_t bucket_ns_;
    std::uint64_t newest_ = 0;
};

void BM_ring_baseline(benchmark::State& state, std::size_t n) {
    TextbookRing c(n, 1000);
    const std::uint64_t limit = limit_for((n - 1) * 1000, false);
    const auto& st = steps();
    std::uint64_t now = 1'000'000'000, admitted = 0;
    std::size_t i = 0;
    for (auto _ : state) {
        now += st[i++ & 4095];
        admitted += c.allow(now, limit);
    }
    keep(admitted);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["admitted"] = static_cast<double>(admitted) / static_cast<double>(state.iterations());
}

// The floor: what any ring counter must do per call (derive the bucket,
// increment its slot).
template <std::size_t N>
void BM_bare_ring_floor(benchmark::State& state) {
    std::array<std::uint32_t, N> ring{};
    const auto& st = steps();
    std::uint64_t now = 1'000'000'000;
    std::size_t i = 0;
    keep(ring.data());
    for (auto _ : state) {
        now += st[i++ & 4095];
        ring[(now >> 10) % N] += 1;
    }
    benchmark::ClobberMemory();
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

template <class C, class Clock = void>
void BM_allow(benchmark::State& state, bool overload) {
    constexpr bool pow2 = C::options.pow2_buckets;
    C c(pow2 ? 1024 : 1000);
    // With a clock, `now` stands still between ticks; a limit no tick can
    // reach keeps these runs on the admit path too.
    const std::uint64_t limit = std::is_void_v<Clock> ? limit_for(c.window_ns(), overload) : ~std::uint64_t{0} / 2;
    const auto& st = steps();
    std::uint64_t now = 1'000'000'000, admitted = 0;
    std::size_t i = 0;
    keep(&c);
    for (auto _ : state) {
        if constexpr (std::is_void_v<Clock>) {
            now += st[i++ & 4095];
            admitted += c.allow(now, limit);
        } else {
            admitted += c.allow(Clock::now_ns(), limit);
        }
    }
    benchmark::ClobberMemory();
    keep(admitted);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["admitted"] = static_cast<double>(admitted) / static_cast<double>(state.iterations());
}

template <class Clock>
void BM_clock_read(benchmark::State& state) {
    std::uint64_t sink = 0;
    for (auto _ : state) sink += Clock::now_ns();
    keep(sink);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

template <class Slot>
const char* slot_name() {
    return sizeof(Slot) == 4 ? "u32" : sizeof(Slot) == 8 ? "u64" : "u16";
}

template <class Slot, std::size_t N, tally::SlidingOptions O>
void register_allow(bool headline) {
    using C = tally::SlidingCounter<Slot, N, O>;
    if (quick() && !headline) return;
    const std::string cfg = std::string("<") + slot_name<Slot>() + "," + (O.running_total ? "total" : "sum") + "," +
                            (O.pow2_buckets ? "pow2" : "div") + ">/" + std::to_string(N);
    benchmark::RegisterBenchmark(("BM_allow" + cfg).c_str(), [](benchmark::State& s) { BM_allow<C>(s, false); });
    if (headline && O.running_total && O.pow2_buckets)
        benchmark::RegisterBenchmark(("BM_allow_overload" + cfg).c_str(),
                                     [](benchmark::State& s) { BM_allow<C>(s, true); });
}

template <std::size_t N>
void register_slots() {
    constexpr tally::SlidingOptions total_pow2{.running_total = true, .pow2_buckets = true};
    constexpr tally::SlidingOptions total_div{.running_total = true, .pow2_buckets = false};
    constexpr tally::SlidingOptions sum_pow2{.running_total = false, .pow2_buckets = true};
    constexpr tally::SlidingOptions sum_div{.running_total = false, .pow2_buckets = false};
    benchmark::RegisterBenchmark(("BM_ring_baseline/" + std::to_string(N)).c_str(),
                                 [](benchmark::State& s) { BM_ring_baseline(s, N); });
    benchmark::RegisterBenchmark(("BM_bare_ring_floor/" + std::to_string(N)).c_str(), BM_bare_ring_floor<N>);
    register_allow<std::uint32_t, N, total_pow2>(true);
    register_allow<std::uint32_t, N, total_div>(true);
    register_allow<std::uint32_t, N, sum_pow2>(false);
    register_allow<std::uint32_t, N, sum_div>(false);
    register_allow<std::uint64_t, N, total_pow2>(false);
    register_allow<std::uint64_t, N, total_div>(false);
    register_allow<std::uint64_t, N, sum_pow2>(false);
    register_allow<std::uint64_t, N, sum_div>(false);
}

}  // namespace

int main(int argc, char** argv) {
    fill_steps();
    register_slots<2>();
    register_slots<8>();
    register_slots<61>();
    register_slots<64>();
    // allow() with the clock read included: what a caller pays per request.
    using C61 = tally::SlidingCounter<std::uint32_t, 61, tally::SlidingOptions{.pow2_buckets = true}>;
    benchmark::RegisterBenchmark("BM_allow+CoarseClock<u32,total,pow2>/61",
                                 [](benchmark::State& s) { BM_allow<C61, tally::CoarseClock>(s, false); });
    benchmark::RegisterBenchmark("BM_allow+SteadyClock<u32,total,pow2>/61",
                                 [](benchmark::State& s) { BM_allow<C61, tally::SteadyClock>(s, false); });
    benchmark::RegisterBenchmark("BM_clock_read<CoarseClock>", BM_clock_read<tally::CoarseClock>);
    benchmark::RegisterBenchmark("BM_clock_read<SteadyClock>", BM_clock_read<tally::SteadyClock>);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
