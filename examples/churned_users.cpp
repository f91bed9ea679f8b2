// Churned users: who was active yesterday but not today, from two theta sketches.
//
// HyperLogLog answers "how many distinct users" but cannot subtract. A theta
// sketch can: theta_a_not_b(yesterday, today) keeps yesterday's retained
// hashes that today's sketch lacks, at the smaller of the two thetas, and its
// estimate comes with DataSketches' confidence bounds. Yesterday's sketch is
// stored as a DataSketches compact image (as Druid or a Java job would keep
// it) and read back, so the computation is the one a mixed fleet would run.
//
// The simulation: 1,000,000 users active yesterday; today 820,000 of them
// return and 250,000 new ones arrive, so 180,000 churned (and the retention
// is 82%). The exact answers are printed beside the estimates; the verdict
// holds if each truth lies inside its 2-standard-deviation bounds (about 95%
// confidence; at lg_k = 14 the churn estimate has a standard error of about
// sqrt(1,250,000 / 180,000) / 128 = 2% here).
// The program exits non-zero if the verdict fails.
#include <tally/sketch/distinct/theta.hpp>

#include <cstdint>
#include <cstdio>

namespace {

// A user id: a fixed mixing of a dense index, so ids look like real ones.
std::uint64_t user_id(std::uint64_t i) {
    std::uint64_t z = i + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

bool report(const char* what, const tally::ThetaSketch& s, double truth) {
    const double lo = s.lower_bound(2), hi = s.upper_bound(2);
    const bool inside = lo <= truth && truth <= hi;
    std::printf("%-22s %10.0f  [%9.0f, %9.0f]  %9.0f  %+6.2f%%  %s\n", what, s.estimate(), lo, hi, truth,
                100.0 * (s.estimate() / truth - 1), inside ? "inside" : "OUTSIDE");
    return inside;
}

}  // namespace

int main() {
    constexpr int lg_k = 14;  // 16384 nominal entries, relative error about 0.8% per sketch
    constexpr std::uint64_t yesterday_users = 1000000, returning = 820000, new_users = 250000;

    tally::ThetaSketch yesterday(lg_k), today(lg_k);
    for (std::uint64_t i = 0; i < yesterday_users; ++i) yesterday.add(user_id(i));
    // Today: the last 820,000 of yesterday's users come back, then new ones (each twice: duplicates do not count).
    for (int pass = 0; pass < 2; ++pass) {
        for (std::uint64_t i = yesterday_users - returning; i < yesterday_users; ++i) today.add(user_id(i));
        for (std::uint64_t i = 0; i < new_users; ++i) today.add(user_id(yesterday_users + i));
    }

    // Yesterday's sketch went to storage as DataSketches bytes.
    const auto stored = yesterday.to_datasketches(/*compressed=*/true);
    const auto yesterday_back = tally::ThetaSketch::from_datasketches(stored, lg_k);

    const auto churned = tally::theta_a_not_b(yesterday_back, today);
    const auto retained = tally::theta_intersection(yesterday_back, today);
    const auto active = tally::theta_union(yesterday_back, today);

    std::printf("stored yesterday: %zu bytes (DataSketches compact image, serial version 4)\n\n", stored.size());
    std::printf("%-22s %10s  %21s  %9s  %7s\n", "", "estimate", "2-sigma bounds", "true", "error");
    bool ok = true;
    ok &= report("active yesterday", yesterday_back, yesterday_users);
    ok &= report("active today", today, returning + new_users);
    ok &= report("active either day", active, yesterday_users + new_users);
    ok &= report("churned (A-not-B)", churned, yesterday_users - returning);
    ok &= report("returning (A and B)", retained, returning);
    const double churn_rate = churned.estimate() / yesterday_back.estimate();
    std::printf("\nchurn rate: %.2f%% estimated, %.2f%% true\n", 100 * churn_rate,
                100.0 * static_cast<double>(yesterday_users - returning) / yesterday_users);
    std::printf("verdict: %s\n", ok ? "every truth lies inside its 2-sigma bounds" : "FAILED: a truth lies outside its bounds");
    return ok ? 0 : 1;
}
