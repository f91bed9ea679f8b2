// Revenue per distinct buyer: distinct counts that carry values.
//
// A theta sketch says how many distinct buyers there were and how many
// stopped buying; an ArrayOfDoubles sketch (the bytes of Druid's
// arrayOfDoublesSketch) also carries, per retained buyer, the sum of their
// spend and their number of purchases, and keeps them through union and
// A-not-B. So one sketch per day answers: buyers and revenue per day, the
// same over a week (a union of 7 daily sketches), and how much the buyers who
// churned had been spending (last week A-not-B this week).
//
// The simulation: 14 days of purchases from 400,000 customers; from day 7
// on, the customers with index below 60,000 stop buying. Each day 60,000
// purchases. The exact answers (from a hash map) are printed beside the
// estimates; the verdict holds if each truth lies inside the estimate's
// 3-standard-deviation bounds. Exits non-zero if it fails.
#include <tally/sketch/distinct/tuple.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <unordered_map>
#include <vector>

namespace {

std::uint64_t mix(std::uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

struct Truth {
    std::unordered_map<std::uint64_t, double> spend;  // per buyer
    double total() const {
        double s = 0;
        for (const auto& [id, v] : spend) s += v;
        return s;
    }
};

bool report(const char* what, double est, double lo, double hi, double truth) {
    const bool inside = lo <= truth && truth <= hi;
    std::printf("%-34s %12.0f  [%12.0f, %12.0f]  %12.0f  %+6.2f%%  %s\n", what, est, lo, hi, truth,
                100.0 * (est / truth - 1), inside ? "inside" : "OUTSIDE");
    return inside;
}

bool report_buyers(const char* what, const tally::ArrayOfDoublesSketch& s, const Truth& t) {
    return report(what, s.estimate(), s.lower_bound(3), s.upper_bound(3), static_cast<double>(t.spend.size()));
}

bool report_spend(const char* what, const tally::ArrayOfDoublesSketch& s, const Truth& t) {
    return report(what, s.column_sum_estimate(0), s.column_sum_lower_bound(0, 3), s.column_sum_upper_bound(0, 3),
                  t.total());
}

}  // namespace

int main() {
    constexpr int lg_k = 12;  // 4096 nominal entries: about 1.6% error on a count
    constexpr std::uint64_t customers = 400000, churners = 60000, per_day = 60000;
    std::vector<tally::ArrayOfDoublesSketch> days;
    Truth week[2], churned_truth;
    std::uint64_t draw = 0;
    for (int day = 0; day < 14; ++day) {
        tally::ArrayOfDoublesSketch s(lg_k, 2);  // spend, purchases
        for (std::uint64_t p = 0; p < per_day; ++p) {
            std::uint64_t c = mix(++draw) % customers;
            if (day >= 7 && c < churners) c += churners;  // churned customers buy no more
            const std::uint64_t id = mix(c ^ 0x5bd1e995u);
            const double spend = 5.0 + static_cast<double>(mix(draw ^ 0xabcdefu) % 9500) / 100.0;
            const double row[2] = {spend, 1.0};
            s.add(id, row);
            week[day / 7].spend[id] += spend;
        }
        days.push_back(std::move(s));
    }
    for (const auto& [id, v] : week[0].spend)
        if (!week[1].spend.count(id)) churned_truth.spend[id] = v;

    const auto last_week = tally::tuple_union(std::span<const tally::ArrayOfDoublesSketch>(days.data(), 7));
    const auto this_week = tally::tuple_union(std::span<const tally::ArrayOfDoublesSketch>(days.data() + 7, 7));
    // The churned: last week's buyers absent this week, with last week's spend.
    const auto churned = tally::tuple_a_not_b(last_week, this_week);

    // Last week's union goes to storage as Druid would keep it, and comes back.
    const auto stored = last_week.to_datasketches();
    const auto back = tally::ArrayOfDoublesSketch::from_datasketches(stored, lg_k);

    std::printf("stored last week: %zu bytes (DataSketches compact ArrayOfDoubles image)\n\n", stored.size());
    std::printf("%-34s %12s  %28s  %12s  %7s\n", "", "estimate", "3-sigma bounds", "true", "error");
    bool ok = true;
    ok &= report_buyers("buyers last week", back, week[0]);
    ok &= report_spend("revenue last week", back, week[0]);
    ok &= report_buyers("buyers this week", this_week, week[1]);
    ok &= report_spend("revenue this week", this_week, week[1]);
    ok &= report_buyers("churned buyers (A-not-B)", churned, churned_truth);
    ok &= report_spend("their spend last week", churned, churned_truth);
    std::printf("\nmean spend per buyer last week: %.2f (true %.2f); per churned buyer: %.2f (true %.2f)\n",
                back.column_mean(0), week[0].total() / static_cast<double>(week[0].spend.size()),
                churned.column_mean(0), churned_truth.total() / static_cast<double>(churned_truth.spend.size()));
    std::printf("purchases per buyer last week: %.2f\n", back.column_mean(1));
    std::printf("verdict: %s\n", ok ? "every truth inside its bounds" : "FAILED");
    return ok ? 0 : 1;
}
