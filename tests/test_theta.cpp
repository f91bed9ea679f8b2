// ThetaSketch: DataSketches' hash, update rule, bounds and bytes; set
// operations against exact sets; coverage of the bounds; merge laws.
//
// The images in tests/fixtures/datasketches/theta/ and the numbers in its
// manifest.txt (estimate, lower_bound(2), upper_bound(2) as hex floats,
// retained, theta64) were written by Apache DataSketches C++ (theta,
// update_theta_sketch of the u64 items 0..n-1, compact().serialize() and
// serialize_compressed(); union/intersection/a_not_b of the "mixed" images).
#include <tally/sketch/distinct/theta.hpp>
#include <tally/window/windowed.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "catch.hpp"
#include "merge_laws.hpp"
#include "test_support.hpp"

using tally::FormatError;
using tally::ThetaSketch;

namespace {

std::string fixture_dir() {
    std::string f = __FILE__;
    return f.substr(0, f.find_last_of("/\\") + 1) + "fixtures/datasketches/theta/";
}

std::vector<std::byte> read_fixture(const std::string& name) { return tally::test::read_file_bytes(fixture_dir() + name); }

struct Expected {
    double estimate, lb2, ub2;
    std::uint32_t retained;
    std::uint64_t theta64;
};

std::map<std::string, Expected> manifest() {
    std::ifstream in(fixture_dir() + "manifest.txt");
    REQUIRE(in.good());
    std::map<std::string, Expected> m;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream ls(line);
        std::string name, e, l, u;
        unsigned long long r = 0, t = 0;
        ls >> name >> e >> l >> u >> r >> t;
        m[name] = {std::strtod(e.c_str(), nullptr), std::strtod(l.c_str(), nullptr), std::strtod(u.c_str(), nullptr),
                   static_cast<std::uint32_t>(r), t};
    }
    REQUIRE(m.size() >= 20);
    return m;
}

bool same_double(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

// The bounds are a chain of multiplies and adds that compilers may fuse
// (aarch64 GCC, Apple clang: -ffp-contract), so across platforms they may
// differ from DataSketches' x86-64 output in the last bits; the estimate is a
// single division and stays bit-identical.
bool same_bound(double a, double b) {
    const auto ia = static_cast<std::int64_t>(std::bit_cast<std::uint64_t>(a));
    const auto ib = static_cast<std::int64_t>(std::bit_cast<std::uint64_t>(b));
    return (a >= 0) == (b >= 0) && (ia > ib ? ia - ib : ib - ia) <= 4;
}

void check_matches(const ThetaSketch& s, const Expected& e) {
    CHECK(same_double(s.estimate(), e.estimate));
    CHECK(same_bound(s.lower_bound(2), e.lb2));
    CHECK(same_bound(s.upper_bound(2), e.ub2));
    CHECK(s.num_retained() == e.retained);
    CHECK(s.theta64() == e.theta64);
}

ThetaSketch of_range(int lg_k, std::uint64_t begin, std::uint64_t end) {
    ThetaSketch s(lg_k);
    for (std::uint64_t i = begin; i < end; ++i) s.add(i);
    return s;
}

ThetaSketch of_keys(int lg_k, const std::vector<std::uint64_t>& keys) {
    ThetaSketch s(lg_k);
    for (const auto k : keys) s.add(k);
    return s;
}

std::uint64_t hash63(std::uint64_t item) { return tally::detail::ds_hash_i64(static_cast<std::int64_t>(item)).h1 >> 1; }

std::uint64_t le64(const std::vector<std::byte>& b, std::size_t at) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint64_t>(b[at + static_cast<std::size_t>(i)]);
    return v;
}

// The framework's union of sorted hash lists below the least theta, trimmed to k.
std::pair<std::vector<std::uint64_t>, std::uint64_t> oracle_union(const std::vector<const ThetaSketch*>& in,
                                                                  std::size_t k) {
    std::uint64_t theta = ThetaSketch::max_theta;
    for (const auto* s : in)
        if (!s->empty()) theta = std::min(theta, s->theta64());
    std::set<std::uint64_t> all;
    for (const auto* s : in)
        for (const auto h : s->hashes())
            if (h < theta) all.insert(h);
    std::vector<std::uint64_t> v(all.begin(), all.end());
    if (v.size() > k) {
        theta = v[k];
        v.resize(k);
    }
    return {v, theta};
}

}  // namespace

TEST_CASE("ThetaSketch: lg_k range and num_std_devs range", "[theta]") {
    CHECK_THROWS_AS(ThetaSketch(4), std::invalid_argument);
    CHECK_THROWS_AS(ThetaSketch(27), std::invalid_argument);
    CHECK_THROWS_WITH(ThetaSketch(4), Catch::Contains("lg_k") && Catch::Contains("4") && Catch::Contains("[5, 26]"));
    CHECK_NOTHROW(ThetaSketch(5));
    CHECK_NOTHROW(ThetaSketch(26));
    const ThetaSketch s(12);
    CHECK_THROWS_WITH(s.lower_bound(0), Catch::Contains("num_std_devs") && Catch::Contains("[1, 3]"));
    CHECK_THROWS_AS(s.upper_bound(4), std::invalid_argument);
}

TEST_CASE("ThetaSketch: exact below k, duplicates ignored, empty semantics", "[theta]") {
    ThetaSketch s(10);
    CHECK(s.empty());
    CHECK(s.estimate() == 0);
    CHECK(s.theta() == 1.0);
    for (int rep = 0; rep < 3; ++rep)
        for (std::uint64_t i = 0; i < 1500; ++i) s.add(i);
    CHECK_FALSE(s.empty());
    CHECK(s.total() == 4500);
    CHECK(s.estimate() == 1500);
    CHECK(s.lower_bound(2) == 1500);
    CHECK(s.upper_bound(3) == 1500);
    CHECK_FALSE(s.is_estimation_mode());
    for (std::uint64_t i = 0; i < 1500; ++i) CHECK(s.contains_hash(hash63(i)));
    CHECK_FALSE(s.contains_hash(hash63(1500)));
    s.add(std::string());   // DataSketches ignores empty strings
    s.add(static_cast<const char*>(nullptr));
    CHECK(s.total() == 4500);
    s.clear();
    CHECK(s.empty());
    CHECK(s.num_retained() == 0);
    CHECK(s.lg_k() == 10);
}

TEST_CASE("ThetaSketch: item conventions are DataSketches'", "[theta]") {
    ThetaSketch a(12), b(12);
    a.add(std::int32_t{-5});
    b.add(std::int64_t{-5});
    a.add(std::uint32_t{4000000000u});  // through int32_t, sign-extended
    b.add(static_cast<std::int64_t>(static_cast<std::int32_t>(4000000000u)));
    a.add(-0.0);
    b.add(0.0);
    a.add(std::nan("1"));
    b.add(std::nan("2"));
    a.add(std::string("abc"));
    b.add("abc");
    CHECK(a.hashes() == b.hashes());
    CHECK(a.num_retained() == 5);
    // add_hash takes MurmurHash3_x64_128's first half, as DataSketches' compute_hash does.
    ThetaSketch c(12);
    c.add_hash(tally::detail::ds_hash_i64(-5).h1);
    CHECK(c.hashes() == std::vector<std::uint64_t>{hash63(static_cast<std::uint64_t>(-5))});
    CHECK(ThetaSketch::seed_hash == (tally::detail::murmur3_x64_128("\x29\x23\0\0\0\0\0\0", 8, 0).h1 & 0xffff));
}

TEST_CASE("ThetaSketch: DataSketches' images decode to DataSketches' estimates and bounds", "[theta][datasketches]") {
    const auto m = manifest();
    int seen = 0;
    for (const auto& [name, e] : m) {
        if (name.find(".sk") == std::string::npos) continue;
        INFO(name);
        const auto bytes = read_fixture(name);
        const ThetaSketch s = ThetaSketch::from_datasketches(bytes);
        check_matches(s, e);
        // And write them back byte for byte.
        CHECK(s.to_datasketches(name.find("_v4") != std::string::npos) == bytes);
        ++seen;
    }
    CHECK(seen >= 20);
}

TEST_CASE("ThetaSketch: tally builds DataSketches' images of the same items byte for byte", "[theta][datasketches]") {
    const auto m = manifest();
    for (const int lg : {5, 12, 16}) {
        for (const std::uint64_t n : {0ull, 1ull, 1000ull, 1000000ull}) {
            if (lg == 16 && n == 1000000) continue;  // image too large to commit (checked outside the suite)
            const ThetaSketch s = of_range(lg, 0, n);
            for (const bool v4 : {false, true}) {
                const std::string name = "u64_lgk" + std::to_string(lg) + "_n" + std::to_string(n) + (v4 ? "_v4" : "") + ".sk";
                if (m.count(name) == 0) continue;
                INFO(name);
                check_matches(s, m.at(name));
                CHECK(s.to_datasketches(v4) == read_fixture(name));
            }
        }
    }
    // Strings, doubles (-0.0, NaN), narrow integers; the empty string is not an item.
    ThetaSketch items(12);
    for (int i = 0; i < 500; ++i) {
        items.add("user-" + std::to_string(i));
        items.add(i * 0.5 - 100);
    }
    items.add(-0.0);
    items.add(std::nan(""));
    items.add(std::int32_t{-5});
    items.add(std::uint32_t{4000000000u});
    items.add(std::string());
    check_matches(items, m.at("items_lgk12.sk"));
    CHECK(items.to_datasketches() == read_fixture("items_lgk12.sk"));
}

TEST_CASE("ThetaSketch: mixed operations agree with DataSketches' on the same images", "[theta][datasketches]") {
    const auto m = manifest();
    const ThetaSketch a = ThetaSketch::from_datasketches(read_fixture("mixed_a_ds_lgk5.sk"), 5);
    const ThetaSketch b = of_range(5, 400000, 1000000);
    // tally's image of B is the one DataSketches read for its operations
    CHECK(b.to_datasketches(true) == read_fixture("mixed_b_tally_lgk5_v4.sk"));
    check_matches(tally::theta_union(a, b), m.at("mixed_union_lgk5"));
    check_matches(tally::theta_intersection(a, b), m.at("mixed_intersection_lgk5"));
    check_matches(tally::theta_a_not_b(a, b), m.at("mixed_a_not_b_lgk5"));
}

TEST_CASE("ThetaSketch: set operations are exact below k", "[theta]") {
    tally::test::Rng rng(35);
    std::vector<std::uint64_t> xs(3000), ys;
    for (auto& x : xs) x = rng.next();
    for (std::size_t i = 1000; i < 3000; ++i) ys.push_back(xs[i]);
    for (int i = 0; i < 800; ++i) ys.push_back(rng.next());
    const ThetaSketch a = of_keys(12, xs), b = of_keys(12, ys);
    CHECK(tally::theta_union(a, b).estimate() == 3800);
    CHECK(tally::theta_intersection(a, b).estimate() == 2000);
    CHECK(tally::theta_a_not_b(a, b).estimate() == 1000);
    CHECK(tally::theta_a_not_b(b, a).estimate() == 800);
    const ThetaSketch e(12);
    CHECK(tally::theta_intersection(a, e).empty());
    CHECK(tally::theta_a_not_b(a, e).hashes() == a.hashes());
    CHECK(tally::theta_a_not_b(e, a).empty());
    CHECK(tally::theta_union(e, e).empty());
    const ThetaSketch three[3] = {a, b, of_keys(12, {xs[1500], xs[2500], 7})};
    CHECK(tally::theta_intersection(std::span<const ThetaSketch>(three)).estimate() == 2);
    CHECK(tally::theta_union(std::span<const ThetaSketch>(three)).estimate() == 3801);
    CHECK_THROWS_AS(tally::theta_intersection(std::span<const ThetaSketch>()), std::invalid_argument);
}

TEST_CASE("ThetaSketch: set operations follow the framework's rules in estimation mode", "[theta]") {
    tally::test::Rng rng(3535);
    for (int round = 0; round < 6; ++round) {
        const int lg = 5 + round;
        std::vector<ThetaSketch> in;
        std::vector<std::vector<std::uint64_t>> keys(5);
        for (int j = 0; j < 5; ++j) {
            ThetaSketch s(lg);
            const std::uint64_t n = 50 + rng.below(20000);
            for (std::uint64_t i = 0; i < n; ++i) {
                const std::uint64_t key = rng.below(30000);  // overlapping key spaces
                s.add(key);
            }
            in.push_back(std::move(s));
        }
        std::vector<const ThetaSketch*> ptrs;
        for (const auto& s : in) ptrs.push_back(&s);
        const auto [want, want_theta] = oracle_union(ptrs, std::size_t{1} << lg);
        const ThetaSketch u = tally::theta_union(std::span<const ThetaSketch>(in));
        CHECK(u.hashes() == want);
        CHECK(u.theta64() == want_theta);
        // intersection: hashes below the least theta retained by all
        const ThetaSketch x = tally::theta_intersection(std::span<const ThetaSketch* const>(ptrs));
        std::uint64_t theta = ThetaSketch::max_theta;
        for (const auto& s : in) theta = std::min(theta, s.theta64());
        std::vector<std::uint64_t> common;
        for (const auto h : in[0].hashes()) {
            bool all = h < theta;
            for (const auto& s : in) all = all && s.contains_hash(h);
            if (all) common.push_back(h);
        }
        CHECK(x.hashes() == common);
        CHECK(x.theta64() == theta);
        // a_not_b
        const std::uint64_t t01 = std::min(in[0].theta64(), in[1].theta64());
        std::vector<std::uint64_t> diff;
        for (const auto h : in[0].hashes())
            if (h < t01 && !in[1].contains_hash(h)) diff.push_back(h);
        const ThetaSketch d = tally::theta_a_not_b(in[0], in[1]);
        CHECK(d.hashes() == diff);
        CHECK(d.theta64() == t01);
        // merge = union of two
        ThetaSketch m = in[2];
        m.merge(in[3]);
        CHECK(m.hashes() == tally::theta_union(in[2], in[3]).hashes());
        // results keep taking items
        ThetaSketch more = u;
        for (std::uint64_t i = 0; i < 100000; ++i) more.add(i + 1000000);
        CHECK(more.estimate() > u.estimate());
    }
}

namespace {

struct Coverage {
    int in_bounds[4] = {};
    int in_band[4] = {};
};

// |A| = 20000, |B| = 60000, |A n B| = 7000, lg_k 9. `wrong_a_not_b` keeps
// A's hashes below theta_A (not min(theta_A, theta_B)): the negative control.
Coverage coverage(int trials, bool wrong_a_not_b) {
    const std::uint64_t na = 20000, nb = 60000, shared = 7000;
    const double truth[4] = {double(na), double(na + nb - shared), double(shared), double(na - shared)};
    Coverage c;
    for (int t = 0; t < trials; ++t) {
        tally::test::Rng rng(1000 + static_cast<std::uint64_t>(t));
        ThetaSketch a(9), b(9);
        for (std::uint64_t i = 0; i < na; ++i) {
            const std::uint64_t k = rng.next();
            a.add(k);
            if (i < shared) b.add(k);
        }
        for (std::uint64_t i = shared; i < nb; ++i) b.add(rng.next());
        const ThetaSketch d = tally::theta_a_not_b(a, b);
        if (wrong_a_not_b) {
            // the wrong estimate: A's retained hashes that B lacks, at A's theta
            std::size_t kept = 0;
            for (const auto h : a.hashes()) kept += b.contains_hash(h) ? 0 : 1;
            const double est = static_cast<double>(kept) / a.theta();
            c.in_band[3] += std::abs(est - truth[3]) <= (d.upper_bound(2) - d.lower_bound(2)) / 2;
        }
        const ThetaSketch r[4] = {a, tally::theta_union(a, b), tally::theta_intersection(a, b), d};
        for (int o = 0; o < (wrong_a_not_b ? 3 : 4); ++o) {
            const double lo = r[o].lower_bound(2), hi = r[o].upper_bound(2), e = r[o].estimate();
            c.in_bounds[o] += lo <= truth[o] && truth[o] <= hi;
            c.in_band[o] += std::abs(e - truth[o]) <= (hi - lo) / 2;
        }
    }
    return c;
}

}  // namespace

TEST_CASE("ThetaSketch: 2-sigma bounds cover the truth of sketches and set operations", "[theta][big]") {
    const int trials = static_cast<int>(tally::test::big(300, 60));
    const Coverage c = coverage(trials, false);
    const char* names[4] = {"estimate", "union", "intersection", "a_not_b"};
    for (int o = 0; o < 4; ++o) {
        INFO(names[o] << ": bounds " << c.in_bounds[o] << " band " << c.in_band[o] << " of " << trials);
        CHECK(c.in_bounds[o] >= 0.88 * trials);
        CHECK(c.in_band[o] >= 0.88 * trials);
    }
    // Negative control: A-not-B at A's theta instead of the least theta is biased
    // (A's shared items above B's theta count as A-only) and misses the band.
    const Coverage bad = coverage(trials, true);
    INFO("wrong a_not_b: " << bad.in_band[3] << " of " << trials);
    CHECK(bad.in_band[3] < 0.5 * trials);
}

TEST_CASE("ThetaSketch: merge laws, frame round trip, incompatible merge", "[theta][merge]") {
    const ThetaSketch empty(9);
    const ThetaSketch a = of_range(9, 0, 5000), b = of_range(9, 3000, 9000), c = of_range(9, 100, 300);
    tally::test::check_merge_laws(empty, a, b, c);
    const ThetaSketch exact = of_range(9, 0, 100);
    tally::test::check_merge_laws(empty, exact, c, of_range(9, 50, 60));
    tally::test::check_incompatible_merge(a, of_range(10, 0, 10));
    tally::test::check_truncations_throw<ThetaSketch>(a.serialize());
    tally::test::check_truncations_throw<ThetaSketch>(empty.serialize());
    tally::test::check_corruptions_safe<ThetaSketch>(a.serialize(), 11);
    tally::test::check_corruptions_safe<ThetaSketch>(c.serialize(), 12);
    // Set-operation results (non-empty, possibly no hashes) round-trip too.
    const ThetaSketch x = tally::theta_intersection(of_range(5, 0, 100000), of_range(5, 200000, 300000));
    CHECK_FALSE(x.empty());
    const auto xb = x.serialize();
    CHECK(ThetaSketch::deserialize(xb).serialize() == xb);
    CHECK(ThetaSketch::deserialize(xb).theta64() == x.theta64());
}

TEST_CASE("ThetaSketch: golden bytes of tally's frame", "[theta][serialize]") {
    CHECK(ThetaSketch(5).serialize() ==
          tally::test::to_bytes({'T', 'A', 'L', 'Y', 11, 1, 0, 0, 5, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
                                 0, 0, 0, 0, 0}));
    // lg_k 5 over 0..999: the hashes and theta are DataSketches' (its v3 image:
    // count at byte 8, theta at 16, hashes from 24), written in the documented layout.
    const auto ds = read_fixture("u64_lgk5_n1000.sk");
    const std::uint64_t count = le64(ds, 8) & 0xffffffffu;
    const std::uint64_t theta = le64(ds, 16);
    std::vector<std::byte> want = tally::test::to_bytes({'T', 'A', 'L', 'Y', 11, 1, 0, 0, 5, 1});
    for (int i = 0; i < 8; ++i) want.push_back(static_cast<std::byte>(theta >> (8 * i)));
    want.push_back(std::byte{0xe8});  // varint 1000
    want.push_back(std::byte{0x07});
    for (int i = 0; i < 4; ++i) want.push_back(static_cast<std::byte>(count >> (8 * i)));
    std::uint64_t prev = 0;
    for (std::uint64_t j = 0; j < count; ++j) {
        const std::uint64_t h = le64(ds, 24 + 8 * j);
        std::uint64_t d = h - prev;
        prev = h;
        while (d >= 0x80) {
            want.push_back(static_cast<std::byte>((d & 0x7f) | 0x80));
            d >>= 7;
        }
        want.push_back(static_cast<std::byte>(d));
    }
    CHECK(of_range(5, 0, 1000).serialize() == want);
}

TEST_CASE("ThetaSketch: bad DataSketches bytes raise FormatError", "[theta][datasketches]") {
    const auto good = read_fixture("u64_lgk5_n1000000.sk");  // v3, estimation mode
    const auto good4 = read_fixture("u64_lgk5_n1000000_v4.sk");
    const auto single = read_fixture("u64_lgk5_n1.sk");
    for (const auto* img : {&good, &good4, &single}) {
        for (std::size_t n = 0; n < img->size(); ++n)
            CHECK_THROWS_AS(ThetaSketch::from_datasketches(std::span<const std::byte>(img->data(), n)), FormatError);
        auto longer = *img;
        longer.push_back(std::byte{0});
        CHECK_THROWS_AS(ThetaSketch::from_datasketches(longer), FormatError);
    }
    auto bad = good;
    bad[6] ^= std::byte{1};  // seed hash
    CHECK_THROWS_WITH(ThetaSketch::from_datasketches(bad), Catch::Contains("seed hash"));
    bad = good;
    bad[2] = std::byte{1};  // an Alpha sketch (update images, type 2, are read: test_theta_datasketches_java.cpp)
    CHECK_THROWS_WITH(ThetaSketch::from_datasketches(bad), Catch::Contains("sketch type"));
    bad = good;
    bad[1] = std::byte{5};
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(bad), FormatError);
    bad = good;
    for (std::size_t i = 0; i < 8; ++i) bad[24 + 8 * 3 + i] = bad[24 + 8 * 2 + i];  // a duplicate hash
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(bad), FormatError);
    bad = good;
    bad[16 + 7] = std::byte{0};  // theta below the hashes
    bad[16 + 6] = std::byte{0};
    bad[16 + 5] = std::byte{0};
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(bad), FormatError);
    bad = good4;
    bad[3] = std::byte{64};  // bits per delta
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(bad), FormatError);
    // random corruptions never read out of bounds (sanitizer builds)
    tally::test::Rng rng(77);
    for (int t = 0; t < 3000; ++t) {
        auto c = (t & 1) ? good : good4;
        c[rng.below(c.size())] ^= static_cast<std::byte>(1 + rng.below(255));
        try {
            const ThetaSketch s = ThetaSketch::from_datasketches(c);
            CHECK(s.estimate() >= 0);
        } catch (const FormatError&) {
        }
    }
}

TEST_CASE("ThetaSketch: serial versions 1 and 2 decode to the same sketch", "[theta][datasketches]") {
    const auto v3 = read_fixture("u64_lgk5_n1000000.sk");  // 3 preamble longs: count @8, theta @16, hashes @24
    const ThetaSketch want = ThetaSketch::from_datasketches(v3);
    auto v1 = v3;
    v1[1] = std::byte{1};
    v1[5] = v1[6] = v1[7] = std::byte{0};  // no flags, no seed hash in version 1
    CHECK(ThetaSketch::from_datasketches(v1).hashes() == want.hashes());
    CHECK(ThetaSketch::from_datasketches(v1).theta64() == want.theta64());
    auto v2 = v3;
    v2[1] = std::byte{2};
    v2[5] = std::byte{0};
    CHECK(ThetaSketch::from_datasketches(v2).estimate() == want.estimate());
    v2[6] ^= std::byte{1};
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(v2), FormatError);
    // an empty version 1 image: count 0, theta 1
    std::vector<std::byte> e1(24, std::byte{0});
    e1[0] = std::byte{3};
    e1[1] = std::byte{1};
    e1[2] = std::byte{3};
    for (int i = 0; i < 7; ++i) e1[16 + static_cast<std::size_t>(i)] = std::byte{0xff};
    e1[23] = std::byte{0x7f};
    CHECK(ThetaSketch::from_datasketches(e1).empty());
}

TEST_CASE("ThetaSketch: from_datasketches raises lg_k to hold the image", "[theta][datasketches]") {
    const ThetaSketch big = of_range(12, 0, 1000000);
    const ThetaSketch back = ThetaSketch::from_datasketches(big.to_datasketches(), 5);
    CHECK(back.lg_k() == 12);
    CHECK(back.estimate() == big.estimate());
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(big.to_datasketches(), 4), std::invalid_argument);
}

TEST_CASE("ThetaSketch: Windowed<ThetaSketch> counts the distinct items of the window", "[theta][windowed]") {
    tally::Windowed<ThetaSketch, 4> w(1000, ThetaSketch(10));
    for (std::uint64_t i = 0; i < 300; ++i) w.add(100, i);         // bucket 0
    for (std::uint64_t i = 200; i < 500; ++i) w.add(1100, i);      // bucket 1
    CHECK(w.view(1100).estimate() == 500);
    for (std::uint64_t i = 1000; i < 1100; ++i) w.add(4100, i);    // bucket 4: bucket 0 leaves
    CHECK(w.view(4100).estimate() == 400);
    const auto bytes = w.serialize();
    CHECK(decltype(w)::deserialize(bytes).view(4100).estimate() == 400);
}

TEST_CASE("ThetaSketch: set operations agree whatever form the inputs are in", "[theta]") {
    // Sketches fed by add are hash tables; decoded ones and results are sorted.
    for (const int lg : {5, 9}) {
        const ThetaSketch a = of_range(lg, 0, 30000), b = of_range(lg, 20000, 45000), c = of_range(lg, 100, 200);
        const ThetaSketch forms_a[2] = {a, ThetaSketch::deserialize(a.serialize())};
        const ThetaSketch forms_b[2] = {b, ThetaSketch::from_datasketches(b.to_datasketches(), lg)};
        // Same hashes, theta and emptiness (total differs: decoded DataSketches bytes carry none).
        const auto key = [](const ThetaSketch& s) { return std::make_tuple(s.hashes(), s.theta64(), s.empty()); };
        const auto want_u = key(tally::theta_union(a, b));
        const auto want_x = key(tally::theta_intersection(a, b));
        const auto want_d = key(tally::theta_a_not_b(a, b));
        const auto want_e = key(tally::theta_a_not_b(b, a));
        for (const auto& fa : forms_a) {
            for (const auto& fb : forms_b) {
                CHECK(key(tally::theta_union(fa, fb)) == want_u);
                CHECK(key(tally::theta_intersection(fa, fb)) == want_x);
                CHECK(tally::theta_intersection(fb, fa).hashes() == tally::theta_intersection(b, a).hashes());
                CHECK(key(tally::theta_a_not_b(fa, fb)) == want_d);
                CHECK(key(tally::theta_a_not_b(fb, fa)) == want_e);
                const ThetaSketch three[3] = {fa, fb, c};
                CHECK(tally::theta_intersection(std::span<const ThetaSketch>(three)).hashes() ==
                      tally::theta_intersection(tally::theta_intersection(a, b), c).hashes());
            }
        }
        // A sorted sketch keeps counting once an add keeps a hash.
        ThetaSketch d = ThetaSketch::deserialize(a.serialize());
        ThetaSketch t = a;
        for (std::uint64_t i = 50000; i < 90000; ++i) {
            d.add(i);
            t.add(i);
        }
        CHECK(d.hashes() == t.hashes());
        CHECK(d.theta64() == t.theta64());
    }
}

TEST_CASE("ThetaSketch: merge in place equals theta_union for every input form", "[theta][merge]") {
    tally::test::Rng rng(4747);
    for (const int lg : {5, 8, 12}) {
        std::vector<ThetaSketch> shards;
        for (int j = 0; j < 8; ++j) {
            ThetaSketch s(lg);
            const std::uint64_t n = rng.below(4) == 0 ? rng.below(40) : 1 + rng.below(30000);
            const std::uint64_t base = rng.below(20000);
            for (std::uint64_t i = 0; i < n; ++i) s.add(base + rng.below(40000));
            shards.push_back(std::move(s));
        }
        shards.emplace_back(lg);  // an empty one
        const ThetaSketch want = tally::theta_union(std::span<const ThetaSketch>(shards));
        // update (table) inputs, compact (decoded) inputs, and both alternating
        for (int form = 0; form < 3; ++form) {
            ThetaSketch acc(lg);
            for (std::size_t j = 0; j < shards.size(); ++j) {
                const bool compact = form == 1 || (form == 2 && j % 2 == 1);
                acc.merge(compact ? ThetaSketch::deserialize(shards[j].serialize()) : shards[j]);
                if (j > 0) CHECK(acc.num_retained() <= (std::uint32_t{1} << lg));  // the first merge copies
            }
            INFO("lg_k " << lg << " form " << form);
            CHECK(acc.hashes() == want.hashes());
            CHECK(acc.theta64() == want.theta64());
            CHECK(acc.total() == want.total());
            CHECK(acc.estimate() == want.estimate());
            // the merged sketch keeps counting like the union result does
            ThetaSketch more = acc, more_u = want;
            for (std::uint64_t i = 0; i < 50000; ++i) {
                more.add(i + 700000);
                more_u.add(i + 700000);
            }
            CHECK(more.hashes() == more_u.hashes());
            CHECK(more.theta64() == more_u.theta64());
        }
        // into a compact target, and with itself
        ThetaSketch c = ThetaSketch::deserialize(shards[0].serialize());
        c.merge(shards[1]);
        CHECK(c.hashes() == tally::theta_union(shards[0], shards[1]).hashes());
        ThetaSketch self = shards[1];
        self.merge(self);
        CHECK(self.hashes() == tally::theta_union(shards[1], shards[1]).hashes());
        CHECK(self.total() == 2 * shards[1].total());
    }
}
