// bench/accuracy_data.cpp: the data behind docs/img/ (scripts/plots draws it).
//
// Seeded, deterministic trials through the public API only, written as one
// JSON document:
//   distinct   relative error of HyperLogLog (Ertl, HIP, DataSketches mode),
//              UltraLogLog (FGRA, ML, martingale) and ThetaSketch against n,
//              median and 5-95 % band over the trials, with each estimator's
//              theoretical relative standard error;
//   quantiles  rank error of KllSketch and TDigest against the queried rank on
//              uniform, lognormal and tied data, median and maximum over trials;
//   limiters   cumulative admitted requests of each limiter under one bursty
//              arrival trace, with the quota's bound limit + limit * t / window.
//
//   build/<dir>/bench/accuracy_data > docs/results/accuracy.json   (a minute or two)
//   build/<dir>/bench/accuracy_data --quick                          (seconds, a smoke run)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <tally/tally.hpp>

namespace {

struct Out {
    std::string s;
    void raw(const std::string& t) { s += t; }
    void num(double v) {
        char buf[64];
        if (!std::isfinite(v)) { s += "null"; return; }
        std::snprintf(buf, sizeof buf, "%.6g", v);
        s += buf;
    }
    void nums(const std::vector<double>& v) {
        s += "[";
        for (std::size_t i = 0; i < v.size(); ++i) {
            if (i) s += ",";
            num(v[i]);
        }
        s += "]";
    }
};

double quantile_of(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    const double pos = q * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(pos);
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

std::vector<std::uint64_t> n_grid(std::uint64_t max_n) {
    std::vector<std::uint64_t> g;
    for (double e = 0; e <= std::log10(static_cast<double>(max_n)) + 1e-9; e += 0.125) {
        const auto n = static_cast<std::uint64_t>(std::llround(std::pow(10.0, e)));
        if (g.empty() || n != g.back()) g.push_back(n);
    }
    return g;
}

// One series: errors[checkpoint][trial].
struct Series {
    std::string name;
    double rse;  // theory, relative standard error at large n
    std::vector<std::vector<double>> err;
};

void distinct(Out& o, int trials, std::uint64_t max_n) {
    constexpr int p = 12, lg_k = 12;
    const double m = 1 << p, k = 1 << lg_k;
    const std::vector<std::uint64_t> grid = n_grid(max_n);
    std::vector<Series> s = {
        {"HyperLogLog p=12, Ertl (tally mode)", 1.04 / std::sqrt(m), {}},
        {"HyperLogLog p=12, HIP (tally mode, add-only)", std::sqrt(std::log(2.0)) / std::sqrt(m), {}},
        {"HyperLogLog p=12, DataSketches mode", 1.04 / std::sqrt(m), {}},
        {"UltraLogLog p=12, FGRA", 0.782 / std::sqrt(m), {}},
        {"UltraLogLog p=12, ML", 0.761 / std::sqrt(m), {}},
        {"UltraLogLog p=12, martingale", 0.658 / std::sqrt(m), {}},
        {"ThetaSketch lg_k=12", 1.0 / std::sqrt(k), {}},
    };
    for (auto& x : s) x.err.assign(grid.size(), {});
    for (int t = 0; t < trials; ++t) {
        tally::HyperLogLog hll(p), hll_ds(p, tally::HllHashMode::datasketches);
        tally::UltraLogLog ull(p);
        tally::ThetaSketch theta(lg_k);
        std::uint64_t n = 0;
        const std::uint64_t base = (static_cast<std::uint64_t>(t) + 1) << 40;  // distinct items per trial
        for (std::size_t c = 0; c < grid.size(); ++c) {
            for (; n < grid[c]; ++n) {
                const std::uint64_t item = base + n;
                hll.add(item);
                hll_ds.add(item);
                ull.add(item);
                theta.add(item);
            }
            const double truth = static_cast<double>(n);
            const double est[] = {hll.ertl_estimate(),
                                  hll.estimate(),
                                  hll_ds.estimate(),
                                  ull.estimate(tally::UllEstimator::fgra),
                                  ull.estimate(tally::UllEstimator::ml),
                                  ull.estimate(tally::UllEstimator::martingale),
                                  theta.estimate()};
            for (std::size_t i = 0; i < s.size(); ++i) s[i].err[c].push_back(est[i] / truth - 1.0);
        }
    }
    o.raw("\"distinct\":{\"trials\":" + std::to_string(trials) + ",\"n\":[");
    for (std::size_t c = 0; c < grid.size(); ++c) o.raw((c ? "," : "") + std::to_string(grid[c]));
    o.raw("],\"series\":[");
    for (std::size_t i = 0; i < s.size(); ++i) {
        std::vector<double> med, p5, p95;
        for (const auto& e : s[i].err) {
            med.push_back(quantile_of(e, 0.5));
            p5.push_back(quantile_of(e, 0.05));
            p95.push_back(quantile_of(e, 0.95));
        }
        o.raw(std::string(i ? "," : "") + "{\"name\":\"" + s[i].name + "\",\"rse\":");
        o.num(s[i].rse);
        o.raw(",\"median\":");
        o.nums(med);
        o.raw(",\"p5\":");
        o.nums(p5);
        o.raw(",\"p95\":");
        o.nums(p95);
        o.raw("}");
    }
    o.raw("]}");
}

// The rank error of answering q for rank r: the distance from r to the
// interval of normalized ranks the data gives the value q (ties make it wide).
double rank_error(const std::vector<double>& sorted, double q, double r) {
    const double n = static_cast<double>(sorted.size());
    const double lo = static_cast<double>(std::lower_bound(sorted.begin(), sorted.end(), q) - sorted.begin()) / n;
    const double hi = static_cast<double>(std::upper_bound(sorted.begin(), sorted.end(), q) - sorted.begin()) / n;
    return r < lo ? lo - r : r > hi ? r - hi : 0.0;
}

void quantiles(Out& o, int trials, std::size_t n) {
    std::vector<double> ranks;
    for (int i = 1; i < 100; ++i) ranks.push_back(i / 100.0);
    for (double r : {0.001, 0.005, 0.995, 0.999}) ranks.push_back(r);
    std::sort(ranks.begin(), ranks.end());
    const char* dists[] = {"uniform", "lognormal", "tied"};
    o.raw("\"quantiles\":{\"trials\":" + std::to_string(trials) + ",\"n\":" + std::to_string(n) + ",\"rank\":");
    o.nums(ranks);
    {
        tally::KllSketch<double> k200(200);
        o.raw(",\"kll_bound\":");
        o.num(k200.normalized_rank_error());
    }
    o.raw(",\"tdigest_bound_mid\":0.005,\"tdigest_bound_tail\":0.0005,\"series\":[");
    bool first = true;
    for (int d = 0; d < 3; ++d) {
        std::vector<std::vector<double>> kerr(ranks.size()), terr(ranks.size());
        for (int t = 0; t < trials; ++t) {
            std::mt19937_64 rng(0x5eed0000u + static_cast<std::uint64_t>(d * 1000 + t));
            std::uniform_real_distribution<double> uni(0.0, 1.0);
            std::lognormal_distribution<double> logn(0.0, 1.0);
            std::uniform_int_distribution<int> tie(0, 19);
            std::vector<double> data(n);
            for (auto& x : data) x = d == 0 ? uni(rng) : d == 1 ? logn(rng) : static_cast<double>(tie(rng));
            tally::KllSketch<double> kll(200, 0x5eedULL + static_cast<std::uint64_t>(t));
            tally::TDigest td(100);
            for (double x : data) {
                kll.add(x);
                td.add(x);
            }
            std::sort(data.begin(), data.end());
            for (std::size_t i = 0; i < ranks.size(); ++i) {
                kerr[i].push_back(rank_error(data, kll.quantile(ranks[i]), ranks[i]));
                terr[i].push_back(rank_error(data, td.quantile(ranks[i]), ranks[i]));
            }
        }
        for (int which = 0; which < 2; ++which) {
            const auto& e = which == 0 ? kerr : terr;
            std::vector<double> med, mx;
            for (const auto& v : e) {
                med.push_back(quantile_of(v, 0.5));
                mx.push_back(*std::max_element(v.begin(), v.end()));
            }
            o.raw(std::string(first ? "" : ",") + "{\"sketch\":\"" + (which == 0 ? "KllSketch k=200" : "TDigest compression 100") +
                  "\",\"data\":\"" + dists[d] + "\",\"median\":");
            o.nums(med);
            o.raw(",\"max\":");
            o.nums(mx);
            o.raw("}");
            first = false;
        }
    }
    o.raw("]}");
}

template <class L>
std::vector<double> admitted(L limiter, const std::vector<std::uint64_t>& arrivals, const std::vector<std::uint64_t>& ticks) {
    std::vector<double> out;
    std::size_t i = 0;
    std::uint64_t count = 0;
    for (std::uint64_t tick : ticks) {
        for (; i < arrivals.size() && arrivals[i] <= tick; ++i) count += limiter.allow(arrivals[i]) ? 1 : 0;
        out.push_back(static_cast<double>(count));
    }
    return out;
}

void limiters(Out& o) {
    // 10 requests per second; a steady 4/s, then bursts of 60 requests in 0.2 s at 2 s, 4.95 s and 7 s.
    const tally::Quota q = tally::Quota::per_second(10);
    constexpr std::uint64_t s = 1'000'000'000, horizon = 10 * s;
    std::mt19937_64 rng(0x11a17e5);
    std::vector<std::uint64_t> arrivals;
    std::exponential_distribution<double> gap(4.0);
    for (double t = gap(rng); t < 10.0; t += gap(rng)) arrivals.push_back(static_cast<std::uint64_t>(t * 1e9));
    for (double start : {2.0, 4.95, 7.0}) {
        std::uniform_real_distribution<double> in(start, start + 0.2);
        for (int i = 0; i < 60; ++i) arrivals.push_back(static_cast<std::uint64_t>(in(rng) * 1e9));
    }
    std::sort(arrivals.begin(), arrivals.end());
    std::vector<std::uint64_t> ticks;
    for (std::uint64_t t = 0; t <= horizon; t += s / 50) ticks.push_back(t);
    std::vector<double> t_s, offered, bound;
    std::size_t i = 0;
    for (std::uint64_t tick : ticks) {
        for (; i < arrivals.size() && arrivals[i] <= tick; ++i) {}
        t_s.push_back(static_cast<double>(tick) / 1e9);
        offered.push_back(static_cast<double>(i));
        bound.push_back(static_cast<double>(q.limit) + static_cast<double>(q.limit) * static_cast<double>(tick) / static_cast<double>(q.window_ns));
    }
    struct Row {
        const char* name;
        std::vector<double> v;
    };
    const Row rows[] = {
        {"Gcra", admitted(tally::Gcra(q), arrivals, ticks)},
        {"TokenBucket", admitted(tally::TokenBucket(q), arrivals, ticks)},
        {"FixedWindowLimiter", admitted(tally::FixedWindowLimiter(q), arrivals, ticks)},
        {"SlidingWindowLimiter", admitted(tally::SlidingWindowLimiter<>(q), arrivals, ticks)},
        {"SlidingLogLimiter", admitted(tally::SlidingLogLimiter(q), arrivals, ticks)},
    };
    o.raw("\"limiters\":{\"quota\":{\"limit\":10,\"window_s\":1},\"t\":");
    o.nums(t_s);
    o.raw(",\"offered\":");
    o.nums(offered);
    o.raw(",\"bound\":");
    o.nums(bound);
    o.raw(",\"series\":[");
    for (std::size_t r = 0; r < std::size(rows); ++r) {
        o.raw(std::string(r ? "," : "") + "{\"name\":\"" + rows[r].name + "\",\"admitted\":");
        o.nums(rows[r].v);
        o.raw("}");
    }
    o.raw("]}");
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    Out o;
    o.raw("{\"generator\":\"bench/accuracy_data.cpp\",");
    distinct(o, quick ? 3 : 100, quick ? 10'000 : 10'000'000);
    o.raw(",");
    quantiles(o, quick ? 2 : 20, quick ? 10'000 : 100'000);
    o.raw(",");
    limiters(o);
    o.raw("}\n");
    std::fputs(o.s.c_str(), stdout);
    return 0;
}
