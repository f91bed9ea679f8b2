// KllSketch: exact answers below capacity, the rank-error bound against an
// exact oracle (with a negative control), merge laws, the tally frame's
// golden bytes, validation of bad bytes, Windowed<KllSketch<double>>.
#include <tally/sketch/quantiles/kll.hpp>
#include <tally/window/windowed.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.hpp"
#include "merge_laws.hpp"
#include "test_support.hpp"

using tally::KllSketch;
using tally::test::Rng;

namespace {

/// DataSketches' quantile on exact data: inclusive, the item at 1-based
/// position ceil(r n); exclusive, at floor(r n) + 1; clamped to the last.
template <class T>
T oracle_quantile(const std::vector<T>& sorted, double r, bool inclusive) {
    const double n = static_cast<double>(sorted.size());
    std::size_t pos = inclusive ? static_cast<std::size_t>(std::ceil(r * n)) : static_cast<std::size_t>(r * n) + 1;
    if (pos == 0) pos = 1;
    if (pos > sorted.size()) pos = sorted.size();
    return sorted[pos - 1];
}

template <class T>
double oracle_rank(const std::vector<T>& sorted, T x, bool inclusive) {
    const auto it = inclusive ? std::upper_bound(sorted.begin(), sorted.end(), x)
                              : std::lower_bound(sorted.begin(), sorted.end(), x);
    return static_cast<double>(it - sorted.begin()) / static_cast<double>(sorted.size());
}

/// Worst |estimated rank - true rank| over 1001 evenly spaced items, for a
/// stream that is a permutation of 0 .. n-1 (true inclusive rank of x: (x + 1) / n).
template <class RankFn>
double worst_rank_error(std::uint64_t n, RankFn&& est) {
    double worst = 0;
    for (std::uint64_t i = 0; i <= 1000; ++i) {
        const std::uint64_t x = i * (n - 1) / 1000;
        const double truth = static_cast<double>(x + 1) / static_cast<double>(n);
        worst = std::max(worst, std::fabs(est(static_cast<double>(x)) - truth));
    }
    return worst;
}

std::vector<double> permutation(std::uint64_t n, std::uint64_t seed) {
    std::vector<double> v(n);
    for (std::uint64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i);
    Rng rng(seed);
    for (std::uint64_t i = n; i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
    return v;
}

/// Two sketches answer alike within the bound: same n, min, max, and the
/// ranks of a grid of quantiles within 2 eps of each other.
struct SameInDistribution {
    bool operator()(const KllSketch<double>& a, const KllSketch<double>& b) const {
        if (a.total() != b.total()) return false;
        if (a.empty()) return b.empty();
        if (a.min_item() != b.min_item() || a.max_item() != b.max_item()) return false;
        const double eps = std::max(a.normalized_rank_error(), b.normalized_rank_error());
        for (int i = 0; i <= 20; ++i) {
            const double r = i / 20.0;
            if (std::fabs(a.rank(b.quantile(r)) - b.rank(b.quantile(r))) > 2 * eps) return false;
        }
        return true;
    }
};

}  // namespace

TEST_CASE("KllSketch: k outside [8, 65535] is rejected with its range", "[kll]") {
    CHECK_NOTHROW(KllSketch<double>(8));
    CHECK_NOTHROW(KllSketch<double>(65535));
    CHECK_THROWS_AS(KllSketch<double>(7), std::invalid_argument);
    CHECK_THROWS_WITH(KllSketch<double>(7), Catch::Contains("k 7") && Catch::Contains("[8, 65535]"));
    CHECK_THROWS_WITH(KllSketch<float>(0), Catch::Contains("k 0"));
}

TEST_CASE("KllSketch: an empty sketch answers NaN and rejects bad arguments", "[kll]") {
    const KllSketch<double> s;
    CHECK(s.empty());
    CHECK(s.total() == 0);
    CHECK(std::isnan(s.quantile(0.5)));
    CHECK(std::isnan(s.rank(1.0)));
    CHECK(std::isnan(s.min_item()));
    CHECK(std::isnan(s.max_item()));
    const double splits[] = {1.0, 2.0};
    CHECK(s.cdf(splits).empty());
    CHECK_THROWS_AS(s.quantile(-0.01), std::invalid_argument);
    CHECK_THROWS_AS(s.quantile(1.01), std::invalid_argument);
    CHECK_THROWS_AS(s.quantile(std::numeric_limits<double>::quiet_NaN()), std::invalid_argument);
    CHECK_THROWS_AS(s.rank(std::numeric_limits<double>::quiet_NaN()), std::invalid_argument);
    const double bad[] = {2.0, 1.0};
    CHECK_THROWS_AS(s.cdf(bad), std::invalid_argument);
    const double dup[] = {1.0, 1.0};
    CHECK_THROWS_AS(s.pmf(dup), std::invalid_argument);
}

TEST_CASE("KllSketch: NaN is ignored and counted nowhere; try_add reports it", "[kll]") {
    KllSketch<float> s;
    s.add(std::numeric_limits<float>::quiet_NaN());
    CHECK(s.empty());
    CHECK_FALSE(s.try_add(std::numeric_limits<float>::quiet_NaN()));
    CHECK(s.try_add(1.5f));
    CHECK(s.total() == 1);
    CHECK(s.quantile(0.0) == 1.5f);
    CHECK(s.quantile(1.0) == 1.5f);
}

TEMPLATE_TEST_CASE("KllSketch: below capacity every answer is exact (DataSketches' semantics)", "[kll]", float, double) {
    for (const std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{100}, std::size_t{200}}) {
        KllSketch<TestType> s(200, n);
        std::vector<TestType> data;
        Rng rng(n);
        for (std::size_t i = 0; i < n; ++i) {
            const auto x = static_cast<TestType>(rng.below(20)) / 4;  // ties
            data.push_back(x);
            s.add(x);
        }
        std::sort(data.begin(), data.end());
        REQUIRE_FALSE(s.is_estimation_mode());
        CHECK(s.min_item() == data.front());
        CHECK(s.max_item() == data.back());
        for (int i = 0; i <= 40; ++i) {
            const double r = i / 40.0;
            for (const bool inc : {true, false}) {
                INFO("n " << n << " rank " << r << " inclusive " << inc);
                CHECK(s.quantile(r, inc) == oracle_quantile(data, r, inc));
            }
        }
        for (int v = -1; v <= 21; ++v) {
            const auto x = static_cast<TestType>(v) / 4;
            for (const bool inc : {true, false}) CHECK(s.rank(x, inc) == oracle_rank(data, x, inc));
        }
        const TestType splits[] = {TestType(1), TestType(2.5), TestType(4)};
        const auto cdf = s.cdf(splits);
        const auto pmf = s.pmf(splits);
        REQUIRE(cdf.size() == 4);
        REQUIRE(pmf.size() == 4);
        CHECK(cdf[3] == 1.0);
        double acc = 0;
        for (std::size_t i = 0; i < 4; ++i) {
            if (i < 3) CHECK(cdf[i] == oracle_rank(data, splits[i], true));
            acc += pmf[i];
            CHECK(std::fabs(acc - cdf[i]) < 1e-12);
        }
    }
}

TEST_CASE("KllSketch: normalized_rank_error is DataSketches' formula", "[kll]") {
    CHECK(KllSketch<double>(200).normalized_rank_error() == 2.296 / std::pow(200.0, 0.9723));
    CHECK(KllSketch<double>(200).normalized_rank_error(true) == 2.446 / std::pow(200.0, 0.9433));
    CHECK(std::fabs(KllSketch<double>(200).normalized_rank_error() - 0.0133) < 0.0001);
}

TEST_CASE("KllSketch: the worst rank error stays within normalized_rank_error, single and merged [big]", "[kll][big]") {
    // The bound is DataSketches' 99th percentile of the worst error; over
    // `trials` fixed seeds at most a few trials may exceed it, none by 50%.
    const std::uint64_t n = tally::test::big(200000, 20000);
    const int trials = static_cast<int>(tally::test::big(24, 6));
    const std::uint16_t k = 200;
    const double eps = KllSketch<double>::normalized_rank_error(k, false);
    int over_single = 0, over_merged = 0, control_passes = 0;
    double worst_single = 0, worst_merged = 0;
    for (int t = 0; t < trials; ++t) {
        const auto data = permutation(n, 1000 + t);
        KllSketch<double> single(k, 77 + t);
        std::vector<KllSketch<double>> shards;
        for (int j = 0; j < 16; ++j) shards.emplace_back(k, 5000 + 16 * t + j);
        for (std::uint64_t i = 0; i < n; ++i) {
            single.add(data[i]);
            shards[i % 16].add(data[i]);
        }
        KllSketch<double> merged(k, 9 + t);
        for (const auto& s : shards) merged.merge(s);
        REQUIRE(merged.total() == n);
        const double es = worst_rank_error(n, [&](double x) { return single.rank(x); });
        const double em = worst_rank_error(n, [&](double x) { return merged.rank(x); });
        worst_single = std::max(worst_single, es);
        worst_merged = std::max(worst_merged, em);
        over_single += es > eps;
        over_merged += em > eps;
        // the same items in ascending order (each level then holds another
        // part of the range) must meet the bound too ...
        KllSketch<double> asc(k, 3000 + t);
        for (std::uint64_t i = 0; i < n; ++i) asc.add(static_cast<double>(i));
        const double ea = worst_rank_error(n, [&](double x) { return asc.rank(x); });
        worst_single = std::max(worst_single, ea);
        over_single += ea > eps;
        // ... and, as the negative control, its retained items counted with
        // weight 1 (ignoring each level's weight 2^h) must break it
        const auto& v = asc.sorted_view();
        const auto items = v.items();
        const double ec = worst_rank_error(n, [&](double x) {
            return static_cast<double>(std::upper_bound(items.begin(), items.end(), x) - items.begin()) /
                   static_cast<double>(items.size());
        });
        control_passes += ec <= eps;
    }
    INFO("eps " << eps << " worst single " << worst_single << " worst merged " << worst_merged);
    CHECK(over_single <= std::max(1, 2 * trials / 10));
    CHECK(over_merged <= std::max(1, trials / 10));
    CHECK(worst_single <= 1.5 * eps);
    CHECK(worst_merged <= 1.5 * eps);
    CHECK(control_passes == 0);
}

TEST_CASE("KllSketch: same seed and inputs give the same sketch; another seed another", "[kll]") {
    KllSketch<double> a(64, 1), b(64, 1), c(64, 2);
    Rng rng(3);
    for (int i = 0; i < 20000; ++i) {
        const double x = rng.uniform();
        a.add(x);
        b.add(x);
        c.add(x);
    }
    CHECK(a.serialize() == b.serialize());
    CHECK(a.to_datasketches() == b.to_datasketches());
    CHECK(a.to_datasketches() != c.to_datasketches());
    a.clear();
    CHECK(a.empty());
    CHECK(a.serialize() == KllSketch<double>(64, 1).serialize());
}

TEST_CASE("KllSketch: merging keeps n, min, max and the smaller k", "[kll]") {
    KllSketch<double> a(200, 1), b(100, 2);
    for (int i = 0; i < 5000; ++i) a.add(i);
    for (int i = 5000; i < 9000; ++i) b.add(-i);
    a.merge(b);
    CHECK(a.total() == 9000);
    CHECK(a.min_item() == -8999);
    CHECK(a.max_item() == 4999);
    CHECK(a.k() == 200);
    CHECK(a.min_merged_k() == 100);
    CHECK(a.normalized_rank_error() == KllSketch<double>::normalized_rank_error(100, false));
    // self-merge doubles every weight
    KllSketch<double> c(200, 3);
    for (int i = 0; i < 100; ++i) c.add(i);
    c.merge(c);
    CHECK(c.total() == 200);
    CHECK(c.rank(49.0) == 0.5);
}

TEST_CASE("KllSketch: min_item and max_item stay exact through compactions, copies, bytes and merges", "[kll]") {
    // The extremes arrive at every point of the stream (first, early, late,
    // last), so most of them are compacted away by the time they are asked for.
    for (const std::uint64_t at : {0ull, 1ull, 777ull, 50000ull, 99998ull, 99999ull}) {
        Rng rng(at + 5);
        KllSketch<double> s(200, at);
        KllSketch<float> f(8, at);
        double lo = 0, hi = 0;
        for (std::uint64_t i = 0; i < 100000; ++i) {
            double x = rng.uniform() * 2.0 - 1.0;
            if (i == at) x = -7.5;
            if (i == 99999 - at) x = 9.25;
            s.add(x);
            f.add(static_cast<float>(x));
            lo = i == 0 ? x : std::min(lo, x);
            hi = i == 0 ? x : std::max(hi, x);
        }
        INFO("extremes at " << at);
        CHECK(s.is_estimation_mode());
        CHECK(s.min_item() == lo);
        CHECK(s.max_item() == hi);
        CHECK(f.min_item() == static_cast<float>(lo));
        CHECK(f.max_item() == static_cast<float>(hi));
        const KllSketch<double> copy = s;
        CHECK(copy.min_item() == lo);
        CHECK(copy.max_item() == hi);
        const auto back = KllSketch<double>::deserialize(s.serialize());
        CHECK(back.min_item() == lo);
        CHECK(back.max_item() == hi);
        const auto ds = KllSketch<double>::from_datasketches(s.to_datasketches());
        CHECK(ds.min_item() == lo);
        CHECK(ds.max_item() == hi);
        // Merged both ways, with a sketch whose own extremes sit in its level 0.
        KllSketch<double> small(200, 9);
        small.add(0.5);
        small.add(-0.25);
        KllSketch<double> m1 = s;
        m1.merge(small);
        KllSketch<double> m2 = small;
        m2.merge(s);
        CHECK(m1.min_item() == lo);
        CHECK(m2.min_item() == lo);
        CHECK(m1.max_item() == hi);
        CHECK(m2.max_item() == hi);
    }
}

TEST_CASE("KllSketch: merge laws (in distribution), truncations, corruptions", "[kll][laws]") {
    KllSketch<double> empty(200, 1), a(200, 2), b(200, 3), c(200, 4);
    Rng rng(11);
    for (int i = 0; i < 30000; ++i) a.add(rng.uniform());
    for (int i = 0; i < 7000; ++i) b.add(rng.uniform() * 2);
    for (int i = 0; i < 150; ++i) c.add(rng.uniform() - 1);
    tally::test::check_merge_laws(empty, a, b, c, SameInDistribution{});
    // exact round trip of every answer
    const auto bytes = a.serialize();
    const auto back = KllSketch<double>::deserialize(bytes);
    for (int i = 0; i <= 100; ++i) CHECK(back.quantile(i / 100.0) == a.quantile(i / 100.0));
    tally::test::check_truncations_throw<KllSketch<double>>(c.serialize());
    tally::test::check_truncations_throw<KllSketch<double>>(bytes);
    tally::test::check_corruptions_safe<KllSketch<double>>(bytes, 5);
    tally::test::check_corruptions_safe<KllSketch<double>>(c.serialize(), 6);
    // a float frame is not a double frame
    KllSketch<float> f;
    f.add(1.0f);
    CHECK_THROWS_AS(KllSketch<double>::deserialize(f.serialize()), tally::FormatError);
}

TEST_CASE("KllSketch: the tally frame's golden bytes", "[kll][golden]") {
    // k = 8, seed 5, items 3, 1, 2: one level, no compaction (layout in kll.hpp)
    KllSketch<float> s(8, 5);
    s.add(3.0f);
    s.add(1.0f);
    s.add(2.0f);
    const std::vector<std::uint8_t> expected = {
        'T', 'A', 'L', 'Y', 10, 1, 0, 0,             // frame: family kll, version 1
        4, 1, 8, 0, 8, 0, 0, 0,                      // float, 1 level, k 8, min k 8, flags 0
        3, 0, 0, 0, 0, 0, 0, 0,                      // n 3
        5, 0, 0, 0, 0, 0, 0, 0,                      // seed 5
        5, 0, 0, 0, 0, 0, 0, 0,                      // random state: no compaction yet
        0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x40, 0x40,  // min 1.0f, max 3.0f
        3, 0, 0, 0,                                  // level 0 holds 3 items
        0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x40, 0x40,  // 2, 1, 3 (newest first)
    };
    const auto bytes = s.serialize();
    REQUIRE(bytes.size() == expected.size());
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        INFO("byte " << i);
        CHECK(static_cast<std::uint8_t>(bytes[i]) == expected[i]);
    }
    const std::vector<std::uint8_t> empty = {'T', 'A', 'L', 'Y', 10, 1, 0, 0, 8, 1, 200, 0, 200, 0, 0, 0,
                                             0,   0,   0,   0,   0,  0, 0, 0, 9, 0, 0,   0, 0,   0, 0, 0,
                                             9,   0,   0,   0,   0,  0, 0, 0};
    const auto eb = KllSketch<double>(200, 9).serialize();
    REQUIRE(eb.size() == empty.size());
    for (std::size_t i = 0; i < eb.size(); ++i) CHECK(static_cast<std::uint8_t>(eb[i]) == empty[i]);
}

TEST_CASE("KllSketch: deserialize rejects inconsistent frames", "[kll]") {
    KllSketch<double> s(8, 1);
    for (int i = 0; i < 100; ++i) s.add(i);
    const auto good = s.serialize();
    auto with = [&](std::size_t pos, std::uint8_t v) {
        auto b = good;
        b[pos] = static_cast<std::byte>(v);
        return b;
    };
    CHECK_THROWS_AS(KllSketch<double>::deserialize(with(8, 4)), tally::FormatError);   // item size
    CHECK_THROWS_AS(KllSketch<double>::deserialize(with(9, 0)), tally::FormatError);   // no levels
    CHECK_THROWS_AS(KllSketch<double>::deserialize(with(10, 7)), tally::FormatError);  // k 7
    CHECK_THROWS_AS(KllSketch<double>::deserialize(with(14, 2)), tally::FormatError);  // flags
    CHECK_THROWS_AS(KllSketch<double>::deserialize(with(16, 101)), tally::FormatError);  // n != weight
    // an item outside [min, max]
    auto b = good;
    const double big = 1e9;
    std::memcpy(b.data() + b.size() - 8, &big, 8);
    CHECK_THROWS_AS(KllSketch<double>::deserialize(b), tally::FormatError);
}

TEST_CASE("KllSketch: quantile after the first query reads the cached view", "[kll]") {
    KllSketch<double> s(200, 1);
    for (int i = 0; i < 100000; ++i) s.add(i % 1000);
    const auto* first = s.sorted_view().items().data();
    (void)s.quantile(0.3);
    CHECK(s.sorted_view().items().data() == first);  // not rebuilt
    s.add(5.0);
    const auto& v = s.sorted_view();
    CHECK(v.total_weight() == s.total());
    CHECK(std::is_sorted(v.items().begin(), v.items().end()));
}

TEST_CASE("KllSketch: quantile is the first item whose cumulative weight reaches the rank's weight", "[kll]") {
    // The oracle scans the view's cumulative weights; the ranks include every
    // boundary cum_i / n and its neighbours, where inclusive and exclusive part.
    std::size_t wrong = 0, checked = 0;
    for (const std::uint16_t k : {8, 200, 1000})
        for (const std::uint64_t n : {1ull, 7ull, 100ull, 5000ull, 1000000ull}) {
            KllSketch<double> s(k, n + k);
            Rng rng(n * 31 + k);
            for (std::uint64_t i = 0; i < n; ++i) s.add(rng.uniform());
            const auto& v = s.sorted_view();
            const auto cum = v.cumulative_weights();
            const double total = static_cast<double>(v.total_weight());
            std::vector<double> ranks = {0.0, 1.0, 0.5, 1e-12, 1.0 - 1e-12};
            for (std::size_t i = 0; i < cum.size(); i += 1 + cum.size() / 300) {
                const double r = static_cast<double>(cum[i]) / total;
                ranks.insert(ranks.end(), {r, std::nextafter(r, 0.0), std::nextafter(r, 2.0)});
            }
            for (int i = 0; i < 200; ++i) ranks.push_back(rng.uniform());
            for (const double r : ranks) {
                if (r > 1.0) continue;
                for (const bool inclusive : {true, false}) {
                    // DataSketches Java's natural rank: rounded to 7 decimals up to n = 10^7
                    double wd = r * total;
                    if (total <= 1e7) wd = static_cast<double>(std::llround(wd * 1e7)) / 1e7;
                    const auto need = static_cast<std::uint64_t>(inclusive ? std::ceil(wd) : std::floor(wd) + 1);
                    std::size_t at = 0;
                    while (at + 1 < cum.size() && cum[at] < need) ++at;
                    ++checked;
                    if (s.quantile(r, inclusive) != v.items()[at] && ++wrong)
                        FAIL_CHECK("k " << k << ", n " << n << ", rank " << r << (inclusive ? " inclusive" : " exclusive"));
                }
            }
        }
    CHECK(checked > 10000);
    CHECK(wrong == 0);
}

TEST_CASE("KllSketch: rank is the weight of the items at or below (or below) the item", "[kll]") {
    // The oracle counts the view's items by comparison; the data spread over
    // one binade, over eighty (where the item index's buckets are crowded),
    // and over a handful of tied values with both infinities; the items
    // asked include every retained item and its neighbours, both zeros, both
    // infinities and points outside the data.
    const auto uniform = [](Rng& rng) { return rng.uniform(); };
    const auto heavy = [](Rng& rng) { return (rng.below(2) ? 1.0 : -1.0) * std::exp(rng.uniform() * 80.0 - 40.0); };
    const auto tied = [](Rng& rng) {
        const std::uint64_t r = rng.below(7);
        if (r == 5) return std::numeric_limits<double>::infinity();
        if (r == 6) return -std::numeric_limits<double>::infinity();
        return static_cast<double>(r) - 2.0;
    };
    std::size_t wrong = 0, checked = 0;
    for (int dist = 0; dist < 3; ++dist)
        for (const std::uint64_t n : {1ull, 7ull, 5000ull, 300000ull}) {
            KllSketch<double> s(200, n + static_cast<std::uint64_t>(dist));
            Rng rng(n * 7 + static_cast<std::uint64_t>(dist));
            for (std::uint64_t i = 0; i < n; ++i) s.add(dist == 0 ? uniform(rng) : dist == 1 ? heavy(rng) : tied(rng));
            const auto& v = s.sorted_view();
            const auto items = v.items();
            const auto cum = v.cumulative_weights();
            const double total = static_cast<double>(v.total_weight());
            constexpr double inf = std::numeric_limits<double>::infinity();
            std::vector<double> asked = {0.0, -0.0, inf, -inf, items.front() - 1.0, items.back() + 1.0};
            for (const double x : items)
                asked.insert(asked.end(), {x, std::nextafter(x, -inf), std::nextafter(x, inf)});
            for (int i = 0; i < 200; ++i) asked.push_back(dist == 1 ? heavy(rng) : rng.uniform() * 6.0 - 3.0);
            for (const double x : asked)
                for (const bool inclusive : {true, false}) {
                    std::size_t count = 0;
                    for (const double y : items) count += inclusive ? !(x < y) : (y < x);
                    const double want = count == 0 ? 0.0 : static_cast<double>(cum[count - 1]) / total;
                    ++checked;
                    if (s.rank(x, inclusive) != want && ++wrong)
                        FAIL_CHECK("dist " << dist << ", n " << n << ", item " << x << (inclusive ? " inclusive" : " exclusive"));
                }
        }
    CHECK(checked > 10000);
    CHECK(wrong == 0);
    // -0 is the smallest item's equal here, at the very start of the index
    KllSketch<double> zero_one;
    zero_one.add(0.0);
    zero_one.add(1.0);
    CHECK(zero_one.rank(-0.0, true) == 0.5);
    CHECK(zero_one.rank(-0.0, false) == 0.0);
}

TEST_CASE("KllSketch: tied data answers the tied value and exact ranks at the ties", "[kll]") {
    KllSketch<double> s(200, 4);
    // 10^5 items, 60% of them exactly 7.0
    Rng rng(8);
    for (int i = 0; i < 100000; ++i) s.add(i % 5 < 3 ? 7.0 : rng.uniform() * 20);
    CHECK(s.quantile(0.5) == 7.0);
    CHECK(s.rank(7.0, true) - s.rank(7.0, false) > 0.6 - 2 * s.normalized_rank_error());
}

TEST_CASE("KllSketch: Windowed<KllSketch<double>> answers over the window", "[kll][windowed]") {
    tally::Windowed<KllSketch<double>, 4> w(1000, KllSketch<double>(200));
    static_assert(tally::MergeableSummary<KllSketch<double>> && tally::SummaryObservers<KllSketch<float>>);
    for (std::uint64_t t = 0; t < 8000; ++t) w.add(t, static_cast<double>(t / 1000));
    // window: buckets 5, 6, 7 (bucket-aligned: the last Slots - 1 closed plus the current)
    const KllSketch<double> v = w.view(7999);
    CHECK(v.min_item() >= 4.0);
    CHECK(v.max_item() == 7.0);
    CHECK(v.quantile(1.0) == 7.0);
    const auto bytes = w.serialize();
    auto back = tally::Windowed<KllSketch<double>, 4>::deserialize(bytes);
    CHECK(back.view(7999).total() == v.total());
}

namespace {
// Values from a small range around zero (ties common), with both zeros and
// both infinities.
template <class T>
T kernel_value(Rng& rng) {
    const std::uint64_t r = rng.below(28);
    if (r == 24) return -std::numeric_limits<T>::infinity();
    if (r == 25) return std::numeric_limits<T>::infinity();
    if (r == 26) return T(-0.0);
    return static_cast<T>(static_cast<int>(r) - 12) / T(4);
}

template <class T>
std::size_t kernel_mismatches(Rng& rng) {
    std::size_t wrong = 0;
    const auto draw = [&](std::size_t n) {
        std::vector<T> v(n);
        for (T& x : v) x = kernel_value<T>(rng);
        std::sort(v.begin(), v.end());
        return v;
    };
    // Every run length pair up to 70 (each merge strategy's range).
    for (std::uint32_t na = 0; na <= 70; ++na)
        for (std::uint32_t nb = 0; nb <= 70; ++nb) {
            const std::vector<T> a = draw(na), b = draw(nb);
            std::vector<T> want(na + nb);
            std::merge(a.begin(), a.end(), b.begin(), b.end(), want.begin());
            std::vector<T> out(na + nb, T(-1));
            tally::detail::kll_merge_into(a.data(), na, b.data(), nb, out.data());
            if (out != want && ++wrong) FAIL_CHECK("kll_merge_into " << na << " + " << nb);
            // In place: a, a gap of na, then b; the result fills [na, 2 na + nb).
            std::vector<T> buf(2 * std::size_t{na} + nb, T(-1));
            std::copy(a.begin(), a.end(), buf.begin());
            std::copy(b.begin(), b.end(), buf.begin() + 2 * na);
            tally::detail::kll_merge_up(buf.data(), 0, na, 2 * na, nb);
            if (!std::equal(want.begin(), want.end(), buf.begin() + na) && ++wrong)
                FAIL_CHECK("kll_merge_up " << na << " + " << nb);
        }
    // Each small network directly (the dispatch above picks one per CPU):
    // the scalar ones, and on x86-64 with AVX2 the vector ones for double.
    for (std::uint32_t na = 1; na <= 32; ++na)
        for (std::uint32_t nb = 1; nb <= 32; ++nb) {
            const std::vector<T> a = draw(na), b = draw(nb);
            std::vector<T> want(na + nb);
            std::merge(a.begin(), a.end(), b.begin(), b.end(), want.begin());
            const auto in_place = [&](auto&& merge) {
                std::vector<T> buf(2 * std::size_t{na} + nb, T(-1));
                std::copy(a.begin(), a.end(), buf.begin());
                std::copy(b.begin(), b.end(), buf.begin() + 2 * na);
                merge(buf.data(), buf.data() + 2 * na, buf.data() + na);
                return std::equal(want.begin(), want.end(), buf.begin() + na);
            };
            if (na <= 8 && nb <= 8 &&
                !in_place([&](T* x, T* y, T* out) { tally::detail::kll_merge_network_into<8>(x, na, y, nb, out); }) &&
                ++wrong)
                FAIL_CHECK("kll_merge_network_into<8> " << na << " + " << nb);
            if (na <= 16 && nb <= 16 &&
                !in_place([&](T* x, T* y, T* out) { tally::detail::kll_merge_network_into<16>(x, na, y, nb, out); }) &&
                ++wrong)
                FAIL_CHECK("kll_merge_network_into<16> " << na << " + " << nb);
#if TALLY_SIMD_X86
            if constexpr (std::is_same_v<T, double>) {
                if (tally::detail::cpu_has_avx2() &&
                    !in_place([&](T* x, T* y, T* out) { tally::detail::kll_merge32_avx2(x, na, y, nb, out); }) &&
                    ++wrong)
                    FAIL_CHECK("kll_merge32_avx2 " << na << " + " << nb);
            }
#endif
        }
    // halving: every other item from the offset, into the level's lower (or
    // upper) half; items below the level must stay, and the level ends its
    // allocation, so that a read past it is an error under AddressSanitizer
    for (std::uint32_t length = 0; length <= 80; length += 2)
        for (std::uint32_t offset = 0; offset <= 1; ++offset) {
            std::vector<T> buf(length + 3);
            for (T& x : buf) x = kernel_value<T>(rng);
            std::vector<T> want = buf;
            for (std::uint32_t i = 0; i < length / 2; ++i) want[3 + i] = buf[3 + offset + 2 * i];
            std::vector<T> got = buf;
            tally::detail::kll_halve_down(got.data(), 3, length, offset);
            const auto same_bits = [](const std::vector<T>& a, const std::vector<T>& b) {
                return std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
            };
            if (!same_bits(got, want) && ++wrong) FAIL_CHECK("kll_halve_down " << length << " from " << offset);
            // and into the upper half, from the top down
            std::vector<T> want_up = buf;
            for (std::uint32_t j = length / 2; j-- > 0;) want_up[3 + length / 2 + j] = want_up[3 + 2 * j + offset];
            std::vector<T> got_up = buf;
            tally::detail::kll_halve_up(got_up.data(), 3, length, offset);
            if (!same_bits(got_up, want_up) && ++wrong) FAIL_CHECK("kll_halve_up " << length << " from " << offset);
#if TALLY_SIMD_X86
            if constexpr (std::is_same_v<T, double>) {
                got = buf;
                if (tally::detail::cpu_has_avx2()) tally::detail::kll_halve_down_avx2(got.data(), 3, length, offset);
                else tally::detail::kll_halve_down(got.data(), 3, length, offset);
                if (!same_bits(got, want) && ++wrong) FAIL_CHECK("kll_halve_down_avx2 " << length << " from " << offset);
                got_up = buf;
                if (tally::detail::cpu_has_avx2()) tally::detail::kll_halve_up_avx2(got_up.data(), 3, length, offset);
                else tally::detail::kll_halve_up(got_up.data(), 3, length, offset);
                if (!same_bits(got_up, want_up) && ++wrong) FAIL_CHECK("kll_halve_up_avx2 " << length << " from " << offset);
            }
#endif
        }
#if TALLY_SIMD_X86
    // the block merge of long runs, in place and into a separate buffer
    if constexpr (std::is_same_v<T, double>) {
        for (int trial = 0; trial < 300 && tally::detail::cpu_has_avx2(); ++trial) {
            const auto na = static_cast<std::uint32_t>(8 + rng.below(400));
            const auto nb = static_cast<std::uint32_t>(8 + rng.below(trial % 3 == 0 ? 24 : 400));
            const std::vector<T> a = draw(na), b = draw(nb);
            std::vector<T> want(na + nb);
            std::merge(a.begin(), a.end(), b.begin(), b.end(), want.begin());
            std::vector<T> out(na + nb, T(-1));
            tally::detail::kll_merge_long_avx2(a.data(), na, b.data(), nb, out.data());
            if (out != want && ++wrong) FAIL_CHECK("kll_merge_long_avx2 " << na << " + " << nb);
            std::vector<T> buf(2 * std::size_t{na} + nb, T(-1));
            std::copy(a.begin(), a.end(), buf.begin());
            std::copy(b.begin(), b.end(), buf.begin() + 2 * na);
            tally::detail::kll_merge_long_avx2(buf.data(), na, buf.data() + 2 * na, nb, buf.data() + na);
            if (!std::equal(want.begin(), want.end(), buf.begin() + na) && ++wrong)
                FAIL_CHECK("kll_merge_long_avx2 in place " << na << " + " << nb);
        }
    }
#endif
    for (std::uint32_t n = 0; n <= 32; ++n) {
        std::vector<T> v(n);
        for (T& x : v) x = kernel_value<T>(rng);
        std::vector<T> want = v;
        std::sort(want.begin(), want.end());
        std::vector<T> got = v;
        if (n <= 8) {
            tally::detail::kll_sort_small<8>(got.data(), n);
            if (got != want && ++wrong) FAIL_CHECK("kll_sort_small<8> " << n);
        }
        if (n <= 16) {
            got = v;
            tally::detail::kll_sort_small<16>(got.data(), n);
            if (got != want && ++wrong) FAIL_CHECK("kll_sort_small<16> " << n);
        }
#if TALLY_SIMD_X86
        if constexpr (std::is_same_v<T, double>) {
            if (tally::detail::cpu_has_avx2()) {
                got = v;
                tally::detail::kll_sort32_avx2(got.data(), n);
                if (got != want && ++wrong) FAIL_CHECK("kll_sort32_avx2 " << n);
            }
        }
#endif
    }
    for (std::uint32_t n = 0; n <= 600; ++n) {
        std::vector<T> v(n);
        for (T& x : v) x = kernel_value<T>(rng) * static_cast<T>(1 + rng.below(n / 8 + 1));
        std::vector<T> want = v;
        std::sort(want.begin(), want.end());
        tally::detail::kll_sort(v.data(), n);
        if (v != want && ++wrong) FAIL_CHECK("kll_sort " << n);
    }
    return wrong;
}
}  // namespace

TEST_CASE("KllSketch: the compaction kernels sort and merge as the standard library does", "[kll]") {
    Rng rng(77);
    CHECK(kernel_mismatches<double>(rng) == 0);
    CHECK(kernel_mismatches<float>(rng) == 0);
}
