#include <tally/core/serialize.hpp>
#include <tally/sketch/distinct/hyperloglog.hpp>
#include <tally/sketch/distinct/theta.hpp>
#include <tally/sketch/distinct/tuple.hpp>
#include <tally/sketch/distinct/ultraloglog.hpp>
#include <tally/sketch/frequency/count_min.hpp>
#include <tally/sketch/frequency/top_k.hpp>
#include <tally/sketch/membership/bloom_filter.hpp>
#include <tally/sketch/quantiles/kll.hpp>
#include <tally/sketch/quantiles/tdigest.hpp>
#include <tally/sketch/sampling/reservoir.hpp>
#include <tally/sketch/sampling/weighted_reservoir.hpp>
#include <tally/window/sliding_counter.hpp>
#include <tally/window/windowed.hpp>

#include <bit>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "catch.hpp"

using tally::ByteReader;
using tally::ByteWriter;
using tally::FormatError;

TEST_CASE("ByteWriter writes little-endian, ByteReader reads it back", "[serialize]") {
    ByteWriter w;
    w.header(tally::Family::hyperloglog, 1);
    w.u8(0xab);
    w.u16(0x1234);
    w.u32(0xdeadbeef);
    w.u64(0x0102030405060708ull);
    w.f64(-2.5);
    w.varint(300);
    w.varint(std::numeric_limits<std::uint64_t>::max());
    w.string("hi");
    const auto bytes = w.take();

    // golden: header then the first fields
    const std::vector<std::uint8_t> golden_prefix = {'T', 'A', 'L', 'Y', 2,    1,    0,    0,    0xab, 0x34,
                                                     0x12, 0xef, 0xbe, 0xad, 0xde, 0x08, 0x07, 0x06, 0x05, 0x04,
                                                     0x03, 0x02, 0x01};
    REQUIRE(bytes.size() > golden_prefix.size());
    for (std::size_t i = 0; i < golden_prefix.size(); ++i) {
        INFO("byte " << i);
        CHECK(static_cast<std::uint8_t>(bytes[i]) == golden_prefix[i]);
    }

    ByteReader r(bytes);
    CHECK(r.header(tally::Family::hyperloglog, 1) == 1);
    CHECK(r.u8() == 0xab);
    CHECK(r.u16() == 0x1234);
    CHECK(r.u32() == 0xdeadbeef);
    CHECK(r.u64() == 0x0102030405060708ull);
    CHECK(r.f64() == -2.5);
    CHECK(r.varint() == 300);
    CHECK(r.varint() == std::numeric_limits<std::uint64_t>::max());
    CHECK(r.string() == "hi");
    CHECK(r.remaining() == 0);
    CHECK_NOTHROW(r.expect_end());
}

TEST_CASE("ByteReader refuses every read past the end", "[serialize]") {
    ByteWriter w;
    w.u64(42);
    w.string("abcdef");
    const auto full = w.take();
    for (std::size_t n = 0; n < full.size(); ++n) {
        INFO("prefix " << n);
        ByteReader r(std::span<const std::byte>(full.data(), n));
        CHECK_THROWS_AS(
            [&] {
                (void)r.u64();
                (void)r.string();
            }(),
            FormatError);
    }
    std::vector<std::byte> empty;
    ByteReader e(empty);
    CHECK_THROWS_AS(e.u8(), FormatError);
    CHECK_THROWS_AS(e.u16(), FormatError);
    CHECK_THROWS_AS(e.u32(), FormatError);
    CHECK_THROWS_AS(e.u64(), FormatError);
    CHECK_THROWS_AS(e.f64(), FormatError);
    CHECK_THROWS_AS(e.varint(), FormatError);
    CHECK_THROWS_AS(e.bytes(1), FormatError);
    CHECK_NOTHROW(e.bytes(0));
    CHECK_THROWS_AS(e.header(tally::Family::tdigest, 1), FormatError);

    // A failed read consumes nothing.
    ByteWriter w2;
    w2.u16(7);
    const auto two = w2.take();
    ByteReader r2(two);
    CHECK_THROWS_AS(r2.u32(), FormatError);
    CHECK(r2.u16() == 7);
}

TEST_CASE("frame header validation", "[serialize]") {
    auto make = [](std::uint8_t family, std::uint8_t version, std::uint16_t reserved, char m0 = 'T') {
        ByteWriter w;
        w.u8(static_cast<std::uint8_t>(m0));
        w.u8('A');
        w.u8('L');
        w.u8('Y');
        w.u8(family);
        w.u8(version);
        w.u16(reserved);
        return w.take();
    };
    auto read = [](const std::vector<std::byte>& b) {
        ByteReader r(b);
        return r.header(tally::Family::bloom_filter, 2);
    };
    CHECK(read(make(5, 1, 0)) == 1);
    CHECK(read(make(5, 2, 0)) == 2);
    CHECK_THROWS_AS(read(make(5, 3, 0)), FormatError);
    CHECK_THROWS_AS(read(make(5, 0, 0)), FormatError);
    CHECK_THROWS_AS(read(make(4, 1, 0)), FormatError);
    CHECK_THROWS_AS(read(make(5, 1, 1)), FormatError);
    CHECK_THROWS_AS(read(make(5, 1, 0, 'X')), FormatError);
}

TEST_CASE("counts are checked against the bytes that remain", "[serialize]") {
    ByteWriter w;
    w.u64(1);
    w.u64(2);
    const auto b = w.take();
    ByteReader r(b);
    CHECK(r.count(2, 8, 100, "items") == 2);
    CHECK_THROWS_AS(r.count(3, 8, 100, "items"), FormatError);
    CHECK_THROWS_AS(r.count(101, 0, 100, "items"), FormatError);
    CHECK_THROWS_AS(r.count(std::numeric_limits<std::uint64_t>::max(), 8, ~0ull, "items"), FormatError);
    r.u64();
    CHECK_THROWS_AS(r.expect_end(), FormatError);
}

TEST_CASE("varint rejects overlong encodings", "[serialize]") {
    std::vector<std::byte> eleven(11, std::byte{0x80});
    ByteReader r(eleven);
    CHECK_THROWS_AS(r.varint(), FormatError);
    std::vector<std::byte> overflow(9, std::byte{0xff});
    overflow.push_back(std::byte{0x02});  // 10th byte may only carry bit 63
    ByteReader r2(overflow);
    CHECK_THROWS_AS(r2.varint(), FormatError);
}

TEST_CASE("little_endian is the identity here and a byte swap on big-endian targets", "[serialize]") {
    constexpr std::uint32_t v = 0x11223344u;
    constexpr std::uint32_t want = std::endian::native == std::endian::little ? v : 0x44332211u;
    STATIC_REQUIRE(tally::detail::little_endian(v) == want);
    STATIC_REQUIRE(tally::detail::little_endian(tally::detail::little_endian(std::uint64_t{0x0102030405060708})) ==
                   0x0102030405060708);
    tally::ByteWriter w;
    w.u32(v);
    const auto bytes = w.take();
    REQUIRE(bytes.size() == 4);
    CHECK(bytes[0] == std::byte{0x44});
    CHECK(bytes[3] == std::byte{0x11});
}

// ---- docs/wire-format.md against the code -----------------------------------

// The build passes the page's path; a hand build run from the repository root
// finds it next to this file.
#ifndef TALLY_WIRE_FORMAT_MD
#define TALLY_WIRE_FORMAT_MD \
    (std::filesystem::path(__FILE__).parent_path().parent_path() / "docs" / "wire-format.md").string()
#endif

namespace {

struct FamilyVersions {
    std::string_view name;  // the enumerator's name, as the family table spells it
    int declared;           // the class's format_version
    int written;            // the version byte of a frame the class writes
};

int version_byte(const std::vector<std::byte>& frame) {
    REQUIRE(frame.size() >= tally::frame_header_size);
    return std::to_integer<int>(frame[5]);
}

// One case per Family enumerator and no default, so that a new enumerator
// draws a -Wswitch warning here and, until it has a case, fails the test below.
std::optional<FamilyVersions> versions_of(tally::Family family) {
    using tally::Family;
    switch (family) {
        case Family::sliding_counter: {
            // SlidingCounter has no format_version: the version is the one it writes.
            const int written = version_byte(tally::SlidingCounter<std::uint32_t, 8>(1000).serialize());
            return FamilyVersions{"sliding_counter", written, written};
        }
        case Family::hyperloglog:
            return FamilyVersions{"hyperloglog", tally::HyperLogLog::format_version,
                                  version_byte(tally::HyperLogLog(12).serialize())};
        case Family::count_min:
            return FamilyVersions{"count_min", tally::CountMin<>::format_version,
                                  version_byte(tally::CountMin<>(64, 4).serialize())};
        case Family::top_k:
            return FamilyVersions{"top_k", tally::TopK<std::uint64_t>::format_version,
                                  version_byte(tally::TopK<std::uint64_t>(10).serialize())};
        case Family::bloom_filter:
            return FamilyVersions{"bloom_filter", tally::BloomFilter<>::format_version,
                                  version_byte(tally::BloomFilter<>(1000, 0.01).serialize())};
        case Family::reservoir:
            return FamilyVersions{"reservoir", tally::Reservoir<std::uint64_t>::format_version,
                                  version_byte(tally::Reservoir<std::uint64_t>(8, 1).serialize())};
        case Family::weighted_reservoir:
            return FamilyVersions{"weighted_reservoir", tally::WeightedReservoir<std::uint64_t>::format_version,
                                  version_byte(tally::WeightedReservoir<std::uint64_t>(8, 1).serialize())};
        case Family::tdigest:
            return FamilyVersions{"tdigest", tally::TDigest::format_version,
                                  version_byte(tally::TDigest(100).serialize())};
        case Family::windowed: {
            using W = tally::Windowed<tally::HyperLogLog, 8>;
            return FamilyVersions{"windowed", W::format_version,
                                  version_byte(W(1000, tally::HyperLogLog(12)).serialize())};
        }
        case Family::kll:
            return FamilyVersions{"kll", tally::KllSketch<double>::format_version,
                                  version_byte(tally::KllSketch<double>().serialize())};
        case Family::theta:
            return FamilyVersions{"theta", tally::ThetaSketch::format_version,
                                  version_byte(tally::ThetaSketch(12).serialize())};
        case Family::ultraloglog:
            return FamilyVersions{"ultraloglog", tally::UltraLogLog::format_version,
                                  version_byte(tally::UltraLogLog(12).serialize())};
        case Family::tuple: {
            const int aod = version_byte(tally::ArrayOfDoublesSketch(12, 2).serialize());
            CHECK(version_byte(tally::TupleSketch<double>(12).serialize()) == aod);
            CHECK(tally::TupleSketch<double>::format_version == tally::ArrayOfDoublesSketch::format_version);
            return FamilyVersions{"tuple", tally::ArrayOfDoublesSketch::format_version, aod};
        }
    }
    return std::nullopt;  // not an enumerator
}

std::string trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return std::string(s);
}

// The leading decimal number of `s` (after spaces), or -1.
int leading_number(std::string_view s) {
    const std::string t = trim(s);
    int v = -1;
    for (const char c : t) {
        if (c < '0' || c > '9') break;
        v = (v < 0 ? 0 : v * 10) + (c - '0');
    }
    return v;
}

// The cells of a table row "| a | b | c |": {"a", "b", "c"}; empty unless the
// line is a row.
std::vector<std::string> table_cells(const std::string& line) {
    std::vector<std::string> cells;
    if (line.size() < 2 || line.front() != '|' || line.back() != '|') return cells;
    std::size_t start = 1;
    for (std::size_t i = 1; i < line.size(); ++i) {
        if (line[i] != '|') continue;
        cells.push_back(trim(std::string_view(line).substr(start, i - start)));
        start = i + 1;
    }
    return cells;
}

}  // namespace

TEST_CASE("docs/wire-format.md gives every family the version its code writes", "[serialize][docs]") {
    const std::string path = TALLY_WIRE_FORMAT_MD;
    std::ifstream in(path);
    INFO("page: " << path);
    REQUIRE(in.good());
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        lines.push_back(line);
    }
    REQUIRE(!lines.empty());

    int families = 0;
    for (int id = 1; id <= 255; ++id) {
        const std::optional<FamilyVersions> v = versions_of(static_cast<tally::Family>(id));
        if (!v) continue;
        ++families;
        INFO("family " << id << " (" << v->name << "): format_version " << v->declared << ", writes "
                       << v->written);
        CHECK(v->declared == v->written);

        // The family table: | <id> | `<name>` | <type> | <version> ... |
        std::string name_cell(1, '`');  // appended, not "`" + name: GCC 12 -Wrestrict misfires on that
        name_cell.append(v->name).push_back('`');
        int rows = 0;
        for (const std::string& line : lines) {
            const std::vector<std::string> cells = table_cells(line);
            if (cells.size() < 3 || cells[0] != std::to_string(id) || cells[1] != name_cell) continue;
            ++rows;
            INFO("row: " << line);
            CHECK(leading_number(cells.back()) == v->declared);
        }
        CHECK(rows == 1);

        // The family's section: ## <id>: ... version <v>
        const std::string prefix = "## " + std::to_string(id) + ": ";
        int headings = 0;
        for (const std::string& line : lines) {
            if (line.rfind(prefix, 0) != 0) continue;
            ++headings;
            INFO("heading: " << line);
            const std::size_t at = line.rfind("version ");
            REQUIRE(at != std::string::npos);
            CHECK(leading_number(std::string_view(line).substr(at + 8)) == v->declared);
        }
        CHECK(headings == 1);
    }
    CHECK(families >= 13);
}
