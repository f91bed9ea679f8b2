// KllSketch against Apache DataSketches Java 6.2.0 (KllFloatsSketch,
// KllDoublesSketch), on the same images, in both directions.
//
// tests/fixtures/datasketches_java/kll/ (written by KllFixtures.java there):
//   java_<name>.bin      Java's compact image of the configuration <name>;
//   java_<name>.v3.bin   (names ending _v3) the updatable image of a Java
//                        direct sketch, java_<name>.bin its compact image;
//   java_<name>.txt      Java's answers on that image;
//   tally_<name>.txt     Java's answers on tally's image of <name>, the
//                        sketch make() below rebuilds (make_tally_kll.cpp).
// Answers: n, retained, estimation mode, rank error, min, max, the sorted
// view (length, sampled items and cumulative weights), getQuantile and
// getRank (inclusive and exclusive) at grids, boundaries and their
// neighbours, getCDF and getPMF; every double compared bit for bit.
#include <tally/sketch/quantiles/kll.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "test_support.hpp"

using tally::KllSketch;

namespace {

std::uint64_t mix(std::uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
/// The fixtures' streams: uniform in [0, 1) with every 7th item 0.5, or 1, 2, 3, ...
double datum(std::uint64_t seed, std::uint64_t i, bool seq) {
    if (seq) return static_cast<double>(i + 1);
    if (i % 7 == 3) return 0.5;
    return static_cast<double>(mix(seed * 0x100000001b3ULL + i) >> 11) * 0x1p-53;
}

template <class T>
KllSketch<T> make(std::uint16_t k, std::uint64_t n, std::uint64_t seed, bool seq, std::uint64_t rng_seed) {
    KllSketch<T> s(k, rng_seed);
    for (std::uint64_t i = 0; i < n; ++i) s.add(static_cast<T>(datum(seed, i, seq)));
    return s;
}

/// tally's sketch of a configuration, as make_tally_kll.cpp writes it.
template <class T>
KllSketch<T> tally_sketch(const std::string& cfg) {
    if (cfg == "k200_k8_merged") {
        auto a = make<T>(200, 20000, 13, false, 42);
        return a.merge(make<T>(8, 3000, 14, false, 43)), a;
    }
    if (cfg == "k200_exact_merged") {
        auto a = make<T>(200, 50, 15, false, 42);
        return a.merge(make<T>(200, 60, 16, false, 43)), a;
    }
    if (cfg == "k8_n1000_seq") return make<T>(8, 1000, 0, true, 42);
    if (cfg == "k200_n100_seq") return make<T>(200, 100, 0, true, 42);
    if (cfg == "k200_n1000000_seq") return make<T>(200, 1000000, 0, true, 42);
    const auto k = static_cast<std::uint16_t>(std::stoul(cfg.substr(1)));
    if (cfg.find("_merged") != std::string::npos) {
        auto a = make<T>(k, 1000, 11, false, 42);
        return a.merge(make<T>(k, 50000, 12, false, 43)), a;
    }
    const std::uint64_t n = std::stoull(cfg.substr(cfg.find("_n") + 2));
    return make<T>(k, n, k * 1000 + n % 997, false, 42);
}

std::string dir() {
    const std::string f = __FILE__;
    return f.substr(0, f.find_last_of("/\\") + 1) + "fixtures/datasketches_java/kll/";
}

double hex(const std::string& s) { return std::strtod(s.c_str(), nullptr); }

std::vector<double> split(std::istringstream& ls, std::size_t count) {
    std::vector<double> v(count);
    for (double& x : v) {
        std::string w;
        ls >> w;
        x = hex(w);
    }
    return v;
}

/// Checks every answer of a Java answers file on s; returns how many were checked.
template <class T>
std::size_t check_answers(const KllSketch<T>& s, const std::string& path) {
    std::ifstream in(path);
    REQUIRE(in.good());
    std::size_t checked = 0;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        INFO(line);
        std::istringstream ls(line);
        std::string kind;
        ls >> kind;
        ++checked;
        if (kind == "n") {
            std::uint64_t n;
            ls >> n;
            CHECK(s.total() == n);
        } else if (kind == "retained") {
            std::uint32_t m;
            ls >> m;
            CHECK(s.num_retained() == m);
        } else if (kind == "est") {
            int e;
            ls >> e;
            CHECK(s.is_estimation_mode() == (e == 1));
        } else if (kind == "eps") {
            std::string a, b;
            ls >> a >> b;
            CHECK(s.normalized_rank_error(false) == hex(a));
            CHECK(s.normalized_rank_error(true) == hex(b));
        } else if (kind == "min" || kind == "max") {
            std::string a;
            ls >> a;
            CHECK(static_cast<double>(kind == "min" ? s.min_item() : s.max_item()) == hex(a));
        } else if (kind == "len") {
            std::size_t len;
            ls >> len;
            CHECK(s.sorted_view().items().size() == len);
        } else if (kind == "v") {
            std::size_t i;
            std::string item;
            std::uint64_t cum;
            ls >> i >> item >> cum;
            const auto& v = s.sorted_view();
            REQUIRE(i < v.items().size());
            CHECK(static_cast<double>(v.items()[i]) == hex(item));
            CHECK(v.cumulative_weights()[i] == cum);
        } else if (kind == "q" || kind == "r") {
            std::string arg, res;
            int inc;
            ls >> arg >> inc >> res;
            if (kind == "q")
                CHECK(static_cast<double>(s.quantile(hex(arg), inc == 1)) == hex(res));
            else
                CHECK(s.rank(static_cast<T>(hex(arg)), inc == 1) == hex(res));
        } else if (kind == "c" || kind == "p") {
            int inc;
            std::size_t count;
            ls >> inc >> count;
            const std::vector<double> sp = split(ls, count), want = split(ls, count + 1);
            std::vector<T> points;
            for (const double x : sp) points.push_back(static_cast<T>(x));
            const std::vector<double> got = kind == "c" ? s.cdf(points, inc == 1) : s.pmf(points, inc == 1);
            CHECK(got == want);
        } else {
            FAIL("unknown line");
        }
    }
    return checked;
}

template <class T>
void check_java_image(const std::string& cfg) {
    const std::string name = std::string(sizeof(T) == 4 ? "float_" : "double_") + cfg;
    INFO(name);
    const auto bytes = tally::test::read_file_bytes(dir() + "java_" + name + ".bin");
    const KllSketch<T> s = KllSketch<T>::from_datasketches(bytes);
    CHECK(check_answers(s, dir() + "java_" + name + ".txt") >= 4);
    CHECK(s.to_datasketches() == bytes);  // re-encodes to Java's bytes
    if (cfg.ends_with("_v3")) {
        const auto v3 = tally::test::read_file_bytes(dir() + "java_" + name + ".v3.bin");
        REQUIRE(static_cast<int>(v3[1]) == 3);
        const KllSketch<T> u = KllSketch<T>::from_datasketches(v3);
        CHECK(check_answers(u, dir() + "java_" + name + ".txt") >= 4);
        // the updatable image holds the same sketch as Java's compact one
        CHECK(u.to_datasketches() == bytes);
    }
}

const std::vector<std::string>& configs() {
    static const std::vector<std::string> c = [] {
        std::vector<std::string> v;
        for (const char* k : {"8", "200", "1000"}) {
            for (const char* n : {"0", "1", "100", "1000", "1000000"}) v.push_back(std::string("k") + k + "_n" + n);
            v.push_back(std::string("k") + k + "_merged");
        }
        for (const char* x : {"k200_k8_merged", "k200_exact_merged", "k8_n1000_seq", "k200_n100_seq", "k200_n1000000_seq"})
            v.push_back(x);
        return v;
    }();
    return c;
}

}  // namespace

TEST_CASE("KllSketch answers as DataSketches Java on Java's images", "[kll][datasketches]") {
    for (const std::string& cfg : configs()) {
        check_java_image<float>(cfg);
        check_java_image<double>(cfg);
    }
}

TEST_CASE("KllSketch reads Java's updatable (serial version 3) images", "[kll][datasketches]") {
    for (const char* k : {"8", "200"})
        for (const char* n : {"0", "1", "100", "1000", "1000000"}) {
            const std::string cfg = std::string("k") + k + "_n" + n + "_v3";
            check_java_image<float>(cfg);
            check_java_image<double>(cfg);
        }
    // every length short of the full image and one byte past it is refused
    const auto full = tally::test::read_file_bytes(dir() + "java_double_k8_n1000_v3.v3.bin");
    for (std::size_t cut = 0; cut < full.size(); ++cut)
        CHECK_THROWS_AS(KllSketch<double>::from_datasketches(std::span<const std::byte>(full.data(), cut)),
                        tally::FormatError);
    auto longer = full;
    longer.push_back(std::byte{0});
    CHECK_THROWS_AS(KllSketch<double>::from_datasketches(longer), tally::FormatError);
    const auto empty = tally::test::read_file_bytes(dir() + "java_float_k200_n0_v3.v3.bin");
    for (std::size_t cut = 0; cut < empty.size(); ++cut)
        CHECK_THROWS_AS(KllSketch<float>::from_datasketches(std::span<const std::byte>(empty.data(), cut)),
                        tally::FormatError);
    // fields: preamble ints, flags against n, level count, last offset, a float image as double
    auto with = [](std::vector<std::byte> b, std::size_t pos, std::uint8_t v) {
        b[pos] = static_cast<std::byte>(v);
        return b;
    };
    using S = KllSketch<double>;
    CHECK_THROWS_AS(S::from_datasketches(with(full, 0, 2)), tally::FormatError);
    CHECK_THROWS_AS(S::from_datasketches(with(full, 3, 1)), tally::FormatError);   // empty flag with n = 1000
    CHECK_THROWS_AS(S::from_datasketches(with(full, 3, 4)), tally::FormatError);   // single flag with n = 1000
    CHECK_THROWS_AS(S::from_datasketches(with(full, 18, 40)), tally::FormatError);  // level count
    CHECK_THROWS_AS(S::from_datasketches(with(full, 19, 1)), tally::FormatError);
    CHECK_THROWS_AS(S::from_datasketches(with(full, 8, 99)), tally::FormatError);   // n != weight
    CHECK_THROWS_AS(S::from_datasketches(with(empty, 8, 1)), tally::FormatError);   // n = 1, no item
    CHECK_THROWS_AS(S::from_datasketches(empty), tally::FormatError);               // float bytes
    // Java's heap sketches write the same form with the empty flag at n = 0
    // and the single-item flag at n = 1 (KllHelper.toByteArray(sketch, true))
    CHECK(KllSketch<float>::from_datasketches(with(empty, 3, 1)).empty());
    const auto one = tally::test::read_file_bytes(dir() + "java_double_k8_n1_v3.v3.bin");
    const S single = S::from_datasketches(with(one, 3, 4));
    CHECK(single.total() == 1);
    CHECK(single.quantile(0.5) == S::from_datasketches(one).quantile(0.5));
    // the free space may hold anything
    auto junk = full;
    const std::size_t free_at = 20 + 4 * (static_cast<std::size_t>(full[18]) + 1) + 16;
    junk[free_at] = std::byte{0xff};
    CHECK_NOTHROW(S::from_datasketches(junk));
}

TEST_CASE("DataSketches Java answers on tally's images as tally does", "[kll][datasketches]") {
    for (const std::string& cfg : configs()) {
        INFO(cfg);
        CHECK(check_answers(tally_sketch<float>(cfg), dir() + "tally_float_" + cfg + ".txt") >= 4);
        CHECK(check_answers(tally_sketch<double>(cfg), dir() + "tally_double_" + cfg + ".txt") >= 4);
    }
}

TEST_CASE("KllSketch: the issue's cases, min and max in the view and the rounded natural rank", "[kll][datasketches]") {
    KllSketch<double> s(8, 1);
    for (int i = 1; i <= 1000; ++i) s.add(i);
    REQUIRE(s.is_estimation_mode());
    CHECK(s.quantile(0) == 1);
    CHECK(s.quantile(1) == 1000);
    CHECK(s.rank(1) == 0.001);
    CHECK(s.rank(1, false) == 0);
    KllSketch<double> e(200, 1);
    for (int i = 1; i <= 100; ++i) e.add(i);
    CHECK(0.07 * 100 > 7.0);  // why the rounding matters
    CHECK(e.quantile(0.07) == 7);
    CHECK(e.quantile(0.07, false) == 8);
    // below capacity every answer is exact: quantile(i / n) is the i-th item
    for (int i = 1; i <= 100; ++i) CHECK(e.quantile(i / 100.0) == i);
}

TEST_CASE("KllSketch: the natural rank is Java's, with and without rounding", "[kll][datasketches]") {
    // Exact mode with items 1..n: quantile(r) is item `need`, where Java's
    // getNaturalRank gives need = ceil (inclusive) or floor + 1 (exclusive)
    // of round(r n 10^7) / 10^7, transcribed here with the division.
    const auto java_need = [](double r, std::uint64_t n, bool inclusive) {
        double nr = r * static_cast<double>(n);
        if (n <= 10000000) nr = static_cast<double>(std::llround(nr * 1e7)) / 1e7;  // half up for nr >= 0
        const double v = inclusive ? std::ceil(nr) : std::floor(nr) + 1;
        return std::min<double>(v, static_cast<double>(n));
    };
    tally::test::Rng rng(7);
    std::size_t checked = 0;
    for (const std::uint64_t n : {1ull, 2ull, 3ull, 7ull, 10ull, 99ull, 100ull, 101ull, 999ull, 1000ull}) {
        KllSketch<double> s(1000, 1);
        for (std::uint64_t i = 1; i <= n; ++i) s.add(static_cast<double>(i));
        REQUIRE(!s.is_estimation_mode());
        std::vector<double> ranks = {0.0, 1.0, 0.07, 0.29, 0.57, 1.0 / 3};
        for (std::uint64_t i = 0; i <= n; ++i) {
            const double r = static_cast<double>(i) / static_cast<double>(n);
            for (const double d : {0.0, 1e-12, -1e-12, 4e-8 / n, -4e-8 / n, 6e-8 / n, -6e-8 / n})
                if (r + d >= 0 && r + d <= 1) ranks.push_back(r + d);
            ranks.push_back(std::nextafter(r, 0.0));
            if (std::nextafter(r, 2.0) <= 1) ranks.push_back(std::nextafter(r, 2.0));
        }
        for (int t = 0; t < 200; ++t) ranks.push_back(rng.uniform());
        for (const double r : ranks)
            for (const bool inc : {true, false}) {
                INFO("n " << n << " rank " << r << " inclusive " << inc);
                const double need = std::max(1.0, java_need(r, n, inc));
                CHECK(s.quantile(r, inc) == need);
                ++checked;
            }
    }
    CHECK(checked > 20000);
}
