// Shared helpers for tally's benchmarks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace tally::bench {

/// scripts/bench sets TALLY_BENCH_QUICK=1 for the default (headline) run:
/// benchmarks then skip their largest sizes. Unset, empty or "0" means a full run.
inline bool quick() {
    const char* q = std::getenv("TALLY_BENCH_QUICK");
    return q != nullptr && q[0] != '\0' && q[0] != '0';
}

/// Length of zipf_keys() (a power of two, so loops can wrap with a mask).
inline constexpr std::size_t stream_len = std::size_t{1} << 20;

/// A fixed Zipf(1.0) stream of 2^20 ranks over 10^6 distinct keys (inverse
/// CDF over xorshift64 draws), built once, outside any timed loop.
inline const std::vector<std::uint64_t>& zipf_keys() {
    static const std::vector<std::uint64_t> keys = [] {
        constexpr std::size_t universe = 1'000'000;
        std::vector<double> cdf(universe);
        double acc = 0;
        for (std::size_t i = 0; i < universe; ++i) cdf[i] = acc += 1.0 / static_cast<double>(i + 1);
        std::vector<std::uint64_t> out(stream_len);
        std::uint64_t x = 0x2545F4914F6CDD1Dull;
        for (auto& k : out) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const double u = static_cast<double>(x >> 11) * 0x1.0p-53 * acc;
            k = static_cast<std::uint64_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
        }
        return out;
    }();
    return keys;
}

}  // namespace tally::bench
