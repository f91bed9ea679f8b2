// hash64 throughput next to FNV-1a and std::hash<std::string_view> in the same run.
#include <tally/core/hash.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace {

// Baseline: FNV-1a, the byte-at-a-time hash people write by hand.
std::uint64_t fnv1a(const void* data, std::size_t len) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (std::size_t i = 0; i < len; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

// 4096 keys of the given length, so the loop is not one hot key.
std::vector<unsigned char> make_keys(std::size_t len) {
    std::vector<unsigned char> buf(len * 4096);
    std::uint64_t x = 0x12345678;
    for (auto& b : buf) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        b = static_cast<unsigned char>(x >> 56);
    }
    return buf;
}

template <class F>
void run(benchmark::State& state, F&& f) {
    const auto len = static_cast<std::size_t>(state.range(0));
    const auto keys = make_keys(len);
    std::size_t i = 0;
    std::uint64_t sink = 0;
    for (auto _ : state) {
        sink += f(keys.data() + i * len, len);
        i = (i + 1) & 4095;
    }
    benchmark::DoNotOptimize(sink);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * len));
}

void BM_hash64(benchmark::State& state) {
    run(state, [](const void* p, std::size_t n) { return tally::hash64(p, n); });
}
void BM_fnv1a_baseline(benchmark::State& state) { run(state, fnv1a); }
void BM_std_hash_baseline(benchmark::State& state) {
    run(state, [](const void* p, std::size_t n) {
        return static_cast<std::uint64_t>(std::hash<std::string_view>{}(std::string_view(static_cast<const char*>(p), n)));
    });
}
void BM_hasher_u64(benchmark::State& state) {
    std::uint64_t x = 1, sink = 0;
    for (auto _ : state) {
        sink += tally::Hasher<std::uint64_t>{}(x++);
    }
    benchmark::DoNotOptimize(sink);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

}  // namespace

BENCHMARK(BM_hash64)->Arg(8)->Arg(16)->Arg(32)->Arg(64);
BENCHMARK(BM_fnv1a_baseline)->Arg(8)->Arg(16)->Arg(32)->Arg(64);
BENCHMARK(BM_std_hash_baseline)->Arg(8)->Arg(16)->Arg(32)->Arg(64);
BENCHMARK(BM_hasher_u64);

BENCHMARK_MAIN();
