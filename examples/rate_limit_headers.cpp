// Simulates one client hitting an API limited to 10 requests per second
// (burst 5) and prints what the server would send: the IETF RateLimit-Policy
// and RateLimit fields (draft-ietf-httpapi-ratelimit-headers), and
// Retry-After on 429s. Then per-tier quotas (free and paid keys served by one
// table of policies, a key upgraded mid-burst) and an operator lowering the
// limit at runtime with set_quota. Exits non-zero if a header disagrees with
// what the limiter then does (a client obeying Retry-After must get through;
// one nanosecond earlier it must not).
#include <array>
#include <cstdint>
#include <cstdio>

#include "tally/limit/gcra.hpp"
#include "tally/limit/token_bucket.hpp"

namespace {

constexpr std::uint64_t kSec = 1'000'000'000;

// Header values are whole seconds; round waits up so a client that obeys
// them is never early.
std::uint64_t ceil_seconds(std::uint64_t ns) { return ns / kSec + (ns % kSec != 0 ? 1 : 0); }

}  // namespace

int main() {
    const tally::Quota quota = tally::Quota::per_second(10).with_burst(5);
    tally::Gcra limiter(quota);
    int failures = 0;

    std::printf("RateLimit-Policy: \"default\";q=%llu;w=%llu\n\n", static_cast<unsigned long long>(quota.limit),
                static_cast<unsigned long long>(ceil_seconds(quota.window_ns)));
    std::printf("%-12s %-6s %-40s %s\n", "t (ms)", "status", "RateLimit", "Retry-After");

    // A client that sends a burst of 8, then one request every 50 ms, then
    // pauses, then obeys Retry-After.
    std::uint64_t now = 1000 * kSec;
    auto request = [&](const char* note) {
        tally::Gcra before = limiter;
        const tally::Decision d = limiter.try_acquire(now);
        std::printf("%-12.1f %-6s \"default\";r=%llu;t=%-24llu", static_cast<double>(now % (100 * kSec)) / 1e6,
                    d ? "200" : "429", static_cast<unsigned long long>(d.remaining),
                    static_cast<unsigned long long>(ceil_seconds(d.reset_after_ns)));
        if (!d) {
            std::printf(" %llu   (exact wait %llu ns) %s\n", static_cast<unsigned long long>(ceil_seconds(d.retry_after_ns)),
                        static_cast<unsigned long long>(d.retry_after_ns), note);
            // The exact wait works, one nanosecond less does not.
            tally::Gcra at = before, early = before;
            if (!at.allow(now + d.retry_after_ns) || early.allow(now + d.retry_after_ns - 1)) {
                std::printf("  ERROR: retry_after_ns is not exact\n");
                ++failures;
            }
        } else {
            std::printf(" -   %s\n", note);
        }
        return d;
    };

    for (int i = 0; i < 8; ++i) request(i == 0 ? "burst of 8" : "");
    for (int i = 0; i < 6; ++i) {
        now += 50'000'000;
        request(i == 0 ? "every 50 ms (twice the rate)" : "");
    }
    now += 2 * kSec;
    request("after 2 s idle: burst again");
    for (int i = 0; i < 5; ++i) request("");
    // Obey Retry-After (rounded up to seconds): must succeed.
    const tally::Decision denied = limiter.try_acquire(now);
    now += ceil_seconds(denied.retry_after_ns) * kSec;
    if (!request("obeying Retry-After").allowed) {
        std::printf("ERROR: a client obeying Retry-After was refused\n");
        ++failures;
    }

    // TokenBucket from the same quota gives the same headers.
    tally::TokenBucket tb(quota);
    tally::Gcra g(quota);
    for (std::uint64_t t = 0; t < 3 * kSec; t += 37'000'000)
        if (tb.try_acquire(t) != g.try_acquire(t)) ++failures;

    // Per-tier quotas: one policy per tier, one 8-byte Gcra::State per key,
    // so a table of millions of keys stores no quota per key. A key that
    // moves to another tier keeps what it has spent (rebase_state).
    enum Tier { free_tier, paid_tier };
    const std::array<tally::Gcra, 2> tiers{tally::Gcra(tally::Quota::per_second(10).with_burst(5)),
                                           tally::Gcra(tally::Quota::per_second(1000).with_burst(100))};
    const char* const tier_name[] = {"free", "paid"};
    struct Key {
        Tier tier;
        tally::Gcra::State state;
    };
    Key alice{free_tier, {}};
    std::printf("\nper-tier quotas:\n");
    for (int t = 0; t < 2; ++t) {
        const tally::Quota q = tiers[t].quota();
        std::printf("  RateLimit-Policy: \"%s\";q=%llu;w=1 (burst %llu)\n", tier_name[t],
                    static_cast<unsigned long long>(q.limit), static_cast<unsigned long long>(q.capacity()));
    }
    now = 2000 * kSec;
    int admitted = 0;
    for (int i = 0; i < 8; ++i) admitted += tiers[alice.tier].try_acquire(alice.state, now).allowed ? 1 : 0;
    std::printf("  alice (free) sends 8 at once: %d admitted\n", admitted);
    if (admitted != 5) ++failures;
    // Alice upgrades: her 5 spent units stay spent; the paid burst applies now.
    alice.state = tiers[paid_tier].rebase_state(alice.state, tiers[alice.tier], now);
    alice.tier = paid_tier;
    const tally::Decision up = tiers[alice.tier].try_acquire(alice.state, now, 0);
    std::printf("  alice upgraded to paid at the same instant: RateLimit: \"paid\";r=%llu\n",
                static_cast<unsigned long long>(up.remaining));
    if (up.remaining != 95) ++failures;

    // The operator lowers the single limit above from 10/s to 2/s at runtime:
    // the state is kept, the new rate applies from now.
    now = 3000 * kSec;
    for (int i = 0; i < 3; ++i) (void)limiter.try_acquire(now);
    limiter.set_quota(tally::Quota::per_second(2), now);
    const tally::Decision low = limiter.try_acquire(now);
    std::printf("\nset_quota(2/s) after 3 requests: %s, Retry-After %llu (exact %llu ns)\n", low ? "200" : "429",
                static_cast<unsigned long long>(ceil_seconds(low.retry_after_ns)),
                static_cast<unsigned long long>(low.retry_after_ns));
    // 3 spent under a burst of 2: two must be repaid at 2/s before the next.
    if (low.allowed || low.retry_after_ns != kSec) ++failures;

    std::printf("\n%s\n", failures == 0 ? "ok: headers agree with the limiter" : "FAILED");
    return failures == 0 ? 0 : 1;
}
