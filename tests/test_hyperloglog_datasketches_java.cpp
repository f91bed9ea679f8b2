// HyperLogLog (mode datasketches) against Apache DataSketches Java 6.2.0's
// HllSketch on the same images, both directions: lg_k 4, 8, 12, 18, 21,
// HLL_4/6/8, n = 0 .. 10^6 items 0, 1, 2, ... and Union results.
//
// tests/fixtures/datasketches_java/hll/ (written by HllFixtures.java):
//   <name>.bin    Java's compact images of at most 8 KiB;
//   answers.txt   per image: file, bytes, mode (0 LIST, 1 SET, 2 HLL),
//                 out-of-order flag, getEstimate, getCompositeEstimate,
//                 bounds 1-3 (hex doubles), the FNV-1a hash of the image's
//                 canonical form (canonical() below); "-<name>" lines are Java
//                 sketches whose images (over 8 KiB) are not kept: tally's
//                 image of the same items is rebuilt and stands in for it where
//                 the hashes match; tally_<name>.bin lines Java's answers on
//                 tally's image of the same items (rebuilt below).
// What holds (docs/hyperloglog.md): every image decodes, and on every image
// (LIST, SET, HLL in order and out of order, Union results) estimate() and
// lower/upper_bound(1..3) are Java's getEstimate/getLowerBound/getUpperBound
// within 4 ulps, both ways; the same items give the same image up to the
// order of coupons and HLL_4 exceptions and fields no reader uses, and the
// same answers bit for bit (lg_k 4-21; one Union result at lg_k 21 aside).
#include <tally/sketch/distinct/hyperloglog.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "test_support.hpp"

using tally::HyperLogLog;

namespace {

std::string dir() {
    const std::string f = __FILE__;
    return f.substr(0, f.find_last_of("/\\") + 1) + "fixtures/datasketches_java/hll/";
}

struct Answer {
    std::string file;
    std::size_t bytes = 0;
    int mode = 0, out_of_order = 0;
    double estimate = 0;
    double lower[3] = {}, upper[3] = {};
    std::uint64_t fnv = 0;
};

std::vector<Answer> answers() {
    std::ifstream in(dir() + "answers.txt");
    REQUIRE(in.good());
    std::vector<Answer> out;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream ls(line);
        Answer a;
        std::string e;
        std::string composite, b[6];
        ls >> a.file >> a.bytes >> a.mode >> a.out_of_order >> e >> composite;
        for (auto& x : b) ls >> x;
        std::string h;
        ls >> h;
        REQUIRE(!ls.fail());
        a.fnv = std::stoull(h, nullptr, 16);
        a.estimate = std::strtod(e.c_str(), nullptr);
        for (int i = 0; i < 3; ++i) {
            a.lower[i] = std::strtod(b[i].c_str(), nullptr);
            a.upper[i] = std::strtod(b[3 + i].c_str(), nullptr);
        }
        out.push_back(a);
    }
    return out;
}

std::uint64_t ulps(double a, double b) {
    const auto ia = std::bit_cast<std::int64_t>(a), ib = std::bit_cast<std::int64_t>(b);
    return ia > ib ? static_cast<std::uint64_t>(ia - ib) : static_cast<std::uint64_t>(ib - ia);
}

/// The image in canonical form, as HllFixtures.java hashes it: LIST/SET
/// coupons and HLL_4 exceptions sorted as 32-bit words, the compact flag
/// cleared, cur_min and num_at_cur_min zeroed on HLL_6/HLL_8 (what depends
/// on insertion order, or what no reader uses).
std::vector<std::byte> canonical(std::vector<std::byte> c) {
    const auto sort_words = [&c](std::size_t from) {
        std::vector<std::uint32_t> w((c.size() - from) / 4);
        if (w.empty()) return;  // an empty LIST image: nothing to sort (and no null memcpy)
        std::memcpy(w.data(), c.data() + from, w.size() * 4);  // little-endian hosts
        std::sort(w.begin(), w.end());
        std::memcpy(c.data() + from, w.data(), w.size() * 4);
    };
    if (c.size() < 8) return c;
    const auto u8 = [&c](std::size_t i) { return std::to_integer<unsigned>(c[i]); };
    if ((u8(7) & 3) < 2) {
        sort_words(4 * u8(0));
        return c;
    }
    c[5] &= std::byte{0xf7};
    if (((u8(7) >> 2) & 3) == 0) {
        sort_words(40 + (std::size_t{1} << (u8(3) - 1)));
    } else {
        c[6] = std::byte{0};
        for (std::size_t i = 32; i < 36; ++i) c[i] = std::byte{0};
    }
    return c;
}

std::uint64_t fnv1a(const std::vector<std::byte>& b) {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (const std::byte x : b) h = (h ^ std::to_integer<std::uint64_t>(x)) * 0x100000001b3ULL;
    return h;
}

/// lg_k 21, a Union of 10 items into 10^6: the 10 coupons raise registers of
/// a HIP sketch in another order than Java's Union (sorted, not as added),
/// so the HIP sum differs in its 13th digit (and the image in bytes 8-15).
bool hip_order_differs(const std::string& name) { return name.starts_with("lgk21_") && name.ends_with("union_big_small"); }

HyperLogLog make(int lg_k, std::int64_t from, std::int64_t to) {
    HyperLogLog s(lg_k, HyperLogLog::HashMode::datasketches);
    for (std::int64_t i = from; i < to; ++i) s.add(i);
    return s;
}

/// tally's sketch named by a tally_ line, as make_tally_hll.cpp builds it.
const HyperLogLog& tally_sketch(const std::string& file) {
    static std::map<std::string, HyperLogLog> cache;
    // tally_lgk<L>_<type>_<what>.bin
    const int lg_k = std::stoi(file.substr(9));
    const std::string what = file.substr(file.find('_', file.find("HLL_") + 4) + 1);
    const std::string key = std::to_string(lg_k) + what;
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    HyperLogLog s(lg_k, HyperLogLog::HashMode::datasketches);
    if (what == "union_overlap.bin") {
        s = make(lg_k, 0, 100000);
        s.merge(make(lg_k, 50000, 150000));
    } else if (what == "union_big_small.bin") {
        s = make(lg_k, 0, 1000000);
        s.merge(make(lg_k, 2000000, 2000010));
    } else if (what == "union_small_small.bin") {
        s = make(lg_k, 0, 10);
        s.merge(make(lg_k, 5, 25));
    } else {
        s = make(lg_k, 0, std::stoll(what.substr(1)));
    }
    return cache.emplace(key, std::move(s)).first->second;
}

tally::DataSketchesHll type_of(const std::string& file) {
    const char t = file[file.find("HLL_") + 4];
    return t == '4' ? tally::DataSketchesHll::hll_4 : t == '6' ? tally::DataSketchesHll::hll_6 : tally::DataSketchesHll::hll_8;
}

/// The estimate of the same registers by another estimator: both are
/// estimates of one cardinality, so they agree within a few standard errors.
void statistically_equal(const HyperLogLog& s, const Answer& a) {
    const double m = static_cast<double>(s.register_count());
    const double tol = a.mode < 2 ? 1e-4 * a.estimate + 1e-6  // coupons: both nearly exact
                                  : 4 * 1.04 / std::sqrt(m) * a.estimate;
    CHECK(std::fabs(s.estimate() - a.estimate) <= tol);
}

/// estimate() and lower/upper_bound(1..3) against Java's answers on the
/// same image: within 4 ulps each.
void same_answers(const HyperLogLog& s, const Answer& a) {
    CHECK(ulps(s.estimate(), a.estimate) <= 4);
    for (int k = 1; k <= 3; ++k) {
        INFO("num_std_dev " << k);
        CHECK(ulps(s.lower_bound(k), a.lower[k - 1]) <= 4);
        CHECK(ulps(s.upper_bound(k), a.upper[k - 1]) <= 4);
    }
}

}  // namespace

TEST_CASE("HyperLogLog (mode datasketches): every estimate and bound on an image is Java's", "[hyperloglog][datasketches]") {
    // Java's images (LIST, SET, HLL in order and out of order, Union results)
    // and tally's images of the same configurations, lg_k 4-21 and HLL_4/6/8;
    // answers.txt holds Java's getEstimate/getLowerBound/getUpperBound of each.
    std::size_t by_mode[2][3] = {}, rebuilt = 0, rebuilt_set = 0;
    for (const Answer& a : answers()) {
        INFO(a.file);
        if (a.file[0] == '-') {
            // Java's image is not kept: tally's image of the same items is
            // the same bytes in canonical form (checked by the hash), and
            // decodes to Java's answers
            const std::string name = a.file.substr(1);
            if (hip_order_differs(name)) continue;
            const auto image = tally_sketch("tally_" + name + ".bin").to_datasketches(type_of(name));
            REQUIRE(fnv1a(canonical(image)) == a.fnv);
            REQUIRE(image.size() == a.bytes);
            same_answers(HyperLogLog::from_datasketches(image), a);
            ++rebuilt;
            rebuilt_set += a.mode == 1;
            continue;
        }
        const bool mine = a.file.starts_with("tally_");
        const HyperLogLog s = mine ? HyperLogLog::from_datasketches(tally_sketch(a.file).to_datasketches(type_of(a.file)))
                                   : HyperLogLog::from_datasketches(tally::test::read_file_bytes(dir() + a.file));
        same_answers(s, a);
        if (mine) {
            // and the sketch that wrote the image answers the same
            INFO("the sketch itself");
            same_answers(tally_sketch(a.file), a);
        }
        ++by_mode[mine][a.mode];
    }
    for (int mine = 0; mine < 2; ++mine) {
        INFO("tally's images: " << mine);
        CHECK(by_mode[mine][0] >= 10);  // LIST
        CHECK(by_mode[mine][1] >= 10);  // SET
        CHECK(by_mode[mine][2] >= 50);  // HLL
    }
    CHECK(rebuilt == 24 - 3);
    CHECK(rebuilt_set == 6);  // lg_k 21: SETs of 99,977 and 149,939 coupons
}

TEST_CASE("HyperLogLog (mode datasketches): the estimators on hand-made images", "[hyperloglog][datasketches]") {
    // One coupon: the coupon table gives exactly 1 (linear counting 1 + 7e-9).
    HyperLogLog one(12, HyperLogLog::HashMode::datasketches);
    one.add(std::int64_t{0});
    CHECK(one.estimate() == 1.0);
    CHECK(one.lower_bound(1) == 1.0);
    CHECK(one.upper_bound(3) > 1.0);
    CHECK_THROWS_AS(one.lower_bound(0), std::invalid_argument);
    CHECK_THROWS_AS(one.upper_bound(4), std::invalid_argument);
    // the bounds bracket the estimate and widen with num_std_dev, in every form
    for (const int lg : {4, 8, 12, 18}) {
        HyperLogLog big = make(lg, 0, 200000);
        big.merge(make(lg, 100000, 300000));  // out of order: composite
        for (const HyperLogLog* h : {&one, &big}) {
            for (int k = 1; k < 3; ++k) {
                CHECK(h->lower_bound(k + 1) <= h->lower_bound(k));
                CHECK(h->upper_bound(k + 1) >= h->upper_bound(k));
            }
            CHECK(h->lower_bound(1) <= h->estimate());
            CHECK(h->upper_bound(1) >= h->estimate());
        }
        // composite, not Ertl; both near 300000
        CHECK(big.estimate() != big.ertl_estimate());
        CHECK(std::fabs(big.estimate() - 300000) < 6 * 1.04 / std::sqrt(double(1 << lg)) * 300000);
    }
    // tally's own mode: its bounds around its own estimators
    HyperLogLog t(12);
    for (int i = 0; i < 100000; ++i) t.add(i);
    const double rse = t.relative_standard_error();
    CHECK(t.lower_bound(2) == t.estimate() / (1 + 2 * rse));
    CHECK(t.upper_bound(2) == t.estimate() / (1 - 2 * rse));
    CHECK_THROWS_AS(t.upper_bound(0), std::invalid_argument);
}

TEST_CASE("HyperLogLog reads every Java HllSketch image; HIP images answer as Java", "[hyperloglog][datasketches]") {
    std::size_t hip = 0, other = 0, kept_out = 0;
    for (const Answer& a : answers()) {
        if (a.file[0] == '-' || a.file.starts_with("tally_")) {
            kept_out += a.file[0] == '-';
            continue;
        }
        INFO(a.file);
        const auto bytes = tally::test::read_file_bytes(dir() + a.file);
        REQUIRE(bytes.size() == a.bytes);
        const HyperLogLog s = HyperLogLog::from_datasketches(bytes);
        if (a.mode == 2 && a.out_of_order == 0) {
            CHECK(s.estimator() == HyperLogLog::Estimator::hip);
            CHECK(ulps(s.estimate(), a.estimate) == 0);
            ++hip;
        } else {
            statistically_equal(s, a);
            ++other;
        }
        // exported again, the image decodes to the same registers and estimate
        const HyperLogLog back = HyperLogLog::from_datasketches(s.to_datasketches(type_of(a.file)));
        CHECK(back == s);
        if (a.mode == 2) CHECK(back.estimate() == s.estimate());
    }
    CHECK(hip >= 50);
    CHECK(other >= 100);
    CHECK(kept_out >= 20);
}

TEST_CASE("DataSketches Java answers on tally's HLL images as tally does (HIP)", "[hyperloglog][datasketches]") {
    std::size_t hip = 0, other = 0;
    for (const Answer& a : answers()) {
        if (!a.file.starts_with("tally_")) continue;
        INFO(a.file);
        const HyperLogLog& s = tally_sketch(a.file);
        const auto bytes = s.to_datasketches(type_of(a.file));
        CHECK(bytes.size() == a.bytes);
        const HyperLogLog back = HyperLogLog::from_datasketches(bytes);
        if (a.mode == 2 && a.out_of_order == 0) {
            CHECK(ulps(back.estimate(), a.estimate) == 0);
            CHECK(s.estimate() == back.estimate());
            ++hip;
        } else {
            statistically_equal(back, a);
            ++other;
        }
    }
    CHECK(hip >= 60);
    CHECK(other >= 100);
}

TEST_CASE("HyperLogLog (mode datasketches): the same items, Java's estimate up to where HIP starts", "[hyperloglog][datasketches]") {
    // tally keeps DataSketches' coupons, turns dense where HllSketch leaves
    // coupon mode and starts HIP from the same coupon estimate, so every
    // answer is the same double and the image the same bytes in canonical
    // form (every lg_k, 4-21; the Union of hip_order_differs() aside).
    std::map<std::string, Answer> java, mine;
    for (const Answer& a : answers()) {
        if (a.file.starts_with("tally_"))
            mine[a.file.substr(6, a.file.size() - 10)] = a;
        else
            java[a.file[0] == '-' ? a.file.substr(1) : a.file.substr(0, a.file.size() - 4)] = a;
    }
    std::size_t pairs = 0, identical = 0, same_bytes = 0;
    for (const auto& [name, j] : java) {
        INFO(name);
        REQUIRE(mine.count(name) == 1);
        const Answer& t = mine[name];
        CHECK(t.bytes == j.bytes);
        CHECK(t.mode == j.mode);
        CHECK(t.out_of_order == j.out_of_order);
        if (!hip_order_differs(name)) {
            // tally's image of the items, and the one Java read back
            CHECK(fnv1a(canonical(tally_sketch("tally_" + name + ".bin").to_datasketches(type_of(name)))) == j.fnv);
            CHECK(t.fnv == j.fnv);
            same_bytes += t.fnv == j.fnv;
            CHECK(t.estimate == j.estimate);
            for (int k = 0; k < 3; ++k) {
                CHECK(t.lower[k] == j.lower[k]);
                CHECK(t.upper[k] == j.upper[k]);
            }
            ++identical;
        }
        if (j.mode != 2 || t.mode != 2 || j.out_of_order || t.out_of_order) continue;
        CHECK(std::fabs(t.estimate - j.estimate) <= 1e-12 * j.estimate);
        ++pairs;
    }
    CHECK(pairs >= 70);
    CHECK(identical == 5 * 3 * 13 - 3);
    CHECK(same_bytes == identical);
}

TEST_CASE("HyperLogLog (mode datasketches): merging a sparse sketch keeps HIP, as Java's Union", "[hyperloglog][datasketches]") {
    // 10 items into 10^6 at lg_k 12: Java's Union of its own two sketches
    // answers 990,116.60 (answers.txt, lgk12_HLL_8_union_big_small.bin)
    HyperLogLog big = make(12, 0, 1000000);
    const double before = big.estimate();
    HyperLogLog small = make(12, 2000000, 2000010);
    REQUIRE(small.sparse());
    HyperLogLog a = big;
    a.merge(small);
    CHECK(a.estimator() == HyperLogLog::Estimator::hip);
    CHECK(a.estimate() >= before);  // HIP only grows (here no register changed)
    CHECK(a.estimate() < before + 20);
    CHECK(std::fabs(a.estimate() - 990116.600737) < 0.01);
    // the other way round: the dense side absorbs the sparse one's entries
    HyperLogLog b = small;
    b.merge(big);
    CHECK(b.estimator() == HyperLogLog::Estimator::hip);
    CHECK(b == a);
    CHECK(b.estimate() == a.estimate());
    // two dense sketches: Ertl (Java: out of order, composite)
    HyperLogLog c = big;
    c.merge(make(12, 500000, 1500000));
    CHECK(c.estimator() == HyperLogLog::Estimator::ertl);
    // two sparse sketches whose union turns dense: HIP from the sparse estimate on
    // (lg_k 12: sparse up to 385 entries, DataSketches' promotion point)
    HyperLogLog d = make(12, 0, 300);
    REQUIRE(d.sparse());
    d.merge(make(12, 5000, 5300));
    CHECK(!d.sparse());
    CHECK(d.estimator() == HyperLogLog::Estimator::hip);
    CHECK(std::fabs(d.estimate() - 600) < 600 * 0.02);
    // the union is the same registers as adding everything to one sketch
    HyperLogLog e = make(12, 0, 300);
    for (std::int64_t i = 5000; i < 5300; ++i) e.add(i);
    CHECK(d == e);
    // negative control: tally's own mode still ends in Ertl
    HyperLogLog t(12), u(12);
    for (int i = 0; i < 100000; ++i) t.add(i);
    for (int i = 0; i < 5; ++i) u.add(1000000 + i);
    t.merge(u);
    CHECK(t.estimator() == HyperLogLog::Estimator::ertl);
}

TEST_CASE("HyperLogLog (mode datasketches): a coupon per (address, value) pair, as DataSketches counts", "[hyperloglog][datasketches]") {
    // Two hashes of one 26-bit address with values 1 and 32: two coupons.
    const std::uint64_t a = 0x8000000000000005ULL, b = 0x0000000100000005ULL;
    HyperLogLog h(12, HyperLogLog::HashMode::datasketches);
    h.add_hash(a);
    h.add_hash(b);
    h.add_hash(a);
    REQUIRE(h.sparse());
    CHECK(h.estimate() == tally::detail::ds_coupon_estimate(2));
    CHECK(h.registers()[5] == 32);
    const auto image = h.to_datasketches();
    CHECK(image.size() == 8 + 2 * 4);  // a LIST of both coupons
    const HyperLogLog back = HyperLogLog::from_datasketches(image);
    CHECK(back.estimate() == h.estimate());
    CHECK(HyperLogLog::deserialize(h.serialize()).estimate() == h.estimate());
    // negative control: mode redis keeps the larger rank of one index'
    HyperLogLog r(12, HyperLogLog::HashMode::redis);
    r.add_hash(a);
    r.add_hash(b);
    CHECK(r.estimate() == tally::detail::hll_sparse_estimate(1, 1));
}

TEST_CASE("HyperLogLog (mode datasketches): at lg_k 21 a SET holds 196,608 coupons, as DataSketches'", "[hyperloglog][datasketches]") {
    // A decoded SET of 100,000 coupons stays sparse through adds and turns
    // dense, HIP from the coupon estimate, past 3/32 m = 196,608 entries.
    std::vector<std::uint32_t> coupons;
    std::uint64_t x = 42;
    for (int i = 0; i < 100000; ++i) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        coupons.push_back(static_cast<std::uint32_t>(((x >> 58) % 62 + 1) << 26) | static_cast<std::uint32_t>(i * 671));
    }
    const auto image = tally::detail::ds_coupon_encode(21, coupons, tally::DataSketchesHll::hll_8);
    HyperLogLog h = HyperLogLog::from_datasketches(image);
    CHECK(h.sparse());
    CHECK(h.estimate() == tally::detail::ds_coupon_estimate(100000));
    CHECK(h.upper_bound(2) == tally::detail::ds_coupon_bound(100000, 2, true));
    CHECK(h.to_datasketches().size() == image.size());
    const HyperLogLog copy = HyperLogLog::deserialize(h.serialize());
    CHECK(copy.sparse());
    CHECK(copy.estimate() == h.estimate());
    h.add(std::int64_t{-1});
    CHECK(h.sparse());
    CHECK(h.estimate() == tally::detail::ds_coupon_estimate(100001));
    // items added one by one: a SET up to 196,608 coupons, dense at the next
    HyperLogLog g(21, HyperLogLog::HashMode::datasketches);
    std::int64_t i = 0;
    while (g.sparse()) g.add(i++);
    CHECK(tally::detail::ds_keeps_coupons(21, 3 * (std::size_t{1} << 16)));
    CHECK(!tally::detail::ds_keeps_coupons(21, 3 * (std::size_t{1} << 16) + 1));
    CHECK(g.estimator() == HyperLogLog::Estimator::hip);
    CHECK(std::fabs(g.estimate() - static_cast<double>(i)) < 0.01 * static_cast<double>(i));
    // what a decoded sparse form (DataSketches SET, tally frame) may hold
    CHECK(tally::detail::hll_sparse_decoded_limit(21, 2) == 3 * (std::size_t{1} << 16) + 1);
}
