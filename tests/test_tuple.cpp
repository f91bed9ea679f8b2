// TupleSketch and ArrayOfDoublesSketch: the retained hashes are ThetaSketch's,
// values against exact maps, DataSketches' bytes and answers (fixtures in
// tests/fixtures/tuple/, written by DataSketches C++, see its README), set
// operations against exact oracles, coverage of the column-sum bound, merge
// laws.
#include <tally/sketch/distinct/tuple.hpp>
#include <tally/window/windowed.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "catch.hpp"
#include "merge_laws.hpp"
#include "test_support.hpp"

using tally::ArrayOfDoublesSketch;
using tally::FormatError;
using tally::ThetaSketch;

namespace {

std::string fixture_dir() {
    std::string f = __FILE__;
    return f.substr(0, f.find_last_of("/\\") + 1) + "fixtures/tuple/";
}

struct Expected {
    double estimate = 0, lb2 = 0, ub2 = 0;
    std::uint32_t retained = 0;
    std::uint64_t theta64 = 0, size = 0, fnv = 0;
    int num_values = 0;
    std::vector<double> sums;
    std::vector<std::pair<std::uint64_t, std::vector<double>>> keys;
};

std::map<std::string, Expected> manifest() {
    std::ifstream in(fixture_dir() + "manifest.txt");
    REQUIRE(in.good());
    std::map<std::string, Expected> m;
    std::string line;
    const auto num = [](std::istringstream& ls) {
        std::string t;
        ls >> t;
        return std::strtod(t.c_str(), nullptr);
    };
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream ls(line);
        std::string name;
        Expected e;
        ls >> name;
        e.estimate = num(ls);
        e.lb2 = num(ls);
        e.ub2 = num(ls);
        unsigned long long r = 0, t = 0, sz = 0, f = 0;
        ls >> r >> t >> sz >> f >> e.num_values;
        e.retained = static_cast<std::uint32_t>(r);
        e.theta64 = t;
        e.size = sz;
        e.fnv = f;
        for (int j = 0; j < e.num_values; ++j) e.sums.push_back(num(ls));
        std::size_t nk = 0;
        ls >> nk;
        for (std::size_t i = 0; i < nk; ++i) {
            unsigned long long h = 0;
            ls >> h;
            std::vector<double> v;
            for (int j = 0; j < e.num_values; ++j) v.push_back(num(ls));
            e.keys.emplace_back(h, v);
        }
        REQUIRE(ls);
        m[name] = e;
    }
    REQUIRE(m.size() >= 96);
    return m;
}

std::uint64_t fnv1a(const std::vector<std::byte>& b) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (const std::byte x : b) {
        h ^= std::to_integer<std::uint8_t>(x);
        h *= 0x100000001b3ull;
    }
    return h;
}

bool same_double(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

// As in test_theta: fused multiply-adds may move the bounds by a few ulps off x86-64.
bool same_bound(double a, double b) {
    const auto ia = static_cast<std::int64_t>(std::bit_cast<std::uint64_t>(a));
    const auto ib = static_cast<std::int64_t>(std::bit_cast<std::uint64_t>(b));
    return (a >= 0) == (b >= 0) && (ia > ib ? ia - ib : ib - ia) <= 4;
}

// The fixtures' values: key i adds (i % 100 + 0.25, i / 2, -(i % 7)).
double value(std::uint64_t i, int j) {
    switch (j) {
        case 0: return static_cast<double>(i % 100) + 0.25;
        case 1: return static_cast<double>(i) * 0.5;
        default: return -static_cast<double>(i % 7);
    }
}

ArrayOfDoublesSketch of_keys(int lg_k, int nv, std::uint64_t begin, std::uint64_t end) {
    ArrayOfDoublesSketch s(lg_k, nv);
    std::vector<double> v(static_cast<std::size_t>(nv));
    const auto add = [&](std::uint64_t i) {
        for (int j = 0; j < nv; ++j) v[static_cast<std::size_t>(j)] = value(i, j);
        s.add(i, std::span<const double>(v));
    };
    for (std::uint64_t i = begin; i < end; ++i) add(i);
    for (std::uint64_t i = begin; i < end; i += 10) add(i);
    return s;
}

void check_matches(const ArrayOfDoublesSketch& s, const Expected& e) {
    CHECK(same_double(s.estimate(), e.estimate));
    CHECK(same_bound(s.lower_bound(2), e.lb2));
    CHECK(same_bound(s.upper_bound(2), e.ub2));
    CHECK(s.num_retained() == e.retained);
    CHECK(s.theta64() == e.theta64);
    REQUIRE(s.num_values() == e.num_values);
    const auto sums = s.column_sum_estimates();
    for (int j = 0; j < e.num_values; ++j) {
        // DataSketches has no column sum: the fixture's is summed in hash
        // order, tally's in table order, so they agree to rounding.
        CHECK(sums[static_cast<std::size_t>(j)] == Approx(e.sums[static_cast<std::size_t>(j)]).epsilon(1e-12).margin(1e-9));
        CHECK(s.column_sum_estimate(j) == sums[static_cast<std::size_t>(j)]);
    }
    for (const auto& [h, v] : e.keys) {
        const auto got = s.find_hash(h);
        REQUIRE(got.size() == v.size());
        for (std::size_t j = 0; j < v.size(); ++j) CHECK(same_double(got[j], v[j]));
    }
    const auto image = s.to_datasketches();
    CHECK(image.size() == e.size);
    CHECK(fnv1a(image) == e.fnv);
}

// Every retained hash with bit-identical values.
void check_same_entries(const ArrayOfDoublesSketch& got, const ArrayOfDoublesSketch& want) {
    REQUIRE((got.hashes() == want.hashes()));  // unexpanded: the vectors are long
    std::size_t differ = 0;
    want.for_each([&](std::uint64_t h, std::span<const double> v) {
        const auto g = got.find_hash(h);
        if (g.size() != v.size() || !std::equal(g.begin(), g.end(), v.begin(), v.end(), same_double)) ++differ;
    });
    CHECK(differ == 0);
}

std::vector<std::byte> read_image(const std::string& name) {
    return tally::test::read_file_bytes(fixture_dir() + name + ".sk");
}
bool has_image(const std::string& name) { return std::ifstream(fixture_dir() + name + ".sk").good(); }

std::uint64_t hash63(std::uint64_t item) { return tally::detail::ds_hash_i64(static_cast<std::int64_t>(item)).h1 >> 1; }

}  // namespace

TEST_CASE("ArrayOfDoublesSketch: parameter ranges", "[tuple]") {
    CHECK_THROWS_AS(ArrayOfDoublesSketch(4, 1), std::invalid_argument);
    CHECK_THROWS_AS(ArrayOfDoublesSketch(27, 1), std::invalid_argument);
    CHECK_THROWS_AS(ArrayOfDoublesSketch(12, 0), std::invalid_argument);
    CHECK_THROWS_AS(ArrayOfDoublesSketch(12, 256), std::invalid_argument);
    CHECK_THROWS_WITH(ArrayOfDoublesSketch(12, 300), Catch::Contains("num_values") && Catch::Contains("300"));
    CHECK_NOTHROW(ArrayOfDoublesSketch(26, 255));
    const ArrayOfDoublesSketch s(5, 2);
    CHECK_THROWS_AS(s.lower_bound(0), std::invalid_argument);
    CHECK_THROWS_AS(s.upper_bound(4), std::invalid_argument);
    CHECK_THROWS_AS(s.column_sum_estimate(2), std::invalid_argument);
    CHECK_THROWS_AS(s.column_mean(-1), std::invalid_argument);
    CHECK_THROWS_AS(s.column_sum_upper_bound(0, 4), std::invalid_argument);
    CHECK_THROWS_AS(tally::TupleSketch<double>(30), std::invalid_argument);
}

TEST_CASE("ArrayOfDoublesSketch: exact below k, the hashes ThetaSketch keeps above", "[tuple]") {
    // exact: every key and its summed values
    ArrayOfDoublesSketch s(10, 2);
    std::unordered_map<std::uint64_t, std::pair<double, double>> truth;
    tally::test::Rng rng(7);
    for (int i = 0; i < 3000; ++i) {
        const std::uint64_t key = rng.below(900);
        const double v[2] = {static_cast<double>(rng.below(1000)), 1.0};
        s.add(key, std::span<const double>(v, 2));
        truth[key].first += v[0];
        truth[key].second += v[1];
    }
    CHECK_FALSE(s.is_estimation_mode());
    CHECK(s.num_retained() == truth.size());
    CHECK(s.estimate() == static_cast<double>(truth.size()));
    CHECK(s.total() == 3000);
    double sum0 = 0;
    for (const auto& [key, v] : truth) {
        const auto got = s.find_hash(hash63(key));
        REQUIRE(got.size() == 2);
        CHECK(got[0] == v.first);
        CHECK(got[1] == v.second);
        sum0 += v.first;
    }
    CHECK(s.column_sum_estimate(0) == sum0);
    CHECK(s.column_sum_lower_bound(0, 2) == sum0);  // theta = 1: no sampling error
    CHECK(s.column_sum_estimate(1) == 3000);
    CHECK(s.column_mean(1) == Approx(3000.0 / static_cast<double>(truth.size())));
    CHECK(s.find_hash(hash63(5000)).empty());
    // estimation mode: the same hashes and theta as ThetaSketch of the same items
    for (const int lg : {5, 9}) {
        ArrayOfDoublesSketch a(lg, 1);
        ThetaSketch t(lg);
        for (std::uint64_t i = 0; i < 200000; ++i) {
            a.add(i, {1.0});
            t.add(i);
        }
        CHECK(a.is_estimation_mode());
        CHECK(a.hashes() == t.hashes());
        CHECK(a.theta64() == t.theta64());
        CHECK(a.estimate() == t.estimate());
        CHECK(a.lower_bound(1) == t.lower_bound(1));
        CHECK(a.upper_bound(3) == t.upper_bound(3));
        a.for_each([](std::uint64_t, std::span<const double> v) { CHECK(v[0] == 1.0); });
    }
    // extra values are ignored, missing ones add 0; empty strings are not items
    ArrayOfDoublesSketch w(5, 2);
    w.add(std::uint64_t{1}, {1.0, 2.0, 3.0});
    w.add(std::uint64_t{1}, {4.0});
    w.add(std::string(), {9.0, 9.0});
    CHECK(w.num_retained() == 1);
    CHECK(w.find_hash(hash63(1))[0] == 5.0);
    CHECK(w.find_hash(hash63(1))[1] == 2.0);
}

TEST_CASE("ArrayOfDoublesSketch: DataSketches' images and answers, both ways", "[tuple][datasketches]") {
    const auto m = manifest();
    for (const int lg : {5, 12, 16}) {
        for (const int nv : {1, 3}) {
            for (const std::uint64_t n : {0ull, 1ull, 1000ull, 1000000ull}) {
                const std::string name =
                    "aod_lgk" + std::to_string(lg) + "_nv" + std::to_string(nv) + "_n" + std::to_string(n);
                INFO(name);
                const Expected& e = m.at(name);
                const ArrayOfDoublesSketch mine = of_keys(lg, nv, 0, n);
                check_matches(mine, e);
                CHECK(mine.empty() == (n == 0));
                // Where DataSketches' image is not kept (10^6 keys at lg_k 12 and 16), it is
                // pinned by size and digest above, which tally's bytes match: decode those.
                const auto image = has_image(name) ? read_image(name) : mine.to_datasketches();
                CHECK((mine.to_datasketches() == image));
                const auto theirs = ArrayOfDoublesSketch::from_datasketches(image, lg);
                check_matches(theirs, e);
                check_same_entries(theirs, mine);
                CHECK((theirs.to_datasketches() == image));
                CHECK((ArrayOfDoublesSketch::deserialize(theirs.serialize()).to_datasketches() == image));
            }
        }
    }
}

TEST_CASE("ArrayOfDoublesSketch: set operations equal DataSketches' on the same images", "[tuple][datasketches]") {
    const auto m = manifest();
    int cells = 0;
    for (const int nv : {3, 1}) {
        for (const int lg : {5, 12, 16}) {
            for (const bool big : {false, true}) {
                const std::string base = std::string("mixed_") + (big ? "big" : "small") + "_lgk" + std::to_string(lg) +
                                         (nv == 1 ? "_nv1" : "");
                INFO(base);
                ++cells;
                const std::uint64_t scale = big ? 1000 : 1;
                // A as DataSketches wrote it where the image is kept, else tally's (pinned to the same bytes)
                const ArrayOfDoublesSketch mine_a = of_keys(lg, nv, 0, 600 * scale);
                check_matches(mine_a, m.at(base + "_a"));
                const ArrayOfDoublesSketch a =
                    has_image(base + "_a") ? ArrayOfDoublesSketch::from_datasketches(read_image(base + "_a"), lg)
                                           : mine_a;
                if (has_image(base + "_a")) check_same_entries(a, mine_a);
                const ArrayOfDoublesSketch b = of_keys(lg, nv, 400 * scale, 1000 * scale);
                check_matches(b, m.at(base + "_b"));
                check_matches(tally::tuple_union(a, b), m.at(base + "_union"));
                check_matches(tally::tuple_intersection(a, b, tally::TupleSum{}), m.at(base + "_intersection"));
                check_matches(tally::tuple_a_not_b(a, b), m.at(base + "_a_not_b"));
                check_matches(tally::tuple_a_not_b(b, a), m.at(base + "_b_not_a"));
                if (has_image(base + "_union")) {
                    CHECK((tally::tuple_union(a, b).to_datasketches() == read_image(base + "_union")));
                    CHECK((tally::tuple_intersection(a, b, tally::TupleSum{}).to_datasketches() ==
                           read_image(base + "_intersection")));
                    CHECK((tally::tuple_a_not_b(a, b).to_datasketches() == read_image(base + "_a_not_b")));
                }
                // merge in place is the union too
                ArrayOfDoublesSketch u = a;
                u.merge(b);
                check_matches(u, m.at(base + "_union"));
            }
        }
    }
    CHECK(cells == 12);
}

namespace {

// Per-key oracle: the sum of a key's values over the inputs that retain it.
std::map<std::uint64_t, double> rows_of(const ArrayOfDoublesSketch& s) {
    std::map<std::uint64_t, double> r;
    s.for_each([&](std::uint64_t h, std::span<const double> v) { r[h] = v[0]; });
    return r;
}

}  // namespace

TEST_CASE("ArrayOfDoublesSketch: set operations follow the framework's rules in estimation mode", "[tuple]") {
    tally::test::Rng rng(4711);
    for (int round = 0; round < 5; ++round) {
        const int lg = 5 + round;
        std::vector<ArrayOfDoublesSketch> in;
        std::vector<ThetaSketch> th;
        for (int j = 0; j < 4; ++j) {
            ArrayOfDoublesSketch s(lg, 1);
            ThetaSketch t(lg);
            const std::uint64_t n = 30 + rng.below(20000);
            for (std::uint64_t i = 0; i < n; ++i) {
                const std::uint64_t key = rng.below(25000);
                s.add(key, {static_cast<double>(key % 13)});
                t.add(key);
            }
            in.push_back(std::move(s));
            th.push_back(std::move(t));
        }
        // union: ThetaSketch's hashes and theta, each value the sum over the inputs retaining it
        const auto u = tally::tuple_union(std::span<const ArrayOfDoublesSketch>(in));
        const auto tu = tally::theta_union(std::span<const ThetaSketch>(th));
        CHECK(u.hashes() == tu.hashes());
        CHECK(u.theta64() == tu.theta64());
        for (const auto& [h, v] : rows_of(u)) {
            double want = 0;
            for (const auto& s : in)
                if (const auto r = s.find_hash(h); !r.empty()) want += r[0];
            CHECK(v == want);
        }
        // intersection (sum) and A-not-B: ThetaSketch's hashes, the combined / A's values
        const auto x = tally::tuple_intersection(std::span<const ArrayOfDoublesSketch>(in), tally::TupleSum{});
        const auto tx = tally::theta_intersection(std::span<const ThetaSketch>(th));
        CHECK(x.hashes() == tx.hashes());
        CHECK(x.theta64() == tx.theta64());
        for (const auto& [h, v] : rows_of(x)) {
            double want = 0;
            for (const auto& s : in) want += s.find_hash(h)[0];
            CHECK(v == want);
        }
        const auto xm = tally::tuple_intersection(in[0], in[1], tally::TupleMax{});
        for (const auto& [h, v] : rows_of(xm)) CHECK(v == std::max(in[0].find_hash(h)[0], in[1].find_hash(h)[0]));
        const auto d = tally::tuple_a_not_b(in[0], in[1]);
        const auto td = tally::theta_a_not_b(th[0], th[1]);
        CHECK(d.hashes() == td.hashes());
        CHECK(d.theta64() == td.theta64());
        for (const auto& [h, v] : rows_of(d)) CHECK(v == in[0].find_hash(h)[0]);
        // with a plain distinct set: the same keys, A's values
        const auto xt = tally::tuple_intersection(in[0], th[2]);
        CHECK(xt.hashes() == tally::theta_intersection(th[0], th[2]).hashes());
        for (const auto& [h, v] : rows_of(xt)) CHECK(v == in[0].find_hash(h)[0]);
        const auto dt = tally::tuple_a_not_b(in[0], th[2]);
        CHECK(dt.hashes() == tally::theta_a_not_b(th[0], th[2]).hashes());
        CHECK(dt.theta64() == tally::theta_a_not_b(th[0], th[2]).theta64());
        // merge loop = span union
        ArrayOfDoublesSketch acc(lg, 1);
        for (const auto& s : in) acc.merge(s);
        CHECK(acc.serialize() == u.serialize());
        // results keep taking items
        ArrayOfDoublesSketch more = x;
        for (std::uint64_t i = 0; i < 30000; ++i) more.add(i + 1000000, {1.0});
        CHECK(more.estimate() > x.estimate());
    }
    // empty inputs
    const ArrayOfDoublesSketch e(8, 1), a = of_keys(8, 1, 0, 100);
    CHECK(tally::tuple_union(e, e).empty());
    CHECK(tally::tuple_intersection(a, e, tally::TupleSum{}).empty());
    CHECK(tally::tuple_a_not_b(a, e).serialize() == a.serialize());
    CHECK(tally::tuple_a_not_b(e, a).empty());
    CHECK(tally::tuple_intersection(a, ThetaSketch(8)).empty());
    CHECK_THROWS_AS(tally::tuple_intersection(std::span<const ArrayOfDoublesSketch>(), tally::TupleSum{}),
                    std::invalid_argument);
    CHECK_THROWS_AS(tally::tuple_union(a, ArrayOfDoublesSketch(8, 2)), std::invalid_argument);
    CHECK(tally::tuple_union(std::span<const ArrayOfDoublesSketch>()).empty());
}

namespace {

struct SumCoverage {
    int in[3] = {};
    int naive[3] = {};  // negative control: the standard error without the 1 / theta
};

// |A| = 6000, |B| = 9000, |A n B| = 3000, lg_k 8; values exponential-ish in
// [0, 100). Truths: the column sum of A, of A u B, of A n B (sum policy).
SumCoverage sum_coverage(int trials) {
    SumCoverage c;
    for (int t = 0; t < trials; ++t) {
        tally::test::Rng rng(50000 + static_cast<std::uint64_t>(t));
        ArrayOfDoublesSketch a(8, 1), b(8, 1);
        double ta = 0, tu = 0, tx = 0;
        const auto val = [&] { return -std::log1p(-rng.uniform()) * 20.0; };
        for (int i = 0; i < 6000; ++i) {
            const std::uint64_t k = rng.next();
            const double va = val();
            a.add(k, {va});
            ta += va;
            tu += va;
            if (i < 3000) {
                const double vb = val();
                b.add(k, {vb});
                tu += vb;
                tx += va + vb;
            }
        }
        for (int i = 3000; i < 9000; ++i) {
            const double vb = val();
            b.add(rng.next(), {vb});
            tu += vb;
        }
        const ArrayOfDoublesSketch r[3] = {a, tally::tuple_union(a, b), tally::tuple_intersection(a, b, tally::TupleSum{})};
        const double truth[3] = {ta, tu, tx};
        for (int o = 0; o < 3; ++o) {
            const double lo = r[o].column_sum_lower_bound(0, 2), hi = r[o].column_sum_upper_bound(0, 2);
            c.in[o] += lo <= truth[o] && truth[o] <= hi;
            const double naive_se = r[o].column_sum_standard_error(0) * r[o].theta();
            c.naive[o] += std::abs(r[o].column_sum_estimate(0) - truth[o]) <= 2 * naive_se;
        }
    }
    return c;
}

}  // namespace

TEST_CASE("ArrayOfDoublesSketch: the column sum lies within its 2-sigma bound", "[tuple][big]") {
    const int trials = static_cast<int>(tally::test::big(1000, 200));
    const SumCoverage c = sum_coverage(trials);
    const char* names[3] = {"sketch", "union", "intersection"};
    for (int o = 0; o < 3; ++o) {
        INFO(names[o] << ": " << c.in[o] << " of " << trials << " (naive " << c.naive[o] << ")");
        CHECK(c.in[o] >= 0.93 * trials);
        CHECK(c.naive[o] < 0.5 * trials);
    }
}

TEST_CASE("ArrayOfDoublesSketch: merge laws, frame round trip, incompatible merge", "[tuple][merge]") {
    // integer values: sums are exact whatever the order, so merges compare byte for byte
    const ArrayOfDoublesSketch empty(9, 2);
    const ArrayOfDoublesSketch a = of_keys(9, 2, 0, 5000), b = of_keys(9, 2, 3000, 9000), c = of_keys(9, 2, 100, 300);
    tally::test::check_merge_laws(empty, a, b, c);
    tally::test::check_merge_laws(empty, of_keys(9, 2, 0, 100), c, of_keys(9, 2, 50, 60));
    tally::test::check_incompatible_merge(a, of_keys(10, 2, 0, 10));
    tally::test::check_incompatible_merge(a, of_keys(9, 3, 0, 10));
    tally::test::check_truncations_throw<ArrayOfDoublesSketch>(c.serialize());
    tally::test::check_truncations_throw<ArrayOfDoublesSketch>(empty.serialize());
    tally::test::check_corruptions_safe<ArrayOfDoublesSketch>(c.serialize(), 21);
    tally::test::check_corruptions_safe<ArrayOfDoublesSketch>(a.serialize(), 22, 300);
    ArrayOfDoublesSketch self = a;
    self.merge(self);
    CHECK(self.hashes() == tally::tuple_union(a, a).hashes());
    CHECK(self.find_hash(self.hashes()[0])[0] == 2 * a.find_hash(self.hashes()[0])[0]);
    ArrayOfDoublesSketch cl = a;
    cl.clear();
    CHECK(cl.serialize() == ArrayOfDoublesSketch(9, 2).serialize());
}

TEST_CASE("ArrayOfDoublesSketch: golden bytes of the frame and of DataSketches' layout", "[tuple][serialize]") {
    ArrayOfDoublesSketch s(5, 1);
    s.add(std::uint64_t{0}, {2.5});
    const std::uint64_t h = hash63(0);
    std::vector<std::byte> want = tally::test::to_bytes({'T', 'A', 'L', 'Y', 13, 1, 0, 0, 5, 1, 1, 1});
    for (int i = 0; i < 8; ++i) want.push_back(static_cast<std::byte>(tally::ThetaSketch::max_theta >> (8 * i)));
    want.push_back(std::byte{1});  // total
    for (const int x : {1, 0, 0, 0}) want.push_back(static_cast<std::byte>(x));
    for (std::uint64_t d = h;; d >>= 7) {
        want.push_back(static_cast<std::byte>((d & 0x7f) | (d >= 0x80 ? 0x80 : 0)));
        if (d < 0x80) break;
    }
    const std::uint64_t v = std::bit_cast<std::uint64_t>(2.5);
    for (int i = 0; i < 8; ++i) want.push_back(static_cast<std::byte>(v >> (8 * i)));
    CHECK(s.serialize() == want);
    // DataSketches: preamble 1, version 1, family 9, type 3, flags has-entries | ordered,
    // num_values, seed hash 0x93cc, theta, count, 0, hashes, values
    std::vector<std::byte> ds = tally::test::to_bytes({1, 1, 9, 3, 8 | 16, 1, 0xcc, 0x93});
    for (int i = 0; i < 8; ++i) ds.push_back(static_cast<std::byte>(tally::ThetaSketch::max_theta >> (8 * i)));
    for (const int x : {1, 0, 0, 0, 0, 0, 0, 0}) ds.push_back(static_cast<std::byte>(x));
    for (int i = 0; i < 8; ++i) ds.push_back(static_cast<std::byte>(h >> (8 * i)));
    for (int i = 0; i < 8; ++i) ds.push_back(static_cast<std::byte>(v >> (8 * i)));
    CHECK(s.to_datasketches() == ds);
    CHECK(ArrayOfDoublesSketch(5, 2).to_datasketches() ==
          tally::test::to_bytes({1, 1, 9, 3, 4 | 16, 2, 0xcc, 0x93, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}));
}

TEST_CASE("ArrayOfDoublesSketch: bad DataSketches bytes raise FormatError", "[tuple][datasketches]") {
    const auto good = read_image("aod_lgk5_nv3_n1000000");
    REQUIRE_NOTHROW(ArrayOfDoublesSketch::from_datasketches(good, 5));
    for (std::size_t n = 0; n < good.size(); ++n)
        CHECK_THROWS_AS(ArrayOfDoublesSketch::from_datasketches(std::span<const std::byte>(good.data(), n), 5), FormatError);
    auto longer = good;
    longer.push_back(std::byte{0});
    CHECK_THROWS_AS(ArrayOfDoublesSketch::from_datasketches(longer, 5), FormatError);
    const auto bad = [&](std::size_t at, int v) {
        auto b = good;
        b[at] = static_cast<std::byte>(v);
        return b;
    };
    CHECK_THROWS_WITH(ArrayOfDoublesSketch::from_datasketches(bad(0, 2), 5), Catch::Contains("preamble"));
    CHECK_THROWS_WITH(ArrayOfDoublesSketch::from_datasketches(bad(1, 2), 5), Catch::Contains("serial version"));
    CHECK_THROWS_WITH(ArrayOfDoublesSketch::from_datasketches(bad(2, 3), 5), Catch::Contains("family"));
    CHECK_THROWS_WITH(ArrayOfDoublesSketch::from_datasketches(bad(3, 2), 5), Catch::Contains("sketch type"));
    CHECK_THROWS_WITH(ArrayOfDoublesSketch::from_datasketches(bad(4, 8 | 16 | 1), 5), Catch::Contains("big-endian"));
    CHECK_THROWS_WITH(ArrayOfDoublesSketch::from_datasketches(bad(4, 8 | 16 | 4), 5), Catch::Contains("empty"));
    CHECK_THROWS_WITH(ArrayOfDoublesSketch::from_datasketches(bad(4, 8 | 16 | 64), 5), Catch::Contains("flag"));
    CHECK_THROWS_WITH(ArrayOfDoublesSketch::from_datasketches(bad(5, 0), 5), Catch::Contains("num_values"));
    CHECK_THROWS_AS(ArrayOfDoublesSketch::from_datasketches(bad(5, 1), 5), FormatError);  // lengths no longer match
    CHECK_THROWS_WITH(ArrayOfDoublesSketch::from_datasketches(bad(6, 0), 5), Catch::Contains("seed hash"));
    CHECK_THROWS_WITH(ArrayOfDoublesSketch::from_datasketches(bad(15, 0x80), 5), Catch::Contains("theta"));
    CHECK_THROWS_AS(ArrayOfDoublesSketch::from_datasketches(bad(16, 0xff), 5), FormatError);  // count
    // hashes: a duplicate, one at or above theta, an unordered image flagged ordered
    auto dup = good;
    std::copy(good.begin() + 24, good.begin() + 32, dup.begin() + 32);
    CHECK_THROWS_AS(ArrayOfDoublesSketch::from_datasketches(dup, 5), FormatError);
    auto high = good;
    std::copy(good.begin() + 8, good.begin() + 16, high.begin() + 24);
    CHECK_THROWS_AS(ArrayOfDoublesSketch::from_datasketches(high, 5), FormatError);
    auto swapped = good;  // the first two entries' hashes and rows swapped
    std::swap_ranges(swapped.begin() + 24, swapped.begin() + 32, swapped.begin() + 32);
    const std::ptrdiff_t rows = 24 + 8 * 36;  // 36 entries of 3 values
    std::swap_ranges(swapped.begin() + rows, swapped.begin() + rows + 24, swapped.begin() + rows + 24);
    CHECK_THROWS_WITH(ArrayOfDoublesSketch::from_datasketches(swapped, 5), Catch::Contains("ascending"));
    // ... which reads when it does not claim to be ordered (Java writes table order)
    swapped[4] = std::byte{8};
    const auto unordered = ArrayOfDoublesSketch::from_datasketches(swapped, 5);
    CHECK(unordered.to_datasketches() == good);
    // every single-byte corruption is FormatError or a valid sketch
    tally::test::Rng rng(99);
    for (int t = 0; t < 3000; ++t) {
        auto b = good;
        b[rng.below(b.size())] ^= static_cast<std::byte>(1 + rng.below(255));
        try {
            const auto s = ArrayOfDoublesSketch::from_datasketches(b, 5);
            (void)s.to_datasketches();
        } catch (const FormatError&) {
        }
    }
    // lg_k rises to hold a large image
    const auto big = of_keys(12, 1, 0, 100000);
    CHECK(ArrayOfDoublesSketch::from_datasketches(big.to_datasketches(), 5).lg_k() == 12);
    CHECK_THROWS_AS(ArrayOfDoublesSketch::from_datasketches(good, 4), std::invalid_argument);
}

namespace {

struct Visits {  // no padding: the frame writes the object bytes
    std::uint64_t count = 0;
    double spend = 0;
    double best = 0;
};

struct VisitsPolicy {
    void update(Visits& v, double spend) const noexcept {
        ++v.count;
        v.spend += spend;
        v.best = std::max(v.best, spend);
    }
    void merge(Visits& v, const Visits& o) const noexcept {
        v.count += o.count;
        v.spend += o.spend;
        v.best = std::max(v.best, o.best);
    }
};

}  // namespace

TEST_CASE("TupleSketch: a user summary and policy", "[tuple]") {
    using S = tally::TupleSketch<Visits, VisitsPolicy>;
    S a(10), b(10);
    std::unordered_map<std::uint64_t, Visits> truth;
    tally::test::Rng rng(17);
    for (int i = 0; i < 4000; ++i) {
        const std::uint64_t key = rng.below(700);
        const double spend = static_cast<double>(rng.below(50));
        (i % 2 ? a : b).add(key, spend);
        VisitsPolicy{}.update(truth[key], spend);
    }
    const S u = tally::tuple_union(a, b);
    CHECK(u.num_retained() == truth.size());
    std::size_t seen = 0;
    u.for_each([&](std::uint64_t h, const Visits& v) {
        ++seen;
        (void)h;
        CHECK(v.count >= 1);
    });
    CHECK(seen == truth.size());
    for (const auto& [key, v] : truth) {
        const Visits* got = u.find_hash(hash63(key));
        REQUIRE(got != nullptr);
        CHECK(got->count == v.count);
        CHECK(got->spend == v.spend);
        CHECK(got->best == v.best);
    }
    CHECK(u.sum_estimate([](const Visits& v) { return v.count; }) == 4000);
    CHECK(u.total() == 4000);
    // the intersection combines by the policy given
    const S x = tally::tuple_intersection(a, b, [](Visits& v, const Visits& o) { v.count = std::min(v.count, o.count); });
    x.for_each([&](std::uint64_t h, const Visits& v) {
        CHECK(v.count == std::min(a.find_hash(h)->count, b.find_hash(h)->count));
    });
    // the frame round trip and the merge laws
    tally::test::check_merge_laws(S(10), a, b, tally::tuple_a_not_b(a, b));
    tally::test::check_truncations_throw<S>(a.serialize());
    CHECK_THROWS_AS(tally::TupleSketch<double>::deserialize(a.serialize()), FormatError);  // another summary width
    CHECK_THROWS_AS(S::deserialize(ArrayOfDoublesSketch(10, 3).serialize()), FormatError);
    // estimation mode: ThetaSketch's hashes; a field's sum within its bound
    tally::TupleSketch<double> big(8);
    ThetaSketch t(8);
    double total = 0;
    for (std::uint64_t i = 0; i < 100000; ++i) {
        big.add(i, static_cast<double>(i % 10));
        t.add(i);
        total += static_cast<double>(i % 10);
    }
    CHECK(big.hashes() == t.hashes());
    const auto id = [](double s) { return s; };
    CHECK(big.sum_lower_bound(id, 3) <= total);
    CHECK(total <= big.sum_upper_bound(id, 3));
    CHECK(big.sum_standard_error(id) > 0);
}

TEST_CASE("ArrayOfDoublesSketch: Windowed<ArrayOfDoublesSketch> sums the window's values", "[tuple][windowed]") {
    tally::Windowed<ArrayOfDoublesSketch, 4> w(1000, ArrayOfDoublesSketch(10, 2));
    const double v12[2] = {1.0, 2.0}, v10[2] = {1.0, 0.0}, v11[2] = {1.0, 1.0};
    using Row = std::span<const double>;
    for (std::uint64_t i = 0; i < 300; ++i) w.add(100, i, Row(v12));     // bucket 0
    for (std::uint64_t i = 200; i < 500; ++i) w.add(1100, i, Row(v10));  // bucket 1
    CHECK(w.view(1100).estimate() == 500);
    CHECK(w.view(1100).column_sum_estimate(0) == 600);
    CHECK(w.view(1100).column_sum_estimate(1) == 600);
    for (std::uint64_t i = 1000; i < 1100; ++i) w.add(4100, i, Row(v11));  // bucket 4: bucket 0 leaves
    CHECK(w.view(4100).estimate() == 400);
    CHECK(w.view(4100).column_sum_estimate(0) == 400);
    CHECK(w.view(4100).column_sum_estimate(1) == 100);
    const auto bytes = w.serialize();
    CHECK(decltype(w)::deserialize(bytes).view(4100).column_sum_estimate(0) == 400);
}

TEST_CASE("TupleSketch and ThetaSketch: unions and rebuilds are exact for any spread of hashes", "[tuple][theta]") {
    // The trims select the (k+1)-th smallest from one side of a cut placed
    // where uniform hashes would put it; hashes crowded at either end of
    // [1, theta) must still give the exact k smallest.
    constexpr std::uint64_t top = ThetaSketch::max_theta;
    const auto crowded = [&](int lg, int kind, std::uint64_t n) {
        std::vector<std::uint64_t> h;
        for (std::uint64_t i = 0; i < n; ++i) {
            switch (kind) {
                case 0: h.push_back(1 + 3 * i); break;                        // all near 0
                case 1: h.push_back(top - 1 - 5 * i); break;                  // all near the top
                default: h.push_back(i % 2 ? 7 * i + 2 : top - 11 * i - 3);  // both ends
            }
        }
        (void)lg;
        return h;
    };
    for (const int lg : {5, 9}) {
        const std::size_t k = std::size_t{1} << lg;
        for (int ka = 0; ka < 3; ++ka) {
            for (int kb = 0; kb < 3; ++kb) {
                INFO("lg_k " << lg << " kinds " << ka << " " << kb);
                const auto ha = crowded(lg, ka, 3 * k), hb = crowded(lg, kb, 5 * k + 7);
                ArrayOfDoublesSketch a(lg, 1), b(lg, 1);
                ThetaSketch ta(lg), tb(lg);
                for (const auto h : ha) {
                    a.add_hash(h << 1, std::span<const double>());
                    ta.add_hash(h << 1);
                }
                for (const auto h : hb) {
                    b.add_hash(h << 1, std::span<const double>());
                    tb.add_hash(h << 1);
                }
                // each alone: an update sketch keeps every hash below its theta, theta its own
                CHECK(a.hashes() == ta.hashes());
                CHECK(b.hashes() == tb.hashes());
                // oracle union: distinct hashes below the least theta, the k smallest
                std::vector<std::uint64_t> all;
                const std::uint64_t theta = std::min(ta.theta64(), tb.theta64());
                for (const auto* s : {&ta, &tb})
                    for (const auto h : s->hashes())
                        if (h < theta) all.push_back(h);
                std::sort(all.begin(), all.end());
                all.erase(std::unique(all.begin(), all.end()), all.end());
                std::uint64_t want_theta = theta;
                if (all.size() > k) {
                    want_theta = all[k];
                    all.resize(k);
                }
                const auto u = tally::tuple_union(a, b);
                CHECK(u.hashes() == all);
                CHECK(u.theta64() == want_theta);
                ArrayOfDoublesSketch m = a;
                m.merge(b);
                CHECK(m.hashes() == all);
                ThetaSketch tm = ta;
                tm.merge(tb);
                CHECK(tm.hashes() == all);
                CHECK(tm.theta64() == want_theta);
                ThetaSketch tm2 = tb;
                tm2.merge(ta);
                CHECK(tm2.hashes() == all);
            }
        }
    }
}
