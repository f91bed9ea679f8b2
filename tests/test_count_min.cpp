#include <tally/sketch/frequency/count_min.hpp>

#include <tally/detail/primitives.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "catch.hpp"
#include "merge_laws.hpp"
#include "test_support.hpp"

using tally::CountMin;
using tally::CountMinOptions;
using tally::test::big;
using tally::test::to_bytes;
using tally::test::Rng;

using tally::Seed;
using tally::test::Zipf;

namespace {


std::vector<std::uint64_t> zipf_stream(std::size_t n, std::size_t universe, double s, std::uint64_t seed) {
    Zipf z(universe, s);
    Rng rng(seed);
    std::vector<std::uint64_t> out(n);
    for (auto& x : out) x = z(rng);
    return out;
}


// The row function as docs/count_min.md specifies it, written out again here:
// (a_i, b_i) = SplitMix64 outputs 2i and 2i + 1 of the seed, a_i forced odd;
// column = ((a_i h + b_i) mod 2^64) * width / 2^64.
std::uint64_t splitmix_output(std::uint64_t seed, std::uint64_t index) {
    std::uint64_t z = seed + (index + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
std::size_t documented_column(std::uint64_t seed, std::size_t row, std::uint64_t hash, std::uint64_t width) {
    const std::uint64_t a = splitmix_output(seed, 2 * row) | 1;
    const std::uint64_t b = splitmix_output(seed, 2 * row + 1);
    return static_cast<std::size_t>((static_cast<tally::detail::uint128>(a * hash + b) * width) >> 64);
}

// Version 1's rows (kept here as the negative control): fastrange32 of
// h1 + i * h2 over the 32-bit halves of the (seed-remixed) hash.
std::size_t double_hashed_column(std::uint64_t seed, std::size_t row, std::uint64_t hash, std::uint64_t width) {
    const std::uint64_t h = seed == 0 ? hash : tally::detail::mix64(hash ^ seed);
    const std::uint32_t g = static_cast<std::uint32_t>(h) + static_cast<std::uint32_t>(row) * static_cast<std::uint32_t>(h >> 32);
    return static_cast<std::size_t>((static_cast<std::uint64_t>(g) * width) >> 32);
}

// A key's columns in all `depth` rows, packed into one value for set lookups.
template <class ColumnOf>
std::uint64_t column_tuple(ColumnOf&& column_of, std::size_t depth, std::uint64_t key) {
    std::uint64_t packed = 0;
    for (std::size_t i = 0; i < depth; ++i) packed = tally::detail::mix64(packed ^ column_of(i, tally::hash_of(key)));
    return packed;
}

// How many of keys [first, universe) share every column with one of keys [0, first).
template <class ColumnOf>
std::size_t full_collisions(ColumnOf&& column_of, std::size_t depth, std::uint64_t first, std::uint64_t universe) {
    std::vector<std::uint64_t> heavy;
    for (std::uint64_t k = 0; k < first; ++k) heavy.push_back(column_tuple(column_of, depth, k));
    std::sort(heavy.begin(), heavy.end());
    std::size_t n = 0;
    for (std::uint64_t k = first; k < universe; ++k)
        n += std::binary_search(heavy.begin(), heavy.end(), column_tuple(column_of, depth, k));
    return n;
}


}  // namespace

TEMPLATE_TEST_CASE("CountMin never underestimates on Zipf streams", "[count_min][big]", std::uint32_t,
                   std::uint64_t) {
    const bool conservative = GENERATE(false, true);
    const double s = GENERATE(0.8, 1.2);
    INFO("conservative " << conservative << ", zipf s " << s);
    const auto stream = zipf_stream(big(1'000'000, 100'000), 200'000, s, 42);
    CountMin<TestType> cm(1024, 4, {.seed = Seed{7}, .conservative = conservative});
    std::unordered_map<std::uint64_t, std::uint64_t> truth;
    Rng w(3);
    std::uint64_t n = 0;
    for (const auto x : stream) {
        const std::uint64_t c = 1 + (w.below(8) == 0 ? w.below(5) : 0);  // mostly 1, some weights
        cm.add(x, c);
        truth[x] += c;
        n += c;
    }
    CHECK(cm.total() == n);
    std::size_t under = 0;
    for (const auto& [key, f] : truth) under += cm.estimate(key) < f;
    CHECK(under == 0);
    // keys never added have truth 0; estimates are non-negative by type, but
    // must stay within the bound for most of them
    std::size_t unseen_over = 0;
    for (std::uint64_t key = 1'000'000; key < 1'010'000; ++key) unseen_over += cm.estimate(key) > cm.error_bound();
    CHECK(unseen_over <= 10'000 * cm.delta());
}

TEST_CASE("CountMin: the epsilon*N bound holds for at least 1 - delta of the keys", "[count_min][big]") {
    SECTION("with_error sizing on a Zipf stream") {
        const auto stream = zipf_stream(big(1'000'000, 100'000), 100'000, 1.1, 11);
        auto cm = CountMin<>::with_error(0.001, 0.01);
        std::unordered_map<std::uint64_t, std::uint64_t> truth;
        for (const auto x : stream) {
            cm.add(x);
            ++truth[x];
        }
        const double bound = cm.epsilon() * static_cast<double>(cm.total());
        std::size_t over = 0;
        for (const auto& [key, f] : truth) over += static_cast<double>(cm.estimate(key) - f) > bound;
        CHECK(static_cast<double>(over) <= cm.delta() * static_cast<double>(truth.size()));
    }
    SECTION("a stream built so that one row fails for ~28% of keys") {
        // 100 heavy keys of weight H each and many light keys of weight 1 in
        // width 300: a light key's row overshoots e/300 * N as soon as one
        // heavy key shares its column (probability 1 - (299/300)^100 = 0.284),
        // so the fraction over the bound measures row independence:
        // ~0.284^3 = 0.023 for depth 3 against delta = e^-3 = 0.0498, but
        // ~0.28 if the rows were one row repeated (the negative control).
        const std::size_t light = big(40'000, 20'000);
        const std::uint64_t heavy_weight = light / 2;
        auto fraction_over = [&](std::size_t depth, std::uint64_t seed) {
            CountMin<> cm(300, depth, {.seed = Seed{seed}});
            for (std::uint64_t h = 0; h < 100; ++h) cm.add(h, heavy_weight);
            for (std::uint64_t l = 0; l < light; ++l) cm.add(1'000'000 + l);
            const double bound = cm.error_bound();
            REQUIRE(static_cast<double>(heavy_weight) > bound);  // one heavy collision breaks the bound
            std::size_t over = 0;
            for (std::uint64_t l = 0; l < light; ++l)
                over += static_cast<double>(cm.estimate(1'000'000 + l) - 1) > bound;
            return static_cast<double>(over) / static_cast<double>(light);
        };
        for (std::uint64_t seed : {0ull, 1ull, 99ull}) {
            INFO("seed " << seed);
            const double f3 = fraction_over(3, seed);
            CHECK(f3 <= std::exp(-3.0));
            CHECK(f3 > 0.005);  // the stream really stresses the bound
            const double f1 = fraction_over(1, seed);
            CHECK(f1 > 0.2);  // negative control: depth 1 fails e^-3 by far
            CHECK(f1 <= std::exp(-1.0));
        }
    }
}

TEST_CASE("CountMin rows are independent: no key shares every column with a heavy hitter", "[count_min][big]") {
    // Zipf(1) over `universe` keys (key = rank, so keys 0..199 are the 200
    // most frequent). With independent rows a key shares all 5 columns with
    // one of them with probability ~200 / width^5 (1e-15 here); version 1's
    // double hashing made that ~1/width^2, a few keys per seed.
    const std::size_t universe = big(std::size_t{1} << 20, std::size_t{1} << 16);
    const std::size_t width = big(2719, 500);
    const std::size_t depth = 5;
    const std::uint64_t seeds = big(12, 8);
    const auto stream = zipf_stream(universe, universe, 1.0, 2026);
    std::unordered_map<std::uint64_t, std::uint64_t> truth;
    for (const auto x : stream) ++truth[x];

    std::size_t full_new = 0, full_old = 0;
    for (std::uint64_t seed = 0; seed < seeds; ++seed) {
        INFO("seed " << seed);
        CountMin<> cm(width, depth, Seed{seed});
        full_new += full_collisions([&](std::size_t i, std::uint64_t h) { return cm.column_of(i, h); }, depth, 200,
                                    universe);
        full_old += full_collisions(
            [&](std::size_t i, std::uint64_t h) { return double_hashed_column(seed, i, h, width); }, depth, 200,
            universe);

        // the guarantee itself, on every seed: at most a delta fraction of
        // the keys is over epsilon * N (here: none, and no key is close)
        for (const auto x : stream) cm.add(x);
        const double bound = cm.error_bound();
        std::size_t over = 0;
        double worst = 0;
        for (const auto& [key, f] : truth) {
            const double excess = static_cast<double>(cm.estimate(key) - f);
            over += excess > bound;
            worst = std::max(worst, excess / bound);
        }
        CHECK(static_cast<double>(over) <= cm.delta() * static_cast<double>(truth.size()));
        CHECK(worst < 1.0);
    }
    CHECK(full_new == 0);
    // negative control: the double-hashed rows of version 1 fail the same count
    CHECK(full_old >= seeds);
}

TEMPLATE_TEST_CASE("CountMin conservative update is never worse than standard, key by key", "[count_min][big]",
                   std::uint32_t, std::uint64_t) {
    const auto stream = zipf_stream(big(500'000, 100'000), 50'000, 1.0, 5);
    CountMin<TestType> standard(512, 4, {.seed = Seed{1}});
    CountMin<TestType> conservative(512, 4, {.seed = Seed{1}, .conservative = true});
    std::unordered_map<std::uint64_t, std::uint64_t> truth;
    for (const auto x : stream) {
        standard.add(x);
        conservative.add(x);
        ++truth[x];
    }
    std::size_t worse = 0;
    std::size_t under = 0;
    std::uint64_t err_std = 0;
    std::uint64_t err_cu = 0;
    for (const auto& [key, f] : truth) {
        const auto s = standard.estimate(key);
        const auto c = conservative.estimate(key);
        worse += c > s;
        under += c < f;
        err_std += s - f;
        err_cu += c - f;
    }
    CHECK(worse == 0);
    CHECK(under == 0);
    // and it matters: on this stream conservative update removes ~40% of the error
    CHECK(err_cu * 10 < err_std * 8);
    CHECK(conservative.total() == standard.total());
}

TEST_CASE("CountMin: add, add_hash, seeds and item types agree", "[count_min]") {
    CountMin<> a(100, 3);
    a.add(std::string("apple"), 3);
    a.add("apple");
    a.add(std::string_view("apple"), 2);
    CHECK(a.estimate("apple") >= 6);
    CHECK(a.estimate(std::string("apple")) == a.estimate(std::string_view("apple")));
    CHECK(a.total() == 6);

    CountMin<> b(100, 3);
    b.add_hash(tally::hash_of(std::string_view("apple")), 6);
    CHECK(b.serialize() == a.serialize());
    CHECK(b.estimate_hash(tally::hash_of("apple")) == 6);

    // an empty sketch estimates 0 for everything, and add(x, 0) changes nothing
    CountMin<> e(64, 4);
    CHECK(e.estimate(123) == 0);
    e.add(123, 0);
    CHECK(e.total() == 0);
    CHECK(e.estimate(123) == 0);

    // a different seed is a different hash function: with 200 keys in 64
    // columns the two sketches' counters cannot all coincide
    CountMin<> s0(64, 4, {.seed = Seed{0}});
    CountMin<> s1(64, 4, {.seed = Seed{1}});
    for (int i = 0; i < 200; ++i) {
        s0.add(i);
        s1.add(i);
    }
    CHECK(!std::ranges::equal(s0.counts(), s1.counts()));
    CHECK(s0.total() == s1.total());

    // exact when nothing collides: one key
    CountMin<> one(10, 5, {.seed = Seed{3}});
    one.add(77, 1234);
    CHECK(one.estimate(77) == 1234);

    // every width is honoured (not rounded to a power of two) and every column is reachable
    CountMin<> odd(3, 1);
    for (int i = 0; i < 1000; ++i) odd.add(i);
    REQUIRE(odd.counts().size() == 3);
    for (const auto c : odd.counts()) CHECK(c > 250);
}

TEST_CASE("CountMin with_error sizing and accessors", "[count_min]") {
    const auto cm = CountMin<>::with_error(0.01, 0.01);
    CHECK(cm.width() == 272);  // ceil(e / 0.01) = ceil(271.83)
    CHECK(cm.depth() == 5);    // ceil(ln 100) = ceil(4.605)
    const auto cm2 = CountMin<std::uint64_t>::with_error(0.001, 0.05);
    CHECK(cm2.width() == 2719);
    CHECK(cm2.depth() == 3);
    CHECK(CountMin<>::with_error(0.5, 0.9).width() == 6);
    CHECK(CountMin<>::with_error(0.5, 0.9).depth() == 1);
    CHECK(cm.epsilon() == Catch::Approx(std::exp(1.0) / 272));
    CHECK(cm.delta() == Catch::Approx(std::exp(-5.0)));
    CHECK(cm.memory_bytes() >= 272 * 5 * 4);
    CHECK(CountMin<>::with_error(0.1, 0.1, {.seed = Seed{9}, .conservative = true}).conservative());
    CHECK(CountMin<>::with_error(0.1, 0.1, {.seed = Seed{9}}).seed() == Seed{9});
}

TEST_CASE("CountMin rejects bad parameters with clear messages", "[count_min]") {
    CHECK_THROWS_WITH(CountMin<>(0, 4), "tally::CountMin::CountMin: width 0 is out of range [1, 2147483648]");
    CHECK_THROWS_WITH(CountMin<>(100, 0), "tally::CountMin::CountMin: depth 0 is out of range [1, 32]");
    CHECK_THROWS_WITH(CountMin<>(100, 33), "tally::CountMin::CountMin: depth 33 is out of range [1, 32]");
    CHECK_THROWS_WITH(CountMin<>((std::size_t{1} << 31) + 1, 1),
                      "tally::CountMin::CountMin: width 2147483649 is out of range [1, 2147483648]");
    // huge values are refused before any arithmetic on them (no wrap)
    CHECK_THROWS_WITH(CountMin<>(SIZE_MAX, 32),
                      "tally::CountMin::CountMin: width " + std::to_string(SIZE_MAX) +
                          " is out of range [1, 2147483648]");
    CHECK_THROWS_WITH(CountMin<>(4, SIZE_MAX),
                      "tally::CountMin::CountMin: depth " + std::to_string(SIZE_MAX) + " is out of range [1, 32]");
    const std::string eps_range = " is out of range [1.2657986155054742e-09, 1)";
    CHECK_THROWS_WITH((void)CountMin<>::with_error(0, 0.1), "tally::CountMin::with_error: epsilon 0" + eps_range);
    CHECK_THROWS_WITH((void)CountMin<>::with_error(1, 0.1), "tally::CountMin::with_error: epsilon 1" + eps_range);
    CHECK_THROWS_WITH((void)CountMin<>::with_error(-0.5, 0.1),
                      "tally::CountMin::with_error: epsilon -0.5" + eps_range);
    CHECK_THROWS_WITH((void)CountMin<>::with_error(std::nan(""), 0.1),
                      "tally::CountMin::with_error: epsilon nan" + eps_range);
    CHECK_THROWS_WITH((void)CountMin<>::with_error(1e-12, 0.1),
                      "tally::CountMin::with_error: epsilon 1e-12" + eps_range);
    const std::string delta_range = " is out of range [1.2664165549094176e-14, 1)";
    CHECK_THROWS_WITH((void)CountMin<>::with_error(0.1, 0), "tally::CountMin::with_error: delta 0" + delta_range);
    CHECK_THROWS_WITH((void)CountMin<>::with_error(0.1, 1), "tally::CountMin::with_error: delta 1" + delta_range);
    CHECK_THROWS_WITH((void)CountMin<>::with_error(0.1, 1.5), "tally::CountMin::with_error: delta 1.5" + delta_range);
    CHECK_THROWS_WITH((void)CountMin<>::with_error(0.1, 1e-20),
                      "tally::CountMin::with_error: delta 1e-20" + delta_range);
    // the smallest epsilon and delta accepted give the largest shape
    CHECK(CountMin<>::with_error(0.1, std::exp(-32.0)).depth() == 32);
}

TEST_CASE("CountMin saturates instead of wrapping", "[count_min]") {
    CountMin<std::uint32_t> a(8, 2);
    a.add(1, 4'000'000'000ull);
    a.add(1, 4'000'000'000ull);
    CHECK(a.estimate(1) == std::numeric_limits<std::uint32_t>::max());
    CHECK(a.total() == 8'000'000'000ull);
    a.add(1, std::numeric_limits<std::uint64_t>::max());
    CHECK(a.estimate(1) == std::numeric_limits<std::uint32_t>::max());
    CHECK(a.total() == std::numeric_limits<std::uint64_t>::max());

    CountMin<std::uint64_t> b(8, 2, {.conservative = true});
    b.add(1, std::numeric_limits<std::uint64_t>::max() - 1);
    b.add(1, 5);
    CHECK(b.estimate(1) == std::numeric_limits<std::uint64_t>::max());

    CountMin<std::uint32_t> c(8, 2);
    c.add(1, 3'000'000'000ull);
    CountMin<std::uint32_t> d = c;
    d.merge(c);
    CHECK(d.estimate(1) == std::numeric_limits<std::uint32_t>::max());
    CHECK(d.total() == 6'000'000'000ull);
    // a saturated sketch still round-trips (row sums stay <= total)
    const auto bytes = d.serialize();
    CHECK(CountMin<std::uint32_t>::deserialize(bytes).serialize() == bytes);
}

TEMPLATE_TEST_CASE("CountMin merge laws and merge equals the sketch of the concatenated stream", "[count_min]",
                   std::uint32_t, std::uint64_t) {
    const bool conservative = GENERATE(false, true);
    INFO("conservative " << conservative);
    const CountMinOptions opt{.seed = Seed{12345}, .conservative = conservative};
    CountMin<TestType> empty(97, 4, opt);
    CountMin<TestType> a = empty, b = empty, c = empty, all = empty;
    CountMin<TestType> all_standard(97, 4, {.seed = Seed{12345}});
    std::unordered_map<std::uint64_t, std::uint64_t> truth;
    const auto sa = zipf_stream(5000, 2000, 1.1, 1);
    const auto sb = zipf_stream(3000, 500, 0.7, 2);
    const auto sc = zipf_stream(1000, 3000, 1.5, 3);
    for (auto x : sa) a.add(x), all.add(x), all_standard.add(x), ++truth[x];
    for (auto x : sb) b.add(x + 100), all.add(x + 100), all_standard.add(x + 100), ++truth[x + 100];
    for (auto x : sc) c.add(x, 3), all.add(x, 3), all_standard.add(x, 3), truth[x] += 3;
    tally::test::check_merge_laws(empty, a, b, c);

    const auto abc = tally::merged(tally::merged(a, b), c);
    CHECK(abc.total() == all.total());
    for (const auto& [key, f] : truth) CHECK(abc.estimate(key) >= f);
    if (!conservative) {
        CHECK(abc.serialize() == all.serialize());  // summing is exact
    } else {
        // the merge of conservative sketches is an upper bound that stays
        // within the standard sketch of the union (so epsilon * N holds),
        // counter by counter
        const auto merged_cells = abc.counts();
        const auto standard_cells = all_standard.counts();
        for (std::size_t i = 0; i < merged_cells.size(); ++i) CHECK(merged_cells[i] <= standard_cells[i]);
        // but it is looser than conservative update over the whole stream
        std::uint64_t err_merged = 0, err_whole = 0;
        for (const auto& [key, f] : truth) err_merged += abc.estimate(key) - f, err_whole += all.estimate(key) - f;
        CHECK(err_whole < err_merged);
        // and conservative updates after a merge stay correct
        CountMin<TestType> m = abc;
        for (auto x : sa) m.add(x);
        for (const auto& [key, f] : truth)
            CHECK(m.estimate(key) >= f + static_cast<std::uint64_t>(std::count(sa.begin(), sa.end(), key)));
    }
    CHECK(tally::merge_all(std::vector{a, b, c}).serialize() == abc.serialize());
}

TEST_CASE("CountMin refuses incompatible merges and leaves the target unchanged", "[count_min]") {
    CountMin<> target(64, 4, {.seed = Seed{1}});
    target.add(5, 10);
    tally::test::check_incompatible_merge(target, CountMin<>(65, 4, {.seed = Seed{1}}));
    tally::test::check_incompatible_merge(target, CountMin<>(64, 3, {.seed = Seed{1}}));
    tally::test::check_incompatible_merge(target, CountMin<>(64, 4, {.seed = Seed{2}}));
    tally::test::check_incompatible_merge(target, CountMin<>(64, 4, {.seed = Seed{1}, .conservative = true}));
    CHECK_THROWS_WITH(target.merge(CountMin<>(65, 4, {.seed = Seed{1}})),
                      "tally::CountMin::merge: shape mismatch (width 64 x depth 4 vs width 65 x depth 4)");
    CHECK_THROWS_WITH(target.merge(CountMin<>(64, 4, {.seed = Seed{2}})),
                      "tally::CountMin::merge: seed mismatch (1 vs 2)");
    CHECK_THROWS_WITH(target.merge(CountMin<>(64, 4, {.seed = Seed{1}, .conservative = true})),
                      "tally::CountMin::merge: update mode mismatch (standard vs conservative)");
}

TEST_CASE("CountMin hashes rows as documented, and seeds change every row", "[count_min]") {
    Rng rng(17);
    for (const std::uint64_t seed : {0ull, 1ull, 0xdeadbeefull, ~0ull}) {
        for (const std::size_t width : {std::size_t{1}, std::size_t{3}, std::size_t{2719}, std::size_t{1} << 20}) {
            CountMin<> cm(width, 7, Seed{seed});
            for (int k = 0; k < 200; ++k) {
                const std::uint64_t h = rng.next();
                for (std::size_t row = 0; row < 7; ++row)
                    REQUIRE(cm.column_of(row, h) == documented_column(seed, row, h, width));
            }
        }
    }
    // a random seed draws new row functions, kept through serialization
    const Seed s = Seed::random();
    CountMin<> a(1000, 4, s), b(1000, 4, s), c(1000, 4, Seed::random());
    for (int i = 0; i < 100; ++i) a.add(i), b.add(i + 100), c.add(i);
    CHECK(!std::ranges::equal(a.counts(), c.counts()));
    auto back = CountMin<>::deserialize(a.serialize());
    CHECK(back.seed() == s);
    back.merge(b);  // equal seeds merge
    for (int i = 0; i < 200; ++i) CHECK(back.estimate(i) >= 1);
    CHECK_THROWS_AS(back.merge(c), std::invalid_argument);
}

TEST_CASE("CountMin vocabulary: total, empty, memory_bytes, clear", "[count_min]") {
    CountMin<> cm(100, 3);
    CHECK(cm.empty());
    CHECK(cm.total() == 0);
    cm.add(5, 0);
    CHECK(cm.empty());
    cm.add(5, 2);
    CHECK(!cm.empty());
    CHECK(cm.total() == 2);
    CHECK(cm.memory_bytes() >= sizeof(cm) + 300 * 4);
    cm.clear();
    CHECK(cm.empty());
    CHECK(cm.estimate(5) == 0);
    CHECK(cm.width() == 100);
}

TEST_CASE("CountMin serialization: golden bytes, round trips, bad bytes", "[count_min][serialize]") {
    CountMin<> cm(3, 2, {.seed = Seed{0}});
    cm.add(1);
    cm.add(2, 2);
    const auto bytes = cm.serialize();
    // header (version 2), counter bytes 4, flags 0, depth 2, width 3, seed 0,
    // total 3, then 2x3 u32 counters placed by the documented row function
    std::vector<std::uint32_t> cells(6, 0);
    for (std::size_t row = 0; row < 2; ++row) {
        cells[row * 3 + documented_column(0, row, tally::hash_of(1), 3)] += 1;
        cells[row * 3 + documented_column(0, row, tally::hash_of(2), 3)] += 2;
    }
    auto golden = to_bytes({'T', 'A', 'L', 'Y', 3, 2, 0, 0,  //
                            4,   0,   2,   0,                 // counter bytes, flags, depth
                            3,   0,   0,   0, 0, 0, 0, 0,     // width
                            0,   0,   0,   0, 0, 0, 0, 0,     // seed
                            3,   0,   0,   0, 0, 0, 0, 0});   // total
    for (const auto c : cells)
        for (int byte = 0; byte < 4; ++byte) golden.push_back(static_cast<std::byte>((c >> (8 * byte)) & 0xff));
    CHECK(bytes.size() == 36 + 6 * 4);
    CHECK(bytes == golden);

    // version 1 (double-hashed rows): its counters sit where no query of this
    // version looks, so it is refused, not misread
    auto v1 = golden;
    v1[5] = std::byte{1};
    try {
        (void)CountMin<>::deserialize(v1);
        FAIL("no FormatError");
    } catch (const tally::FormatError& e) {
        CHECK(std::string(e.what()) ==
              "tally: CountMin: format version 1 (double-hashed rows) is no longer read; rebuild the sketch from its "
              "stream");
    }
    auto v3 = golden;
    v3[5] = std::byte{3};
    CHECK_THROWS_AS(CountMin<>::deserialize(v3), tally::FormatError);

    const auto back = CountMin<>::deserialize(bytes);
    CHECK(back.serialize() == bytes);
    CHECK(back.estimate(1) == cm.estimate(1));
    CHECK(back.estimate(2) == cm.estimate(2));
    CHECK(back.width() == 3);
    CHECK(back.depth() == 2);

    SECTION("every prefix, an extra byte and random corruptions") {
        CountMin<std::uint64_t> c64(5, 3, {.seed = Seed{77}, .conservative = true});
        for (int i = 0; i < 50; ++i) c64.add(i, static_cast<std::uint64_t>(i));
        tally::test::check_truncations_throw<CountMin<>>(bytes);
        tally::test::check_truncations_throw<CountMin<std::uint64_t>>(c64.serialize());
        tally::test::check_corruptions_safe<CountMin<>>(bytes, 1);
        tally::test::check_corruptions_safe<CountMin<std::uint64_t>>(c64.serialize(), 2);
        const auto back64 = CountMin<std::uint64_t>::deserialize(c64.serialize());
        CHECK(back64.conservative());
        CHECK(back64.seed() == Seed{77});
        for (int i = 0; i < 50; ++i) CHECK(back64.estimate(i) == c64.estimate(i));
    }
    SECTION("wrong counter type, flags, shape and inconsistent counters") {
        CHECK_THROWS_AS(CountMin<std::uint64_t>::deserialize(bytes), tally::FormatError);
        auto bad = bytes;
        bad[9] = std::byte{2};  // unknown flag
        CHECK_THROWS_AS(CountMin<>::deserialize(bad), tally::FormatError);
        bad = bytes;
        bad[10] = std::byte{0};  // depth 0
        CHECK_THROWS_AS(CountMin<>::deserialize(bad), tally::FormatError);
        bad = bytes;
        bad[19] = std::byte{0x7f};  // width ~2^63: refused before any allocation
        CHECK_THROWS_AS(CountMin<>::deserialize(bad), tally::FormatError);
        bad = bytes;
        bad[28] = std::byte{2};  // total 2 < row sum 3
        try {
            (void)CountMin<>::deserialize(bad);
            FAIL("no FormatError");
        } catch (const tally::FormatError& e) {
            CHECK(std::string(e.what()) == "tally: CountMin: a row sums to more than total");
        }
        bad = bytes;
        bad[4] = std::byte{4};  // the top_k family
        CHECK_THROWS_AS(CountMin<>::deserialize(bad), tally::FormatError);
    }
}
