// An SLO report with a guaranteed error: "99% of requests finish within
// 300 ms", checked from KLL sketches kept per server and merged.
//
// Each of 8 servers records its request latencies (ms) into a KllSketch;
// the report merges them and reads the fraction of requests within the SLO
// (rank(300)) and the p99. KLL's rank error is guaranteed (with 99%
// probability at most normalized_rank_error()), so the report states the
// verdict as "met", "missed" or "too close to call". At the default k = 200
// the bound is 1.33%, wider than the 1% a 99% SLO leaves; k = 1000 (0.28%,
// about 12 KB a sketch) can tell.
// The merged sketch also goes out in Apache DataSketches' bytes, which a
// Druid or Pinot ingestion (or any DataSketches job) reads as it is.
//
// Prints the sketch's answers beside the exact ones (from sorting every
// latency) and exits non-zero if the sketch's error exceeds its bound, or
// the verdict differs from the one the exact data gives.
#include <tally/sketch/quantiles/kll.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <vector>

namespace {

double uniform(std::uint64_t& s) {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return static_cast<double>((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

}  // namespace

int main() {
    constexpr int servers = 8;
    constexpr std::size_t requests = 200000;
    constexpr double slo_ms = 300;
    constexpr double slo_fraction = 0.99;
    constexpr std::uint16_t k = 1000;

    std::vector<tally::KllSketch<double>> sketches;
    std::vector<double> exact;  // kept here only to check the answer
    std::uint64_t s = 2024;
    for (int srv = 0; srv < servers; ++srv) {
        sketches.emplace_back(k, 1 + static_cast<std::uint64_t>(srv));
        // most requests are fast; server 5 has a slow tail
        for (std::size_t i = 0; i < requests; ++i) {
            double ms = 20 + 80 * uniform(s);
            if (uniform(s) < (srv == 5 ? 0.03 : 0.002)) ms = 200 + 400 * uniform(s);
            ms = std::round(ms);  // logged in whole milliseconds: ties
            sketches.back().add(ms);
            exact.push_back(ms);
        }
    }
    tally::KllSketch<double> all(k);
    for (const auto& sk : sketches) all.merge(sk);
    std::sort(exact.begin(), exact.end());

    const double n = static_cast<double>(exact.size());
    const double eps = all.normalized_rank_error();
    const double within = all.rank(slo_ms);  // fraction of requests <= 300 ms
    const double within_exact =
        static_cast<double>(std::upper_bound(exact.begin(), exact.end(), slo_ms) - exact.begin()) / n;
    const double p99 = all.quantile(0.99);
    const double p99_exact = exact[static_cast<std::size_t>(std::ceil(0.99 * n)) - 1];
    // the exact ranks of the value answered: below it, and at or below it (ties)
    const double p99_rank_lo =
        static_cast<double>(std::lower_bound(exact.begin(), exact.end(), p99) - exact.begin()) / n;
    const double p99_rank_hi =
        static_cast<double>(std::upper_bound(exact.begin(), exact.end(), p99) - exact.begin()) / n;

    std::printf("%zu requests on %d servers, merged sketch of %u items (%zu bytes in DataSketches' form)\n",
                exact.size(), servers, all.num_retained(), all.to_datasketches().size());
    std::printf("within %.0f ms: sketch %.4f, exact %.4f (guaranteed error +-%.4f)\n", slo_ms, within, within_exact,
                eps);
    std::printf("p99: sketch %.0f ms (exact rank %.4f to %.4f), exact %.0f ms\n", p99, p99_rank_lo, p99_rank_hi,
                p99_exact);

    const char* verdict = within - eps >= slo_fraction  ? "met"
                          : within + eps < slo_fraction ? "missed"
                                                        : "too close to call";
    const char* verdict_exact = within_exact >= slo_fraction ? "met" : "missed";
    std::printf("SLO %.0f%% within %.0f ms: %s (exact: %s)\n", 100 * slo_fraction, slo_ms, verdict, verdict_exact);

    bool ok = std::fabs(within - within_exact) <= eps && p99_rank_lo - eps <= 0.99 && 0.99 <= p99_rank_hi + eps;
    if (std::string_view(verdict) != "too close to call" && std::string_view(verdict) != verdict_exact) ok = false;
    std::printf("%s\n", ok ? "OK: the sketch's answers are within their guaranteed error"
                           : "FAIL: an answer is outside the sketch's error bound");
    return ok ? 0 : 1;
}
