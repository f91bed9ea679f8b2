// A per-minute limit with 1 s resolution: SlidingCounter<std::uint32_t, 61>
// (60 full buckets + the partly expired oldest one). Simulated traffic runs
// against it; every second we print the decision tally, the counter's
// estimate half way into the next second, and the exact count of admitted
// requests in the 60 s before that instant (from a log), and check the
// documented bound |estimate - exact| <= count in the oldest bucket.
#include <tally/window/sliding_counter.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>

int main() {
    constexpr std::uint64_t second = 1'000'000'000;
    constexpr std::uint64_t limit = 100;  // requests per minute
    tally::SlidingCounter<std::uint32_t, 61> per_minute(second);

    std::deque<std::uint64_t> admitted_log;  // exact sliding log of admitted requests
    std::uint64_t x = 42;
    auto next_random = [&x] {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        return x >> 33;
    };

    bool ok = true;
    std::uint64_t now = 1000 * second;
    std::printf("%5s %8s %8s %9s %7s %7s %7s\n", "t(s)", "allowed", "denied", "estimate", "exact", "|err|", "bound");
    for (int s = 0; s < 180; ++s) {
        // 0-3 requests a second, with a burst of 40 at t = 30 s and t = 95 s.
        int requests = static_cast<int>(next_random() % 4);
        if (s == 30 || s == 95) requests += 40;
        int allowed = 0, denied = 0;
        for (int r = 0; r < requests; ++r) {
            const std::uint64_t t = now + (next_random() % second);
            // (events within one second arrive in random order: late events
            // land in their own bucket)
            if (per_minute.allow(t, limit)) {
                ++allowed;
                admitted_log.push_back(t);
            } else {
                ++denied;
            }
        }
        now += second;
        const std::uint64_t q = now + second / 2;  // read half way into the next second
        while (!admitted_log.empty() && admitted_log.front() + per_minute.window_ns() + second <= q)
            admitted_log.pop_front();
        std::uint64_t exact = 0;
        for (std::uint64_t t : admitted_log) exact += (t <= q && t + per_minute.window_ns() > q) ? 1 : 0;
        const tally::SlidingEstimate e = per_minute.read(q);
        const double err = std::fabs(e.value() - static_cast<double>(exact));
        if (err > static_cast<double>(e.oldest) + 1e-9) ok = false;
        if (e.value() > static_cast<double>(limit) + 1e-9) ok = false;  // the limiter never lets the estimate pass the limit
        if (s % 10 == 0 || s == 30 || s == 31 || s == 95 || s == 96)
            std::printf("%5d %8d %8d %9.2f %7llu %7.2f %7llu\n", s, allowed, denied, e.value(),
                        static_cast<unsigned long long>(exact), err, static_cast<unsigned long long>(e.oldest));
    }
    std::printf("%s: |estimate - exact| <= count of the oldest bucket at every second, estimate <= limit\n",
                ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
