// Per-thread t-digests merged into global latency percentiles.
//
// Each worker thread records its request latencies into its own TDigest (no
// locks, no sharing); at report time the digests are merged. The merged
// p50 / p99 / p99.9 are printed beside the exact values from sorting every
// latency. The same merge works across processes via serialize().
//
// Exits non-zero if a merged percentile is off by more than the t-digest's
// tested rank error (0.005 mid-range, 0.0005 at p99.9), or if averaging the
// per-thread p99s happens to look right (it should not: one slow thread).
#include <tally/sketch/quantiles/tdigest.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <numbers>
#include <thread>
#include <tuple>
#include <vector>

namespace {

struct Worker {
    tally::TDigest digest;      // what a real service keeps
    std::vector<double> exact;  // kept here only to check the answer
};

// Thread t serves requests with lognormal latency (ms); thread 3 is slow (a
// noisy neighbour): 10x the median.
void serve(Worker& w, int t, std::size_t requests) {
    std::uint64_t s = 0x1234 + static_cast<std::uint64_t>(t);
    auto uniform = [&] {
        std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return static_cast<double>((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
    };
    const double median_ms = t == 3 ? 20.0 : 2.0;
    for (std::size_t i = 0; i < requests; ++i) {
        const double u1 = std::max(uniform(), 1e-300), u2 = uniform();
        const double z = std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
        const double ms = median_ms * std::exp(0.6 * z);
        w.digest.add(ms);
        w.exact.push_back(ms);
    }
}

}  // namespace

int main() {
    constexpr int threads = 4;
    constexpr std::size_t requests = 250'000;
    std::vector<Worker> workers(threads);
    {
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t) pool.emplace_back(serve, std::ref(workers[t]), t, requests);
        for (auto& th : pool) th.join();
    }

    tally::TDigest global;
    std::vector<double> all;
    double mean_of_p99 = 0;
    for (auto& w : workers) {
        global.merge(w.digest);
        all.insert(all.end(), w.exact.begin(), w.exact.end());
        mean_of_p99 += w.digest.quantile(0.99) / threads;
    }
    std::sort(all.begin(), all.end());
    const double n = static_cast<double>(all.size());
    auto exact_quantile = [&](double q) { return all[static_cast<std::size_t>(std::ceil(q * n)) - 1]; };
    auto exact_cdf = [&](double x) {
        return static_cast<double>(std::upper_bound(all.begin(), all.end(), x) - all.begin()) / n;
    };

    std::printf("%d threads x %zu requests, merged digest: %zu centroids, %.0f values\n\n", threads, requests,
                global.centroids().size(), global.total());
    std::printf("%-7s %12s %12s %12s\n", "", "t-digest ms", "exact ms", "rank error");
    bool ok = true;
    for (auto [name, q, bound] :
         {std::tuple{"p50", 0.5, 0.005}, std::tuple{"p99", 0.99, 0.005}, std::tuple{"p99.9", 0.999, 0.0005}}) {
        const double est = global.quantile(q);
        const double err = std::fabs(exact_cdf(est) - q);
        std::printf("%-7s %12.3f %12.3f %12.5f%s\n", name, est, exact_quantile(q), err,
                    err <= bound ? "" : "  <-- outside the tested bound");
        ok = ok && err <= bound;
    }
    const double avg_err = std::fabs(exact_cdf(mean_of_p99) - 0.99);
    std::printf("\nmean of the per-thread p99s: %.3f ms (that is the exact p%.1f, not the p99)\n", mean_of_p99,
                100 * exact_cdf(mean_of_p99));
    if (avg_err < 0.005) {
        std::printf("unexpected: averaging percentiles looked right\n");
        ok = false;
    }
    return ok ? 0 : 1;
}
