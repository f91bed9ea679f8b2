// HyperLogLog (mode datasketches) against Apache DataSketches Java 6.2.0's
// HllSketch on the same images, both directions: lg_k 4, 8, 12, 18, 21,
// HLL_4/6/8, n = 0 .. 10^6 items 0, 1, 2, ... and Union results.
//
// tests/fixtures/datasketches_java/hll/ (written by HllFixtures.java):
//   <name>.bin    Java's compact images of at most 8 KiB;
//   answers.txt   per image: file, bytes, mode (0 LIST, 1 SET, 2 HLL),
//                 out-of-order flag, getEstimate, getCompositeEstimate,
//                 bounds 1-3 (hex doubles); "-<name>" lines are Java sketches
//                 whose images are not kept, tally_<name>.bin lines Java's
//                 answers on tally's image of the same items (rebuilt below).
// What holds (docs/hyperloglog.md): every image decodes; on HLL images in
// order (HIP) the estimate is Java's, bit for bit, both ways. On LIST/SET
// images Java answers with its coupon table, on out-of-order images with its
// composite estimator; tally's linear counting and Ertl estimates are checked
// to be statistically the same answer there, not the same bits.
#include <tally/sketch/hyperloglog.hpp>

#include <bit>
#include <cmath>
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
        ls >> a.file >> a.bytes >> a.mode >> a.out_of_order >> e;
        a.estimate = std::strtod(e.c_str(), nullptr);
        out.push_back(a);
    }
    return out;
}

std::uint64_t ulps(double a, double b) {
    const auto ia = std::bit_cast<std::int64_t>(a), ib = std::bit_cast<std::int64_t>(b);
    return ia > ib ? static_cast<std::uint64_t>(ia - ib) : static_cast<std::uint64_t>(ib - ia);
}

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

}  // namespace

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
    // tally turns dense where HllSketch leaves coupon mode, so both run HIP
    // from there over the same registers; they differ only by the start (the
    // coupon estimate: linear counting against DataSketches' table), and at
    // lg_k 20-21 where tally caps the sparse form at 2^16 entries.
    std::map<std::string, Answer> java, mine;
    for (const Answer& a : answers()) {
        if (a.file.starts_with("tally_"))
            mine[a.file.substr(6, a.file.size() - 10)] = a;
        else
            java[a.file[0] == '-' ? a.file.substr(1) : a.file.substr(0, a.file.size() - 4)] = a;
    }
    std::size_t pairs = 0;
    for (const auto& [name, j] : java) {
        INFO(name);
        REQUIRE(mine.count(name) == 1);
        const Answer& t = mine[name];
        if (j.mode != 2 || t.mode != 2 || j.out_of_order || t.out_of_order) continue;
        const int lg = std::stoi(name.substr(3));
        const double tol = lg <= 12 ? 1e-6 : lg <= 19 ? 2e-5 : 1e-3;
        CHECK(std::fabs(t.estimate - j.estimate) <= tol * j.estimate);
        ++pairs;
    }
    CHECK(pairs >= 70);
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
