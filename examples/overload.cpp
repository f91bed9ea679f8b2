// Overload: what an adaptive concurrency limit buys when a server is offered
// twice its capacity and then loses three quarters of it for a while. A
// deterministic discrete-event simulation (examples/overload.hpp): no limit,
// a fixed limit tuned to the healthy server, and Aimd, Vegas and Gradient2 in
// a tally::ConcurrencyLimiter, each learning only from the latency of its own
// completions and told only the healthy capacity, as its ceiling (Vegas and
// Gradient2 also run with Netflix's defaults, for comparison). Goodput counts
// requests finished within 2x the no-load latency; latencies are of admitted
// requests, by arrival phase. Usage: example_overload [capacity [overload
// [seconds [seed]]]].
#include <cstdio>
#include <cstdlib>

#include "overload.hpp"

namespace {

void print_options(const overload::Contenders& k) {
    std::printf("options of the rows fixed, Aimd, Vegas and Gradient2 (see overload::contenders):\n");
    std::printf("  FixedConcurrency {limit %d}\n", k.fixed.limit);
    std::printf("  Aimd      {initial_limit %d, min_limit %d, max_limit %d, backoff_ratio %g, timeout_ns %llu}\n",
                k.aimd.initial_limit, k.aimd.min_limit, k.aimd.max_limit, k.aimd.backoff_ratio,
                static_cast<unsigned long long>(k.aimd.timeout_ns));
    std::printf(
        "  Vegas     {initial_limit %d, max_concurrency %d, smoothing %g, probe_multiplier %d, probe_seed %llu,\n"
        "             alpha, beta, threshold, increase, decrease: %s}\n",
        k.vegas.initial_limit, k.vegas.max_concurrency, k.vegas.smoothing, k.vegas.probe_multiplier,
        static_cast<unsigned long long>(k.vegas.probe_seed),
        k.vegas.alpha == tally::Vegas::default_alpha && k.vegas.beta == tally::Vegas::default_beta &&
                k.vegas.threshold == tally::Vegas::default_threshold &&
                k.vegas.increase == tally::Vegas::default_increase &&
                k.vegas.decrease == tally::Vegas::default_decrease
            ? "Netflix's defaults"
            : "custom");
    std::printf(
        "  Gradient2 {initial_limit %d, min_limit %d, max_concurrency %d, smoothing %g, queue_size %d,\n"
        "             rtt_tolerance %g, long_window %d}\n",
        k.gradient2.initial_limit, k.gradient2.min_limit, k.gradient2.max_concurrency, k.gradient2.smoothing,
        k.gradient2.queue_size, k.gradient2.rtt_tolerance, k.gradient2.long_window);
    std::printf("  \"defaults\" rows: Vegas({.probe_seed = seed}), Gradient2() (max_concurrency 1000 and 200).\n");
}

}  // namespace

int main(int argc, char** argv) {
    overload::Config c;
    if (argc > 1) c.capacity = std::atof(argv[1]);
    if (argc > 2) c.overload = std::atof(argv[2]);
    if (argc > 3) c.duration_ns = static_cast<std::uint64_t>(std::atof(argv[3]) * 1e9);
    if (argc > 4) c.seed = static_cast<std::uint64_t>(std::atof(argv[4]));
    const auto results = overload::run_all(c);
    std::printf(
        "server: capacity %.0f concurrent, no-load latency %.0f ms, offered load %.0fx capacity;\n"
        "capacity / %.0f from %.0f s to %.0f s (phase 2 of 3); seed %llu\n\n",
        c.capacity, c.work_ns / 1e6, c.overload, c.drop, c.duration_ns / 3e9, 2 * c.duration_ns / 3e9,
        static_cast<unsigned long long>(c.seed));
    std::printf("%-19s | %-27s | %-27s | %-27s | verdict\n", "", "healthy", "capacity / 4", "recovered");
    std::printf("%-19s |", "limiter");
    for (int p = 0; p < 3; ++p) std::printf(" %8s %8s %8s |", "goodput", "p50 ms", "p99 ms");
    std::printf("\n");
    for (const auto& r : results) {
        std::printf("%-19s |", r.name.c_str());
        for (const auto& p : r.phases) {
            if (p.completed == 0)
                std::printf(" %7.0f%% %8s %8s |", 0.0, "never", "never");
            else
                std::printf(" %7.0f%% %8.1f %8.1f |", 100 * p.goodput_share(), p.p50_ms, p.p99_ms);
        }
        const bool p99 = overload::keeps_p99(r, c), good = overload::keeps_goodput(r);
        std::printf(" p99 <= 3x no-load: %-3s  goodput >= 80 %% after the drop: %s\n", p99 ? "yes" : "no",
                    good ? "yes" : "no");
    }
    std::printf(
        "\ngoodput: requests per second finished within %.0f ms, as a share of what the server can\n"
        "finish in that phase. \"after the drop\": in the drop and once recovered.\n\n",
        2 * c.work_ns / 1e6);
    print_options(overload::contenders(c));
    std::printf(
        "\nverdicts:\n"
        "- no limit: the queue grows without bound; every phase fails.\n"
        "- a fixed limit is right only for the server it was tuned to: 4x latency in the drop.\n"
        "- Vegas, capped at the healthy capacity, follows the capacity down from its smallest RTT\n"
        "  and back up: p99 within 3x and goodput above 80 %% in every phase. With its default cap\n"
        "  (1000) it settles below capacity when healthy: the +-5 %% service time reads as a queue.\n"
        "- Gradient2, capped at the healthy capacity, with rtt_tolerance 1 and a long window of\n"
        "  5 s of traffic, holds the drop too. Its long-term average RTT is its idea of normal:\n"
        "  with the defaults (600 samples, 60 ms here) the slow server becomes normal at once and\n"
        "  the limit climbs to max_concurrency (200: 2x the healthy capacity, 8x the reduced one).\n"
        "- Aimd backs off only on drops and timeouts (here 2x no-load): goodput halves in the drop.\n");
    return 0;
}
