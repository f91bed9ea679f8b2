// Tests for tally::Reservoir (uniform reservoir sampling, Algorithm L).
#include <tally/sketch/common/item_codec.hpp>  // the customisation point a user specialises
#include <tally/sketch/sampling/reservoir.hpp>

#include <algorithm>
#include <cstdint>
#include <list>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.hpp"
#include "merge_laws.hpp"
#include "test_support.hpp"

using tally::Reservoir;

struct Point {
    std::int32_t x;
    std::int32_t y;
};
template <>
struct tally::ItemCodec<Point> {
    static constexpr std::uint8_t wire_size = 8;
    static void write(tally::ByteWriter& w, const Point& p) {
        w.u32(static_cast<std::uint32_t>(p.x));
        w.u32(static_cast<std::uint32_t>(p.y));
    }
    static Point read(tally::ByteReader& r) {
        const auto x = static_cast<std::int32_t>(r.u32());
        return Point{x, static_cast<std::int32_t>(r.u32())};
    }
};
using tally::test::big;
using tally::test::to_bytes;
using U64Reservoir = Reservoir<std::uint64_t>;

namespace {

// Chi-square critical values at p = 0.001.
constexpr double chi2_crit_19 = 43.82;  // 19 degrees of freedom

/// Pearson's statistic for "each of the G cells is equally likely", for
/// counts of a k-of-N sample without replacement aggregated over trials
/// into G equal groups of items. Without replacement each count varies less
/// than a multinomial cell, by the finite-population factor (N - k) /
/// (N - 1), and the covariance keeps the multinomial's shape, so dividing by
/// that factor makes the statistic chi-square with G - 1 degrees of freedom
/// (uncorrected it would be conservative, i.e. weaker).
double chi2_uniform(const std::vector<std::uint64_t>& group_counts, double population, double sample_size) {
    double total = 0;
    for (auto c : group_counts) total += static_cast<double>(c);
    const double expected = total / static_cast<double>(group_counts.size());
    double stat = 0;
    for (auto c : group_counts) {
        const double d = static_cast<double>(c) - expected;
        stat += d * d / expected;
    }
    const double fpc = population > 1 ? (population - sample_size) / (population - 1) : 1.0;
    return stat / fpc;
}

/// Two-sample homogeneity statistic for equal totals (same trials and k).
double chi2_same(const std::vector<std::uint64_t>& a, const std::vector<std::uint64_t>& b, double population,
                 double sample_size) {
    double stat = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
        const double s = static_cast<double>(a[i] + b[i]);
        if (s > 0) stat += d * d / s;
    }
    return stat / ((population - sample_size) / (population - 1));
}

/// Adds one to the group of every sampled item (item values are stream indices).
void tally_groups(std::span<const std::uint64_t> sample, std::uint64_t group_size, std::vector<std::uint64_t>& groups) {
    for (auto item : sample) ++groups.at(static_cast<std::size_t>(item / group_size));
}

/// Textbook Algorithm R; `off_by_one` draws randrange(i) instead of
/// randrange(i + 1), a classic off-by-one (i is the 0-based index of the item).
std::vector<std::uint64_t> algorithm_r(std::uint64_t n, std::size_t k, tally::test::Rng& rng, bool off_by_one) {
    std::vector<std::uint64_t> res;
    for (std::uint64_t i = 0; i < n; ++i) {
        if (i < k) {
            res.push_back(i);
            continue;
        }
        const std::uint64_t j = off_by_one ? rng.below(i) : rng.below(i + 1);
        if (j < k) res[static_cast<std::size_t>(j)] = i;
    }
    return res;
}

std::vector<std::uint64_t> iota_vec(std::uint64_t from, std::uint64_t to) {
    std::vector<std::uint64_t> v(static_cast<std::size_t>(to - from));
    std::iota(v.begin(), v.end(), from);
    return v;
}

U64Reservoir fed(std::size_t k, std::uint64_t seed, std::uint64_t from, std::uint64_t to) {
    U64Reservoir r(k, seed);
    for (std::uint64_t i = from; i < to; ++i) r.add(i);
    return r;
}

std::vector<std::uint64_t> sorted(std::span<const std::uint64_t> s) {
    std::vector<std::uint64_t> v(s.begin(), s.end());
    std::sort(v.begin(), v.end());
    return v;
}


}  // namespace

TEST_CASE("xoshiro256** matches the published reference outputs", "[reservoir]") {
    tally::detail::ReservoirRng rng(0);
    const std::uint64_t state[4] = {1, 2, 3, 4};
    rng.set_state(state);
    const std::uint64_t expected[] = {11520ull,
                                      0ull,
                                      1509978240ull,
                                      1215971899390074240ull,
                                      1216172134540287360ull,
                                      607988272756665600ull,
                                      16172922978634559625ull,
                                      8476171486693032832ull,
                                      10595114339597558777ull,
                                      2904607092377533576ull};
    for (auto e : expected) CHECK(rng.next() == e);

    // Seeding is SplitMix64 of the seed: seed 0 gives its published outputs.
    const tally::detail::ReservoirRng seeded(0);
    CHECK(seeded.state(0) == 0xE220A8397B1DCDAFull);
    CHECK(seeded.state(1) == 0x6E789E6AA1B965F4ull);
    CHECK(seeded.state(2) == 0x06C45D188009454Full);
}

TEST_CASE("ReservoirRng::below is in range and uniform", "[reservoir]") {
    tally::detail::ReservoirRng rng(9);
    std::vector<std::uint64_t> counts(7, 0);
    for (int i = 0; i < 70000; ++i) ++counts.at(static_cast<std::size_t>(rng.below(7)));
    // multinomial, 6 dof, p = 0.001 critical 22.46
    double stat = 0;
    for (auto c : counts) stat += (static_cast<double>(c) - 10000.0) * (static_cast<double>(c) - 10000.0) / 10000.0;
    CHECK(stat < 22.46);
    CHECK(rng.below(1) == 0);
    CHECK(rng.below(0) == 0);
    for (int i = 0; i < 1000; ++i) CHECK(rng.below(3) < 3);
    for (int i = 0; i < 1000; ++i) {
        const double u = rng.uniform_open0();
        CHECK(u > 0.0);
        CHECK(u <= 1.0);
    }
}

TEST_CASE("Reservoir: k out of range throws invalid_argument with the exact message", "[reservoir]") {
    CHECK_THROWS_WITH(U64Reservoir(0, 1), "tally::Reservoir::Reservoir: k 0 is out of range [1, 4294967295]");
    if constexpr (sizeof(std::size_t) > 4) {
        CHECK_THROWS_WITH(U64Reservoir(std::size_t{1} << 32, 1),
                          "tally::Reservoir::Reservoir: k 4294967296 is out of range [1, 4294967295]");
        // checked before any arithmetic: no wrap for the largest sizes
        CHECK_THROWS_WITH(U64Reservoir(SIZE_MAX, 1), "tally::Reservoir::Reservoir: k " + std::to_string(SIZE_MAX) +
                                                         " is out of range [1, 4294967295]");
    }
    CHECK_NOTHROW(U64Reservoir(1, 1));
    CHECK_NOTHROW(U64Reservoir(4294967295u, 1));  // no allocation up front
}

TEST_CASE("Reservoir keeps everything until full, then exactly k", "[reservoir]") {
    U64Reservoir r(5, 3);
    CHECK(r.empty());
    CHECK(r.sample().empty());
    for (std::uint64_t i = 0; i < 4; ++i) r.add(i);
    CHECK(r.total() == 4);
    CHECK(std::vector<std::uint64_t>(r.sample().begin(), r.sample().end()) == std::vector<std::uint64_t>{0, 1, 2, 3});
    for (std::uint64_t i = 4; i < 1000; ++i) r.add(i);
    CHECK(r.total() == 1000);
    CHECK(r.size() == 5);
    CHECK(r.k() == 5);
    auto s = sorted(r.sample());
    CHECK(std::adjacent_find(s.begin(), s.end()) == s.end());  // without replacement
    CHECK(s.back() < 1000);
    // Skipping really happens: over a long stream the sample changes only O(k log(n/k)) times.
    U64Reservoir big_stream(4, 5);
    const auto items = iota_vec(0, 200000);
    big_stream.add_range(items);
    CHECK(big_stream.total() == 200000);
    CHECK(big_stream.size() == 4);
}

TEST_CASE("Reservoir: same seed, same sample; different seeds differ", "[reservoir]") {
    auto run = [](std::uint64_t seed) {
        U64Reservoir r(10, seed);
        for (std::uint64_t i = 0; i < 10000; ++i) r.add(i * 7);
        return std::vector<std::uint64_t>(r.sample().begin(), r.sample().end());
    };
    CHECK(run(42) == run(42));
    CHECK(run(42) != run(43));
    // And pinned, so a change of the draws (a format-visible behaviour) is noticed.
    const U64Reservoir a = fed(3, 2024, 0, 100);
    const U64Reservoir b = fed(3, 2024, 0, 100);
    CHECK(a.serialize() == b.serialize());
}

TEST_CASE("Reservoir::add_range equals add item by item, for every kind of range", "[reservoir]") {
    for (std::size_t k : {1u, 3u, 64u}) {
        for (std::uint64_t n : {0u, 2u, 64u, 65u, 5000u}) {
            INFO("k " << k << " n " << n);
            const auto items = iota_vec(0, n);
            U64Reservoir one(k, 77);
            for (auto x : items) one.add(x);
            U64Reservoir vec(k, 77);
            vec.add_range(items);
            CHECK(vec.serialize() == one.serialize());
            // in two chunks, split inside the fill and after it
            U64Reservoir chunks(k, 77);
            const std::size_t cut = static_cast<std::size_t>(n / 3);
            chunks.add_range(std::span<const std::uint64_t>(items.data(), cut));
            chunks.add_range(std::span<const std::uint64_t>(items.data() + cut, items.size() - cut));
            CHECK(chunks.serialize() == one.serialize());
            // a non-random-access range
            const std::list<std::uint64_t> lst(items.begin(), items.end());
            U64Reservoir from_list(k, 77);
            from_list.add_range(lst);
            CHECK(from_list.serialize() == one.serialize());
            // a random-access range of another element type (converted on the way in)
            std::vector<std::uint32_t> narrow(items.begin(), items.end());
            U64Reservoir from_narrow(k, 77);
            from_narrow.add_range(narrow);
            CHECK(from_narrow.serialize() == one.serialize());
        }
    }
    // rvalue adds and conversions
    Reservoir<std::string> s(2, 1);
    std::string x = "moved";
    s.add(std::move(x));
    const char* words[] = {"a", "b", "c"};
    s.add_range(words);
    CHECK(s.total() == 4);
    CHECK(s.size() == 2);
}

TEST_CASE("20 items, k = 5: every item kept k/n of the time", "[reservoir][big]") {
    const std::size_t trials = big(200000, 40000);
    std::vector<std::uint64_t> counts(20, 0);
    for (std::size_t t = 0; t < trials; ++t) {
        U64Reservoir r(5, t);
        for (std::uint64_t i = 0; i < 20; ++i) r.add(i);
        REQUIRE(r.size() == 5);
        tally_groups(r.sample(), 1, counts);
    }
    const double expected = static_cast<double>(trials) * 5.0 / 20.0;  // 50,000 at full size
    const double sd = std::sqrt(static_cast<double>(trials) * 0.25 * 0.75);
    for (std::size_t i = 0; i < 20; ++i) {
        INFO("item " << i << " kept " << counts[i] << " times, expected " << expected);
        CHECK(std::abs(static_cast<double>(counts[i]) - expected) < 5 * sd);
    }
    // the pair everyone expects to differ
    CHECK(std::abs(static_cast<double>(counts[0]) - static_cast<double>(counts[19])) < 7 * sd);
    const double chi2 = chi2_uniform(counts, 20, 5);
    INFO("chi-square " << chi2);
    CHECK(chi2 < chi2_crit_19);
}

TEST_CASE("Negative control: the off-by-one Algorithm R fails the same test", "[reservoir][big]") {
    const std::size_t trials = big(200000, 40000);
    std::vector<std::uint64_t> good(20, 0);
    std::vector<std::uint64_t> bad(20, 0);
    tally::test::Rng rng(12345);
    for (std::size_t t = 0; t < trials; ++t) {
        tally_groups(algorithm_r(20, 5, rng, false), 1, good);
        tally_groups(algorithm_r(20, 5, rng, true), 1, bad);
    }
    const double chi2_good = chi2_uniform(good, 20, 5);
    const double chi2_bad = chi2_uniform(bad, 20, 5);
    INFO("correct R chi-square " << chi2_good << ", off-by-one R chi-square " << chi2_bad);
    CHECK(chi2_good < chi2_crit_19);  // the harness accepts a correct sampler...
    CHECK(chi2_bad > chi2_crit_19);   // ...and rejects the buggy one
    // With randrange(i) the first k items survive with (k-1)/(n-1) = 4/19 and
    // the rest with k/(n-1) = 5/19 instead of 1/4: the early items lose.
    const double n = static_cast<double>(trials);
    CHECK(std::abs(static_cast<double>(bad[0]) - n * 4.0 / 19.0) < 5 * std::sqrt(n * 0.25));
    CHECK(std::abs(static_cast<double>(bad[19]) - n * 5.0 / 19.0) < 5 * std::sqrt(n * 0.25));
}

TEST_CASE("Algorithm L matches Algorithm R in distribution", "[reservoir][big]") {
    SECTION("n = 1000, k = 10, 20 groups of 50 items") {
        const std::size_t trials = big(100000, 20000);
        std::vector<std::uint64_t> l_counts(20, 0);
        std::vector<std::uint64_t> r_counts(20, 0);
        std::vector<std::uint64_t> last_item(20, 0);  // inclusion of the single items 980..999
        tally::test::Rng rng(99);
        const auto items = iota_vec(0, 1000);
        for (std::size_t t = 0; t < trials; ++t) {
            U64Reservoir r(10, 1000000 + t);
            if (t % 2 == 0) {
                r.add_range(items);
            } else {
                for (auto x : items) r.add(x);
            }
            tally_groups(r.sample(), 50, l_counts);
            for (auto x : r.sample())
                if (x >= 980) ++last_item[static_cast<std::size_t>(x - 980)];
            tally_groups(algorithm_r(1000, 10, rng, false), 50, r_counts);
        }
        const double chi2_l = chi2_uniform(l_counts, 1000, 10);
        const double chi2_r = chi2_uniform(r_counts, 1000, 10);
        const double chi2_lr = chi2_same(l_counts, r_counts, 1000, 10);
        INFO("L " << chi2_l << ", R " << chi2_r << ", L vs R " << chi2_lr);
        CHECK(chi2_l < chi2_crit_19);
        CHECK(chi2_r < chi2_crit_19);
        CHECK(chi2_lr < chi2_crit_19);
        // The last 20 single items (the tail of the stream, where skips land) each k/n.
        CHECK(chi2_uniform(last_item, 20, 10.0 * 20.0 / 1000.0) < chi2_crit_19);
        const double per_item = static_cast<double>(trials) * 10.0 / 1000.0;
        for (auto c : last_item) CHECK(std::abs(static_cast<double>(c) - per_item) < 5 * std::sqrt(per_item));
    }
    SECTION("short streams past the switch to skipping (n = 16 k): k = 2, n = 100 and k = 1, n = 40") {
        // Most of these streams are skipped over by Algorithm L, where an
        // off-by-one in the skip or a wrong W at the switch shows most.
        const std::size_t trials = big(200000, 40000);
        std::vector<std::uint64_t> k2(20, 0);
        std::vector<std::uint64_t> k1(20, 0);
        for (std::size_t t = 0; t < trials; ++t) {
            U64Reservoir a(2, 5000000 + t);
            for (std::uint64_t i = 0; i < 100; ++i) a.add(i);
            tally_groups(a.sample(), 5, k2);
            U64Reservoir b(1, 6000000 + t);
            for (std::uint64_t i = 0; i < 40; ++i) b.add(i);
            tally_groups(b.sample(), 2, k1);
        }
        const double c2 = chi2_uniform(k2, 100, 2);
        const double c1 = chi2_uniform(k1, 40, 1);
        INFO("k = 2: " << c2 << ", k = 1: " << c1);
        CHECK(c2 < chi2_crit_19);
        CHECK(c1 < chi2_crit_19);
    }
    SECTION("at the switch: n = 80 and n = 81 with k = 5 (dense_factor 16)") {
        STATIC_REQUIRE(U64Reservoir::dense_factor == 16);
        const std::size_t trials = big(100000, 20000);
        for (std::uint64_t n : {80u, 81u, 95u}) {
            std::vector<std::uint64_t> counts(5, 0);  // 5 groups of n / 5 (remainder dropped)
            std::vector<std::uint64_t> last(1, 0);
            const std::uint64_t g = n / 5;
            for (std::size_t t = 0; t < trials; ++t) {
                U64Reservoir r(5, 8000000 + t);
                for (std::uint64_t i = 0; i < n; ++i) r.add(i);
                for (auto x : r.sample()) {
                    if (x < 5 * g) ++counts[static_cast<std::size_t>(x / g)];
                    if (x == n - 1) ++last[0];
                }
            }
            double total = 0;
            for (auto c : counts) total += static_cast<double>(c);
            double stat = 0;
            for (auto c : counts) {
                const double e = total / 5;
                stat += (static_cast<double>(c) - e) * (static_cast<double>(c) - e) / e;
            }
            INFO("n " << n << " chi-square " << stat);
            CHECK(stat < 18.47);  // 4 dof, p = 0.001 (uncorrected: conservative)
            const double p = 5.0 / static_cast<double>(n);
            const double sd = std::sqrt(static_cast<double>(trials) * p * (1 - p));
            CHECK(std::abs(static_cast<double>(last[0]) - static_cast<double>(trials) * p) < 5 * sd);
        }
    }
    SECTION("long stream n = 100000, k = 3: huge skips, 20 groups of 5000") {
        const std::size_t trials = big(40000, 10000);
        std::vector<std::uint64_t> counts(20, 0);
        const auto items = iota_vec(0, 100000);
        for (std::size_t t = 0; t < trials; ++t) {
            U64Reservoir r(3, 9000000 + t);
            r.add_range(items);
            tally_groups(r.sample(), 5000, counts);
        }
        const double chi2 = chi2_uniform(counts, 100000, 3);
        INFO("chi-square " << chi2);
        CHECK(chi2 < chi2_crit_19);
    }
}

TEST_CASE("Merges of unequal streams are uniform over the union", "[reservoir][big]") {
    const std::size_t trials = big(100000, 20000);
    SECTION("n1 = 10, n2 = 90, k = 5, both merge orders") {
        std::vector<std::uint64_t> ab(20, 0);
        std::vector<std::uint64_t> ba(20, 0);
        for (std::size_t t = 0; t < trials; ++t) {
            const U64Reservoir a = fed(5, 2 * t, 0, 10);
            const U64Reservoir b = fed(5, 2 * t + 1, 10, 100);
            U64Reservoir x = a;
            x.merge(b);
            REQUIRE(x.total() == 100);
            REQUIRE(x.size() == 5);
            tally_groups(x.sample(), 5, ab);
            U64Reservoir y = b;
            y.merge(a);
            tally_groups(y.sample(), 5, ba);
        }
        const double c_ab = chi2_uniform(ab, 100, 5);
        const double c_ba = chi2_uniform(ba, 100, 5);
        INFO("a+b " << c_ab << ", b+a " << c_ba);
        CHECK(c_ab < chi2_crit_19);
        CHECK(c_ba < chi2_crit_19);  // commutative in distribution
        // the small side gets its 10% share, not half of the sample
        const double share_a = static_cast<double>(ab[0] + ab[1]) / (5.0 * static_cast<double>(trials));
        CHECK(share_a == Catch::Approx(0.10).margin(0.01));
    }
    SECTION("associative in distribution: (a+b)+c and a+(b+c), n = 10, 30, 60, k = 5") {
        std::vector<std::uint64_t> left(20, 0);
        std::vector<std::uint64_t> right(20, 0);
        for (std::size_t t = 0; t < trials; ++t) {
            const U64Reservoir a = fed(5, 3 * t, 0, 10);
            const U64Reservoir b = fed(5, 3 * t + 1, 10, 40);
            const U64Reservoir c = fed(5, 3 * t + 2, 40, 100);
            const U64Reservoir l = tally::merged(tally::merged(a, b), c);
            const U64Reservoir r = tally::merged(a, tally::merged(b, c));
            REQUIRE(l.total() == 100);
            REQUIRE(r.total() == 100);
            tally_groups(l.sample(), 5, left);
            tally_groups(r.sample(), 5, right);
        }
        CHECK(chi2_uniform(left, 100, 5) < chi2_crit_19);
        CHECK(chi2_uniform(right, 100, 5) < chi2_crit_19);
        CHECK(chi2_same(left, right, 100, 5) < chi2_crit_19);
    }
    SECTION("one side still filling: n1 = 3 (< k), n2 = 97") {
        std::vector<std::uint64_t> counts(20, 0);
        for (std::size_t t = 0; t < trials; ++t) {
            U64Reservoir a = fed(5, 2 * t, 0, 3);
            a.merge(fed(5, 2 * t + 1, 3, 100));
            tally_groups(a.sample(), 5, counts);
        }
        CHECK(chi2_uniform(counts, 100, 5) < chi2_crit_19);
    }
}

TEST_CASE("After a merge, later adds stay uniform over the whole union stream", "[reservoir][big]") {
    const std::size_t trials = big(100000, 20000);
    SECTION("n1 = 10, n2 = 90, then 100 more items (W re-derived at n = 100)") {
        std::vector<std::uint64_t> counts(20, 0);
        for (std::size_t t = 0; t < trials; ++t) {
            U64Reservoir a = fed(5, 2 * t, 0, 10);
            a.merge(fed(5, 2 * t + 1, 10, 100));
            for (std::uint64_t i = 100; i < 200; ++i) a.add(i);
            REQUIRE(a.total() == 200);
            tally_groups(a.sample(), 10, counts);
        }
        const double chi2 = chi2_uniform(counts, 200, 5);
        INFO("chi-square " << chi2);
        CHECK(chi2 < chi2_crit_19);
        // A threshold left at the small side's W (about 0.45 instead of 0.05)
        // would let the tail in about nine times too often.
        double tail = 0;
        for (std::size_t g = 10; g < 20; ++g) tail += static_cast<double>(counts[g]);
        CHECK(tail / (5.0 * static_cast<double>(trials)) == Catch::Approx(0.5).margin(0.02));
    }
    SECTION("both sides already skipping: n1 = 100, n2 = 300 (k = 5), then 400 more") {
        std::vector<std::uint64_t> counts(20, 0);
        const auto tail = iota_vec(400, 800);
        for (std::size_t t = 0; t < trials / 2; ++t) {
            U64Reservoir a = fed(5, 2 * t, 0, 100);
            a.merge(fed(5, 2 * t + 1, 100, 400));
            a.add_range(tail);
            REQUIRE(a.total() == 800);
            tally_groups(a.sample(), 40, counts);
        }
        const double chi2 = chi2_uniform(counts, 800, 5);
        INFO("chi-square " << chi2);
        CHECK(chi2 < chi2_crit_19);
    }
    SECTION("merged while both are still filling (n1 + n2 = 3 < k), then 17 more") {
        std::vector<std::uint64_t> counts(20, 0);
        for (std::size_t t = 0; t < trials; ++t) {
            U64Reservoir a = fed(5, 2 * t, 0, 2);
            a.merge(fed(5, 2 * t + 1, 2, 3));
            for (std::uint64_t i = 3; i < 20; ++i) a.add(i);
            tally_groups(a.sample(), 1, counts);
        }
        CHECK(chi2_uniform(counts, 20, 5) < chi2_crit_19);
    }
    SECTION("merge exactly at n = k, then more") {
        std::vector<std::uint64_t> counts(20, 0);
        for (std::size_t t = 0; t < trials; ++t) {
            U64Reservoir a = fed(5, 2 * t, 0, 2);
            a.merge(fed(5, 2 * t + 1, 2, 5));
            for (std::uint64_t i = 5; i < 20; ++i) a.add(i);
            tally_groups(a.sample(), 1, counts);
        }
        CHECK(chi2_uniform(counts, 20, 5) < chi2_crit_19);
    }
    SECTION("a chain of merges of equal shards, then add_range") {
        std::vector<std::uint64_t> counts(20, 0);
        const auto tail = iota_vec(100, 400);
        for (std::size_t t = 0; t < trials / 4; ++t) {
            U64Reservoir acc(8, 5 * t);
            for (std::uint64_t s = 0; s < 4; ++s) acc.merge(fed(8, 5 * t + 1 + s, s * 25, s * 25 + 25));
            acc.add_range(tail);
            REQUIRE(acc.total() == 400);
            tally_groups(acc.sample(), 20, counts);
        }
        CHECK(chi2_uniform(counts, 400, 8) < chi2_crit_19);
    }
}

TEST_CASE("Reservoir merge laws", "[reservoir]") {
    // With every stream shorter than k in total, merges are deterministic as
    // multisets, so the laws can be checked exactly; the sampled case is
    // covered in distribution by the chi-square tests above.
    auto same = [](const U64Reservoir& x, const U64Reservoir& y) {
        return x.k() == y.k() && x.total() == y.total() && sorted(x.sample()) == sorted(y.sample());
    };
    const U64Reservoir empty(16, 1);
    tally::test::check_merge_laws(empty, fed(16, 2, 0, 5), fed(16, 3, 5, 9), fed(16, 4, 9, 16), same);

    auto same_s = [](const Reservoir<std::string>& x, const Reservoir<std::string>& y) {
        auto sx = std::vector<std::string>(x.sample().begin(), x.sample().end());
        auto sy = std::vector<std::string>(y.sample().begin(), y.sample().end());
        std::sort(sx.begin(), sx.end());
        std::sort(sy.begin(), sy.end());
        return x.total() == y.total() && sx == sy;
    };
    Reservoir<std::string> sa(8, 1), sb(8, 2), sc(8, 3);
    sa.add("alpha");
    sb.add("beta");
    sb.add(std::string(300, 'x'));
    sc.add("");
    tally::test::check_merge_laws(Reservoir<std::string>(8, 9), sa, sb, sc, same_s);
}

TEST_CASE("Reservoir: merging an empty reservoir is exactly the identity", "[reservoir]") {
    const U64Reservoir a = fed(5, 11, 0, 1000);
    const U64Reservoir empty(5, 12);
    // a + empty: nothing changes, not even the generator.
    CHECK(tally::merged(a, empty).serialize() == a.serialize());
    // empty + a: the same sample, count, W and pending skip; only the
    // generator (bytes 42..73) stays the target's own.
    const auto x = tally::merged(empty, a).serialize();
    auto y = a.serialize();
    REQUIRE(x.size() == y.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (i >= 42 && i < 74) continue;
        INFO("byte " << i);
        CHECK(x[i] == y[i]);
    }
    const auto e = empty.serialize();
    CHECK(std::equal(x.begin() + 42, x.begin() + 74, e.begin() + 42));
}

TEST_CASE("Reservoir: incompatible merges throw and leave the target unchanged", "[reservoir]") {
    tally::test::check_incompatible_merge(fed(5, 1, 0, 50), fed(6, 2, 0, 50));
    U64Reservoir a = fed(5, 1, 0, 50);
    CHECK_THROWS_WITH(a.merge(fed(6, 2, 0, 50)), "tally::Reservoir::merge: k 5 does not match the other reservoir's k 6");
}

namespace {
// An item whose copies throw once `copies_left` reaches 0.
struct FragileItem {
    static inline int copies_left = 1 << 30;
    int v = 0;
    explicit FragileItem(int x) : v(x) {}
    FragileItem(const FragileItem& o) : v(o.v) {
        if (copies_left-- <= 0) throw std::runtime_error("copy failed");
    }
    FragileItem& operator=(const FragileItem& o) {
        if (copies_left-- <= 0) throw std::runtime_error("copy failed");
        v = o.v;
        return *this;
    }
    FragileItem(FragileItem&&) noexcept = default;
    FragileItem& operator=(FragileItem&&) noexcept = default;
};
}  // namespace

TEST_CASE("Reservoir: an empty target whose merge copy throws is left as it was", "[reservoir]") {
    tally::Reservoir<FragileItem> full(8, 1), empty(8, 2);
    for (int i = 0; i < 20; ++i) full.add(FragileItem(i));
    // The third item's copy throws, midway through taking the other's sample.
    FragileItem::copies_left = 2;
    CHECK_THROWS_AS(empty.merge(full), std::runtime_error);
    FragileItem::copies_left = 1 << 30;
    CHECK(empty.empty());
    CHECK(empty.total() == 0);
    CHECK(empty.size() == 0);
    // and it still works: the same merge, now with copies that succeed
    empty.merge(full);
    CHECK(empty.total() == 20);
    CHECK(empty.size() == 8);
}

TEST_CASE("Reservoir: self-merge counts the stream twice", "[reservoir]") {
    U64Reservoir a = fed(5, 1, 0, 3);
    a.merge(a);
    CHECK(a.total() == 6);
    REQUIRE(a.size() == 5);
    for (std::uint64_t v = 0; v < 3; ++v) {
        const auto c = std::count(a.sample().begin(), a.sample().end(), v);
        CHECK(c >= 1);
        CHECK(c <= 2);
    }
    U64Reservoir b = fed(5, 1, 0, 100);
    b.merge(b);
    CHECK(b.total() == 200);
    CHECK(b.size() == 5);
}

TEST_CASE("Reservoir serialization: golden bytes", "[reservoir]") {
    // k = 3, seed 0, two items: still filling, so next = seen = 2 and W = 0;
    // the generator state is SplitMix64(0)'s first four outputs.
    Reservoir<std::uint32_t> r(3, 0);
    r.add(0x11223344u);
    r.add(7u);
    const std::vector<std::uint8_t> golden = {
        'T',  'A',  'L',  'Y',  6,    2,    0,    0,                             // frame header, version 2
        1,    4,                                                                 // unsigned integer items of 4 bytes
        3,    0,    0,    0,    0,    0,    0,    0,                             // k = 3
        2,    0,    0,    0,    0,    0,    0,    0,                             // seen = 2
        2,    0,    0,    0,    0,    0,    0,    0,                             // next = 2
        0,    0,    0,    0,    0,    0,    0,    0,                             // W = 0.0
        0xAF, 0xCD, 0x1D, 0x7B, 0x39, 0xA8, 0x20, 0xE2,                          // generator word 0
        0xF4, 0x65, 0xB9, 0xA1, 0x6A, 0x9E, 0x78, 0x6E,                          // word 1
        0x4F, 0x45, 0x09, 0x80, 0x18, 0x5D, 0xC4, 0x06,                          // word 2
        0xEC, 0x81, 0x4C, 0x72, 0xA8, 0xB8, 0x8B, 0xF8,                          // word 3
        2,    0,    0,    0,    0,    0,    0,    0,                             // m = 2
        0x44, 0x33, 0x22, 0x11, 7,    0,    0,    0,                             // items, little-endian
    };
    const auto bytes = r.serialize();
    CHECK(bytes == to_bytes(golden));
    const auto back = Reservoir<std::uint32_t>::deserialize(bytes);
    CHECK(std::vector<std::uint32_t>(back.sample().begin(), back.sample().end()) ==
          std::vector<std::uint32_t>{0x11223344u, 7u});
    tally::test::check_truncations_throw<Reservoir<std::uint32_t>>(to_bytes(golden));

    Reservoir<std::string> s(2, 0);
    s.add("hi");
    const auto sbytes = s.serialize();
    const std::vector<std::uint8_t> string_tail = {1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 'h', 'i'};
    REQUIRE(sbytes.size() == 74 + string_tail.size());
    CHECK(static_cast<int>(sbytes[8]) == 4);  // string kind
    CHECK(std::equal(string_tail.begin(), string_tail.end(), sbytes.begin() + 74,
                     [](std::uint8_t a, std::byte b) { return a == static_cast<std::uint8_t>(b); }));
}

static std::vector<std::byte> r_bytes_v2() {
    Reservoir<std::uint32_t> r(3, 0);
    r.add(7u);
    return r.serialize();
}

TEST_CASE("Reservoir reads the old format (version 1)", "[reservoir]") {
    const std::vector<std::uint8_t> v1 = {
        'T',  'A',  'L',  'Y',  6,    1,    0,    0,                             // frame header, version 1
        1,    4,    0,    0,    0,                                               // fixed-size items of 4 bytes
        3,    0,    0,    0,    0,    0,    0,    0,                             // k = 3
        2,    0,    0,    0,    0,    0,    0,    0,                             // seen = 2
        2,    0,    0,    0,    0,    0,    0,    0,                             // next = 2
        0,    0,    0,    0,    0,    0,    0,    0,                             // W = 0.0
        0xAF, 0xCD, 0x1D, 0x7B, 0x39, 0xA8, 0x20, 0xE2,                          // generator word 0
        0xF4, 0x65, 0xB9, 0xA1, 0x6A, 0x9E, 0x78, 0x6E,                          // word 1
        0x4F, 0x45, 0x09, 0x80, 0x18, 0x5D, 0xC4, 0x06,                          // word 2
        0xEC, 0x81, 0x4C, 0x72, 0xA8, 0xB8, 0x8B, 0xF8,                          // word 3
        2,    0,    0,    0,    0,    0,    0,    0,                             // m = 2
        0x44, 0x33, 0x22, 0x11, 7,    0,    0,    0,                             // items
    };
    const auto old = Reservoir<std::uint32_t>::deserialize(to_bytes(v1));
    CHECK(old.total() == 2);
    CHECK(std::vector<std::uint32_t>(old.sample().begin(), old.sample().end()) ==
          std::vector<std::uint32_t>{0x11223344u, 7u});
    // it continues exactly as a reservoir built today
    Reservoir<std::uint32_t> now(3, 0);
    now.add(0x11223344u);
    now.add(7u);
    CHECK(old.serialize() == now.serialize());
    tally::test::check_truncations_throw<Reservoir<std::uint32_t>>(to_bytes(v1));
    // (version 1 did not tell signed from unsigned items; version 2 does)
    CHECK_THROWS_AS(Reservoir<std::int32_t>::deserialize(r_bytes_v2()), tally::FormatError);
    CHECK_THROWS_AS(Reservoir<std::uint64_t>::deserialize(to_bytes(v1)), tally::FormatError);
}

TEST_CASE("Reservoir round trip continues identically", "[reservoir]") {
    U64Reservoir a(7, 31);
    const auto first = iota_vec(0, 5000);
    a.add_range(first);
    const auto bytes = a.serialize();
    U64Reservoir b = U64Reservoir::deserialize(bytes);
    CHECK(b.serialize() == bytes);
    CHECK(b.total() == a.total());
    const auto more = iota_vec(5000, 100000);
    a.add_range(more);
    b.add_range(more);
    CHECK(a.serialize() == b.serialize());
    const U64Reservoir other = fed(7, 8, 100000, 100500);
    a.merge(other);
    b.merge(other);
    CHECK(a.serialize() == b.serialize());
    for (std::uint64_t i = 0; i < 1000; ++i) {
        a.add(i);
        b.add(i);
    }
    CHECK(a.serialize() == b.serialize());
}

TEST_CASE("Reservoir deserialize rejects bad bytes with FormatError", "[reservoir]") {
    using tally::FormatError;
    const auto filling = fed(5, 1, 0, 3).serialize();
    const auto full = fed(5, 1, 0, 300).serialize();
    tally::test::check_truncations_throw<U64Reservoir>(filling);
    tally::test::check_truncations_throw<U64Reservoir>(full);
    tally::test::check_corruptions_safe<U64Reservoir>(full, 1);
    tally::test::check_corruptions_safe<U64Reservoir>(filling, 2);

    Reservoir<std::string> s(4, 3);
    for (int i = 0; i < 50; ++i) s.add(std::string(static_cast<std::size_t>(i % 7), static_cast<char>('a' + i % 26)));
    const auto sbytes = s.serialize();
    tally::test::check_truncations_throw<Reservoir<std::string>>(sbytes);
    tally::test::check_corruptions_safe<Reservoir<std::string>>(sbytes, 3);

    auto patched = [&](std::size_t offset, std::uint64_t value, std::size_t width = 8) {
        auto b = full;
        for (std::size_t i = 0; i < width; ++i) b[offset + i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
        return b;
    };
    CHECK_THROWS_AS(U64Reservoir::deserialize(patched(4, 7, 1)), FormatError);          // wrong family
    CHECK_THROWS_AS(Reservoir<std::uint32_t>::deserialize(full), FormatError);          // wrong item type
    CHECK_THROWS_AS(Reservoir<std::string>::deserialize(full), FormatError);            // wrong item type
    CHECK_THROWS_AS(U64Reservoir::deserialize(patched(10, 0)), FormatError);            // k = 0
    CHECK_THROWS_AS(U64Reservoir::deserialize(patched(10, 1ull << 40)), FormatError);   // k too large
    CHECK_THROWS_AS(U64Reservoir::deserialize(patched(18, 3)), FormatError);            // filling, but next != seen
    CHECK_THROWS_AS(U64Reservoir::deserialize(patched(26, 0)), FormatError);            // next < seen
    CHECK_THROWS_AS(U64Reservoir::deserialize(patched(34, 0x3FF8000000000000ull)), FormatError);  // W = 1.5
    CHECK_THROWS_AS(U64Reservoir::deserialize(patched(34, 0x7FF8000000000000ull)), FormatError);  // W = NaN
    CHECK_THROWS_AS(U64Reservoir::deserialize(patched(34, 0)), FormatError);            // W = 0 when full
    {
        auto b = full;
        for (std::size_t i = 42; i < 74; ++i) b[i] = std::byte{0};
        CHECK_THROWS_AS(U64Reservoir::deserialize(b), FormatError);  // all-zero generator
    }
    CHECK_THROWS_AS(U64Reservoir::deserialize(patched(74, 4)), FormatError);            // m != min(k, seen)
    CHECK_THROWS_AS(U64Reservoir::deserialize(patched(74, ~0ull)), FormatError);        // absurd count, no allocation
    {
        // dense phase (seen < 16 k): W must be 0 and next == seen
        auto dense = fed(5, 1, 0, 50).serialize();
        CHECK_NOTHROW(U64Reservoir::deserialize(dense));
        dense[34 + 6] = std::byte{0xF0};
        dense[34 + 7] = std::byte{0x3F};  // W = 1.0
        CHECK_THROWS_AS(U64Reservoir::deserialize(dense), FormatError);
        tally::test::check_truncations_throw<U64Reservoir>(fed(5, 1, 0, 50).serialize());
    }
    // a version this build does not know
    CHECK_THROWS_AS(U64Reservoir::deserialize(patched(5, 3, 1)), FormatError);
}

TEST_CASE("Reservoir is a MergeableSummary for serialisable items", "[reservoir]") {
    STATIC_REQUIRE(tally::MergeableSummary<Reservoir<std::uint64_t>>);
    STATIC_REQUIRE(tally::MergeableSummary<Reservoir<std::string>>);
    STATIC_REQUIRE(tally::MergeableSummary<Reservoir<double>>);
    STATIC_REQUIRE(noexcept(std::declval<U64Reservoir&>().add(std::uint64_t{1})));
    // A struct item, serialisable through its ItemCodec.
    Reservoir<Point> p(2, 1);
    p.add(Point{1, -2});
    const auto bytes = p.serialize();
    CHECK(static_cast<int>(bytes[8]) == 5);  // user-defined kind
    CHECK(static_cast<int>(bytes[9]) == 8);
    const auto back = Reservoir<Point>::deserialize(bytes);
    REQUIRE(back.size() == 1);
    CHECK(back.sample()[0].x == 1);
    CHECK(back.sample()[0].y == -2);
}
