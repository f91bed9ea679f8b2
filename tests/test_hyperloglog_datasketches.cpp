// HyperLogLog <-> Apache DataSketches HllSketch.
//
// The fixtures in tests/fixtures/datasketches/ were written by the reference
// implementation, apache/datasketches-cpp 5.2.0 (tag 5.2.0, commit de8553ba),
// with a 40-line generator outside this repository:
//
//   git clone https://github.com/apache/datasketches-cpp && git -C datasketches-cpp checkout 5.2.0
//   g++ -std=c++17 -O2 -Idatasketches-cpp/hll/include -Idatasketches-cpp/common/include gen.cpp -o gen
//   ./gen tests/fixtures/datasketches
//
// gen.cpp, for lg_k in {4, 10, 14}, type in {HLL_4, HLL_6, HLL_8}, items in
// {integers, strings} and n in {0, 1, 10, 1000, 1000000}: builds
// `hll_sketch s(lg_k, type)`, calls s.update(i) (uint64_t i) or
// s.update(std::to_string(i)) for i = 0 .. n-1, and writes
// s.serialize_compact() to <int|str>_lgk<K>_<hll4|hll6|hll8>_n<N>_compact.sk and
// s.serialize_updatable() to ..._updatable.sk. It also writes
// int_lgk{18,19,21}_hll8_n10_compact.sk (items 0..9) and, for each type,
// union_int_lgk12_<type>_n30000_{compact,updatable}.sk: hll_union(12) of an
// HLL_8 sketch of 0..19999 and one of 10000..29999, get_result(type).
//
// Estimator choice: DataSketches' get_estimate() of an HLL-mode image whose
// out-of-order flag is clear is its HIP accumulator, stored in the image;
// tally compares against that (HIP against HIP). LIST/SET images are
// estimated by DataSketches from the coupon count, which tally does not
// reproduce: there tally replays the coupons and answers with HIP.
#include <tally/sketch/distinct/hyperloglog.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

#include "catch.hpp"
#include "test_support.hpp"

using tally::DataSketchesHll;
using tally::FormatError;
using tally::HyperLogLog;
using Mode = tally::HllHashMode;

namespace {

std::string fixture_dir() {
    std::string f = __FILE__;
    return f.substr(0, f.find_last_of("/\\") + 1) + "fixtures/datasketches/";
}

std::vector<std::byte> read_fixture(const std::string& name) { return tally::test::read_file_bytes(fixture_dir() + name); }

double f64_at(const std::vector<std::byte>& b, std::size_t at) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint64_t>(b[at + static_cast<std::size_t>(i)]);
    return std::bit_cast<double>(v);
}

HyperLogLog ds_sketch(int lg_k, bool strings, std::uint64_t begin, std::uint64_t end) {
    HyperLogLog h(lg_k, Mode::datasketches);
    for (std::uint64_t i = begin; i < end; ++i) {
        if (strings)
            h.add(std::to_string(i));
        else
            h.add(i);
    }
    return h;
}

const char* type_name(DataSketchesHll t) {
    return t == DataSketchesHll::hll_4 ? "hll4" : t == DataSketchesHll::hll_6 ? "hll6" : "hll8";
}

std::vector<std::byte> bytes_of(std::initializer_list<int> xs) {
    std::vector<std::byte> v;
    for (int x : xs) v.push_back(static_cast<std::byte>(x));
    return v;
}

bool hll_mode(const std::vector<std::byte>& b) { return (std::to_integer<int>(b[7]) & 3) == 2; }

constexpr DataSketchesHll types[] = {DataSketchesHll::hll_4, DataSketchesHll::hll_6, DataSketchesHll::hll_8};

}  // namespace

TEST_CASE("DataSketches: MurmurHash3 x64 128 matches the reference", "[hyperloglog][datasketches]") {
    using tally::detail::murmur3_x64_128;
    // Values printed by datasketches-cpp 5.2.0's MurmurHash3_x64_128.
    const char* fox = "The quick brown fox jumps over the lazy dog";
    CHECK(murmur3_x64_128(fox, std::strlen(fox), 0).h1 == 0xe34bbc7bbc071b6cull);
    CHECK(murmur3_x64_128(fox, std::strlen(fox), 0).h2 == 0x7a433ca9c49a9347ull);
    CHECK(murmur3_x64_128(fox, std::strlen(fox), 9001).h1 == 0x2f67dcdbc56dbf23ull);
    CHECK(murmur3_x64_128(fox, std::strlen(fox), 9001).h2 == 0x8a0a2fafd6b2155cull);
    CHECK(murmur3_x64_128("", 0, 9001).h1 == 0x1e70a32266491bb9ull);
    CHECK(murmur3_x64_128("a", 1, 9001).h2 == 0xc51f4ded6e1eb0feull);
    CHECK(murmur3_x64_128("0123456789abcdef0", 17, 9001).h1 == 0x9d65180a94df5057ull);
    CHECK(murmur3_x64_128("0123456789abcdef0", 17, 0).h2 == 0x73fb68b3313128caull);
}

TEST_CASE("DataSketches: the hot-path MurmurHash3 equals the byte-by-byte one", "[hyperloglog][datasketches]") {
    using tally::detail::murmur3_x64_128;
    using tally::detail::murmur3_x64_128_fast;
    tally::test::Rng rng(0x3a3a'9001ull);
    const auto same = [](tally::detail::Hash128 a, tally::detail::Hash128 b) { return a.h1 == b.h1 && a.h2 == b.h2; };
    // Every length 0..40 (all tail shapes, with and without a 16-byte block)
    // and random longer ones; each input in an exactly sized heap buffer, so
    // that a read past the end is an error under AddressSanitizer.
    std::vector<std::size_t> lengths;
    for (std::size_t len = 0; len <= 40; ++len) lengths.push_back(len);
    for (int i = 0; i < 60; ++i) lengths.push_back(41 + static_cast<std::size_t>(rng.below(300)));
    int mismatches = 0;
    int insensitive = 0;
    int outside = 0;
    for (const std::size_t len : lengths) {
        for (int trial = 0; trial < 40; ++trial) {
            const std::uint64_t seed = trial == 0 ? 0 : trial == 1 ? tally::detail::ds_default_seed : rng.next();
            std::vector<unsigned char> buf(len);
            for (auto& b : buf) b = static_cast<unsigned char>(rng.next());
            const auto fast = murmur3_x64_128_fast(buf.data(), len, seed);
            if (!same(fast, murmur3_x64_128(buf.data(), len, seed))) ++mismatches;
            // Every byte of the input counts: flipping one changes the hash.
            if (len > 0) {
                const std::size_t at = static_cast<std::size_t>(rng.below(len));
                buf[at] ^= static_cast<unsigned char>(1u << rng.below(8));
                if (same(murmur3_x64_128_fast(buf.data(), len, seed), fast)) ++insensitive;
            }
            // ...and nothing outside it: the same bytes inside a larger,
            // differently filled buffer hash alike.
            std::vector<unsigned char> wide(len + 32);
            for (auto& b : wide) b = static_cast<unsigned char>(rng.next());
            std::copy(buf.begin(), buf.end(), wide.begin() + 16);
            if (!same(murmur3_x64_128_fast(wide.data() + 16, len, seed), murmur3_x64_128(buf.data(), len, seed)))
                ++outside;
        }
    }
    CHECK(mismatches == 0);
    CHECK(insensitive == 0);
    CHECK(outside == 0);
    CHECK(same(murmur3_x64_128_fast(nullptr, 0, 9001), murmur3_x64_128("", 0, 9001)));

    // The integer path: the 8 little-endian bytes of v through the generic hash.
    int int_mismatches = 0;
    std::vector<std::int64_t> values = {0, 1, -1, 42, INT64_MIN, INT64_MAX, 0x0102030405060708};
    for (int i = 0; i < 20000; ++i) values.push_back(static_cast<std::int64_t>(rng.next()));
    for (const std::int64_t v : values) {
        unsigned char le[8];
        for (int b = 0; b < 8; ++b) le[b] = static_cast<unsigned char>(static_cast<std::uint64_t>(v) >> (8 * b));
        if (!same(tally::detail::ds_hash_i64(v), murmur3_x64_128(le, 8, tally::detail::ds_default_seed))) ++int_mismatches;
    }
    CHECK(int_mismatches == 0);

    // The coupon's register value: min(leading zeros, 62) + 1, including the
    // all-zero and one-bit words where the cap applies.
    int rank_mismatches = 0;
    std::vector<std::uint64_t> words = {0, 1, 2, 3, 4, ~std::uint64_t{0}};
    for (int k = 0; k < 64; ++k) words.push_back(std::uint64_t{1} << k);
    for (int i = 0; i < 2000; ++i) words.push_back(rng.next() >> rng.below(64));
    for (const std::uint64_t w : words) {
        int lz = 0;
        while (lz < 64 && !((w >> (63 - lz)) & 1)) ++lz;
        if (tally::detail::ds_hll_rank(w) != std::min(lz, 62) + 1) ++rank_mismatches;
    }
    CHECK(rank_mismatches == 0);
}

TEST_CASE("DataSketches: every fixture decodes to the registers of the same items", "[hyperloglog][datasketches]") {
    int checked = 0;
    for (int lg_k : {4, 10, 14}) {
        for (bool strings : {false, true}) {
            std::uint64_t done = 0;
            HyperLogLog ours(lg_k, Mode::datasketches);
            for (std::uint64_t n : {0ull, 1ull, 10ull, 1000ull, 1000000ull}) {
                const HyperLogLog more = ds_sketch(lg_k, strings, done, n);
                ours.merge(more);  // the same registers as adding 0 .. n-1 to one sketch
                done = n;
                for (DataSketchesHll t : types) {
                    for (const char* form : {"compact", "updatable"}) {
                        const std::string name = std::string(strings ? "str" : "int") + "_lgk" +
                                                 std::to_string(lg_k) + "_" + type_name(t) + "_n" + std::to_string(n) +
                                                 "_" + form + ".sk";
                        INFO(name);
                        const auto bytes = read_fixture(name);
                        const HyperLogLog theirs = HyperLogLog::from_datasketches(bytes);
                        CHECK(theirs.hash_mode() == Mode::datasketches);
                        CHECK(theirs.precision() == lg_k);
                        CHECK(theirs == ours);
                        CHECK(theirs.empty() == (n == 0));
                        if (hll_mode(bytes)) {
                            // HIP state carried over: estimate() is DataSketches' get_estimate().
                            CHECK(theirs.estimator() == tally::HllEstimator::hip);
                            CHECK(theirs.estimate() == Catch::Approx(f64_at(bytes, 8)).epsilon(1e-9));
                        } else {
                            // Coupons replayed: HIP over <= 3/4 k / 8 coupons is close to n.
                            CHECK(theirs.estimate() == Catch::Approx(static_cast<double>(n)).epsilon(0.02));
                        }
                        ++checked;
                    }
                }
            }
        }
    }
    CHECK(checked == 180);
}

TEST_CASE("DataSketches: an imported HIP state continues exactly as DataSketches' does", "[hyperloglog][datasketches]") {
    // lg_k 10, n = 1000 is in HLL mode: import it, add items 1000 .. 999999
    // in datasketches mode, and land on DataSketches' own HIP estimate for
    // 0 .. 999999 (same registers, same estimator).
    for (bool strings : {false, true}) {
        for (DataSketchesHll t : types) {
            const std::string base = std::string(strings ? "str" : "int") + "_lgk10_" + type_name(t);
            INFO(base);
            const auto at_1000 = read_fixture(base + "_n1000_compact.sk");
            const auto at_1e6 = read_fixture(base + "_n1000000_compact.sk");
            REQUIRE(hll_mode(at_1000));
            HyperLogLog h = HyperLogLog::from_datasketches(at_1000);
            for (std::uint64_t i = 1000; i < 1000000; ++i) {
                if (strings)
                    h.add(std::to_string(i));
                else
                    h.add(i);
            }
            CHECK(h.estimator() == tally::HllEstimator::hip);
            CHECK(h == HyperLogLog::from_datasketches(at_1e6));
            CHECK(h.estimate() == Catch::Approx(f64_at(at_1e6, 8)).epsilon(1e-9));
        }
    }
}

TEST_CASE("DataSketches: export is byte-identical where the image is canonical", "[hyperloglog][datasketches]") {
    int identical = 0;
    for (int lg_k : {4, 10, 14}) {
        for (bool strings : {false, true}) {
            for (std::uint64_t n : {0ull, 1ull, 10ull, 1000ull, 1000000ull}) {
                const HyperLogLog ours = ds_sketch(lg_k, strings, 0, n);
                for (DataSketchesHll t : types) {
                    const std::string name = std::string(strings ? "str" : "int") + "_lgk" + std::to_string(lg_k) +
                                             "_" + type_name(t) + "_n" + std::to_string(n) + "_compact.sk";
                    INFO(name);
                    const auto fixture = read_fixture(name);
                    const auto exported = ours.to_datasketches(t);
                    // Always: the export decodes (in tally) to the same registers.
                    CHECK(HyperLogLog::from_datasketches(exported) == ours);
                    const bool canonical = n == 0 || (hll_mode(fixture) && t != DataSketchesHll::hll_4);
                    if (!canonical) continue;
                    // Re-exporting DataSketches' own image reproduces it byte for byte.
                    CHECK(HyperLogLog::from_datasketches(fixture).to_datasketches(t) == fixture);
                    // Built from the items, every byte but the history-dependent
                    // HIP accumulator (8..15) matches; kxq (16..31) to rounding.
                    REQUIRE(exported.size() == fixture.size());
                    auto a = exported;
                    auto b = fixture;
                    if (n != 0) {
                        CHECK(f64_at(a, 16) == Catch::Approx(f64_at(b, 16)).epsilon(1e-12));
                        CHECK(f64_at(a, 24) == Catch::Approx(f64_at(b, 24)).epsilon(1e-12).margin(1e-300));
                        std::fill(a.begin() + 8, a.begin() + 32, std::byte{0});
                        std::fill(b.begin() + 8, b.begin() + 32, std::byte{0});
                    }
                    CHECK(a == b);
                    ++identical;
                }
            }
        }
    }
    CHECK(identical > 30);
}

TEST_CASE("DataSketches: unions (out-of-order) import with Ertl's estimator", "[hyperloglog][datasketches]") {
    HyperLogLog expected = ds_sketch(12, false, 0, 20000);
    expected.merge(ds_sketch(12, false, 10000, 30000));
    for (DataSketchesHll t : types) {
        for (const char* form : {"compact", "updatable"}) {
            const auto bytes = read_fixture(std::string("union_int_lgk12_") + type_name(t) + "_n30000_" + form + ".sk");
            const HyperLogLog h = HyperLogLog::from_datasketches(bytes);
            CHECK(h == expected);
            CHECK(h.estimator() == tally::HllEstimator::ertl);
            CHECK(h.estimate() == Catch::Approx(30000).epsilon(3 * 1.04 / 64));
            // Exported again, the out-of-order flag travels.
            CHECK((std::to_integer<int>(h.to_datasketches(t)[5]) & 16) == 16);
        }
    }
}

TEST_CASE("DataSketches: lg_k 4-21 in mode datasketches, outside it a clear error", "[hyperloglog][datasketches]") {
    const HyperLogLog h18 = HyperLogLog::from_datasketches(read_fixture("int_lgk18_hll8_n10_compact.sk"));
    CHECK(h18 == ds_sketch(18, false, 0, 10));
    for (const int lg : {19, 21}) {
        const auto bytes = read_fixture("int_lgk" + std::to_string(lg) + "_hll8_n10_compact.sk");
        const HyperLogLog h = HyperLogLog::from_datasketches(bytes);
        CHECK(h.precision() == lg);
        CHECK(h == ds_sketch(lg, false, 0, 10));
        CHECK(HyperLogLog::from_datasketches(h.to_datasketches()) == h);  // (coupons in another order)
        CHECK(HyperLogLog::deserialize(h.serialize()) == h);
    }
    // only mode datasketches goes past 18
    CHECK_NOTHROW(HyperLogLog(21, HyperLogLog::HashMode::datasketches));
    CHECK_THROWS_WITH(HyperLogLog(22, HyperLogLog::HashMode::datasketches),
                      "tally::HyperLogLog::HyperLogLog: precision 22 is out of range [4, 21]");
    CHECK_THROWS_WITH(HyperLogLog(19, HyperLogLog::HashMode::redis),
                      "tally::HyperLogLog::HyperLogLog: precision 19 is out of range [4, 18]");
    auto frame = HyperLogLog(19, HyperLogLog::HashMode::datasketches).serialize();
    CHECK(HyperLogLog::deserialize(frame).precision() == 19);
    frame[9] = std::byte{0};  // mode tally at precision 19
    CHECK_THROWS_AS(HyperLogLog::deserialize(frame), tally::FormatError);
    auto bad = read_fixture("int_lgk10_hll8_n10_compact.sk");
    bad[3] = std::byte{22};
    CHECK_THROWS_WITH(HyperLogLog::from_datasketches(bad),
                      "tally::HyperLogLog::from_datasketches: lg_k 22 is out of range [4, 21]");
}

TEST_CASE("DataSketches: malformed images raise FormatError", "[hyperloglog][datasketches]") {
    const char* names[] = {"int_lgk4_hll8_n0_compact.sk",         "int_lgk4_hll8_n0_updatable.sk",
                           "int_lgk14_hll6_n10_compact.sk",       "int_lgk14_hll4_n1000_updatable.sk",
                           "int_lgk10_hll4_n1000000_compact.sk",  "int_lgk10_hll4_n1000000_updatable.sk",
                           "str_lgk10_hll6_n1000_compact.sk",     "str_lgk4_hll8_n10_updatable.sk",
                           "union_int_lgk12_hll4_n30000_compact.sk"};
    tally::test::Rng rng(0xd5);
    for (const char* name : names) {
        INFO(name);
        const auto good = read_fixture(name);
        (void)HyperLogLog::from_datasketches(good);
        for (std::size_t len = 0; len < good.size(); ++len)
            CHECK_THROWS_AS(HyperLogLog::from_datasketches(std::span<const std::byte>(good.data(), len)), FormatError);
        auto longer = good;
        longer.push_back(std::byte{0});
        CHECK_THROWS_AS(HyperLogLog::from_datasketches(longer), FormatError);
        for (int t = 0; t < 3000; ++t) {
            auto b = good;
            const auto at = rng.below(std::min<std::size_t>(b.size(), 64));
            b[at] = static_cast<std::byte>(std::to_integer<int>(b[at]) ^ static_cast<int>(1 + rng.below(255)));
            try {
                const HyperLogLog h = HyperLogLog::from_datasketches(b);
                CHECK(h.estimate() >= 0);
                CHECK(HyperLogLog::from_datasketches(h.to_datasketches()) == h);
            } catch (const FormatError&) {
            }
        }
    }
    auto with = [](std::vector<std::byte> b, std::size_t at, int v) {
        b[at] = static_cast<std::byte>(v);
        return b;
    };
    const auto hll8 = read_fixture("int_lgk10_hll8_n1000_compact.sk");
    CHECK_THROWS_WITH(HyperLogLog::from_datasketches(with(hll8, 2, 3)),
                      "tally::HyperLogLog::from_datasketches: family 3 is not 7 (HLL)");
    CHECK_THROWS_WITH(HyperLogLog::from_datasketches(with(hll8, 1, 2)),
                      "tally::HyperLogLog::from_datasketches: serial version 2 is not 1");
    CHECK_THROWS_WITH(HyperLogLog::from_datasketches(with(hll8, 40, 64)),
                      "tally::HyperLogLog::from_datasketches: register value 64 exceeds 63");
    CHECK_THROWS_AS(HyperLogLog::from_datasketches(with(hll8, 7, 0x0e)), FormatError);  // type 3
    CHECK_THROWS_AS(HyperLogLog::from_datasketches(with(hll8, 0, 2)), FormatError);     // preamble vs mode
    CHECK_THROWS_AS(HyperLogLog::from_datasketches(with(hll8, 5, 0x09)), FormatError);  // big-endian flag
    CHECK_THROWS_WITH(HyperLogLog::from_datasketches(with(hll8, 23, 0x41)),  // kxq0 off by 2^16
                      "tally::HyperLogLog::from_datasketches: HIP state does not match the registers");
    // Flag 32 (Java's "rebuild cur_min and kxq"): the stored kxq is not trusted.
    const HyperLogLog rebuilt = HyperLogLog::from_datasketches(with(with(hll8, 23, 0x41), 5, 0x08 | 0x20));
    CHECK(rebuilt == HyperLogLog::from_datasketches(hll8));
    CHECK(rebuilt.estimate() == HyperLogLog::from_datasketches(hll8).estimate());

    // Found by fuzzing: an empty LIST image with the out-of-order flag is an
    // empty sketch (sparse, like every empty sketch), and a SET count
    // near 2^32 is refused before any table size is computed from it.
    const auto empty_ooo = bytes_of({0x02, 0x01, 0x07, 0x0e, 0x0b, 0x3a, 0x00, 0x00});
    const HyperLogLog e = HyperLogLog::from_datasketches(empty_ooo);
    CHECK(e.empty());
    CHECK(e.estimator() == tally::HllEstimator::linear_counting);
    CHECK(HyperLogLog::from_datasketches(e.to_datasketches()).estimator() == tally::HllEstimator::linear_counting);
    CHECK_THROWS_WITH(HyperLogLog::from_datasketches(bytes_of(
                          {0x03, 0x01, 0x07, 0x0e, 0x00, 0x00, 0x00, 0x01, 0xff, 0xff, 0xff, 0xff})),
                      "tally::HyperLogLog::from_datasketches: coupon count 4294967295 exceeds 2^26");
}

TEST_CASE("DataSketches: hash mode conventions and merging", "[hyperloglog][datasketches]") {
    HyperLogLog a(12, Mode::datasketches), b(12, Mode::datasketches);
    // Narrow integers sign-extend through their signed type, as update() does.
    a.add(std::uint32_t{0xffffffffu});
    b.add(std::int64_t{-1});
    CHECK(a == b);
    a.add(std::int16_t{-5});
    b.add(std::int64_t{-5});
    CHECK(a == b);
    a.add(-0.0);
    b.add(0.0);
    a.add(std::nan(""));
    b.add(std::bit_cast<double>(0x7ff8000000000000ull));
    a.add(1.5f);
    b.add(1.5);
    CHECK(a == b);
    // Empty strings are ignored, as DataSketches ignores them.
    HyperLogLog e(12, Mode::datasketches);
    e.add(std::string());
    e.add("");
    CHECK(e.empty());
    CHECK(e.total() == 0);
    // char pointers, string_view and string hash alike.
    HyperLogLog s1(12, Mode::datasketches), s2(12, Mode::datasketches);
    s1.add("abc");
    s2.add(std::string_view("abc"));
    CHECK(s1 == s2);
    // An imported sketch merges with tally's own datasketches-mode sketches.
    HyperLogLog imported = HyperLogLog::from_datasketches(read_fixture("int_lgk10_hll8_n1000_compact.sk"));
    imported.merge(ds_sketch(10, false, 1000, 2000));
    CHECK(imported == ds_sketch(10, false, 0, 2000));
    CHECK_THROWS_AS(imported.merge(HyperLogLog(10)), std::invalid_argument);
    // Another hash mode exports its registers (they do not line up with
    // DataSketches' hashing of the same items).
    HyperLogLog t(10);
    for (int i = 0; i < 5000; ++i) t.add(i);
    const HyperLogLog back = HyperLogLog::from_datasketches(t.to_datasketches(DataSketchesHll::hll_4));
    CHECK(back.hash_mode() == Mode::datasketches);
    CHECK(std::equal(back.registers().begin(), back.registers().end(), t.registers().begin()));
    CHECK(back.estimate() == Catch::Approx(t.estimate()).epsilon(1e-12));
}

namespace {

// The coupons of a LIST or SET image, read here from the layout (LIST: count
// at byte 6, coupons from byte 8; SET: count at bytes 8..11, coupons from
// byte 12; updatable images hold a table with empty slots = 0).
std::vector<std::uint32_t> coupons_of(std::span<const std::byte> b) {
    auto u32 = [&](std::size_t at) {
        std::uint32_t v = 0;
        for (int i = 3; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint32_t>(b[at + static_cast<std::size_t>(i)]);
        return v;
    };
    const bool list = (std::to_integer<int>(b[7]) & 3) == 0;
    const std::size_t start = list ? 8 : 12;
    std::vector<std::uint32_t> out;
    for (std::size_t at = start; at + 4 <= b.size(); at += 4)
        if (u32(at) != 0) out.push_back(u32(at));
    std::sort(out.begin(), out.end());
    return out;
}


}  // namespace

// coupons.bin holds 596 LIST and SET images that DataSketches C++ (master,
// commit c2288858) wrote: hll_sketch(lg_k, HLL_8) for lg_k 4..18 updated with
// the integers (uint64_t) or their decimal strings 0 .. n-1, n in {1, 2, 3, 5,
// 7, 8, 10, 20, ..., 10000} while DataSketches keeps coupons; compact images
// for n <= 1000 (and integers at 3000 and 10000), updatable ones for n <= 100.
// coupons.txt: name, mode, offset, size, DataSketches' get_estimate().
TEST_CASE("HyperLogLog: DataSketches LIST/SET images keep their coupons and DataSketches' estimate",
          "[hyperloglog][datasketches][sparse]") {
    const std::vector<std::byte> blob = read_fixture("coupons.bin");
    std::ifstream index(fixture_dir() + "coupons.txt");
    REQUIRE(index.good());
    std::string name, mode;
    std::size_t offset = 0, size = 0;
    double ds_estimate = 0;
    std::size_t images = 0, sets = 0;
    double worst = 0;
    while (index >> name >> mode >> offset >> size >> ds_estimate) {
        INFO(name);
        REQUIRE(offset + size <= blob.size());
        const std::span<const std::byte> image(blob.data() + offset, size);
        const HyperLogLog h = HyperLogLog::from_datasketches(image);
        CHECK(h.sparse());
        CHECK(h.estimator() == tally::HllEstimator::linear_counting);
        // DataSketches' coupon table, as DataSketches C++ interpolates it
        const auto ia = std::bit_cast<std::int64_t>(h.estimate()), ib = std::bit_cast<std::int64_t>(ds_estimate);
        CHECK((ia > ib ? ia - ib : ib - ia) <= 4);
        const double rel = std::fabs(h.estimate() - ds_estimate) / ds_estimate;
        worst = std::max(worst, rel);
        // The coupons come back out, in the mode DataSketches used.
        const auto exported = h.to_datasketches();
        CHECK((std::to_integer<int>(exported[7]) & 3) == (mode == "LIST" ? 0 : 1));
        CHECK(coupons_of(exported) == coupons_of(image));  // every (address, value) pair, as DataSketches keeps them
        const HyperLogLog back = HyperLogLog::from_datasketches(exported);
        CHECK(back.estimate() == h.estimate());
        CHECK(back == h);
        ++images;
        sets += mode == "SET";
    }
    CHECK(images == 596);
    CHECK(sets > 250);
    INFO("worst relative difference " << worst);
    CHECK(worst < 1e-15);
}

TEST_CASE("HyperLogLog: to_datasketches of a sparse sketch follows DataSketches' LIST/SET sizes",
          "[hyperloglog][datasketches][sparse]") {
    for (int lg_k : {4, 7, 8, 12}) {
        HyperLogLog h(lg_k, Mode::datasketches);
        for (int i = 0; h.sparse() && i < 100000; ++i) {
            h.add(std::uint64_t(i));
            if (!h.sparse()) break;
            const auto img = h.to_datasketches();
            const int m = std::to_integer<int>(img[7]) & 3;
            const auto n = static_cast<std::size_t>(i + 1);  // distinct items (no address collisions here)
            INFO("lg_k " << lg_k << " coupons " << n);
            if (m != 2) CHECK(coupons_of(img).size() == n);
            // LIST up to 7 coupons; SET (lg_k >= 8) up to 3/4 of 2^(lg_k - 3); then HLL.
            if (n <= 7) CHECK(m == 0);
            else if (lg_k >= 8 && 4 * n <= 3 * (std::size_t{1} << (lg_k - 3))) CHECK(m == 1);
            else CHECK(m == 2);
            CHECK(HyperLogLog::from_datasketches(img) == h);
        }
    }
}
