// PostgreSQL formats without a server: the `hll` storage format (postgresql-hll,
// storage specification v1.0.0) and the `tdigest` text form, pinned by values
// a real server wrote (tests/fixtures/postgres/, made with PostgreSQL 15.20,
// postgresql-hll 2.17 and tdigest 1.4.0; each file names its SQL) and by the
// specification's own examples; every malformed field is refused, and every
// prefix or corruption of a valid value either fails with FormatError or
// decodes to a valid sketch. tests/test_postgres.cpp checks the same against
// a live server.
#include <tally/sketch/distinct/hyperloglog.hpp>
#include <tally/sketch/quantiles/tdigest.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "test_support.hpp"

using tally::FormatError;
using tally::HyperLogLog;
using tally::PostgresHllOptions;
using tally::TDigest;
using Mode = tally::HllHashMode;

namespace {

std::string fixture(const std::string& name) {
    std::string f = __FILE__;
    std::ifstream in(f.substr(0, f.find_last_of("/\\") + 1) + "fixtures/postgres/" + name);
    REQUIRE(in.good());
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::vector<std::string> fixture_lines(const std::string& name) {
    std::vector<std::string> out;
    std::istringstream in(fixture(name));
    for (std::string line; std::getline(in, line);)
        if (!line.empty() && line[0] != '#') out.push_back(line);
    return out;
}

std::vector<std::byte> unhex(const std::string& h) {
    std::vector<std::byte> out;
    for (std::size_t i = 0; i + 1 < h.size(); i += 2)
        out.push_back(static_cast<std::byte>(std::stoi(h.substr(i, 2), nullptr, 16)));
    return out;
}

std::vector<std::byte> bytes(std::initializer_list<int> v) {
    std::vector<std::byte> out;
    for (const int b : v) out.push_back(static_cast<std::byte>(b));
    return out;
}

struct HllFixture {
    int log2m, regwidth;
    std::int64_t expthresh;
    bool sparse_on;
    std::int64_t first, last;
    std::vector<std::byte> value;
};

std::vector<HllFixture> hll_fixtures() {
    std::vector<HllFixture> out;
    for (const std::string& line : fixture_lines("hll_values.txt")) {
        std::istringstream ss(line);
        HllFixture f{};
        int so = 0;
        std::string hex;
        ss >> f.log2m >> f.regwidth >> f.expthresh >> so >> f.first >> f.last >> hex;
        f.sparse_on = so != 0;
        f.value = unhex(hex);
        out.push_back(f);
    }
    return out;
}

HyperLogLog items(int log2m, int regwidth, std::int64_t first, std::int64_t last) {
    HyperLogLog h = HyperLogLog::postgres_compatible(log2m, regwidth);
    for (std::int64_t x = first; x <= last; ++x) h.add(x);
    return h;
}

// What a decoded value must satisfy to count as a valid sketch.
void check_valid(const HyperLogLog& h) {
    REQUIRE(h.hash_mode() == Mode::postgres);
    const int cap = h.max_rank();
    const auto regs = h.registers();
    REQUIRE(static_cast<int>(*std::max_element(regs.begin(), regs.end())) <= cap);
    // +inf only when saturated (every register at 2^regwidth - 1: reachable
    // with a small regwidth); never NaN, never negative.
    const bool saturated = std::all_of(h.registers().begin(), h.registers().end(),
                                       [cap](std::uint8_t r) { return static_cast<int>(r) == cap; });
    REQUIRE((std::isfinite(h.estimate()) || (saturated && h.estimate() == HUGE_VAL)));
    REQUIRE(h.estimate() >= 0);
    const HyperLogLog again = HyperLogLog::from_postgres(h.to_postgres());
    REQUIRE(again == h);
    REQUIRE(HyperLogLog::deserialize(h.serialize()) == h);
}

// FormatError or a valid sketch; anything else fails.
int decode_outcome(std::span<const std::byte> b) {
    try {
        const HyperLogLog h = HyperLogLog::from_postgres(b);
        check_valid(h);
        return 1;
    } catch (const FormatError&) {
        return 0;
    }
}

std::string td_message(const std::string& text) {
    return tally::test::message_of<FormatError>([&] { (void)TDigest::from_postgres(text); });
}

std::string hll_message(const std::vector<std::byte>& b) {
    return tally::test::message_of<FormatError>([&] { (void)HyperLogLog::from_postgres(b); });
}

}  // namespace

// ---- hll -------------------------------------------------------------------

TEST_CASE("postgres hll: hashes equal the extension's hll_hash_* functions", "[postgres_formats]") {
    int n = 0;
    for (const std::string& line : fixture_lines("hll_hashes.txt")) {
        std::istringstream ss(line);
        std::string fn, arg, result;
        std::getline(ss, fn, '\t');
        std::getline(ss, arg, '\t');
        std::getline(ss, result, '\t');
        const auto expected = static_cast<std::uint64_t>(std::stoll(result));
        INFO(fn << "(" << arg << ")");
        std::uint64_t got = 0;
        if (fn == "bigint") got = HyperLogLog::postgres_hash_of(static_cast<std::int64_t>(std::stoll(arg)));
        else if (fn == "integer") got = HyperLogLog::postgres_hash_of(static_cast<std::int32_t>(std::stol(arg)));
        else if (fn == "smallint") got = HyperLogLog::postgres_hash_of(static_cast<std::int16_t>(std::stoi(arg)));
        else if (fn == "boolean") got = HyperLogLog::postgres_hash_of(arg == "true");
        else if (fn == "text") got = HyperLogLog::postgres_hash_of(std::string_view(arg));
        else if (fn == "bytea") {
            const auto b = unhex(arg);
            got = HyperLogLog::postgres_hash_of(std::span<const std::byte>(b));
        }
        CHECK(got == expected);
        ++n;
    }
    CHECK(n == 17);
    // add(x) is add_hash(postgres_hash_of(x)).
    HyperLogLog a = HyperLogLog::postgres_compatible(), b = HyperLogLog::postgres_compatible();
    for (std::int64_t x = -500; x < 500; ++x) {
        a.add(x);
        b.add_hash(HyperLogLog::postgres_hash_of(x));
    }
    a.add(std::string("text item"));
    b.add_hash(HyperLogLog::postgres_hash_of(std::string_view("text item")));
    CHECK(a == b);
}

TEST_CASE("postgres hll: the register rule (low log2m bits, trailing zeros + 1, capped at 2^regwidth - 1)",
          "[postgres_formats]") {
    HyperLogLog h = HyperLogLog::postgres_compatible(10, 4);
    CHECK(h.max_rank() == 15);
    CHECK(HyperLogLog::postgres_compatible(11, 6).max_rank() == 53);  // 64 - 11 below 2^6 - 1
    const std::uint64_t idx = 37;
    h.add_hash((std::uint64_t{1} << 10) | idx);         // rest 1: value 1
    h.add_hash((std::uint64_t{0b1000} << 10) | 38);     // rest ...1000: value 4
    h.add_hash((std::uint64_t{1} << 40) | 39);          // value 31, capped at 15
    h.add_hash(40);                                      // rest 0: value 0 (no change)
    h.add_hash((std::uint64_t{0b100} << 10) | idx);     // larger value wins
    const auto r = h.registers();
    CHECK(r[37] == 3);
    CHECK(r[38] == 4);
    CHECK(r[39] == 15);
    CHECK(r[40] == 0);
    CHECK(std::count_if(r.begin(), r.end(), [](std::uint8_t v) { return v != 0; }) == 3);
    CHECK(h.total() == 5);
}

TEST_CASE("postgres hll: server-written values decode to tally's registers and tally writes the same bytes",
          "[postgres_formats]") {
    int explicit_values = 0, sparse = 0, full = 0, empty = 0;
    for (const HllFixture& f : hll_fixtures()) {
        INFO("log2m " << f.log2m << " regwidth " << f.regwidth << " items " << f.first << ".." << f.last);
        const HyperLogLog expected = items(f.log2m, f.regwidth, f.first, f.last);
        const HyperLogLog got = HyperLogLog::from_postgres(f.value);
        CHECK(got == expected);
        CHECK(got.precision() == f.log2m);
        CHECK(got.postgres_regwidth() == f.regwidth);
        const int type = std::to_integer<int>(f.value[0]) & 0xf;
        explicit_values += type == 2;
        sparse += type == 3;
        full += type == 4;
        empty += type == 1;
        if (type != 2)  // tally keeps registers, so it writes EXPLICIT values as SPARSE
            CHECK(expected.to_postgres(PostgresHllOptions{f.expthresh, f.sparse_on, -1}) == f.value);
        else
            CHECK((std::to_integer<int>(expected.to_postgres(PostgresHllOptions{f.expthresh, f.sparse_on, -1})[0]) & 0xf) ==
                  (f.sparse_on ? 3 : 4));
    }
    CHECK(explicit_values >= 4);
    CHECK(sparse >= 8);
    CHECK(full >= 4);
    CHECK(empty == 1);
}

TEST_CASE("postgres hll: the storage specification's examples", "[postgres_formats]") {
    // SPARSE, log2m 11, regwidth 6, registers (11, 6) and (1099, 19): 0x016344B4C0.
    const auto sparse = bytes({0x13, (5 << 5) | 11, 0x7f, 0x01, 0x63, 0x44, 0xB4, 0xC0});
    const HyperLogLog h = HyperLogLog::from_postgres(sparse);
    CHECK(h.precision() == 11);
    CHECK(h.postgres_regwidth() == 6);
    const auto r = h.registers();
    CHECK(r[11] == 6);
    CHECK(r[1099] == 19);
    CHECK(std::count_if(r.begin(), r.end(), [](std::uint8_t v) { return v != 0; }) == 2);
    CHECK(h.to_postgres() == sparse);
    // FULL at log2m 4, regwidth 5 with the spec's first four registers 0, 1, 2, 3
    // ([0x00, 0x44, 0x30] starts the data), the other twelve 0.
    auto full = bytes({0x14, (4 << 5) | 4, 0x00, 0x00, 0x44, 0x30, 0, 0, 0, 0, 0, 0, 0});
    const HyperLogLog f = HyperLogLog::from_postgres(full);
    CHECK(f.registers()[0] == 0);
    CHECK(f.registers()[1] == 1);
    CHECK(f.registers()[2] == 2);
    CHECK(f.registers()[3] == 3);
    CHECK(f.to_postgres(PostgresHllOptions{0, false, -1}) == full);
    // EMPTY with the extension's default header: 0x118b7f.
    CHECK(HyperLogLog::postgres_compatible().to_postgres() == bytes({0x11, 0x8b, 0x7f}));
    CHECK(HyperLogLog::from_postgres(bytes({0x11, 0x8b, 0x7f})).empty());
}

TEST_CASE("postgres hll: EXPLICIT values replay their hashes", "[postgres_formats]") {
    // Built by hand (big-endian, ascending as signed): -5451491901947305642 and 1,
    // the specification's example.
    const auto v = bytes({0x12, 0x8b, 0x7f, 0xCB, 0xA7, 0x97, 0x00, 0x67, 0x7C, 0xDE, 0xAA, 0, 0, 0, 0, 0, 0, 0, 1});
    HyperLogLog expected = HyperLogLog::postgres_compatible();
    expected.add_hash(0xCBA79700677CDEAAull);
    expected.add_hash(1);  // rest 0: no register changes
    CHECK(HyperLogLog::from_postgres(v) == expected);
    // Unsigned order (1 before the negative one) is not the specification's.
    const auto unsigned_order =
        bytes({0x12, 0x8b, 0x7f, 0, 0, 0, 0, 0, 0, 0, 1, 0xCB, 0xA7, 0x97, 0x00, 0x67, 0x7C, 0xDE, 0xAA});
    CHECK_THAT(hll_message(unsigned_order), Catch::Matchers::Contains("not strictly ascending"));
}

TEST_CASE("postgres hll: malformed values are refused with FormatError naming the field", "[postgres_formats]") {
    using Catch::Matchers::Contains;
    CHECK_THAT(hll_message({}), Contains("empty input"));
    CHECK_THAT(hll_message(bytes({0x21, 0x8b, 0x7f})), Contains("schema version 2"));
    CHECK_THAT(hll_message(bytes({0x10, 0x8b, 0x7f})), Contains("UNDEFINED"));
    CHECK_THAT(hll_message(bytes({0x15, 0x8b, 0x7f})), Contains("type 5"));
    CHECK_THAT(hll_message(bytes({0x11, 0x8b})), Contains("2 bytes"));
    CHECK_THAT(hll_message(bytes({0x11, 0xeb, 0x7f})), Contains("regwidth 8"));
    CHECK_THAT(hll_message(bytes({0x11, 0x83, 0x7f})), Contains("log2m 3"));
    CHECK_THAT(hll_message(bytes({0x11, 0x92, 0x7f})), Contains("log2m 18"));
    CHECK_THAT(hll_message(bytes({0x11, 0x8b, 0xff})), Contains("top bit"));
    CHECK_THAT(hll_message(bytes({0x11, 0x8b, 0x68})), Contains("cutoff code 40"));
    CHECK_THAT(hll_message(bytes({0x11, 0x8b, 0x4f})), Contains("expthresh 16384"));
    CHECK_THAT(hll_message(bytes({0x11, 0x8b, 0x7f, 0})), Contains("EMPTY with 1 data bytes"));
    CHECK_THAT(hll_message(bytes({0x12, 0x8b, 0x7f, 1, 2, 3})), Contains("not a multiple of 8"));
    CHECK_THAT(hll_message(bytes({0x12, 0x8b, 0x7f, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 5})),
               Contains("not strictly ascending"));
    {
        std::vector<std::byte> big = bytes({0x12, 0x8b, 0x7f});
        for (std::uint64_t i = 1; i <= 16384; ++i)
            for (int b = 7; b >= 0; --b) big.push_back(static_cast<std::byte>(i >> (8 * b)));
        CHECK_THAT(hll_message(big), Contains("16384 hashes"));
    }
    // SPARSE at log2m 11, regwidth 5: 16-bit words.
    CHECK_THAT(hll_message(bytes({0x13, 0x8b, 0x7f, 0x00, 0x21, 0x00})), Contains("padding of 8 bits"));
    CHECK_THAT(hll_message(bytes({0x13, 0x8b, 0x7f, 0x00, 0x41, 0x00, 0x21})), Contains("not strictly ascending"));
    CHECK_THAT(hll_message(bytes({0x13, 0x8b, 0x7f, 0x00, 0x21, 0x00, 0x21})), Contains("not strictly ascending"));
    CHECK_THAT(hll_message(bytes({0x13, 0x8b, 0x7f, 0x00, 0x20})), Contains("zero register"));
    // regwidth 7 at log2m 11: values up to 53 only (18-bit words).
    CHECK_THAT(hll_message(bytes({0x13, 0xcb, 0x7f, 0x00, 0x0f, 0x40})), Contains("exceeds 53"));
    // SPARSE at log2m 4, regwidth 5 (9-bit words): one word and 7 padding bits that must be zero.
    CHECK_THAT(hll_message(bytes({0x13, 0x84, 0x7f, 0x08, 0x81})), Contains("padding bits are not zero"));
    // FULL at log2m 4, regwidth 5: 80 bits = 10 bytes exactly.
    CHECK_THAT(hll_message(bytes({0x14, 0x84, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0, 0})), Contains("need 10"));
    CHECK_THAT(hll_message(bytes({0x14, 0x84, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})), Contains("need 10"));
    // FULL at log2m 4, regwidth 7: 112 bits = 14 bytes; register 0 = 127 > 60.
    {
        auto v = bytes({0x14, 0xc4, 0x7f});
        v.resize(17, std::byte{0});
        v[3] = std::byte{0xfe};
        CHECK_THAT(hll_message(v), Contains("above 60"));
    }
    // (FULL data is never padded: 2^log2m * regwidth bits is a whole number of bytes.)
}

TEST_CASE("postgres hll: every strict prefix and random corruption raises FormatError or decodes to a valid sketch",
          "[postgres_formats]") {
    std::vector<std::vector<std::byte>> values;
    for (const HllFixture& f : hll_fixtures()) values.push_back(f.value);
    for (const int log2m : {4, 9, 13})
        for (const int w : {1, 4, 6, 7})
            for (const std::int64_t n : {5, 300, 20'000}) values.push_back(items(log2m, w, 1, n).to_postgres());
    tally::test::Rng rng(0x9051);
    std::size_t decoded = 0, refused = 0;
    for (const auto& v : values) {
        for (std::size_t len = 0; len < v.size(); ++len) {
            const int ok = decode_outcome(std::span<const std::byte>(v.data(), len));
            decoded += ok;
            refused += 1 - ok;
        }
        for (int trial = 0; trial < 60; ++trial) {
            auto c = v;
            const int edits = 1 + static_cast<int>(rng.below(3));
            for (int e = 0; e < edits; ++e) {
                const std::size_t at = rng.below(c.size());
                if (rng.below(2) == 0)
                    c[at] ^= static_cast<std::byte>(1u << rng.below(8));
                else
                    c[at] = static_cast<std::byte>(rng.below(256));
            }
            const int ok = decode_outcome(c);
            decoded += ok;
            refused += 1 - ok;
        }
    }
    // Both outcomes occur: the check is not vacuous.
    CHECK(decoded > 100);
    CHECK(refused > 100);
}

TEST_CASE("postgres hll: parameters, options and modes", "[postgres_formats]") {
    using Catch::Matchers::Contains;
    using tally::test::message_of;
    CHECK_THAT(message_of([] { (void)HyperLogLog::postgres_compatible(3, 5); }), Contains("log2m 3 is out of range [4, 17]"));
    CHECK_THAT(message_of([] { (void)HyperLogLog::postgres_compatible(18, 5); }), Contains("log2m 18 is out of range [4, 17]"));
    CHECK_THAT(message_of([] { (void)HyperLogLog::postgres_compatible(11, 0); }), Contains("regwidth 0 is out of range [1, 7]"));
    CHECK_THAT(message_of([] { (void)HyperLogLog::postgres_compatible(11, 8); }), Contains("regwidth 8 is out of range [1, 7]"));
    const HyperLogLog h = items(11, 5, 1, 5000);
    CHECK_THAT(message_of([&] { (void)h.to_postgres(PostgresHllOptions{3, true, -1}); }), Contains("expthresh 3"));
    CHECK_THAT(message_of([&] { (void)h.to_postgres(PostgresHllOptions{16384, true, -1}); }), Contains("expthresh 16384"));
    CHECK_THAT(message_of([&] { (void)h.to_postgres(PostgresHllOptions{-1, true, -2}); }), Contains("max_sparse -2"));
    CHECK_THAT(message_of([] { (void)HyperLogLog(11).to_postgres(); }), Contains("HashMode::postgres"));
    // The header carries the options; the type follows the extension's rules.
    const auto small = items(11, 5, 1, 50);
    CHECK(small.to_postgres()[0] == std::byte{0x13});                            // SPARSE: smaller than FULL
    CHECK(small.to_postgres(PostgresHllOptions{-1, false, -1})[0] == std::byte{0x14});  // sparse off: FULL
    CHECK(small.to_postgres(PostgresHllOptions{-1, false, -1})[2] == std::byte{0x3f});
    CHECK(small.to_postgres(PostgresHllOptions{-1, true, 10})[0] == std::byte{0x14});   // over max_sparse
    CHECK(small.to_postgres(PostgresHllOptions{-1, true, 60})[0] == std::byte{0x13});
    CHECK(small.to_postgres(PostgresHllOptions{256, true, -1})[2] == std::byte{0x49});   // code 9 = 2^8
    CHECK(h.to_postgres()[0] == std::byte{0x14});  // 5000 items at log2m 11: FULL is smaller
    // Regwidth is part of the sketch: no merge across it; serialize keeps it.
    HyperLogLog a = HyperLogLog::postgres_compatible(11, 5), b = HyperLogLog::postgres_compatible(11, 6);
    a.add(std::int64_t{1});
    b.add(std::int64_t{1});
    CHECK_FALSE(a.mergeable_with(b));
    CHECK_THAT(message_of([&] { a.merge(b); }), Contains("regwidth"));
    const HyperLogLog back = HyperLogLog::deserialize(h.serialize());
    CHECK(back == h);
    CHECK(back.postgres_regwidth() == 5);
    CHECK(back.hash_mode() == Mode::postgres);
    HyperLogLog m = items(12, 4, 1, 100);
    m.merge(items(12, 4, 50, 20'000));
    CHECK(m == items(12, 4, 1, 20'000));
    CHECK(HyperLogLog::from_postgres(m.to_postgres()) == m);
}

TEST_CASE("postgres hll: estimates stay within the documented error", "[postgres_formats]") {
    // Ertl's estimator handles the 2^regwidth - 1 cap; HIP counts from the adds.
    for (const int w : {4, 5, 6}) {
        for (const std::int64_t n : {1000, 30'000, 400'000}) {
            const HyperLogLog h = items(12, w, 0, n - 1);
            INFO("regwidth " << w << " n " << n);
            CHECK(std::abs(h.estimate() / static_cast<double>(n) - 1) < 4 * h.relative_standard_error());
            const HyperLogLog d = HyperLogLog::from_postgres(h.to_postgres());
            CHECK(std::abs(d.estimate() / static_cast<double>(n) - 1) < 4 * d.relative_standard_error());
        }
    }
}

// ---- tdigest ---------------------------------------------------------------

TEST_CASE("postgres tdigest: server-printed text parses to its centroids", "[postgres_formats]") {
    int n = 0;
    for (const std::string& line : fixture_lines("tdigest_texts.txt")) {
        const std::string name = line.substr(0, line.find(' '));
        const std::string text = line.substr(line.find(' ') + 1);
        INFO(name);
        const TDigest d = TDigest::from_postgres(text);
        // The header fields, read independently of the parser.
        std::istringstream ss(text);
        std::string w;
        long long flags = 0, count = 0, k = 0;
        double compression = 0;
        ss >> w >> flags >> w >> count >> w >> compression >> w >> k;
        CHECK(flags == 1);
        CHECK(d.total() == static_cast<double>(count));
        CHECK(d.compression() == compression);
        std::vector<double> data;
        if (name == "sorted_1_to_20000")
            for (int x = 1; x <= 20000; ++x) data.push_back(x);
        else if (name == "permuted_1_to_10007")
            for (int x = 1; x <= 10007; ++x) data.push_back(static_cast<double>((x * 7919LL) % 10007 + 1));
        else if (name == "tied_1_to_30_x_1000")
            for (int x = 1; x <= 30000; ++x) data.push_back(x % 30 + 1);
        else if (name == "small_fractions")
            for (int x = 1; x <= 5; ++x) data.push_back(x / 7.0);
        REQUIRE(static_cast<long long>(data.size()) == count);
        std::sort(data.begin(), data.end());
        // The outer centroids of the server's digests hold single values:
        // min and max are exact.
        CHECK(d.min() == Approx(data.front()).margin(1e-6));
        CHECK(d.max() == Approx(data.back()).margin(1e-6));
        // The server's digests are coarser than tally's (its own scale), but
        // its continuous ones answer the median within 1% of the rank.
        if (name != "tied_1_to_30_x_1000" && data.size() >= 10000) {
            const double med = d.quantile(0.5);
            const double rank = static_cast<double>(std::upper_bound(data.begin(), data.end(), med) - data.begin()) /
                                static_cast<double>(data.size());
            CHECK(std::abs(rank - 0.5) <= 0.01);
        }
        ++n;
    }
    CHECK(n == 4);
}

TEST_CASE("postgres tdigest: to_postgres writes the extension's text form", "[postgres_formats]") {
    const TDigest::Centroid cs[] = {{0.1, 1}, {2.5, 2}, {2.5, 3}, {1e20, 1}};
    const TDigest d = TDigest::from_centroids(cs, 100);
    CHECK(d.to_postgres() == "flags 1 count 7 compression 100 centroids 4 (0.1, 1) (2.5, 2) (2.5, 3) (1e+20, 1)");
    // Shortest round-trip means: the text reads back bit for bit.
    tally::test::Rng rng(5);
    TDigest big(200);
    for (int i = 0; i < 50'000; ++i) big.add(std::exp(6 * rng.uniform() - 3));
    TDigest back = TDigest::from_postgres(big.to_postgres());
    const auto a = big.centroids();
    const auto b = back.centroids();
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        CHECK(a[i].mean == b[i].mean);
        CHECK(a[i].weight == b[i].weight);
    }
    CHECK(back.compression() == 200);
    CHECK(back.total() == big.total());
}

TEST_CASE("postgres tdigest: to_postgres refuses what the extension cannot hold", "[postgres_formats]") {
    using Catch::Matchers::Contains;
    using tally::test::message_of;
    CHECK_THAT(message_of([] { (void)TDigest(100).to_postgres(); }), Contains("empty"));
    TDigest frac(100.5);
    frac.add(1);
    CHECK_THAT(message_of([&] { (void)frac.to_postgres(); }), Contains("compression 100.5"));
    CHECK(frac.to_postgres(100) == "flags 1 count 1 compression 100 centroids 1 (1, 1)");  // header named explicitly
    CHECK_THAT(message_of([&] { (void)frac.to_postgres(5); }), Contains("postgres_compression 5 is out of range [10, 10000]"));
    CHECK(TDigest::from_postgres(frac.to_postgres(1000)).compression() == 1000);
    TDigest weighted(100);
    weighted.add(1, 0.5);
    CHECK_THAT(message_of([&] { (void)weighted.to_postgres(); }), Contains("total weight 0.5"));
}

TEST_CASE("postgres tdigest: malformed text is refused with FormatError", "[postgres_formats]") {
    using Catch::Matchers::Contains;
    const std::string ok = "flags 1 count 3 compression 100 centroids 2 (1.5, 1) (2, 2)";
    CHECK(TDigest::from_postgres(ok).total() == 3);
    CHECK(TDigest::from_postgres("  flags 1 count 3 compression 100 centroids 2 (1.5,1)(2 , 2)  ").total() == 3);
    CHECK_THAT(td_message(""), Contains("expected \"flags\""));
    CHECK_THAT(td_message("flags 2 count 3 compression 100 centroids 2 (1.5, 1) (2, 2)"), Contains("flags 2"));
    CHECK_THAT(td_message("flags 1 count 0 compression 100 centroids 1 (1.5, 1)"), Contains("count 0"));
    CHECK_THAT(td_message("flags 1 count 3 compression 5 centroids 2 (1.5, 1) (2, 2)"), Contains("compression 5"));
    CHECK_THAT(td_message("flags 1 count 3 compression 100 centroids 0"), Contains("centroids 0"));
    CHECK_THAT(td_message("flags 1 count 3 compression 10 centroids 101 (1, 3)"), Contains("centroids 101"));
    CHECK_THAT(td_message("flags 1 count 3 compression 100 centroids 2 (2.5, 1) (2, 2)"), Contains("not sorted"));
    CHECK_THAT(td_message("flags 1 count 3 compression 100 centroids 2 (nan, 1) (2, 2)"), Contains("not finite"));
    CHECK_THAT(td_message("flags 1 count 3 compression 100 centroids 2 (1, 1) (inf, 2)"), Contains("not finite"));
    CHECK_THAT(td_message("flags 1 count 3 compression 100 centroids 2 (1, 1) (1e999, 2)"), Contains("mean"));
    CHECK_THAT(td_message("flags 1 count 3 compression 100 centroids 2 (1, -1) (2, 4)"), Contains("count -1"));
    CHECK_THAT(td_message("flags 1 count 4 compression 100 centroids 2 (1.5, 1) (2, 2)"), Contains("sum to 3"));
    CHECK_THAT(td_message(ok + " x"), Contains("trailing"));
    CHECK_THAT(td_message("flags 1 count 3 compression 100 centroids 2 (1.5, 1) (2, 2"), Contains("')'"));
    CHECK_THAT(td_message("flags 1 count 9007199254740993 compression 100 centroids 1 (1, 9007199254740993)"),
               Contains("2^53"));
    // flags 0: the pre-1.2 form stores sums, read as means.
    TDigest old = TDigest::from_postgres("flags 0 count 3 compression 100 centroids 2 (1.5, 1) (4, 2)");
    CHECK(old.centroids()[1].mean == 2.0);
    // Every strict prefix of a valid text is refused or valid.
    const std::string text = TDigest::from_centroids(std::vector<TDigest::Centroid>{{1, 1}, {2.25, 3}, {7, 1}}, 100).to_postgres();
    int refused = 0;
    for (std::size_t len = 0; len < text.size(); ++len) {
        try {
            const TDigest d = TDigest::from_postgres(text.substr(0, len));
            CHECK(d.total() > 0);
        } catch (const FormatError&) {
            ++refused;
        }
    }
    CHECK(refused >= static_cast<int>(text.size()) - 2);
}
