#include <tally/core/serialize.hpp>

#include <bit>
#include <cstdint>
#include <limits>
#include <string>
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
