// The overload simulation of examples/overload.cpp, at the example's size
// (30 s of simulated time; deterministic, about half a second per seed in a
// release build) for three seeds (one in sanitizer builds): what its table and docs/concurrency.md
// claim must hold. Vegas and Gradient2, with the options of
// overload::contenders, keep p99 within 3x the no-load latency in every
// phase and goodput at 80 % of capacity in the drop and after it; no limit
// keeps neither; the fixed limit fails only in the drop; Aimd keeps p99 but
// not goodput in the drop; Gradient2 with Netflix's defaults climbs to its
// max_concurrency (200) and fails everywhere, Vegas with its defaults stays
// below capacity when healthy.
#include "../examples/overload.hpp"

#include <cstdint>

#include "catch.hpp"
#include "test_support.hpp"

TEST_CASE("overload simulation: the example's claims", "[concurrency][overload][big]") {
    for (std::uint64_t seed = 1; seed <= tally::test::big(3, 1); ++seed) {
        overload::Config c;
        c.seed = seed;
        INFO("seed " << seed);
        const double no_load_ms = static_cast<double>(c.work_ns) / 1e6;
        const auto results = overload::run_all(c);
        REQUIRE(results.size() == 7);
        const auto& none = results[0];
        const auto& fixed = results[1];
        const auto& aimd = results[2];
        const auto& vegas = results[3];
        const auto& gradient2 = results[4];
        const auto& vegas_defaults = results[5];
        const auto& gradient2_defaults = results[6];
        REQUIRE(vegas.name == "Vegas");
        REQUIRE(gradient2.name == "Gradient2");

        // The claim: Vegas and Gradient2 keep p99 within 3x the no-load
        // latency in every phase, and goodput at 80 % of capacity in the drop
        // and once recovered (and when healthy).
        for (const auto* r : {&vegas, &gradient2}) {
            INFO(r->name);
            for (int p = 0; p < 3; ++p) {
                INFO("phase " << p);
                CHECK(r->phases[p].completed > 0);
                CHECK(r->phases[p].p99_ms <= 3 * no_load_ms);
                CHECK(r->phases[p].goodput_share() >= 0.8);
            }
            CHECK(overload::keeps_p99(*r, c));
            CHECK(overload::keeps_goodput(*r));
        }

        // No limit: the backlog grows; nothing is good, p99 far past 3x.
        CHECK(!overload::keeps_p99(none, c));
        CHECK(!overload::keeps_goodput(none));
        for (const auto& p : none.phases) CHECK(p.goodput_share() < 0.05);
        CHECK(none.phases[0].p99_ms > 10 * no_load_ms);

        // Fixed at the healthy capacity: right when healthy, 4x in the drop.
        CHECK(fixed.phases[0].p99_ms <= 1.2 * no_load_ms);
        CHECK(fixed.phases[2].p99_ms <= 1.2 * no_load_ms);
        CHECK(fixed.phases[1].p99_ms > 3 * no_load_ms);
        CHECK(fixed.phases[1].goodput_share() < 0.05);

        // Aimd (timeout 2x no-load) holds p99, but backs off only on
        // timeouts: about half the goodput in the drop.
        CHECK(overload::keeps_p99(aimd, c));
        CHECK(aimd.phases[0].goodput_share() >= 0.9);
        CHECK(aimd.phases[1].goodput_share() < 0.6);

        // Netflix's defaults: Gradient2 at max_concurrency 200 on a server of
        // 100, then of 25 (about 2x and 8x the no-load latency); Vegas below
        // capacity when healthy.
        CHECK(gradient2_defaults.phases[0].p50_ms >= 1.8 * no_load_ms);
        CHECK(gradient2_defaults.phases[1].p50_ms >= 7 * no_load_ms);
        CHECK(!overload::keeps_p99(gradient2_defaults, c));
        CHECK(vegas_defaults.phases[0].goodput_share() < 0.8);
        CHECK(!overload::keeps_goodput(vegas_defaults));
    }
}
