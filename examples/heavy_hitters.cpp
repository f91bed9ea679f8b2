// Heavy hitters over a Zipf stream: TopK (Misra-Gries counters) finds the
// hottest keys with an error bound on every count, CountMin answers "how often?" for any key,
// and both are checked against exact counts. Returns 1 if any estimate falls
// outside its documented bound.
#include <tally/sketch/frequency/count_min.hpp>
#include <tally/sketch/frequency/top_k.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

int main() {
    // 1M page views over 50k pages, Zipf(1.1): a few pages dominate.
    const std::size_t pages = 50'000, events = 1'000'000;
    std::vector<double> cdf(pages);
    double acc = 0;
    for (std::size_t i = 0; i < pages; ++i) cdf[i] = acc += 1.0 / std::pow(static_cast<double>(i + 1), 1.1);

    tally::TopK<std::string> top(100);                           // every page above N/top.k() is kept, k() >= 100
    auto cm = tally::CountMin<>::with_error(0.0005, 0.001);      // error <= 0.05% of N, 99.9% of the time
    std::unordered_map<std::string, std::uint64_t> exact;

    std::uint64_t x = 0x9E3779B97F4A7C15ull;
    for (std::size_t i = 0; i < events; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const double u = static_cast<double>(x >> 11) * 0x1.0p-53 * acc;
        const auto rank = static_cast<std::size_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
        const std::string page = "/page/" + std::to_string(rank);
        top.add(page);
        cm.add(page);
        ++exact[page];
    }

    const double n = static_cast<double>(cm.total());
    std::printf("%zu events, %zu distinct pages\n", events, exact.size());
    const double k = static_cast<double>(top.k());
    std::printf("TopK(100): k = %zu, %zu bytes, error bound %llu (<= N/k = %.0f)\n", top.k(), top.memory_bytes(),
                static_cast<unsigned long long>(top.error_bound()), n / k);
    std::printf("CountMin %zux%zu: %zu bytes, bound epsilon*N = %.0f (exact map: ~%zu bytes)\n\n", cm.width(),
                cm.depth(), cm.memory_bytes(), cm.error_bound(), exact.size() * 64);
    std::printf("%-12s %10s %21s %12s\n", "page", "true", "TopK [lower, upper]", "CountMin");

    bool ok = top.error_bound() * top.k() <= cm.total();
    for (const auto& e : top.top(15)) {
        const std::uint64_t f = exact[e.item];
        const std::uint64_t c = cm.estimate(e.item);
        const bool in_bounds = e.lower_bound() <= f && f <= e.count && f <= c &&
                               static_cast<double>(c - f) <= cm.error_bound();
        ok = ok && in_bounds;
        std::printf("%-12s %10llu   [%8llu, %8llu] %12llu%s\n", e.item.c_str(), static_cast<unsigned long long>(f),
                    static_cast<unsigned long long>(e.lower_bound()), static_cast<unsigned long long>(e.count),
                    static_cast<unsigned long long>(c), in_bounds ? "" : "  <-- OUT OF BOUNDS");
    }

    // The guarantees, checked over every page.
    std::size_t heavy = 0, missed = 0, under = 0, over_bound = 0;
    for (const auto& [page, f] : exact) {
        if (static_cast<double>(f) * k > n) ++heavy, missed += !top.contains(page);
        under += cm.estimate(page) < f || top.estimate(page) < f || top.lower_bound(page) > f;
        over_bound += static_cast<double>(cm.estimate(page) - f) > cm.error_bound();
    }
    const double over_fraction = static_cast<double>(over_bound) / static_cast<double>(exact.size());
    std::printf("\npages above N/k: %zu, all in TopK: %s\n", heavy, missed == 0 ? "yes" : "NO");
    std::printf("underestimates: %zu; CountMin estimates over epsilon*N: %.4f%% of pages (delta = %.4f%%)\n", under,
                100 * over_fraction, 100 * cm.delta());
    ok = ok && missed == 0 && under == 0 && over_fraction <= cm.delta();
    std::printf("%s\n", ok ? "all estimates within their bounds" : "BOUND VIOLATED");
    return ok ? 0 : 1;
}
