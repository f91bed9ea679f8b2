// Tests for tally::WeightedReservoir (Efraimidis-Spirakis A-ExpJ).
#include <tally/sketch/sampling/weighted_reservoir.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "merge_laws.hpp"
#include "test_support.hpp"

using tally::WeightedReservoir;
using tally::test::big;
using tally::test::to_bytes;
using WR = WeightedReservoir<std::uint32_t>;

namespace {

/// Exact inclusion probabilities of k successive draws without replacement,
/// each proportional to weight among the items not yet drawn (the law the
/// Efraimidis-Spirakis sample follows), by enumerating every ordered draw.
std::vector<double> exact_inclusion(const std::vector<double>& w, std::size_t k) {
    std::vector<double> p(w.size(), 0.0);
    std::vector<bool> used(w.size(), false);
    std::vector<std::size_t> drawn;
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    auto rec = [&](auto& self, double prob, double remaining) -> void {
        if (drawn.size() == k) {
            for (auto i : drawn) p[i] += prob;
            return;
        }
        for (std::size_t i = 0; i < w.size(); ++i) {
            if (used[i]) continue;
            used[i] = true;
            drawn.push_back(i);
            self(self, prob * w[i] / remaining, remaining - w[i]);
            drawn.pop_back();
            used[i] = false;
        }
    };
    rec(rec, 1.0, total);
    return p;
}

/// Each inclusion count within 5 binomial standard deviations of trials * p.
void check_inclusion(const std::vector<std::uint64_t>& counts, const std::vector<double>& p, std::size_t trials) {
    const double n = static_cast<double>(trials);
    for (std::size_t i = 0; i < p.size(); ++i) {
        const double expected = n * p[i];
        const double sd = std::sqrt(n * p[i] * (1 - p[i]));
        INFO("item " << i << ": kept " << counts[i] << " times, expected " << expected << " (sd " << sd << ")");
        CHECK(std::abs(static_cast<double>(counts[i]) - expected) < 5 * sd + 1e-9);
    }
}

WR fed(std::size_t k, std::uint64_t seed, const std::vector<double>& w, std::size_t from, std::size_t to) {
    WR r(k, seed);
    for (std::size_t i = from; i < to; ++i) r.add(static_cast<std::uint32_t>(i), w[i]);
    return r;
}

void count_sample(const WR& r, std::vector<std::uint64_t>& counts) {
    for (auto x : r.sample()) ++counts.at(x);
}

std::vector<std::pair<double, std::uint32_t>> entries(const WR& r) {
    std::vector<std::pair<double, std::uint32_t>> e;
    for (std::size_t i = 0; i < r.size(); ++i) e.emplace_back(r.keys()[i], r.sample()[i]);
    std::sort(e.begin(), e.end());
    return e;
}

/// The key computation of earlier releases, for k = 1: keys log(u) / w,
/// which overflow to -inf for subnormal weights, so every key ties and
/// every jump is 0. Kept here as the negative control of the subnormal test.
std::size_t old_pick_k1(std::uint64_t seed, const std::vector<double>& w) {
    tally::detail::ReservoirRng rng(seed);
    auto jump_of = [&](double min_key) {
        const double log_r = std::log(rng.uniform_open0());
        if (!(min_key < 0.0)) return std::numeric_limits<double>::infinity();
        return log_r / min_key;
    };
    double key = std::log(rng.uniform_open0()) / w[0];
    std::size_t pick = 0;
    double jump = jump_of(key);
    for (std::size_t i = 1; i < w.size(); ++i) {
        jump -= w[i];
        if (jump > 0.0) continue;
        key = std::log1p(std::expm1(w[i] * key) * rng.uniform_open0()) / w[i];
        pick = i;
        jump = jump_of(key);
    }
    return pick;
}

/// Pearson's chi-square statistic of `counts` against probabilities `p`.
double chi_square(const std::vector<std::uint64_t>& counts, const std::vector<double>& p, std::size_t trials) {
    double x2 = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
        const double e = p[i] * static_cast<double>(trials);
        x2 += (static_cast<double>(counts[i]) - e) * (static_cast<double>(counts[i]) - e) / e;
    }
    return x2;
}


}  // namespace

TEST_CASE("WeightedReservoir: k out of range throws with the exact message", "[weighted_reservoir]") {
    CHECK_THROWS_WITH(WR(0, 1), "tally::WeightedReservoir::WeightedReservoir: k 0 is out of range [1, 4294967295]");
    if constexpr (sizeof(std::size_t) > 4)
        CHECK_THROWS_WITH(WR(SIZE_MAX, 1), "tally::WeightedReservoir::WeightedReservoir: k " +
                                               std::to_string(SIZE_MAX) + " is out of range [1, 4294967295]");
    CHECK_NOTHROW(WR(1, 1));
}

TEST_CASE("WeightedReservoir: bad weights throw and change nothing; try_add returns false", "[weighted_reservoir]") {
    WR r(3, 5);
    for (std::uint32_t i = 0; i < 10; ++i) r.add(i, 1.0 + i);
    const auto before = r.serialize();
    const double bad[] = {0.0, -0.0, -1.0, std::numeric_limits<double>::quiet_NaN(),
                          std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
    for (double w : bad) {
        INFO("weight " << w);
        CHECK_THROWS_AS(r.add(99, w), std::invalid_argument);
        CHECK_FALSE(r.try_add(99, w));
        CHECK(r.serialize() == before);
    }
    CHECK_THROWS_WITH(r.add(1, -1.0), "tally::WeightedReservoir::add: weight -1 is out of range (0, 1.7976931348623157e+308]");
    CHECK_THROWS_WITH(r.add(1, std::numeric_limits<double>::infinity()),
                      "tally::WeightedReservoir::add: weight inf is out of range (0, 1.7976931348623157e+308]");
    CHECK(r.try_add(1, std::numeric_limits<double>::denorm_min()));
    CHECK(r.try_add(1, std::numeric_limits<double>::max()));
    CHECK(r.items_seen() == 12);
}

TEST_CASE("WeightedReservoir fills, then keeps k, without repeats", "[weighted_reservoir]") {
    WR r(4, 1);
    CHECK(r.empty());
    r.add(10, 1.0);
    r.add(11, 2.0);
    CHECK(r.size() == 2);
    CHECK(r.total() == 3.0);
    for (std::uint32_t i = 0; i < 10000; ++i) r.add(100 + i, 1.0 + (i % 7));
    CHECK(r.size() == 4);
    CHECK(r.items_seen() == 10002);
    std::vector<std::uint32_t> s(r.sample().begin(), r.sample().end());
    std::sort(s.begin(), s.end());
    CHECK(std::adjacent_find(s.begin(), s.end()) == s.end());
    for (double key : r.keys()) CHECK_FALSE(std::isnan(key));
}

TEST_CASE("WeightedReservoir: same seed, same sample", "[weighted_reservoir]") {
    auto run = [](std::uint64_t seed) {
        WR r(5, seed);
        for (std::uint32_t i = 0; i < 5000; ++i) r.add(i, 0.5 + (i % 13));
        return r.serialize();
    };
    CHECK(run(8) == run(8));
    CHECK(run(8) != run(9));
}

TEST_CASE("Weighted inclusion frequencies match the exact law", "[weighted_reservoir][big]") {
    SECTION("5 items, k = 2, weights 1 2 3 4 10") {
        const std::vector<double> w = {1, 2, 3, 4, 10};
        const auto p = exact_inclusion(w, 2);
        CHECK(std::accumulate(p.begin(), p.end(), 0.0) == Catch::Approx(2.0));
        const std::size_t trials = big(200000, 40000);
        std::vector<std::uint64_t> counts(5, 0);
        for (std::size_t t = 0; t < trials; ++t) count_sample(fed(2, t, w, 0, 5), counts);
        check_inclusion(counts, p, trials);
        // far from the uniform answer 0.4 for the heaviest item
        CHECK(p[4] > 0.75);
    }
    SECTION("10 items, k = 3, heavy items late (exercises the jumps)") {
        const std::vector<double> w = {1, 1, 1, 2, 0.5, 3, 1, 8, 0.25, 5};
        const auto p = exact_inclusion(w, 3);
        const std::size_t trials = big(200000, 40000);
        std::vector<std::uint64_t> counts(10, 0);
        for (std::size_t t = 0; t < trials; ++t) count_sample(fed(3, 1000000 + t, w, 0, 10), counts);
        check_inclusion(counts, p, trials);
    }
    SECTION("k = 1: P(i) = w_i / sum(w)") {
        const std::vector<double> w = {1, 2, 3, 4, 5, 6, 7, 8};
        const std::size_t trials = big(200000, 40000);
        std::vector<std::uint64_t> counts(8, 0);
        for (std::size_t t = 0; t < trials; ++t) count_sample(fed(1, 2000000 + t, w, 0, 8), counts);
        std::vector<double> p;
        for (double x : w) p.push_back(x / 36.0);
        check_inclusion(counts, p, trials);
    }
    SECTION("equal weights: uniform, k/n each") {
        const std::vector<double> w(20, 3.5);
        const std::size_t trials = big(100000, 20000);
        std::vector<std::uint64_t> counts(20, 0);
        for (std::size_t t = 0; t < trials; ++t) count_sample(fed(5, 3000000 + t, w, 0, 20), counts);
        check_inclusion(counts, std::vector<double>(20, 0.25), trials);
    }
}

TEST_CASE("Negative control: a key without log space (u^(1/w)) loses the order for small weights",
          "[weighted_reservoir]") {
    // Item 0 weighs 1e-290, item 1 weighs 1e-200: item 1 should win a k = 1
    // draw with probability 1 - 1e-90. As u^(1/w) both keys underflow to 0
    // and the tie hides the difference; as log(u) / w they stay ordered.
    tally::test::Rng rng(3);
    int naive_ties = 0;
    int ours_wrong = 0;
    for (std::uint64_t t = 0; t < 1000; ++t) {
        const double u0 = rng.uniform() + 1e-12;
        const double u1 = rng.uniform() + 1e-12;
        if (std::pow(u0, 1.0 / 1e-290) == std::pow(u1, 1.0 / 1e-200)) ++naive_ties;
        WR r(1, t);
        r.add(0, 1e-290);
        r.add(1, 1e-200);
        if (r.sample()[0] != 1) ++ours_wrong;
    }
    CHECK(naive_ties == 1000);
    CHECK(ours_wrong == 0);
    // extreme weights side by side stay finite or -inf, never NaN
    WR r(3, 1);
    for (std::uint32_t i = 0; i < 1000; ++i) r.add(i, i % 2 ? 1e-300 : 1e300);
    for (double key : r.keys()) CHECK_FALSE(std::isnan(key));
    for (auto x : r.sample()) CHECK(x % 2 == 0);
}

TEST_CASE("WeightedReservoir follows its law for subnormal weights; the old keys fail", "[weighted_reservoir][big]") {
    constexpr double chi2_crit_9 = 27.88;  // p = 0.001, 9 degrees of freedom
    const double base = GENERATE(1e-310, std::numeric_limits<double>::denorm_min());
    const bool equal = GENERATE(true, false);
    INFO("base weight " << base << (equal ? ", 10 equal weights" : ", weights base * (1..10)"));
    std::vector<double> w, p;
    double sum = 0;
    for (int i = 0; i < 10; ++i) {
        w.push_back(equal ? base : base * (i + 1));
        sum += w.back() * 0x1.0p1000;  // scaling a subnormal by 2^1000 is exact
    }
    for (double x : w) p.push_back(x * 0x1.0p1000 / sum);
    const std::size_t trials = big(20000, 5000);
    std::vector<std::uint64_t> ours(10, 0), old(10, 0);
    for (std::size_t t = 0; t < trials; ++t) {
        count_sample(fed(1, 5000000 + t, w, 0, 10), ours);
        ++old[old_pick_k1(5000000 + t, w)];
    }
    const double x2_ours = chi_square(ours, p, trials);
    const double x2_old = chi_square(old, p, trials);
    INFO("chi-square: ours " << x2_ours << ", old keys " << x2_old << "; last item picked " << ours[9] << " vs "
                             << old[9] << " times of " << trials);
    CHECK(x2_ours < chi2_crit_9);
    CHECK(x2_old > chi2_crit_9);  // the negative control: log(u) / w fails the same test
    // and with normal weights mixed in, an item of weight 1 still wins almost always
    WR r(1, 9);
    for (std::uint32_t i = 0; i < 9; ++i) r.add(i, base);
    r.add(9, 1.0);
    CHECK(r.sample()[0] == 9);
}

TEST_CASE("Weighted merges keep the exact law, in any order", "[weighted_reservoir][big]") {
    const std::vector<double> w = {1, 1, 1, 2, 0.5, 3, 1, 8, 0.25, 5};
    const auto p = exact_inclusion(w, 3);
    const std::size_t trials = big(100000, 20000);
    std::vector<std::uint64_t> ab(10, 0), ba(10, 0), later(10, 0), filling(10, 0), full(10, 0);
    for (std::size_t t = 0; t < trials; ++t) {
        const WR a = fed(3, 4 * t, w, 0, 4);
        const WR b = fed(3, 4 * t + 1, w, 4, 10);
        count_sample(tally::merged(a, b), ab);
        count_sample(tally::merged(b, a), ba);
        // merge of a 6-item prefix, then the rest added afterwards (the jump is redrawn)
        WR c = tally::merged(fed(3, 4 * t + 2, w, 0, 2), fed(3, 4 * t + 3, w, 2, 6));
        for (std::uint32_t i = 6; i < 10; ++i) c.add(i, w[i]);
        count_sample(c, later);
        // merge while both are still filling, then more
        WR d = tally::merged(fed(3, 4 * t + 2, w, 0, 1), fed(3, 4 * t + 3, w, 1, 2));
        for (std::uint32_t i = 2; i < 10; ++i) d.add(i, w[i]);
        count_sample(d, filling);
        // both sides full (a pending jump on each), then more: the jump must
        // follow the merged threshold, not the target's old one
        WR e = tally::merged(fed(3, 4 * t, w, 0, 3), fed(3, 4 * t + 1, w, 3, 6));
        for (std::uint32_t i = 6; i < 10; ++i) e.add(i, w[i]);
        count_sample(e, full);
    }
    check_inclusion(ab, p, trials);
    check_inclusion(ba, p, trials);
    check_inclusion(later, p, trials);
    check_inclusion(filling, p, trials);
    check_inclusion(full, p, trials);
}

TEST_CASE("WeightedReservoir merge laws hold exactly for the kept entries", "[weighted_reservoir]") {
    // Integer weights keep the total weight exact in any summation order.
    auto same = [](const WR& x, const WR& y) {
        return x.items_seen() == y.items_seen() && x.total() == y.total() && entries(x) == entries(y);
    };
    std::vector<double> w;
    for (int i = 0; i < 300; ++i) w.push_back(1.0 + (i * 7) % 11);
    tally::test::check_merge_laws(WR(8, 100), fed(8, 1, w, 0, 50), fed(8, 2, w, 50, 60), fed(8, 3, w, 60, 300), same);
    tally::test::check_merge_laws(WR(8, 100), fed(8, 1, w, 0, 2), fed(8, 2, w, 2, 5), fed(8, 3, w, 5, 7), same);
    // empty is the identity on either side (the target's generator aside)
    const WR a = fed(8, 1, w, 0, 50);
    CHECK(tally::merged(a, WR(8, 5)).serialize() == a.serialize());
    const auto x = tally::merged(WR(8, 5), a).serialize();
    const auto y = a.serialize();
    REQUIRE(x.size() == y.size());
    CHECK(std::equal(x.begin(), x.begin() + 42, y.begin()));  // all but the generator
    CHECK(std::equal(x.begin() + 74, x.end(), y.begin() + 74));

    WeightedReservoir<std::string> sa(4, 1), sb(4, 2), sc(4, 3);
    sa.add("a", 1);
    sb.add("bb", 2);
    sb.add(std::string(100, 'z'), 3);
    sc.add("", 4);
    auto same_s = [](const WeightedReservoir<std::string>& p, const WeightedReservoir<std::string>& q) {
        std::vector<std::pair<double, std::string>> ep, eq;
        for (std::size_t i = 0; i < p.size(); ++i) ep.emplace_back(p.keys()[i], p.sample()[i]);
        for (std::size_t i = 0; i < q.size(); ++i) eq.emplace_back(q.keys()[i], q.sample()[i]);
        std::sort(ep.begin(), ep.end());
        std::sort(eq.begin(), eq.end());
        return p.items_seen() == q.items_seen() && ep == eq;
    };
    tally::test::check_merge_laws(WeightedReservoir<std::string>(4, 9), sa, sb, sc, same_s);
}

TEST_CASE("WeightedReservoir: incompatible merges throw and leave the target unchanged", "[weighted_reservoir]") {
    const std::vector<double> w(50, 1.0);
    tally::test::check_incompatible_merge(fed(3, 1, w, 0, 50), fed(4, 2, w, 0, 50));
    WR a = fed(3, 1, w, 0, 50);
    CHECK_THROWS_WITH(a.merge(fed(4, 2, w, 0, 50)),
                      "tally::WeightedReservoir::merge: k 3 does not match the other reservoir's k 4");
    WR self = fed(3, 1, w, 0, 2);
    self.merge(self);
    CHECK(self.items_seen() == 4);
    CHECK(self.size() == 3);
}

TEST_CASE("WeightedReservoir serialization: golden bytes, round trip continues identically", "[weighted_reservoir]") {
    // k = 2, seed 0, no items: only parameters and the SplitMix64(0) state.
    const WR empty(2, 0);
    const std::vector<std::uint8_t> golden = {
        'T',  'A',  'L',  'Y',  7,    2,    0,    0,     // frame header, version 2
        1,    4,                                         // unsigned integer items of 4 bytes
        2,    0,    0,    0,    0,    0,    0,    0,     // k = 2
        0,    0,    0,    0,    0,    0,    0,    0,     // seen = 0
        0,    0,    0,    0,    0,    0,    0,    0,     // total weight 0.0
        0,    0,    0,    0,    0,    0,    0,    0,     // jump 0.0
        0xAF, 0xCD, 0x1D, 0x7B, 0x39, 0xA8, 0x20, 0xE2,  // generator
        0xF4, 0x65, 0xB9, 0xA1, 0x6A, 0x9E, 0x78, 0x6E,  //
        0x4F, 0x45, 0x09, 0x80, 0x18, 0x5D, 0xC4, 0x06,  //
        0xEC, 0x81, 0x4C, 0x72, 0xA8, 0xB8, 0x8B, 0xF8,  //
        0,    0,    0,    0,    0,    0,    0,    0,     // m = 0
    };
    CHECK(empty.serialize() == to_bytes(golden));
    // One item: its key is log(w) - log(-log u) for the generator's first draw.
    WR one(2, 0);
    one.add(0xAABBCCDDu, 2.0);
    const auto b1 = one.serialize();
    REQUIRE(b1.size() == golden.size() + 12);
    CHECK(static_cast<int>(b1[18]) == 1);       // seen = 1
    CHECK(static_cast<int>(b1[26 + 7]) == 0x40);  // total weight 2.0 = 0x4000000000000000
    const double key = one.keys()[0];
    tally::detail::ReservoirRng rng(0);
    const double u0 = rng.uniform_open0();
    CHECK(key == std::log(2.0) - std::log(-std::log(u0)));
    const std::vector<std::uint8_t> item = {0xDD, 0xCC, 0xBB, 0xAA};
    CHECK(std::equal(item.begin(), item.end(), b1.end() - 4,
                     [](std::uint8_t a, std::byte b) { return a == static_cast<std::uint8_t>(b); }));

    // The old format (version 1): keys were log(u) / w; they read converted.
    tally::ByteWriter v1;
    v1.header(tally::Family::weighted_reservoir, 1);
    v1.u8(1);  // fixed-size items
    v1.u32(4);
    v1.u64(2);                   // k
    v1.u64(1);                   // seen
    v1.f64(2.0);                 // total weight
    v1.f64(0.0);                 // jump (still filling)
    tally::detail::ReservoirRng(0).write(v1);
    v1.u64(1);                   // m
    v1.f64(std::log(u0) / 2.0);  // key
    v1.u32(0xAABBCCDDu);
    const auto v1_bytes = v1.take();
    REQUIRE(v1_bytes.size() == b1.size() + 3);
    const WR old = WR::deserialize(v1_bytes);
    CHECK(old.total() == 2.0);
    CHECK(old.sample()[0] == 0xAABBCCDDu);
    CHECK(old.keys()[0] == Catch::Approx(key).epsilon(1e-12));
    tally::test::check_truncations_throw<WR>(v1_bytes);
    // the old bytes are a reservoir like any other: same answers after more items
    WR fresh = WR::deserialize(b1);
    WR olds = old;
    for (std::uint32_t i = 0; i < 100; ++i) fresh.add(i, 1.0 + i), olds.add(i, 1.0 + i);
    CHECK(fresh.serialize().size() == olds.serialize().size());

    std::vector<double> w;
    for (int i = 0; i < 20000; ++i) w.push_back(0.1 + (i % 17));
    WR a = fed(6, 3, w, 0, 10000);
    const auto bytes = a.serialize();
    WR b = WR::deserialize(bytes);
    CHECK(b.serialize() == bytes);
    for (std::uint32_t i = 10000; i < 20000; ++i) {
        a.add(i, w[i]);
        b.add(i, w[i]);
    }
    CHECK(a.serialize() == b.serialize());
    const WR other = fed(6, 4, w, 0, 300);
    a.merge(other);
    b.merge(other);
    for (std::uint32_t i = 0; i < 1000; ++i) {
        a.add(i, 2.0);
        b.add(i, 2.0);
    }
    CHECK(a.serialize() == b.serialize());
}

TEST_CASE("WeightedReservoir deserialize rejects bad bytes with FormatError", "[weighted_reservoir]") {
    using tally::FormatError;
    std::vector<double> w;
    for (int i = 0; i < 500; ++i) w.push_back(0.5 + (i % 5));
    const auto full = fed(4, 1, w, 0, 500).serialize();
    const auto filling = fed(4, 1, w, 0, 2).serialize();
    tally::test::check_truncations_throw<WR>(full);
    tally::test::check_truncations_throw<WR>(filling);
    tally::test::check_corruptions_safe<WR>(full, 11);
    tally::test::check_corruptions_safe<WR>(filling, 12);
    WeightedReservoir<std::string> s(3, 1);
    for (int i = 0; i < 40; ++i) s.add(std::string(static_cast<std::size_t>(i % 5), 'q'), 1.0 + i % 3);
    const auto sbytes = s.serialize();
    tally::test::check_truncations_throw<WeightedReservoir<std::string>>(sbytes);
    tally::test::check_corruptions_safe<WeightedReservoir<std::string>>(sbytes, 13);

    auto patched = [&](std::size_t offset, std::uint64_t value, std::size_t width = 8) {
        auto b = full;
        for (std::size_t i = 0; i < width; ++i) b[offset + i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
        return b;
    };
    CHECK_NOTHROW(WR::deserialize(full));
    CHECK_THROWS_AS(WR::deserialize(patched(4, 6, 1)), FormatError);                      // reservoir's family
    CHECK_THROWS_AS(WeightedReservoir<std::uint64_t>::deserialize(full), FormatError);     // other item type
    CHECK_THROWS_AS(WR::deserialize(patched(10, 0)), FormatError);                         // k = 0
    CHECK_THROWS_AS(WR::deserialize(patched(26, 0xBFF0000000000000ull)), FormatError);     // total weight -1
    CHECK_THROWS_AS(WR::deserialize(patched(34, 0xBFF0000000000000ull)), FormatError);     // jump -1
    CHECK_THROWS_AS(WR::deserialize(patched(34, 0x7FF8000000000000ull)), FormatError);     // jump NaN
    CHECK_THROWS_AS(WR::deserialize(patched(74, 5)), FormatError);                         // m != min(k, seen)
    CHECK_THROWS_AS(WR::deserialize(patched(74, ~0ull)), FormatError);                     // absurd count
    CHECK_THROWS_AS(WR::deserialize(patched(82, 0x7FF8000000000000ull)), FormatError);     // key NaN
    // first key (the heap's minimum) made larger than its children: +inf
    CHECK_THROWS_AS(WR::deserialize(patched(82, 0x7FF0000000000000ull)), FormatError);
    {
        auto b = fed(4, 1, w, 0, 2).serialize();
        for (std::size_t i = 0; i < 8; ++i) b[34 + i] = static_cast<std::byte>(i == 7 ? 0x3F : i == 6 ? 0xF0 : 0);
        CHECK_THROWS_AS(WR::deserialize(b), FormatError);  // filling with a nonzero jump
    }
}

TEST_CASE("WeightedReservoir is a MergeableSummary", "[weighted_reservoir]") {
    STATIC_REQUIRE(tally::MergeableSummary<WeightedReservoir<std::uint64_t>>);
    STATIC_REQUIRE(tally::MergeableSummary<WeightedReservoir<std::string>>);
    STATIC_REQUIRE(noexcept(std::declval<WR&>().try_add(1u, 1.0)));
}
