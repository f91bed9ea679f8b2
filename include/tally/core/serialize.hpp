// tally/core/serialize.hpp: the byte format every summary crosses the wire in.
//
// Frame: little-endian throughout.
//
//   offset size field
//   0      4    magic "TALY" (0x54 0x41 0x4C 0x59)
//   4      1    family id (tally::Family)
//   5      1    format version of that family
//   6      2    reserved, must be zero
//   8      ...  family parameters, then payload (documented in each header)
//
// ByteReader checks every read against the end of its span and throws
// tally::FormatError instead of reading past it; counts read from the wire
// are checked against the bytes that remain before anything is allocated.
// ByteWriter and ByteReader are not thread-safe (one per thread).
#pragma once

#include "../detail/abi.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../detail/throw.hpp"
#include "detail/byte_order.hpp"

TALLY_BEGIN_NAMESPACE

/// Bytes that are not a valid serialised summary: truncated, wrong magic,
/// wrong family, unknown version, a parameter out of range, trailing bytes.
class FormatError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

namespace detail {
[[noreturn]] inline void throw_format_error(const std::string& message) { throw_as<FormatError>(message); }

/// throw_format_error of the pieces joined, e.g.
/// throw_format_error_of({who, ": k ", k, " is out of range [8, 65535]"}).
[[noreturn, gnu::noinline, gnu::cold]] inline void throw_format_error_of(std::initializer_list<MessagePart> parts) {
    throw_as<FormatError>(join_message(parts));
}

}  // namespace detail

/// Family ids of the frame header. Values are part of the wire format.
enum class Family : std::uint8_t {
    sliding_counter = 1,
    hyperloglog = 2,
    count_min = 3,
    top_k = 4,
    bloom_filter = 5,
    reservoir = 6,
    weighted_reservoir = 7,
    tdigest = 8,
    windowed = 9,  ///< Windowed<S>: a ring of nested S frames
    kll = 10,
    theta = 11,
    ultraloglog = 12,
    tuple = 13,  ///< TupleSketch and ArrayOfDoublesSketch
};

inline constexpr std::uint8_t frame_magic[4] = {'T', 'A', 'L', 'Y'};
inline constexpr std::size_t frame_header_size = 8;

/// Appends little-endian values to a byte vector.
class ByteWriter {
  public:
    ByteWriter() = default;
    explicit ByteWriter(std::size_t reserve) { bytes_.reserve(reserve); }

    void u8(std::uint8_t v) { bytes_.push_back(static_cast<std::byte>(v)); }
    void u16(std::uint16_t v) { put_le(v); }
    void u32(std::uint32_t v) { put_le(v); }
    void u64(std::uint64_t v) { put_le(v); }
    void i64(std::int64_t v) { put_le(static_cast<std::uint64_t>(v)); }
    void f64(double v) { put_le(std::bit_cast<std::uint64_t>(v)); }
    /// Unsigned LEB128: 7 bits a byte, low groups first.
    void varint(std::uint64_t v) {
        while (v >= 0x80) {
            u8(static_cast<std::uint8_t>(v | 0x80));
            v >>= 7;
        }
        u8(static_cast<std::uint8_t>(v));
    }
    void bytes(const void* data, std::size_t n) {
        const auto* p = static_cast<const std::byte*>(data);
        bytes_.insert(bytes_.end(), p, p + n);
    }
    void bytes(std::span<const std::byte> s) { bytes(s.data(), s.size()); }
    /// A length-prefixed (u32) string.
    void string(std::string_view s) {
        u32(static_cast<std::uint32_t>(s.size()));
        bytes(s.data(), s.size());
    }
    /// The 8-byte frame header.
    void header(Family family, std::uint8_t version) {
        bytes(frame_magic, 4);
        u8(static_cast<std::uint8_t>(family));
        u8(version);
        u16(0);
    }

    std::size_t size() const noexcept { return bytes_.size(); }
    std::vector<std::byte>& buffer() noexcept { return bytes_; }
    std::vector<std::byte> take() noexcept { return std::move(bytes_); }

  private:
    template <class U>
    void put_le(U v) {
        v = detail::little_endian(v);
        std::byte b[sizeof(U)];
        std::memcpy(b, &v, sizeof(U));
        bytes_.insert(bytes_.end(), b, b + sizeof(U));
    }
    std::vector<std::byte> bytes_;
};

/// Reads little-endian values from a span, never past its end.
class ByteReader {
  public:
    explicit ByteReader(std::span<const std::byte> bytes) noexcept : data_(bytes) {}

    std::uint8_t u8() { return get_le<std::uint8_t>("u8"); }
    std::uint16_t u16() { return get_le<std::uint16_t>("u16"); }
    std::uint32_t u32() { return get_le<std::uint32_t>("u32"); }
    std::uint64_t u64() { return get_le<std::uint64_t>("u64"); }
    std::int64_t i64() { return static_cast<std::int64_t>(get_le<std::uint64_t>("i64")); }
    double f64() { return std::bit_cast<double>(get_le<std::uint64_t>("f64")); }
    std::uint64_t varint() {
        std::uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            const std::uint8_t b = u8();
            if (shift == 63 && b > 1) detail::throw_format_error("tally: varint overflows 64 bits");
            v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
            if ((b & 0x80) == 0) return v;
        }
        detail::throw_format_error("tally: varint longer than 10 bytes");
    }
    /// `n` raw bytes, as a view into the input.
    std::span<const std::byte> bytes(std::size_t n) {
        need(n, "byte run");
        auto s = data_.subspan(pos_, n);
        pos_ += n;
        return s;
    }
    void bytes_into(void* out, std::size_t n) {
        auto s = bytes(n);
        if (n != 0) std::memcpy(out, s.data(), n);
    }
    std::string string() {
        const std::uint32_t n = u32();
        auto s = bytes(n);
        return std::string(reinterpret_cast<const char*>(s.data()), s.size());
    }
    /// A count of elements of `min_element_bytes` each that must still fit in
    /// the input and must not exceed `max_count`; checked before any allocation.
    std::uint64_t count(std::uint64_t n, std::size_t min_element_bytes, std::uint64_t max_count, const char* what) {
        if (n > max_count)
            detail::throw_format_error_of({"tally: ", what, " count ", n, " exceeds the maximum ", max_count});
        if (min_element_bytes != 0 && n > remaining() / min_element_bytes)
            detail::throw_format_error_of(
                {"tally: ", what, " count ", n, " needs more bytes than remain (", remaining(), ")"});
        return n;
    }
    /// Checks magic, family and reserved bytes; returns the format version,
    /// which must lie in [1, max_version].
    std::uint8_t header(Family family, std::uint8_t max_version) {
        std::uint8_t magic[4];
        bytes_into(magic, 4);
        if (std::memcmp(magic, frame_magic, 4) != 0) detail::throw_format_error("tally: bad magic (expected \"TALY\")");
        const std::uint8_t fam = u8();
        if (fam != static_cast<std::uint8_t>(family))
            detail::throw_format_error_of(
                {"tally: family id ", fam, " where ", static_cast<int>(family), " was expected"});
        const std::uint8_t version = u8();
        if (version == 0 || version > max_version)
            detail::throw_format_error_of(
                {"tally: unsupported format version ", version, " (supported: 1..", max_version, ")"});
        if (u16() != 0) detail::throw_format_error("tally: reserved header bytes are not zero");
        return version;
    }
    /// Throws unless every byte was consumed.
    void expect_end() const {
        if (pos_ != data_.size())
            detail::throw_format_error_of({"tally: ", data_.size() - pos_, " trailing bytes"});
    }

    std::size_t remaining() const noexcept { return data_.size() - pos_; }
    std::size_t position() const noexcept { return pos_; }

  private:
    void need(std::size_t n, const char* what) const {
        if (n > remaining())
            detail::throw_format_error_of(
                {"tally: truncated input reading ", what, " (need ", n, " bytes, ", remaining(), " remain)"});
    }
    template <class U>
    U get_le(const char* what) {
        need(sizeof(U), what);
        U v;
        std::memcpy(&v, data_.data() + pos_, sizeof(U));
        pos_ += sizeof(U);
        return detail::little_endian(v);
    }

    std::span<const std::byte> data_;
    std::size_t pos_ = 0;
};

/// Throws FormatError with `message` unless `ok`.
inline void format_check(bool ok, const char* message) {
    if (!ok) detail::throw_format_error(std::string("tally: ") + message);
}

TALLY_END_NAMESPACE
