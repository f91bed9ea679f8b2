// tally/sketch/distinct/detail/hyperloglog_postgres.hpp: PostgreSQL's `hll` type
// (postgresql-hll, the Aggregate Knowledge storage specification v1.0.0) for
// tally::HyperLogLog: the extension's hashing of items and its register rule,
// and the codec of its values. Written from the storage specification and the
// extension's documented behaviour; docs/postgres.md has the mapping.
//
// Hashing: hll_hash_bigint / hll_hash_integer / hll_hash_smallint /
// hll_hash_boolean / hll_hash_text / hll_hash_bytea are MurmurHash3_x64_128
// (murmur3.hpp) with seed 0 of the value's bytes (integers as their
// little-endian bytes, sizeof(T) of them), keeping the first 64 bits.
// Register rule for log2m = p and regwidth = w: index = the low p bits of the
// hash; value = 1 + trailing zeros of (hash >> p), or 0 when that is 0,
// capped at 2^w - 1.
//
// Value layout (schema version 1; all multi-bit fields big-endian, packed
// from the top bit of each byte down):
//
//   byte 0  version << 4 | type: 0 undefined, 1 EMPTY, 2 EXPLICIT, 3 SPARSE, 4 FULL
//   byte 1  (regwidth - 1) << 5 | log2m
//   byte 2  0 (1 bit) | sparseon (1 bit) | explicit cutoff code (6 bits):
//           0 -> expthresh 0, 63 -> -1 (auto), k in 1..31 -> 2^(k - 1)
//   EMPTY     no data bytes
//   EXPLICIT  the hashes, 8 bytes each, big-endian, ascending as signed
//             64-bit integers, no duplicates (at most 16383: the extension's
//             buffer)
//   SPARSE    (log2m + regwidth)-bit words index << regwidth | value, for the
//             non-zero registers in ascending index order, then zero padding
//             to the byte (under 8 bits)
//   FULL      2^log2m regwidth-bit register values in index order, then zero
//             padding to the byte
//
// All functions are pure and thread-safe.
#pragma once

#include "../../../detail/abi.hpp"

#include <algorithm>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../../../core/serialize.hpp"
#include "../../../detail/throw.hpp"
#include "../../common/detail/item_kind.hpp"
#include "murmur3.hpp"
#include "../hyperloglog_options.hpp"

TALLY_BEGIN_NAMESPACE

namespace detail {

inline constexpr int pg_hll_min_log2m = 4;        // the storage specification's floor
inline constexpr int pg_hll_max_log2m = 17;       // the extension's 128 KiB register buffer
inline constexpr int pg_hll_min_regwidth = 1;
inline constexpr int pg_hll_max_regwidth = 7;     // the extension's ceiling (3 header bits hold 1..8)
inline constexpr std::size_t pg_hll_max_explicit = 16383;  // hashes the extension's buffer holds
inline constexpr std::int64_t pg_hll_max_expthresh = 8192;  // largest power of two <= 16383

enum class PgHllType : std::uint8_t { undefined = 0, empty = 1, explicit_list = 2, sparse = 3, full = 4 };

/// The largest register value for log2m and regwidth: min(2^w - 1, 64 - p).
constexpr int pg_hll_max_rank(int log2m, int regwidth) noexcept {
    const int cap = (1 << regwidth) - 1;
    return cap < 64 - log2m ? cap : 64 - log2m;
}

/// Register value of a hash: 1 + trailing zeros of (hash >> p), 0 when that
/// is 0, capped at `cap` (2^regwidth - 1).
TALLY_ALWAYS_INLINE std::uint8_t pg_hll_rank(std::uint64_t hash, int log2m, int cap) noexcept {
    const std::uint64_t rest = hash >> log2m;
    if (rest == 0) return 0;
    const int r = std::countr_zero(rest) + 1;
    return static_cast<std::uint8_t>(r < cap ? r : cap);
}

/// hll_hash_* of `len` raw bytes: MurmurHash3_x64_128, seed 0, first half.
inline std::uint64_t pg_hll_hash_bytes(const void* data, std::size_t len) noexcept {
    return murmur3_x64_128_fast(data, len, 0).h1;
}

/// hll_hash_bigint / integer / smallint / boolean (and "char"): the value's
/// sizeof(T) little-endian bytes.
template <class T>
    requires std::is_integral_v<T>
inline std::uint64_t pg_hll_hash_integer(T v) noexcept {
    if constexpr (sizeof(T) == 8) {
        return murmur3_x64_128_u64(static_cast<std::uint64_t>(v), 0).h1;
    } else {
        unsigned char buf[sizeof(T)];
        auto u = static_cast<std::make_unsigned_t<T>>(v);
        for (std::size_t i = 0; i < sizeof(T); ++i) buf[i] = static_cast<unsigned char>(u >> (8 * i));
        return pg_hll_hash_bytes(buf, sizeof(T));
    }
}

// The item kinds (item_kind.hpp) as the hll extension's hll_hash_* functions
// hash them: bytes as they are, booleans as one byte, integers and floating
// point as their own-width little-endian bits.
struct PostgresItemHasher {
    std::uint64_t operator()(ItemBytes b) const noexcept { return pg_hll_hash_bytes(b.data, b.size); }
    std::uint64_t operator()(bool v) const noexcept { return pg_hll_hash_integer(static_cast<std::uint8_t>(v ? 1 : 0)); }
    template <std::integral I>
    std::uint64_t operator()(I v) const noexcept {
        return pg_hll_hash_integer(v);
    }
    template <std::floating_point F>
    std::uint64_t operator()(F v) const noexcept {
        if constexpr (std::is_same_v<F, double>)
            return pg_hll_hash_integer(std::bit_cast<std::uint64_t>(v));
        else if constexpr (std::is_same_v<F, float>)
            return pg_hll_hash_integer(std::bit_cast<std::uint32_t>(v));
        else
            return hash_of(v);
    }
    std::uint64_t operator()(ItemHashed h) const noexcept { return h.hash; }
};

/// A decoded `hll` value. EXPLICIT keeps its hashes; SPARSE its entries as
/// (index << 8) | value, ascending; FULL its 2^log2m registers.
struct PgHllImage {
    PgHllType type = PgHllType::empty;
    int log2m = 0;
    int regwidth = 0;
    std::int64_t expthresh = -1;
    bool sparse_on = true;
    std::vector<std::uint64_t> elements;
    std::vector<std::uint32_t> entries;
    std::vector<std::uint8_t> registers;
};

inline constexpr std::int64_t pg_hll_decode_expthresh(int code) noexcept {
    return code == 63 ? -1 : code == 0 ? 0 : std::int64_t{1} << (code - 1);
}

inline constexpr int pg_hll_encode_expthresh(std::int64_t expthresh) noexcept {
    return expthresh == -1 ? 63 : expthresh == 0 ? 0 : std::countr_zero(static_cast<std::uint64_t>(expthresh)) + 1;
}

/// Reads `width` (<= 25) bits at bit offset `bit`, most significant first;
/// the caller guarantees bit + width <= 8 * size.
inline std::uint32_t pg_hll_read_bits(const unsigned char* p, std::size_t bit, int width) noexcept {
    const std::size_t byte = bit >> 3;
    const int offset = static_cast<int>(bit & 7);
    const int nbytes = (offset + width + 7) / 8;
    std::uint64_t acc = 0;
    for (int i = 0; i < nbytes; ++i) acc = (acc << 8) | p[byte + static_cast<std::size_t>(i)];
    return static_cast<std::uint32_t>((acc >> (8 * nbytes - offset - width)) & ((std::uint64_t{1} << width) - 1));
}

/// ORs the low `width` (<= 25) bits of v in at bit offset `bit` (zeroed buffer).
inline void pg_hll_write_bits(unsigned char* p, std::size_t bit, int width, std::uint32_t v) noexcept {
    const std::size_t byte = bit >> 3;
    const int offset = static_cast<int>(bit & 7);
    const int nbytes = (offset + width + 7) / 8;
    const std::uint64_t acc = static_cast<std::uint64_t>(v) << (8 * nbytes - offset - width);
    for (int i = 0; i < nbytes; ++i)
        p[byte + static_cast<std::size_t>(i)] |= static_cast<unsigned char>(acc >> (8 * (nbytes - 1 - i)));
}

[[noreturn]] inline void pg_hll_bad(const std::string& what) {
    throw_format_error("tally::HyperLogLog::from_postgres: " + what);
}

/// Decodes one `hll` value, validating every field and length against the
/// storage specification and the extension's own limits; throws FormatError.
inline PgHllImage pg_hll_decode(std::span<const std::byte> bytes) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const std::size_t size = bytes.size();
    if (size == 0) pg_hll_bad("empty input (a value has at least 3 bytes)");
    const int version = p[0] >> 4;
    const int type = p[0] & 0xf;
    if (version != 1) pg_hll_bad("schema version " + std::to_string(version) + " (expected 1)");
    if (type == 0) pg_hll_bad("type UNDEFINED (the result of an undefined operation) holds no sketch");
    if (type > 4) pg_hll_bad("type " + std::to_string(type) + " (expected 1 EMPTY, 2 EXPLICIT, 3 SPARSE or 4 FULL)");
    if (size < 3) pg_hll_bad(std::to_string(size) + " bytes: the header has 3");
    PgHllImage img;
    img.type = static_cast<PgHllType>(type);
    img.regwidth = (p[1] >> 5) + 1;
    img.log2m = p[1] & 0x1f;
    if (img.regwidth > pg_hll_max_regwidth)
        pg_hll_bad("regwidth " + std::to_string(img.regwidth) + " is out of range [1, 7]");
    if (img.log2m < pg_hll_min_log2m || img.log2m > pg_hll_max_log2m)
        pg_hll_bad("log2m " + std::to_string(img.log2m) + " is out of range [4, 17]");
    if ((p[2] & 0x80) != 0) pg_hll_bad("the top bit of the cutoff byte is set (it is padding)");
    img.sparse_on = (p[2] & 0x40) != 0;
    const int code = p[2] & 0x3f;
    if (code > 31 && code != 63) pg_hll_bad("explicit cutoff code " + std::to_string(code) + " (expected 0..31 or 63)");
    img.expthresh = pg_hll_decode_expthresh(code);
    if ((img.type == PgHllType::empty || img.type == PgHllType::explicit_list) &&
        img.expthresh > static_cast<std::int64_t>(pg_hll_max_explicit))
        pg_hll_bad("expthresh " + std::to_string(img.expthresh) + " exceeds the extension's 16383");
    const std::size_t data = size - 3;
    const unsigned char* d = p + 3;
    const std::size_t m = std::size_t{1} << img.log2m;
    const int max_rank = pg_hll_max_rank(img.log2m, img.regwidth);
    switch (img.type) {
        case PgHllType::empty:
            if (data != 0) pg_hll_bad("EMPTY with " + std::to_string(data) + " data bytes (expected 0)");
            break;
        case PgHllType::explicit_list: {
            if (data % 8 != 0) pg_hll_bad("EXPLICIT data of " + std::to_string(data) + " bytes, not a multiple of 8");
            const std::size_t n = data / 8;
            if (n > pg_hll_max_explicit) pg_hll_bad("EXPLICIT with " + std::to_string(n) + " hashes (at most 16383)");
            img.elements.resize(n);
            for (std::size_t i = 0; i < n; ++i) {
                std::uint64_t v = 0;
                for (int b = 0; b < 8; ++b) v = (v << 8) | d[8 * i + static_cast<std::size_t>(b)];
                if (i > 0 && static_cast<std::int64_t>(img.elements[i - 1]) >= static_cast<std::int64_t>(v))
                    pg_hll_bad("EXPLICIT hashes not strictly ascending at " + std::to_string(i));
                img.elements[i] = v;
            }
            break;
        }
        case PgHllType::sparse: {
            const int chunk = img.log2m + img.regwidth;
            const std::size_t bits = data * 8;
            std::size_t n = bits / static_cast<std::size_t>(chunk);
            const std::size_t pad = bits - n * static_cast<std::size_t>(chunk);
            if (pad >= 8) pg_hll_bad("SPARSE padding of " + std::to_string(pad) + " bits (under 8)");
            if (pad > 0 && pg_hll_read_bits(d, bits - pad, static_cast<int>(pad)) != 0)
                pg_hll_bad("SPARSE padding bits are not zero");
            // With words under 8 bits the extension's writer can leave a whole
            // zero word in the padding: it is padding, not register 0.
            if (chunk < 8 && n > 0 && bits - (n - 1) * static_cast<std::size_t>(chunk) < 8 &&
                pg_hll_read_bits(d, (n - 1) * static_cast<std::size_t>(chunk), chunk) == 0)
                --n;
            img.entries.reserve(n);
            std::int64_t previous = -1;
            for (std::size_t i = 0; i < n; ++i) {
                const std::uint32_t word = pg_hll_read_bits(d, i * static_cast<std::size_t>(chunk), chunk);
                const std::uint32_t index = word >> img.regwidth;
                const std::uint32_t value = word & ((1u << img.regwidth) - 1);
                if (static_cast<std::int64_t>(index) <= previous)
                    pg_hll_bad("SPARSE register indices not strictly ascending at entry " + std::to_string(i));
                if (value == 0) pg_hll_bad("SPARSE entry " + std::to_string(i) + " stores a zero register");
                if (static_cast<int>(value) > max_rank)
                    pg_hll_bad("SPARSE register value " + std::to_string(value) + " exceeds " +
                               std::to_string(max_rank) + ", the largest of log2m " + std::to_string(img.log2m));
                previous = index;
                img.entries.push_back((index << 8) | value);
            }
            break;
        }
        case PgHllType::full: {
            const std::size_t bits = m * static_cast<std::size_t>(img.regwidth);
            const std::size_t expected = (bits + 7) / 8;
            if (data != expected)
                pg_hll_bad("FULL data of " + std::to_string(data) + " bytes where log2m " + std::to_string(img.log2m) +
                           " and regwidth " + std::to_string(img.regwidth) + " need " + std::to_string(expected));
            if (bits % 8 != 0 && pg_hll_read_bits(d, bits, static_cast<int>(8 - bits % 8)) != 0)
                pg_hll_bad("FULL padding bits are not zero");
            img.registers.resize(m);
            for (std::size_t i = 0; i < m; ++i) {
                const std::uint32_t v = pg_hll_read_bits(d, i * static_cast<std::size_t>(img.regwidth), img.regwidth);
                if (static_cast<int>(v) > max_rank)
                    pg_hll_bad("FULL register " + std::to_string(i) + " holds " + std::to_string(v) + ", above " +
                               std::to_string(max_rank) + ", the largest of log2m " + std::to_string(img.log2m));
                img.registers[i] = static_cast<std::uint8_t>(v);
            }
            break;
        }
        default:
            break;
    }
    return img;
}

/// The most register bytes a decode of `input` bytes allocates at once:
/// max(64 KiB, 16 x input), the bound every tally decoder keeps.
constexpr std::size_t pg_hll_dense_decode_bytes(std::size_t input) noexcept {
    return input > (std::size_t{4} << 10) ? input * 16 : std::size_t{64} << 10;
}

/// Sparse entries of HyperLogLog's mode postgres ((index' << 6) | rank', p' =
/// 25, hyperloglog_sparse.hpp) that set exactly the given registers ((index <<
/// 8) | value, ascending) at precision p: value v > 25 - p is index' = index,
/// rank' = v - (25 - p); a smaller v puts its trailing zeros into index' bits
/// above p. Sorted by index'.
inline std::vector<std::uint32_t> pg_hll_sparse_entries(const std::vector<std::uint32_t>& regs, int p) {
    const int k = 25 - p;
    std::vector<std::uint32_t> out;
    out.reserve(regs.size());
    for (const std::uint32_t e : regs) {
        const std::uint32_t index = e >> 8;
        const int v = static_cast<int>(e & 0xff);
        if (v > k)
            out.push_back((index << 6) | static_cast<std::uint32_t>(v - k));
        else
            out.push_back(((index | (std::uint32_t{1} << (p + v - 1))) << 6) | 1u);
    }
    std::sort(out.begin(), out.end());
    return out;
}

/// Throws std::invalid_argument unless the options are ones the extension accepts.
inline void pg_hll_check_options(const PostgresHllOptions& o, const char* who) {
    const std::int64_t e = o.expthresh;
    if (!(e == -1 || e == 0 || (e > 0 && e <= pg_hll_max_expthresh && std::has_single_bit(static_cast<std::uint64_t>(e)))))
        throw_invalid_argument(std::string(who) + ": expthresh " + std::to_string(e) +
                               " is not -1, 0 or a power of two in [1, 8192]");
    if (o.max_sparse < -1 || o.max_sparse > 2147483647)
        throw_invalid_argument(std::string(who) + ": max_sparse " + std::to_string(o.max_sparse) +
                               " is out of range [-1, 2147483647]");
}

inline void pg_hll_put_header(std::vector<std::byte>& out, PgHllType type, int log2m, int regwidth,
                              const PostgresHllOptions& o) {
    out.push_back(static_cast<std::byte>((1 << 4) | static_cast<int>(type)));
    out.push_back(static_cast<std::byte>(((regwidth - 1) << 5) | log2m));
    out.push_back(static_cast<std::byte>((o.sparse_on ? 0x40 : 0) | pg_hll_encode_expthresh(o.expthresh)));
}

/// Writes registers (each <= pg_hll_max_rank) as EMPTY (none set), SPARSE or
/// FULL by the extension's rule. Options must have passed pg_hll_check_options.
inline std::vector<std::byte> pg_hll_encode(std::span<const std::uint8_t> registers, int log2m, int regwidth,
                                            const PostgresHllOptions& o) {
    std::size_t filled = 0;
    for (const std::uint8_t r : registers) filled += r != 0;
    std::vector<std::byte> out;
    if (filled == 0) {
        pg_hll_put_header(out, PgHllType::empty, log2m, regwidth, o);
        return out;
    }
    const std::size_t m = registers.size();
    const std::size_t chunk = static_cast<std::size_t>(log2m + regwidth);
    const std::size_t sparse_bits = filled * chunk;
    const std::size_t full_bits = m * static_cast<std::size_t>(regwidth);
    const bool sparse = o.sparse_on && ((o.max_sparse != -1 && filled <= static_cast<std::size_t>(o.max_sparse)) ||
                                        (o.max_sparse == -1 && sparse_bits < full_bits));
    pg_hll_put_header(out, sparse ? PgHllType::sparse : PgHllType::full, log2m, regwidth, o);
    const std::size_t bits = sparse ? sparse_bits : full_bits;
    out.resize(3 + (bits + 7) / 8, std::byte{0});
    auto* d = reinterpret_cast<unsigned char*>(out.data() + 3);
    std::size_t bit = 0;
    for (std::size_t i = 0; i < m; ++i) {
        if (sparse) {
            if (registers[i] == 0) continue;
            pg_hll_write_bits(d, bit, static_cast<int>(chunk), static_cast<std::uint32_t>((i << regwidth) | registers[i]));
            bit += chunk;
        } else {
            pg_hll_write_bits(d, bit, regwidth, registers[i]);
            bit += static_cast<std::size_t>(regwidth);
        }
    }
    return out;
}

/// An EXPLICIT value of the given hashes (sorted and deduplicated here as
/// signed integers; at most 16383). For tests and tools: tally itself keeps
/// registers, so to_postgres never writes one.
inline std::vector<std::byte> pg_hll_encode_explicit(std::vector<std::uint64_t> hashes, int log2m, int regwidth,
                                                     const PostgresHllOptions& o) {
    std::sort(hashes.begin(), hashes.end(), [](std::uint64_t a, std::uint64_t b) {
        return static_cast<std::int64_t>(a) < static_cast<std::int64_t>(b);
    });
    hashes.erase(std::unique(hashes.begin(), hashes.end()), hashes.end());
    std::vector<std::byte> out;
    pg_hll_put_header(out, PgHllType::explicit_list, log2m, regwidth, o);
    for (const std::uint64_t h : hashes)
        for (int b = 7; b >= 0; --b) out.push_back(static_cast<std::byte>(h >> (8 * b)));
    return out;
}

}  // namespace detail
TALLY_END_NAMESPACE
