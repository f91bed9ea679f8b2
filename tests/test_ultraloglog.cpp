// UltraLogLog: registers and estimates against hash4j's golden table
// (tests/fixtures/ultraloglog/hash4j.txt), exact oracles for merge, reduce and
// the HyperLogLog conversion, the frame format, and the error bound.
#include <tally/core/platform.hpp>
#include <tally/sketch/distinct/ultraloglog.hpp>
#include <tally/window/windowed.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "merge_laws.hpp"
#include "test_support.hpp"

using tally::FormatError;
using tally::UllEstimator;
using tally::UltraLogLog;
using tally::test::Rng;

namespace {

std::string fixture_path() {
    std::string f = __FILE__;
    return f.substr(0, f.find_last_of("/\\") + 1) + "fixtures/ultraloglog/hash4j.txt";
}

std::vector<std::vector<std::string>> fixture_lines(const std::string& kind) {
    std::ifstream in(fixture_path());
    REQUIRE(in.good());
    std::vector<std::vector<std::string>> out;
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream ss(line);
        std::vector<std::string> fields;
        for (std::string f; ss >> f;) fields.push_back(f);
        if (!fields.empty() && fields[0] == kind) out.push_back(fields);
    }
    REQUIRE_FALSE(out.empty());
    return out;
}

std::uint64_t fnv1a(std::span<const std::uint8_t> s) {
    std::uint64_t x = 0xcbf29ce484222325ull;
    for (const std::uint8_t b : s) {
        x ^= b;
        x *= 0x100000001b3ull;
    }
    return x;
}

std::string hex(std::span<const std::uint8_t> s) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (const std::uint8_t b : s) {
        out += digits[b >> 4];
        out += digits[b & 15];
    }
    return out;
}

std::vector<std::uint8_t> unhex(const std::string& s) {
    std::vector<std::uint8_t> out;
    for (std::size_t i = 0; i + 1 < s.size(); i += 2)
        out.push_back(static_cast<std::uint8_t>(std::stoul(s.substr(i, 2), nullptr, 16)));
    return out;
}

// The fixture's hash streams (see its header).
struct Stream {
    Rng rng;
    int kind;
    int p;
    std::uint64_t next() {
        const std::uint64_t h = rng.next();
        if (kind == 0) return h;
        const std::uint64_t s = rng.next() & 63;
        const std::uint64_t top = h & (~std::uint64_t{0} << (64 - p));
        const std::uint64_t low = (h << p) >> p;
        return top | (low >> s);
    }
};

UltraLogLog build(int p, int kind, std::uint64_t seed, std::uint64_t n) {
    UltraLogLog u(p);
    Stream s{Rng(seed), kind, p};
    for (std::uint64_t i = 0; i < n; ++i) u.add_hash(s.next());
    return u;
}

bool close(double x, double ref, double rel) {
    if (std::isinf(ref)) return x == ref;
    return std::fabs(x - ref) <= rel * std::fabs(ref);
}

// The reference register update: the paper's unpack, OR, pack.
std::uint8_t reference_union(std::uint8_t a, std::uint8_t b) {
    if (a == 0 || b == 0) return a | b;
    return tally::detail::ull_pack(tally::detail::ull_unpack(a) | tally::detail::ull_unpack(b));
}

std::vector<std::uint8_t> valid_registers(int p) {
    std::vector<std::uint8_t> v;
    for (int r = 0; r < 256; ++r)
        if (tally::detail::ull_valid_register(static_cast<std::uint8_t>(r), p))
            v.push_back(static_cast<std::uint8_t>(r));
    return v;
}

}  // namespace

TEST_CASE("UltraLogLog rejects precisions outside [3, 26]", "[ultraloglog]") {
    CHECK_THROWS_WITH(UltraLogLog(2), "tally::UltraLogLog::UltraLogLog: precision 2 is out of range [3, 26]");
    CHECK_THROWS_WITH(UltraLogLog(27), "tally::UltraLogLog::UltraLogLog: precision 27 is out of range [3, 26]");
    CHECK_THROWS_AS(UltraLogLog(-1), std::invalid_argument);
    CHECK(UltraLogLog(3).register_count() == 8);
    CHECK(UltraLogLog(26).register_count() == (std::size_t{1} << 26));
    CHECK(UltraLogLog(26).memory_bytes() < 256);  // nothing allocated before the first add
}

TEST_CASE("UltraLogLog states and estimates equal hash4j's for the same hash streams", "[ultraloglog][hash4j]") {
    // n up to 10^7 in optimized builds, 10^5 under the sanitizers.
    const std::uint64_t max_n = tally::test::big(10'000'000, 100'000);
    std::size_t checked = 0;
    for (const auto& f : fixture_lines("stream")) {
        const int kind = std::stoi(f[1]);
        const int p = std::stoi(f[2]);
        const std::uint64_t seed = std::stoull(f[3]);
        const std::uint64_t n = std::stoull(f[4]);
        if (n > max_n) continue;
        INFO("kind " << kind << " p " << p << " n " << n);
        const UltraLogLog u = build(p, kind, seed, n);
        CHECK(fnv1a(u.state()) == std::stoull(f[5], nullptr, 16));
        CHECK(close(u.estimate(UllEstimator::fgra), std::stod(f[6]), 1e-9));
        CHECK(close(u.estimate(UllEstimator::ml), std::stod(f[7]), 1e-9));
        // hash4j keeps the change probability as a running double (1 minus the
        // decrements), tally the exact sum: they agree while the probability
        // is well above the double's absolute error (near saturation hash4j's
        // drifts to 0 and its martingale estimate to infinity).
        if (std::stod(f[9]) > 1e-6) CHECK(close(u.estimate(UllEstimator::martingale), std::stod(f[8]), 1e-9));
        CHECK(close(u.state_change_probability(), std::stod(f[9]), 1e-12));
        CHECK(u.estimator() == UllEstimator::martingale);
        CHECK(u.estimate() == u.estimate(UllEstimator::martingale));
        // from_state reads the same bytes into a sketch that answers FGRA and ML alike.
        const UltraLogLog back = UltraLogLog::from_state(u.state());
        CHECK(back == u);
        CHECK(back.estimate(UllEstimator::fgra) == u.estimate(UllEstimator::fgra));
        CHECK(back.estimate() == u.estimate(UllEstimator::fgra));
        ++checked;
    }
    CHECK(checked >= (tally::test::small_tests ? 80u : 100u));
    for (const auto& f : fixture_lines("state")) {
        const std::uint64_t n = std::stoull(f[4]);
        const UltraLogLog u = build(std::stoi(f[2]), std::stoi(f[1]), std::stoull(f[3]), n);
        INFO("kind " << f[1] << " p " << f[2] << " n " << n);
        CHECK(hex(u.state()) == f[5]);
    }
}

TEST_CASE("UltraLogLog merge and reduce equal hash4j's merge and downsize", "[ultraloglog][hash4j]") {
    for (const auto& f : fixture_lines("merge")) {
        const int p = std::stoi(f[1]);
        UltraLogLog a = build(p, 0, std::stoull(f[2]), std::stoull(f[3]));
        const UltraLogLog b = build(p, 0, std::stoull(f[4]), std::stoull(f[5]));
        a.merge(b);
        INFO("merge p " << p);
        CHECK(fnv1a(a.state()) == std::stoull(f[6], nullptr, 16));
        CHECK(close(a.estimate(UllEstimator::fgra), std::stod(f[7]), 1e-9));
        CHECK(close(a.estimate(UllEstimator::ml), std::stod(f[8]), 1e-9));
        CHECK(a.estimator() == UllEstimator::fgra);
        CHECK(a.estimate() == a.estimate(UllEstimator::fgra));
        CHECK_THROWS_AS(a.estimate(UllEstimator::martingale), std::invalid_argument);
    }
    for (const auto& f : fixture_lines("reduce")) {
        const UltraLogLog a = build(std::stoi(f[1]), 1, std::stoull(f[3]), std::stoull(f[4]));
        const UltraLogLog r = a.reduce(std::stoi(f[2]));
        INFO("reduce " << f[1] << " -> " << f[2]);
        CHECK(r.precision() == std::stoi(f[2]));
        CHECK(fnv1a(r.state()) == std::stoull(f[5], nullptr, 16));
        CHECK(close(r.estimate(UllEstimator::fgra), std::stod(f[6]), 1e-9));
        CHECK(close(r.estimate(UllEstimator::ml), std::stod(f[7]), 1e-9));
        CHECK(r.total() == a.total());
    }
    for (const auto& f : fixture_lines("rstate")) {
        const UltraLogLog a = build(std::stoi(f[1]), 1, std::stoull(f[3]), std::stoull(f[4]));
        CHECK(hex(a.reduce(std::stoi(f[2])).state()) == f[5]);
    }
}

TEST_CASE("UltraLogLog::merge is the register union of the paper's update rule", "[ultraloglog]") {
    // Every pair of registers that can occur at p = 3, 4, 5 and 8, in the
    // first `lanes` registers of two sketches (every byte lane of the 16- and
    // 32-byte kernels; the register after them holds the smallest value, so
    // neither is empty).
    for (int p : {3, 4, 5, 8}) {
        const auto regs = valid_registers(p);
        const std::size_t lanes = std::min<std::size_t>(32, (std::size_t{1} << p) - 1);
        std::vector<std::uint8_t> sa(std::size_t{1} << p, 0), sb(sa.size(), 0);
        sa[lanes] = sb[lanes] = static_cast<std::uint8_t>(4 * (p - 1));
        for (const std::uint8_t x : regs)
            for (const std::uint8_t y : regs) {
                std::fill_n(sa.begin(), lanes, x);
                std::fill_n(sb.begin(), lanes, y);
                UltraLogLog a = UltraLogLog::from_state(sa);
                a.merge(UltraLogLog::from_state(sb));
                const std::uint8_t want = reference_union(x, y);
                for (std::size_t j = 0; j < lanes; ++j)
                    if (a.state()[j] != want || !tally::detail::ull_valid_register(want, p))
                        FAIL_CHECK("p " << p << ", register " << j << ": " << int(x) << " | " << int(y) << " gave "
                                        << int(a.state()[j]) << ", expected " << int(want));
            }
    }
    // The merge itself: random sketches at p = 3 (registers reach every
    // value), each register against the reference union.
    Rng rng(31);
    for (int trial = 0; trial < 200; ++trial) {
        const int p = 3 + static_cast<int>(rng.below(4));
        UltraLogLog a = build(p, 1, rng.next(), rng.below(64));
        const UltraLogLog b = build(p, 1, rng.next(), rng.below(64));
        std::vector<std::uint8_t> expect(a.register_count());
        for (std::size_t i = 0; i < expect.size(); ++i) expect[i] = reference_union(a.state()[i], b.state()[i]);
        a.merge(b);
        CHECK(std::equal(expect.begin(), expect.end(), a.state().begin()));
    }
    // The kernels stream whole cache lines: the registers start on one.
    for (int p : {4, 12, 16}) {
        const UltraLogLog u = build(p, 1, 7, 100);
        CHECK(reinterpret_cast<std::uintptr_t>(u.state().data()) % tally::cache_line_size == 0);
        const UltraLogLog copy = u;
        CHECK(reinterpret_cast<std::uintptr_t>(copy.state().data()) % tally::cache_line_size == 0);
    }
}

TEST_CASE("UltraLogLog merge kernels each give the paper's union in every byte lane", "[ultraloglog]") {
    // Each vector kernel called directly (the dispatcher runs only the best
    // one this CPU has), on 48 registers: both steps of the AVX2 kernel.
    struct Kernel {
        const char* name;
        bool runs;
        std::size_t (*merge)(std::uint8_t*, const std::uint8_t*, std::size_t);
    };
    std::vector<Kernel> kernels;
#if TALLY_SIMD_X86
    kernels.push_back({"sse2", true, &tally::detail::ull_merge_sse2});
#endif
#if TALLY_SIMD_X86
    kernels.push_back({"avx2", tally::detail::cpu_has_avx2(), &tally::detail::ull_merge_avx2});
#endif
#if TALLY_SIMD_NEON
    kernels.push_back({"neon", true, &tally::detail::ull_merge_neon});
#endif
    constexpr std::size_t m = 48;
    const auto regs = valid_registers(4);  // kernels run from p = 4; larger p use a subset
    for (const Kernel& k : kernels) {
        if (!k.runs) continue;
        std::size_t wrong = 0, pairs = 0;
        std::vector<std::uint8_t> a(m), b(m);
        for (const std::uint8_t x : regs)
            for (const std::uint8_t y : regs) {
                std::fill(a.begin(), a.end(), x);
                std::fill(b.begin(), b.end(), y);
                const std::size_t done = k.merge(a.data(), b.data(), m);
                const std::uint8_t want = reference_union(x, y);
                ++pairs;
                if ((done != m || std::count(a.begin(), a.end(), want) != static_cast<std::ptrdiff_t>(m)) && ++wrong <= 5)
                    FAIL_CHECK(k.name << ": " << int(x) << " | " << int(y) << " gave " << int(a[0]) << " over "
                                      << done << " registers, expected " << int(want));
            }
        INFO(k.name);
        CHECK(pairs == regs.size() * regs.size());
        CHECK(wrong == 0);
    }
}

TEST_CASE("UltraLogLog merge of two streams equals the sketch of their union", "[ultraloglog]") {
    for (int p : {3, 8, 12}) {
        for (std::uint64_t n : {0u, 1u, 50u, 5000u, 200000u}) {
            Rng rng(p * 1000 + n);
            UltraLogLog a(p), b(p), both(p);
            for (std::uint64_t i = 0; i < n; ++i) {
                const std::uint64_t h = rng.next();
                (i % 3 == 0 ? a : b).add_hash(h);
                both.add_hash(h);
                if (i % 7 == 0) {  // shared items count once
                    a.add_hash(h);
                    b.add_hash(h);
                }
            }
            UltraLogLog m = a;
            m.merge(b);
            INFO("p " << p << " n " << n);
            CHECK(m == both);
            CHECK(m.estimate(UllEstimator::fgra) == both.estimate(UllEstimator::fgra));
            CHECK(m.estimate(UllEstimator::ml) == both.estimate(UllEstimator::ml));
            CHECK(m.total() == a.total() + b.total());
        }
    }
}

TEST_CASE("UltraLogLog::reduce equals a sketch built at the smaller precision", "[ultraloglog]") {
    for (int kind : {0, 1}) {
        for (int p : {5, 12, 16}) {
            for (int q : {3, std::max(3, p - 3), p - 1, p}) {
                Stream s1{Rng(77), kind, p};
                UltraLogLog big(p), small(q);
                for (int i = 0; i < 30000; ++i) {
                    const std::uint64_t h = s1.next();
                    big.add_hash(h);
                    small.add_hash(h);
                }
                INFO("kind " << kind << " p " << p << " -> " << q);
                const UltraLogLog r = big.reduce(q);
                CHECK(r == small);
                CHECK(r.estimator() == UllEstimator::fgra);
            }
        }
    }
    UltraLogLog u(10);
    CHECK_THROWS_WITH(u.reduce(11), "tally::UltraLogLog::reduce: precision 11 is out of range [3, 10]");
    CHECK_THROWS_AS(u.reduce(2), std::invalid_argument);
    CHECK(u.reduce(4).empty());
    CHECK(u.reduce(4).estimator() == UllEstimator::martingale);
}

TEST_CASE("UltraLogLog::to_hyperloglog has the registers of a HyperLogLog fed the same hashes", "[ultraloglog]") {
    for (int p : {4, 12, 18}) {
        for (std::uint64_t n : {0u, 3u, 1000u, 100000u}) {
            Rng rng(p + 10 * n);
            UltraLogLog u(p);
            tally::HyperLogLog h(p);
            for (std::uint64_t i = 0; i < n; ++i) {
                const std::uint64_t x = rng.next() >> (rng.next() & 31);  // some long runs of zeros too
                u.add_hash(x);
                h.add_hash(x);
            }
            const tally::HyperLogLog c = u.to_hyperloglog();
            INFO("p " << p << " n " << n);
            CHECK(c.precision() == p);
            CHECK(c.hash_mode() == tally::HllHashMode::tally);
            CHECK(c == h);
            CHECK(c.total() == u.total());
            CHECK(c.ertl_estimate() == h.ertl_estimate());
        }
    }
    CHECK_THROWS_WITH(UltraLogLog(3).to_hyperloglog(),
                      "tally::UltraLogLog::to_hyperloglog: precision 3 is out of range [4, 18]");
    CHECK_THROWS_AS(UltraLogLog(19).to_hyperloglog(), std::invalid_argument);
}

TEST_CASE("UltraLogLog::from_state validates the length and every register", "[ultraloglog]") {
    CHECK_THROWS_AS(UltraLogLog::from_state(std::vector<std::uint8_t>(4, 0)), FormatError);
    CHECK_THROWS_AS(UltraLogLog::from_state(std::vector<std::uint8_t>(12, 0)), FormatError);
    CHECK_THROWS_AS(UltraLogLog::from_state({}), FormatError);
    const UltraLogLog e = UltraLogLog::from_state(std::vector<std::uint8_t>(64, 0));
    CHECK(e.precision() == 6);
    CHECK(e.empty());
    CHECK(e.estimator() == UllEstimator::martingale);
    CHECK(e.estimate() == 0.0);
    for (int p : {3, 8}) {
        for (int r = 1; r < 256; ++r) {
            std::vector<std::uint8_t> s(std::size_t{1} << p, 0);
            s.back() = static_cast<std::uint8_t>(r);
            const int h = r >> 2;
            const bool valid = h >= p && (h > p || (r & 1) == 0) ? true : (h == p - 1 && (r & 3) == 0);
            INFO("p " << p << " r " << r);
            CHECK(tally::detail::ull_valid_register(static_cast<std::uint8_t>(r), p) == valid);
            if (valid) {
                CHECK(UltraLogLog::from_state(s).state().back() == r);
            } else {
                CHECK_THROWS_AS(UltraLogLog::from_state(s), FormatError);
            }
        }
    }
    // Every register value a stream produces is valid (p = 3: all of them occur).
    const UltraLogLog u = build(3, 1, 5, 100000);
    for (const std::uint8_t r : u.state()) CHECK(tally::detail::ull_valid_register(r, 3));
}

TEST_CASE("UltraLogLog martingale estimate: add-only, duplicates ignored, kept through copies", "[ultraloglog]") {
    UltraLogLog u(10);
    CHECK(u.empty());
    CHECK(u.estimate() == 0.0);
    CHECK(u.state_change_probability() == 1.0);
    CHECK(u.estimate(UllEstimator::fgra) == 0.0);
    CHECK(u.estimate(UllEstimator::ml) == 0.0);
    u.add(std::uint64_t{1});
    CHECK(u.estimate() == 1.0);
    for (std::uint64_t i = 0; i < 5000; ++i) u.add(i);
    const double e = u.estimate();
    const std::vector<std::uint8_t> before(u.state().begin(), u.state().end());
    for (std::uint64_t i = 0; i < 5000; ++i) u.add(i);  // all seen before
    CHECK(u.estimate() == e);
    CHECK(std::equal(before.begin(), before.end(), u.state().begin()));
    CHECK(u.total() == 10001);
    CHECK(std::fabs(e / 5000 - 1) < 4 * u.relative_standard_error());
    const UltraLogLog copy = u;
    CHECK(copy.estimate() == e);
    UltraLogLog moved = UltraLogLog(copy);
    CHECK(moved.estimate() == e);
    // The exact change probability: the registers' sum.
    const UltraLogLog fresh = UltraLogLog::from_state(u.state());
    CHECK(fresh.state_change_probability() == u.state_change_probability());
    // Strings and other items go through tally's hashing.
    UltraLogLog s(8);
    s.add(std::string("a"));
    s.add("a");
    CHECK(s.estimate() == 1.0);
    const double second = 1.0 + 1.0 / s.state_change_probability();
    s.add(std::string_view("b"));
    CHECK(s.estimate() == second);
    CHECK(s.estimate(UllEstimator::fgra) == Approx(2.0).epsilon(0.01));
    u.clear();
    CHECK(u.empty());
    CHECK(u.total() == 0);
    CHECK(u.estimate() == 0.0);
    CHECK(u.estimator() == UllEstimator::martingale);
    CHECK(u.relative_standard_error() == Approx(0.6582 / 32).epsilon(1e-3));
    CHECK(u.relative_standard_error(UllEstimator::fgra) == Approx(0.7822 / 32).epsilon(1e-3));
    CHECK(u.relative_standard_error(UllEstimator::ml) == Approx(0.7609 / 32).epsilon(1e-3));
}

TEST_CASE("UltraLogLog merge laws, incompatible merges and the frame's robustness", "[ultraloglog]") {
    UltraLogLog empty(8), a(8), b(8), c(8);
    for (std::uint64_t i = 0; i < 3000; ++i) a.add(i);
    for (std::uint64_t i = 2000; i < 9000; ++i) b.add(i);
    for (std::uint64_t i = 0; i < 20; ++i) c.add(i * 1000003);
    tally::test::check_merge_laws(empty, a, b, c);
    tally::test::check_incompatible_merge(a, UltraLogLog(9));
    CHECK_THROWS_WITH(UltraLogLog(8).merge(UltraLogLog(9)),
                      "tally::UltraLogLog::merge: precision 9 does not match 8 (fold the larger one with reduce())");
    for (const UltraLogLog* s : {&empty, &a, &c}) {
        tally::test::check_truncations_throw<UltraLogLog>(s->serialize());
        tally::test::check_corruptions_safe<UltraLogLog>(s->serialize(), 9);
    }
    UltraLogLog merged = a;
    merged.merge(b);
    tally::test::check_truncations_throw<UltraLogLog>(merged.serialize());
    // A decoded sketch answers every query alike, martingale included.
    for (const UltraLogLog* s : {&empty, &a, &c, &merged}) {
        const auto bytes = s->serialize();
        const UltraLogLog back = UltraLogLog::deserialize(bytes);
        CHECK(back.estimate() == s->estimate());
        CHECK(back.estimator() == s->estimator());
        CHECK(back.state_change_probability() == s->state_change_probability());
        CHECK(back.total() == s->total());
        UltraLogLog x = back, y = *s;
        x.add(std::uint64_t{123456789});
        y.add(std::uint64_t{123456789});
        CHECK(x.estimate() == y.estimate());
    }
}

TEST_CASE("UltraLogLog frame bytes are the documented layout", "[ultraloglog][golden]") {
    // Header, then p, flags (1: martingale), encoding (0 dense, 1 sparse), 0,
    // total (u64), the martingale estimate (f64) when flagged, the registers.
    const auto frame = [](std::vector<std::uint8_t> tail) {
        std::vector<std::byte> out;
        for (const int b : {int{'T'}, int{'A'}, int{'L'}, int{'Y'}, 12, 1, 0, 0})
            out.push_back(static_cast<std::byte>(b));
        for (const std::uint8_t b : tail) out.push_back(std::byte{b});
        return out;
    };
    CHECK(UltraLogLog(3).serialize() == frame({3, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
    // Two hashes of the fixture's p = 3 stream: hash4j's state 00 00 00 00 08 00 00 00 (n = 1) and
    // the martingale sum 1 + 1 / (15/16) = 2.0666666666666664 (n = 2).
    UltraLogLog two = build(3, 0, 1003, 2);
    const std::string state = hex(two.state());
    const auto regs = unhex(state);
    std::vector<std::uint8_t> sparse{3, 1, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0};
    double mart = 1.0 + 1.0 / (15.0 / 16.0);
    std::uint64_t bits;
    std::memcpy(&bits, &mart, 8);
    for (int i = 0; i < 8; ++i) sparse.push_back(static_cast<std::uint8_t>(bits >> (8 * i)));
    std::vector<std::size_t> nz;
    for (std::size_t i = 0; i < regs.size(); ++i)
        if (regs[i] != 0) nz.push_back(i);
    REQUIRE(nz.size() == 2);
    sparse.push_back(2);
    sparse.push_back(static_cast<std::uint8_t>(nz[0]));
    sparse.push_back(regs[nz[0]]);
    sparse.push_back(static_cast<std::uint8_t>(nz[1] - nz[0] - 1));
    sparse.push_back(regs[nz[1]]);
    CHECK(two.serialize() == frame(sparse));
    // Dense: hash4j's p = 3 state after 100 hashes, through from_state (no martingale).
    std::string dense_hex;
    for (const auto& f : fixture_lines("state"))
        if (f[1] == "0" && f[2] == "3" && f[4] == "100") dense_hex = f[5];
    REQUIRE(dense_hex.size() == 16);
    std::vector<std::uint8_t> dense{3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    for (const std::uint8_t r : unhex(dense_hex)) dense.push_back(r);
    CHECK(UltraLogLog::from_state(unhex(dense_hex)).serialize() == frame(dense));
    CHECK(UltraLogLog::deserialize(frame(dense)) == UltraLogLog::from_state(unhex(dense_hex)));
    // Non-canonical or impossible frames.
    auto bad = frame(dense);
    bad[8 + 12] = std::byte{1};  // register value 1 is impossible
    CHECK_THROWS_AS(UltraLogLog::deserialize(bad), FormatError);
    CHECK_THROWS_AS(UltraLogLog::deserialize(frame({3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})),
                    FormatError);  // dense all-zero: the sparse form is shorter
    CHECK_THROWS_AS(UltraLogLog::deserialize(frame({27, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})),
                    FormatError);  // precision 27
    CHECK_THROWS_AS(
        UltraLogLog::deserialize(frame({3, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0})),
        FormatError);  // an empty sketch whose martingale estimate is 1
    // p = 26, empty: decodes without allocating 64 MiB.
    const auto e26 = frame({26, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
    const UltraLogLog u26 = UltraLogLog::deserialize(e26);
    CHECK(u26.memory_bytes() < 256);
    CHECK(u26.serialize() == e26);
    // p = 20 with a few registers: decoded as a list; every query answers
    // as the sketch that wrote it, and the array is built on first use.
    UltraLogLog few(20);
    for (std::uint64_t i = 0; i < 5; ++i) few.add(i);
    UltraLogLog back = UltraLogLog::deserialize(few.serialize());
    CHECK(back.memory_bytes() < 1024);
    CHECK(back.estimate() == few.estimate());
    CHECK(back.estimate(UllEstimator::ml) == few.estimate(UllEstimator::ml));
    CHECK(back.state_change_probability() == few.state_change_probability());
    CHECK(back.reduce(18).to_hyperloglog() == few.reduce(18).to_hyperloglog());
    const UltraLogLog copy = back;
    CHECK(copy.serialize() == few.serialize());
    CHECK(back == few);  // builds the array
    back.add(std::uint64_t{99});
    few.add(std::uint64_t{99});
    CHECK(back.serialize() == few.serialize());
    UltraLogLog merged = UltraLogLog::deserialize(few.serialize());
    merged.merge(UltraLogLog::deserialize(few.serialize()));
    CHECK(merged == few);
}

TEST_CASE("UltraLogLog RSE per estimator is within 1.05 of the paper's at p = 8", "[ultraloglog][big]") {
    // 1000 seeded trials; at each n the RMS relative error of every estimator
    // must be at most 1.05 times its asymptotic RSE (the error is smaller near
    // n = m and below). Negative control: HyperLogLog's Ertl estimate on the
    // same registers (to_hyperloglog) must exceed the FGRA bound.
    constexpr int p = 8;
    const double m = 256;
    const int trials = 1000;
    std::vector<std::uint64_t> ns{10, 100, 1000, 10000};
    if (!tally::test::small_tests) ns.push_back(100000);
    std::vector<double> se_fgra(ns.size()), se_ml(ns.size()), se_mart(ns.size()), se_hll(ns.size());
    for (int t = 0; t < trials; ++t) {
        Rng rng(0x5eed0000 + t);
        UltraLogLog u(p);
        std::uint64_t n = 0;
        for (std::size_t j = 0; j < ns.size(); ++j) {
            for (; n < ns[j]; ++n) u.add_hash(rng.next());
            const double nd = static_cast<double>(n);
            const auto sq = [&](double e) { return (e / nd - 1) * (e / nd - 1); };
            se_fgra[j] += sq(u.estimate(UllEstimator::fgra));
            se_ml[j] += sq(u.estimate(UllEstimator::ml));
            se_mart[j] += sq(u.estimate(UllEstimator::martingale));
            se_hll[j] += sq(u.to_hyperloglog().ertl_estimate());
        }
    }
    const double rse_fgra = std::sqrt(0.6118931496978437 / m);
    const double rse_ml = 0.7608621002725182 / std::sqrt(m);
    const double rse_mart = std::sqrt(5 * std::log(2.0) / 8 / m);
    for (std::size_t j = 0; j < ns.size(); ++j) {
        const double f = std::sqrt(se_fgra[j] / trials), l = std::sqrt(se_ml[j] / trials),
                     g = std::sqrt(se_mart[j] / trials), h = std::sqrt(se_hll[j] / trials);
        INFO("n " << ns[j] << ": fgra " << f / rse_fgra << " ml " << l / rse_ml << " martingale " << g / rse_mart
                  << " hll/fgra " << h / rse_fgra);
        CHECK(f <= 1.05 * rse_fgra);
        CHECK(l <= 1.05 * rse_ml);
        CHECK(g <= 1.05 * rse_mart);
        if (ns[j] >= 1000) CHECK(h > 1.05 * rse_fgra);  // the negative control fails the bound
        if (ns[j] >= 10000) {  // n >= 39 m: the asymptotic regime, where the errors are the paper's
            CHECK(f >= 0.9 * rse_fgra);
            CHECK(l >= 0.9 * rse_ml);
            CHECK(g >= 0.9 * rse_mart);
        }
    }
}

TEST_CASE("Windowed<UltraLogLog> answers the sketch of the window's items", "[ultraloglog]") {
    tally::Windowed<UltraLogLog, 4> w(1000, UltraLogLog(8));
    std::vector<std::pair<std::uint64_t, std::uint64_t>> events;
    Rng rng(4);
    for (std::uint64_t t = 0; t < 10000; t += 7) {
        const std::uint64_t h = rng.next();
        w.add(t, h);
        events.emplace_back(t, h);
    }
    const std::uint64_t now = 9999;
    UltraLogLog expect(8);
    for (const auto& [t, h] : events)
        if (t / 1000 + 4 > now / 1000) expect.add(h);
    const UltraLogLog& v = w.view(now);
    CHECK(v == expect);
    CHECK(v.estimate() == expect.estimate(UllEstimator::fgra));
    const auto bytes = w.serialize();
    auto back = tally::Windowed<UltraLogLog, 4>::deserialize(bytes);
    CHECK(back.view(now) == expect);
}

TEST_CASE("UltraLogLog bounds hold the true count as often as their standard errors promise", "[ultraloglog]") {
    CHECK_THROWS_AS(tally::UltraLogLog(10).lower_bound(0), std::invalid_argument);
    CHECK_THROWS_AS(tally::UltraLogLog(10).upper_bound(4), std::invalid_argument);
    tally::UltraLogLog empty(10);
    CHECK(empty.lower_bound(2) == 0.0);
    CHECK(empty.upper_bound(2) == 0.0);
    // 400 seeded trials of 20,000 distinct items at p = 10 (RSE about 2.4%):
    // 2 standard errors hold the count in about 95% of trials, 1 in about 68%.
    // The negative control: a band of a quarter of one standard error would
    // hold it in only about 20%, so a bound of the wrong width fails here.
    constexpr int trials = 400;
    constexpr std::uint64_t n = 20'000;
    int in2 = 0, in1 = 0, in_quarter = 0;
    tally::test::Rng rng(0x51ab1e5u);
    for (int t = 0; t < trials; ++t) {
        tally::UltraLogLog s(10);
        for (std::uint64_t i = 0; i < n; ++i) s.add_hash(rng.next());
        const double lo2 = s.lower_bound(2), hi2 = s.upper_bound(2);
        REQUIRE(lo2 <= s.estimate());
        REQUIRE(hi2 >= s.estimate());
        REQUIRE(s.lower_bound(1) >= lo2);
        REQUIRE(s.upper_bound(1) <= hi2);
        in2 += lo2 <= n && n <= hi2;
        in1 += s.lower_bound(1) <= n && n <= s.upper_bound(1);
        const double q = 0.25 * s.relative_standard_error();
        in_quarter += s.estimate() / (1 + q) <= n && n <= s.estimate() / (1 - q);
    }
    CHECK(in2 >= trials * 90 / 100);
    CHECK(in1 >= trials * 58 / 100);
    CHECK(in1 <= trials * 80 / 100);
    CHECK(in_quarter <= trials * 35 / 100);
}
