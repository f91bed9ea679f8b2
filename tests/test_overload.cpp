// The overload simulation of examples/overload.cpp at reduced size (9 s of
// simulated time, three seeds): what its table shows must hold. No limit
// fails everywhere; a fixed limit fails only in the capacity drop; Vegas
// keeps p99 within 3x the no-load latency outside the drop, goodput at 80 %
// of capacity in it; Gradient2 with Netflix's defaults climbs to
// max_concurrency (200), the behaviour docs/concurrency.md warns about.
#include "../examples/overload.hpp"

#include <cstdint>

#include "catch.hpp"

TEST_CASE("overload simulation: the example's claims at reduced size", "[concurrency][overload]") {
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        overload::Config c;
        c.duration_ns = 9'000'000'000;
        c.seed = seed;
        INFO("seed " << seed);
        const double no_load_ms = static_cast<double>(c.work_ns) / 1e6;
        const auto results = overload::run_all(c);
        REQUIRE(results.size() == 5);
        const auto& none = results[0];
        const auto& fixed = results[1];
        const auto& aimd = results[2];
        const auto& vegas = results[3];
        const auto& gradient2 = results[4];

        // No limit: the backlog grows; nothing is good, p99 far past 3x.
        CHECK(!overload::keeps_p99(none, c));
        for (const auto& p : none.phases) CHECK(p.goodput_share() < 0.05);
        CHECK(none.phases[0].p99_ms > 10 * no_load_ms);

        // Fixed at the healthy capacity: right when healthy, 4x in the drop.
        CHECK(fixed.phases[0].p99_ms <= 1.2 * no_load_ms);
        CHECK(fixed.phases[2].p99_ms <= 1.2 * no_load_ms);
        CHECK(fixed.phases[1].p99_ms > 3 * no_load_ms);
        CHECK(fixed.phases[1].goodput_share() < 0.05);

        // Vegas adapts down and back up.
        CHECK(vegas.phases[0].p99_ms <= 3 * no_load_ms);
        CHECK(vegas.phases[2].p99_ms <= 3 * no_load_ms);
        CHECK(vegas.phases[1].p99_ms <= 5 * no_load_ms);
        CHECK(vegas.phases[1].goodput_share() >= 0.8);
        for (const auto& p : vegas.phases) CHECK(p.p50_ms <= 1.5 * no_load_ms);

        // Gradient2 (defaults): at max_concurrency 200 on a server of 100,
        // then of 25: about 2x and 8x the no-load latency.
        CHECK(gradient2.phases[0].p50_ms >= 1.8 * no_load_ms);
        CHECK(gradient2.phases[1].p50_ms >= 7 * no_load_ms);

        // Aimd (timeout 2x no-load) keeps the healthy server busy.
        CHECK(aimd.phases[0].goodput_share() >= 0.9);
        CHECK(aimd.phases[0].p99_ms <= 3 * no_load_ms);
    }
}
