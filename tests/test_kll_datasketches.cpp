// KllSketch <-> Apache DataSketches C++ kll_sketch<float|double> images.
//
// tests/fixtures/datasketches/kll/ holds, for k = 8, 200, 1000 and
// n = 0, 1, 100, 10^6 (k = 1000 at 10^6 is checked against the reference
// build only, its images being 12 and 24 KB):
//   ds_<type>_k<k>_n<n>.bin     an image written by DataSketches C++ (5.x,
//                               built from apache/datasketches-cpp) after
//                               update() of the stream `datum` below;
//   tally_<type>_k<k>_n<n>.bin  KllSketch<type>(k, 42)'s to_datasketches()
//                               of the same stream, as read back by it;
//   <image>.txt                 DataSketches' get_quantile / get_rank
//                               answers on that image (hex floats).
// So the suite checks, without DataSketches: both read each other's bytes,
// and DataSketches C++ answers as tally except where C++ and Java differ
// (tally follows Java: tests/test_kll_datasketches_java.cpp, docs/kll.md).
#include <tally/sketch/quantiles/kll.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "test_support.hpp"
#include "merge_laws.hpp"

using tally::KllSketch;

namespace {

std::uint64_t mix(std::uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
/// The fixtures' stream: uniform in [0, 1), every 7th item (i % 7 == 3) 0.5.
double datum(std::uint64_t seed, std::uint64_t i) {
    if (i % 7 == 3) return 0.5;
    return static_cast<double>(mix(seed * 0x100000001b3ULL + i) >> 11) * 0x1p-53;
}

std::string fixture_dir() {
    const std::string f = __FILE__;
    return f.substr(0, f.find_last_of("/\\") + 1) + "fixtures/datasketches/kll/";
}

std::vector<std::byte> read_bytes(const std::string& path) { return tally::test::read_file_bytes(path); }

struct Answer {
    char kind;  // 'q' or 'r'
    double arg;
    bool inclusive;
    double result;
};

std::vector<Answer> read_answers(const std::string& path) {
    std::ifstream in(path);
    REQUIRE(in.good());
    std::vector<Answer> out;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream ls(line);
        std::string kind, arg, inc, res;
        ls >> kind >> arg >> inc >> res;
        out.push_back({kind[0], std::strtod(arg.c_str(), nullptr), inc == "1", std::strtod(res.c_str(), nullptr)});
    }
    return out;
}

template <class T>
void check_answers(const KllSketch<T>& s, const std::vector<Answer>& answers, std::uint64_t n) {
    if (n == 0) {
        CHECK(answers.empty());
        CHECK(s.empty());
        return;
    }
    REQUIRE(answers.size() > 20);
    // tally answers as DataSketches Java (tests/test_kll_datasketches_java.cpp);
    // DataSketches C++ 5.x answers otherwise in two known ways only: in
    // estimation mode its view lacks the exact min and max, and it takes
    // ceil / floor of rank n unrounded (Java rounds to 7 decimals first).
    std::size_t differ = 0;
    for (const Answer& a : answers) {
        INFO(a.kind << " " << a.arg << " inclusive " << a.inclusive);
        const double mine = a.kind == 'q' ? static_cast<double>(s.quantile(a.arg, a.inclusive))
                                          : s.rank(static_cast<T>(a.arg), a.inclusive);
        if (mine == a.result) continue;
        ++differ;
        const double wd = a.arg * static_cast<double>(n);
        const bool rounding = a.kind == 'q' && wd != std::round(wd) && std::fabs(wd - std::round(wd)) < 1e-7;
        CHECK((s.is_estimation_mode() || rounding));
    }
    if (!s.is_estimation_mode()) CHECK(differ <= 2);
}

template <class T>
void check_fixture(std::uint16_t k, std::uint64_t n) {
    const std::string name = std::string(sizeof(T) == 4 ? "float" : "double") + "_k" + std::to_string(k) + "_n" +
                             std::to_string(n);
    INFO(name);
    // DataSketches' image: decodes, answers as DataSketches, re-encodes to the same bytes
    const auto ds = read_bytes(fixture_dir() + "ds_" + name + ".bin");
    const KllSketch<T> from_ds = KllSketch<T>::from_datasketches(ds);
    CHECK(from_ds.total() == n);
    CHECK(from_ds.k() == k);
    check_answers(from_ds, read_answers(fixture_dir() + "ds_" + name + ".txt"), n);
    CHECK(from_ds.to_datasketches() == ds);
    // tally's image of the same stream: the same bytes again, and DataSketches'
    // answers on it are tally's
    const std::uint64_t seed = k * 1000 + n % 997;
    KllSketch<T> mine(k, 42);
    for (std::uint64_t i = 0; i < n; ++i) mine.add(static_cast<T>(datum(seed, i)));
    CHECK(mine.to_datasketches() == read_bytes(fixture_dir() + "tally_" + name + ".bin"));
    check_answers(mine, read_answers(fixture_dir() + "tally_" + name + ".txt"), n);
    // DataSketches' min and max are exact: the stream's
    if (n > 0) {
        T lo = static_cast<T>(datum(seed, 0)), hi = lo;
        for (std::uint64_t i = 1; i < n; ++i) {
            lo = std::min(lo, static_cast<T>(datum(seed, i)));
            hi = std::max(hi, static_cast<T>(datum(seed, i)));
        }
        CHECK(from_ds.min_item() == lo);
        CHECK(from_ds.max_item() == hi);
    }
}

}  // namespace

TEST_CASE("KllSketch and DataSketches read each other's images with identical answers", "[kll][datasketches]") {
    for (const std::uint16_t k : {std::uint16_t{8}, std::uint16_t{200}, std::uint16_t{1000}})
        for (const std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{100}, std::uint64_t{1000000}}) {
            if (k == 1000 && n == 1000000) continue;
            check_fixture<float>(k, n);
            check_fixture<double>(k, n);
        }
}

TEST_CASE("KllSketch::from_datasketches validates every field", "[kll][datasketches]") {
    const auto good = read_bytes(fixture_dir() + "ds_double_k200_n100.bin");
    const auto full = read_bytes(fixture_dir() + "ds_double_k8_n1000000.bin");
    const auto single = read_bytes(fixture_dir() + "ds_float_k8_n1.bin");
    auto with = [](std::vector<std::byte> b, std::size_t pos, std::uint8_t v) {
        b[pos] = static_cast<std::byte>(v);
        return b;
    };
    using S = KllSketch<double>;
    CHECK_THROWS_AS(S::from_datasketches(with(good, 0, 2)), tally::FormatError);   // preamble ints
    CHECK_THROWS_AS(S::from_datasketches(with(good, 1, 4)), tally::FormatError);   // serial version
    CHECK_THROWS_AS(S::from_datasketches(with(good, 2, 7)), tally::FormatError);   // family (HLL)
    CHECK_THROWS_AS(S::from_datasketches(with(good, 3, 8)), tally::FormatError);   // unknown flag
    CHECK_THROWS_AS(S::from_datasketches(with(good, 4, 7)), tally::FormatError);   // k 7
    CHECK_THROWS_AS(S::from_datasketches(with(good, 6, 9)), tally::FormatError);   // m
    CHECK_THROWS_AS(S::from_datasketches(with(good, 8, 99)), tally::FormatError);  // n != weight
    CHECK_THROWS_AS(S::from_datasketches(with(good, 18, 3)), tally::FormatError);  // levels
    CHECK_THROWS_AS(S::from_datasketches(with(full, 20, 0xff)), tally::FormatError);  // level offset
    // a float image is not a double image
    CHECK_THROWS_AS(S::from_datasketches(single), tally::FormatError);
    CHECK_NOTHROW(KllSketch<float>::from_datasketches(single));
    // version 1 of the single-item form (full preamble) decodes too
    KllSketch<float> one(200, 1);
    one.add(2.5f);
    const auto v2 = one.to_datasketches();
    CHECK(v2.size() == 12);
    CHECK(static_cast<int>(v2[1]) == 2);
    auto v1 = v2;
    v1[1] = std::byte{1};
    CHECK(KllSketch<float>::from_datasketches(v1).quantile(0.5) == 2.5f);
    for (std::size_t cut = 0; cut < full.size(); cut += 7)
        CHECK_THROWS_AS(S::from_datasketches(std::span<const std::byte>(full.data(), cut)), tally::FormatError);
    auto longer = full;
    longer.push_back(std::byte{0});
    CHECK_THROWS_AS(S::from_datasketches(longer), tally::FormatError);
    // random single-byte corruptions never read out of bounds
    tally::test::Rng rng(4);
    for (int t = 0; t < 3000; ++t) {
        auto bad = (t % 2) ? full : good;
        bad[rng.below(bad.size())] ^= static_cast<std::byte>(1 + rng.below(255));
        try {
            const S s = S::from_datasketches(bad);
            (void)s.to_datasketches();
            if (!s.empty()) (void)s.quantile(0.5);
        } catch (const tally::FormatError&) {
        }
    }
}

TEST_CASE("KllSketch: a decoded DataSketches image keeps adding and merging", "[kll][datasketches]") {
    const auto ds = read_bytes(fixture_dir() + "ds_double_k200_n1000000.bin");
    KllSketch<double> s = KllSketch<double>::from_datasketches(ds);
    const std::size_t decoded_bytes = s.memory_bytes();
    KllSketch<double> copy = s;
    // the stream continues with 10^5 more items of the same distribution
    for (std::uint64_t i = 0; i < 100000; ++i) s.add(datum(77, i));
    CHECK(s.total() == 1100000);
    CHECK(s.memory_bytes() > decoded_bytes);  // the free space came with the first add
    const double eps = s.normalized_rank_error();
    // uniform on [0, 1) with 1/7 of the mass at 0.5: rank(0.25) = 6/7 * 0.25
    CHECK(std::fabs(s.rank(0.25) - 6.0 / 7 * 0.25) <= eps);
    CHECK(std::fabs(s.rank(0.75) - (6.0 / 7 * 0.75 + 1.0 / 7)) <= eps);
    CHECK(s.quantile(0.5) == 0.5);  // inside the tie
    copy.merge(s);
    CHECK(copy.total() == 2100000);
    CHECK(std::fabs(copy.rank(0.25) - 6.0 / 7 * 0.25) <= eps);
    // and exports an image that decodes to the same answers
    const KllSketch<double> again = KllSketch<double>::from_datasketches(copy.to_datasketches());
    for (int i = 0; i <= 20; ++i) CHECK(again.quantile(i / 20.0) == copy.quantile(i / 20.0));
}
