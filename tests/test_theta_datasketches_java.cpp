// ThetaSketch against Apache DataSketches Java 6.2.0 on the same images, both
// directions: Java's UpdateSketch images (family 2, lg_k 5-26, resize
// factors x1-x8, p = 0.5) and their compact forms, ordered and not, decode
// in tally with Java's estimate and bounds; Java's answers on tally's images
// (compact and delta-packed) are tally's.
//
// tests/fixtures/datasketches_java/theta/ (written by ThetaFixtures.java):
//   <name>.update.bin / .compact.bin / .unordered.bin   Java's images;
//   answers.txt   one line per image: file, empty, estimation mode,
//                 retained, theta (integer), estimate, lower bounds 1-3,
//                 upper bounds 1-3 (hex doubles); tally_lgk<L>_n<N>[.v4].bin
//                 lines are Java's answers on tally's image of that sketch.
#include <tally/sketch/distinct/theta.hpp>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "test_support.hpp"

using tally::ThetaSketch;

namespace {

std::string dir() {
    const std::string f = __FILE__;
    return f.substr(0, f.find_last_of("/\\") + 1) + "fixtures/datasketches_java/theta/";
}

struct Answer {
    std::string file;
    int empty = 0, estimation = 0;
    std::uint32_t retained = 0;
    std::uint64_t theta = 0;
    double estimate = 0, lb[3] = {}, ub[3] = {};
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
        std::string e, l[3], u[3];
        ls >> a.file >> a.empty >> a.estimation >> a.retained >> a.theta >> e >> l[0] >> l[1] >> l[2] >> u[0] >> u[1] >> u[2];
        a.estimate = std::strtod(e.c_str(), nullptr);
        for (int i = 0; i < 3; ++i) {
            a.lb[i] = std::strtod(l[i].c_str(), nullptr);
            a.ub[i] = std::strtod(u[i].c_str(), nullptr);
        }
        out.push_back(a);
    }
    return out;
}

/// Distance in units in the last place (finite doubles of one sign).
std::uint64_t ulps(double a, double b) {
    const auto ia = std::bit_cast<std::int64_t>(a), ib = std::bit_cast<std::int64_t>(b);
    return ia > ib ? static_cast<std::uint64_t>(ia - ib) : static_cast<std::uint64_t>(ib - ia);
}

struct Tally {
    std::size_t values = 0, exact = 0;
};

void near(double mine, double java, Tally& t) {
    ++t.values;
    t.exact += mine == java;
    CHECK(ulps(mine, java) <= 4);
}

void check(const ThetaSketch& s, const Answer& a, Tally& t) {
    INFO(a.file);
    CHECK(s.empty() == (a.empty == 1));
    CHECK(s.is_estimation_mode() == (a.estimation == 1));
    CHECK(s.num_retained() == a.retained);
    CHECK(s.theta64() == a.theta);
    // Java's estimate is count * (2^63 - 1) / theta64), tally's count /
    // (theta64 / (2^63 - 1)): one rounding apart, at most an ulp
    near(s.estimate(), a.estimate, t);
    for (int i = 0; i < 3; ++i) {
        near(s.lower_bound(i + 1), a.lb[i], t);
        near(s.upper_bound(i + 1), a.ub[i], t);
    }
}

/// tally's sketch behind tally_lgk<L>_n<N>[.v4].bin, as make_tally_theta.cpp builds it.
ThetaSketch tally_sketch(const std::string& file) {
    const int lg_k = std::stoi(file.substr(9));
    const std::int64_t n = std::stoll(file.substr(file.find("_n") + 2));
    ThetaSketch s(lg_k);
    for (std::int64_t i = 0; i < n; ++i) s.add(std::int64_t{lg_k} * 1000000000 + i);
    return s;
}

}  // namespace

TEST_CASE("ThetaSketch reads Java's update and compact images with Java's estimate and bounds", "[theta][datasketches]") {
    std::size_t update = 0, compact = 0, mine = 0;
    Tally t;
    for (const Answer& a : answers()) {
        if (a.file.starts_with("tally_")) {
            check(tally_sketch(a.file), a, t);
            ++mine;
            continue;
        }
        const auto bytes = tally::test::read_file_bytes(dir() + a.file);
        const ThetaSketch s = ThetaSketch::from_datasketches(bytes);
        check(s, a, t);
        // every form holds the hashes and theta of Java's compact ordered image
        const std::string stem = a.file.substr(0, a.file.rfind('.', a.file.rfind('.') - 1));
        const ThetaSketch ordered =
            ThetaSketch::from_datasketches(tally::test::read_file_bytes(dir() + stem + ".compact.bin"));
        CHECK(s.hashes() == ordered.hashes());
        CHECK(s.theta64() == ordered.theta64());
        CHECK(s.empty() == ordered.empty());
        // and re-encodes to bytes that Java's compact ones decode to
        CHECK(ThetaSketch::from_datasketches(s.to_datasketches()).hashes() == ordered.hashes());
        (a.file.ends_with(".update.bin") ? update : compact) += 1;
    }
    CHECK(update >= 22 * 3 + 3);  // lg_k 5-26, estimation mode up to lg_k 12
    CHECK(compact == 2 * update);
    CHECK(mine == 2 * (6 * 5 + 16 * 3));  // lg_k 5-26 at small n, six of them up to 10^5
    // most values are bit-identical: only the estimate may round differently
    CHECK(t.exact * 10 >= t.values * 9);
}

TEST_CASE("ThetaSketch: Java's update images, every length and field checked", "[theta][datasketches]") {
    const auto full = tally::test::read_file_bytes(dir() + "lgk5_x8_n1000.update.bin");
    for (std::size_t cut = 0; cut < full.size(); ++cut)
        CHECK_THROWS_AS(ThetaSketch::from_datasketches(std::span<const std::byte>(full.data(), cut)), tally::FormatError);
    auto longer = full;
    longer.push_back(std::byte{0});
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(longer), tally::FormatError);
    const auto with = [](std::vector<std::byte> b, std::size_t pos, std::uint8_t v) {
        b[pos] = static_cast<std::byte>(v);
        return b;
    };
    CHECK_NOTHROW(ThetaSketch::from_datasketches(full));
    CHECK_NOTHROW(ThetaSketch::from_datasketches(with(full, 0, 3)));                       // resize factor x1
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(with(full, 0, 0xc2)), tally::FormatError);  // preamble longs
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(with(full, 1, 2)), tally::FormatError);     // serial version
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(with(full, 3, 3)), tally::FormatError);     // lg_k 3
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(with(full, 3, 27)), tally::FormatError);    // lg_k 27
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(with(full, 4, 7)), tally::FormatError);     // table past lg_k + 1
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(with(full, 5, 8)), tally::FormatError);     // compact flag
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(with(full, 5, 4)), tally::FormatError);     // empty with hashes
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(with(full, 6, 0)), tally::FormatError);     // seed hash
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(with(full, 8, 0)), tally::FormatError);     // count
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(with(full, 15, 0xff)), tally::FormatError); // p NaN
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(with(full, 23, 0)), tally::FormatError);    // hashes above theta
    // a hash moved onto another (duplicate), or set above theta
    auto dup = full;
    std::size_t first = 0, second = 0;
    for (std::size_t at = 24; at < dup.size(); at += 8) {
        bool zero = true;
        for (std::size_t i = 0; i < 8; ++i) zero = zero && dup[at + i] == std::byte{0};
        if (zero) continue;
        (first == 0 ? first : second) = at;
        if (second) break;
    }
    REQUIRE(second > first);
    std::copy(dup.begin() + static_cast<std::ptrdiff_t>(first), dup.begin() + static_cast<std::ptrdiff_t>(first + 8),
              dup.begin() + static_cast<std::ptrdiff_t>(second));
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(dup), tally::FormatError);
    // random corruptions never read out of bounds
    tally::test::Rng rng(43);
    for (int t = 0; t < 2000; ++t) {
        auto bad = full;
        bad[rng.below(40)] ^= static_cast<std::byte>(1 + rng.below(255));
        try {
            (void)ThetaSketch::from_datasketches(bad).estimate();
        } catch (const tally::FormatError&) {
        }
    }
    // an empty update image (Java sets the empty flag; its p may be below 1)
    const auto empty = tally::test::read_file_bytes(dir() + "lgk6_x8_p0.5_n0.update.bin");
    CHECK(ThetaSketch::from_datasketches(empty).empty());
    CHECK_THROWS_AS(ThetaSketch::from_datasketches(with(empty, 8, 1)), tally::FormatError);
}
