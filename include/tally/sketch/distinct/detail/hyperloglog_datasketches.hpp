// tally/sketch/distinct/detail/hyperloglog_datasketches.hpp: the pieces of Apache
// DataSketches' HllSketch that tally::HyperLogLog needs: DataSketches' item
// byte conventions over MurmurHash3 x64 128 (murmur3.hpp) and coupon rule, and the serial-version-1
// HllSketch image (LIST, SET and HLL modes; HLL_4, HLL_6, HLL_8 arrays).
// Written from the DataSketches documentation and format description; the
// byte layout is documented in docs/hyperloglog.md.
//
// DataSketches seeds MurmurHash3_x64_128 with 9001.
//
// All functions are pure and thread-safe.
#pragma once

#include "../../../detail/abi.hpp"

#include "../../../core/detail/byte_order.hpp"

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../../../core/hash.hpp"
#include "../../../core/serialize.hpp"
#include "../../../detail/primitives.hpp"
#include "../../../detail/throw.hpp"
#include "datasketches_hash.hpp"
#include "murmur3.hpp"
#include "../hyperloglog_options.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

inline constexpr int ds_hll_max_rank = 63;  // min(leading zeros, 62) + 1

/// DataSketches' register value for the second hash half: min(clz, 62) + 1.
/// Setting bit 1 caps the count at 62 without a compare (and h2 | 2 != 0).
TALLY_ALWAYS_INLINE std::uint8_t ds_hll_rank(std::uint64_t h2) noexcept {
    return static_cast<std::uint8_t>(std::countl_zero(h2 | 2) + 1);
}

/// 2^-k for k in 0..63, exact.
inline double ds_inv_pow2(int k) noexcept {
    return std::bit_cast<double>(static_cast<std::uint64_t>(1023 - k) << 52);
}

// ---- the HllSketch image --------------------------------------------------

enum class DsHllMode : std::uint8_t { list = 0, set = 1, hll = 2 };

inline constexpr std::uint8_t ds_ser_ver = 1;
inline constexpr std::uint8_t ds_family_hll = 7;
inline constexpr std::uint8_t ds_flag_big_endian = 1;
inline constexpr std::uint8_t ds_flag_read_only = 2;
inline constexpr std::uint8_t ds_flag_empty = 4;
inline constexpr std::uint8_t ds_flag_compact = 8;
inline constexpr std::uint8_t ds_flag_out_of_order = 16;
inline constexpr std::uint8_t ds_flag_full_size = 32;
inline constexpr std::size_t ds_hll_header = 40;
inline constexpr int ds_min_lg_k = 4;
inline constexpr int ds_max_lg_k = 21;
/// Starting log2 size of the HLL_4 exception table, by lg_k (DataSketches' LG_AUX_ARR_INTS).
inline constexpr std::uint8_t ds_lg_aux_arr_ints[22] = {0, 2, 2, 2, 2, 2, 2, 3, 3, 3, 4,
                                                        4, 5, 5, 6, 7, 8, 9, 10, 11, 12, 13};

inline std::size_t ds_hll_array_bytes(DataSketchesHll type, int lg_k) noexcept {
    const std::size_t k = std::size_t{1} << lg_k;
    return type == DataSketchesHll::hll_4 ? k / 2 : type == DataSketchesHll::hll_6 ? k * 3 / 4 + 1 : k;
}

/// Log2 of the hash table DataSketches sizes for `count` entries: the next
/// power of two, doubled when more than 3/4 full, at least `floor_lg`.
inline int ds_lg_table_size(std::uint32_t count, int floor_lg) noexcept {
    std::uint32_t pow2 = count <= 1 ? 1 : std::bit_ceil(count);
    if (std::uint64_t{4} * count > std::uint64_t{3} * pow2) pow2 <<= 1;
    const int lg = std::countr_zero(pow2);
    return lg > floor_lg ? lg : floor_lg;
}

struct DsHllState {
    int lg_k = 0;
    std::span<const std::uint8_t> registers;
    bool empty = true;
    bool out_of_order = false;
    double hip = 0, kxq0 = 0, kxq1 = 0;
    std::uint32_t zeros = 0;
};


/// The compact image: the 8-byte empty LIST form, else HLL mode.
inline std::vector<std::byte> ds_hll_encode(const DsHllState& st, DataSketchesHll type) {
    const auto lg_k = static_cast<std::uint8_t>(st.lg_k);
    const auto tgt = static_cast<std::uint8_t>(static_cast<std::uint8_t>(type) << 2);
    if (st.empty) {
        return {std::byte{2}, std::byte{ds_ser_ver}, std::byte{ds_family_hll}, std::byte{lg_k}, std::byte{3},
                std::byte{ds_flag_empty | ds_flag_compact}, std::byte{0}, std::byte{tgt}};
    }
    const std::size_t k = std::size_t{1} << st.lg_k;
    const std::size_t array_bytes = ds_hll_array_bytes(type, st.lg_k);
    std::uint8_t cur_min = 0;
    std::uint32_t num_at_cur_min = st.zeros;
    std::uint32_t aux_count = 0;
    if (type == DataSketchesHll::hll_4) {
        cur_min = 63;
        for (const std::uint8_t r : st.registers) cur_min = r < cur_min ? r : cur_min;
        num_at_cur_min = 0;
        for (const std::uint8_t r : st.registers) {
            num_at_cur_min += r == cur_min;
            aux_count += r - cur_min >= 15;
        }
    }
    std::vector<std::byte> out(ds_hll_header + array_bytes + 4 * std::size_t{aux_count}, std::byte{0});
    out[0] = std::byte{10};
    out[1] = std::byte{ds_ser_ver};
    out[2] = std::byte{ds_family_hll};
    out[3] = std::byte{lg_k};
    out[4] = std::byte{static_cast<std::uint8_t>(aux_count == 0 ? 0 : ds_lg_table_size(aux_count, ds_lg_aux_arr_ints[lg_k]))};
    out[5] = std::byte{static_cast<std::uint8_t>(ds_flag_compact | (st.out_of_order ? ds_flag_out_of_order : 0))};
    out[6] = std::byte{cur_min};
    out[7] = std::byte{static_cast<std::uint8_t>(tgt | 2)};
    store_le(out.data() + 8, std::bit_cast<std::uint64_t>(st.hip));
    store_le(out.data() + 16, std::bit_cast<std::uint64_t>(st.kxq0));
    store_le(out.data() + 24, std::bit_cast<std::uint64_t>(st.kxq1));
    store_le(out.data() + 32, num_at_cur_min, 4);
    store_le(out.data() + 36, aux_count, 4);
    auto* a = reinterpret_cast<unsigned char*>(out.data() + ds_hll_header);
    const std::uint8_t* r = st.registers.data();
    if (type == DataSketchesHll::hll_8) {
        std::memcpy(a, r, k);
    } else if (type == DataSketchesHll::hll_6) {
        for (std::size_t i = 0; i + 4 <= k; i += 4, a += 3) {  // LSB-first 6-bit fields
            const std::uint32_t v = std::uint32_t{r[i]} | (std::uint32_t{r[i + 1]} << 6) |
                                    (std::uint32_t{r[i + 2]} << 12) | (std::uint32_t{r[i + 3]} << 18);
            a[0] = static_cast<unsigned char>(v);
            a[1] = static_cast<unsigned char>(v >> 8);
            a[2] = static_cast<unsigned char>(v >> 16);
        }
    } else {
        std::size_t aux_at = ds_hll_header + array_bytes;
        for (std::size_t i = 0; i < k; ++i) {
            const int shifted = r[i] - cur_min;
            std::uint8_t nibble = static_cast<std::uint8_t>(shifted);
            if (shifted >= 15) {
                nibble = 15;
                store_le(out.data() + aux_at, (std::uint32_t{r[i]} << 26) | static_cast<std::uint32_t>(i), 4);
                aux_at += 4;
            }
            a[i >> 1] = static_cast<unsigned char>(a[i >> 1] | (nibble << ((i & 1) * 4)));
        }
    }
    return out;
}

/// Whether DataSketches keeps `count` coupons as coupons at lg_k: a LIST holds
/// up to 7; a SET (lg_k >= 8 only) until its table of 2^(lg_k - 3) would be
/// more than 3/4 full.
constexpr bool ds_keeps_coupons(int lg_k, std::size_t count) noexcept {
    if (count <= 7) return true;
    return lg_k >= 8 && 4 * count <= 3 * (std::size_t{1} << (lg_k - 3));
}

/// The compact LIST (up to 7 coupons) or SET image of `coupons`, as
/// DataSketches' serialize_compact() writes it: preamble ints 2 or 3, the
/// array's log size, the compact flag, the LIST count or the SET count (u32 at
/// offset 8), the mode byte (current mode | target type << 2), the coupons.
inline std::vector<std::byte> ds_coupon_encode(int lg_k, std::span<const std::uint32_t> coupons,
                                               DataSketchesHll type) {
    const bool list = coupons.size() <= 7;
    const std::size_t start = list ? 8 : 12;
    std::vector<std::byte> out(start + 4 * coupons.size(), std::byte{0});
    const auto count = static_cast<std::uint32_t>(coupons.size());
    out[0] = std::byte{static_cast<std::uint8_t>(list ? 2 : 3)};
    out[1] = std::byte{ds_ser_ver};
    out[2] = std::byte{ds_family_hll};
    out[3] = std::byte{static_cast<std::uint8_t>(lg_k)};
    out[4] = std::byte{static_cast<std::uint8_t>(list ? 3 : ds_lg_table_size(count, 5))};
    out[5] = std::byte{ds_flag_compact};
    out[6] = std::byte{static_cast<std::uint8_t>(list ? count : 0)};
    out[7] = std::byte{static_cast<std::uint8_t>((static_cast<std::uint8_t>(type) << 2) | (list ? 0 : 1))};
    if (!list) store_le(out.data() + 8, count, 4);
    for (std::size_t i = 0; i < coupons.size(); ++i) store_le(out.data() + start + 4 * i, coupons[i], 4);
    return out;
}

struct DsHllImage {
    int lg_k = 0;
    DsHllMode mode = DsHllMode::list;
    DataSketchesHll type = DataSketchesHll::hll_8;
    bool out_of_order = false;
    std::vector<std::uint32_t> coupons;    // LIST / SET mode, in stored order
    std::vector<std::uint8_t> registers;   // HLL mode (empty if all zero)
    double hip = 0, kxq0 = 0, kxq1 = 0;  // HLL mode
};

inline constexpr const char* ds_who = "tally::HyperLogLog::from_datasketches";

[[noreturn]] inline void ds_fail(const std::string& what) { throw_format_error(std::string(ds_who) + ": " + what); }

inline std::uint32_t ds_u32(std::span<const std::byte> b, std::size_t at) noexcept {
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint32_t>(b[at + static_cast<std::size_t>(i)]);
    return v;
}
inline double ds_f64(std::span<const std::byte> b, std::size_t at) noexcept {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint64_t>(b[at + static_cast<std::size_t>(i)]);
    return std::bit_cast<double>(v);
}

// A coupon is (value << 26) | 26-bit slot address, value in 1..63.
inline std::uint32_t ds_check_coupon(std::uint32_t c) {
    const std::uint32_t v = c >> 26;
    if (v < 1 || v > 63) ds_fail("coupon value " + std::to_string(v) + " is out of range [1, 63]");
    return c;
}

/// Parses and validates an HllSketch image. Lengths are checked against the
/// bytes present before anything is allocated.
inline DsHllImage ds_hll_decode(std::span<const std::byte> b, int min_lg_k, int max_lg_k) {
    const std::size_t len = b.size();
    if (len < 8) ds_fail("truncated preamble (" + std::to_string(len) + " bytes, need 8)");
    auto byte = [&](std::size_t i) { return std::to_integer<std::uint8_t>(b[i]); };
    const std::uint8_t pre_ints = byte(0);
    if (byte(1) != ds_ser_ver) ds_fail("serial version " + std::to_string(byte(1)) + " is not 1");
    if (byte(2) != ds_family_hll)
        ds_fail("family " + std::to_string(byte(2)) + " is not 7 (HLL)");
    const int lg_k = byte(3);
    if (lg_k < ds_min_lg_k || lg_k > ds_max_lg_k)
        ds_fail(out_of_range_message(ds_who, "lg_k", lg_k, ds_min_lg_k, ds_max_lg_k).substr(std::strlen(ds_who) + 2));
    if (lg_k < min_lg_k || lg_k > max_lg_k)
        ds_fail("lg_k " + std::to_string(lg_k) + " is outside tally's precision range [" + std::to_string(min_lg_k) +
                ", " + std::to_string(max_lg_k) + "]");
    const std::uint8_t lg_arr = byte(4);
    const std::uint8_t flags = byte(5);
    if ((flags & ds_flag_big_endian) != 0) ds_fail("big-endian images are not supported");
    if ((flags & ~(ds_flag_read_only | ds_flag_empty | ds_flag_compact | ds_flag_out_of_order | ds_flag_full_size)) != 0)
        ds_fail("unknown flags " + std::to_string(flags));
    const bool compact = (flags & ds_flag_compact) != 0;
    const bool empty = (flags & ds_flag_empty) != 0;
    const std::uint8_t mode_byte = byte(7);
    if ((mode_byte >> 4) != 0 || (mode_byte & 3) == 3 || ((mode_byte >> 2) & 3) == 3)
        ds_fail("bad mode byte " + std::to_string(mode_byte));
    DsHllImage img;
    img.lg_k = lg_k;
    img.mode = static_cast<DsHllMode>(mode_byte & 3);
    img.type = static_cast<DataSketchesHll>((mode_byte >> 2) & 3);
    img.out_of_order = (flags & ds_flag_out_of_order) != 0;
    const std::uint8_t want_pre = img.mode == DsHllMode::list ? 2 : img.mode == DsHllMode::set ? 3 : 10;
    if (pre_ints != want_pre)
        ds_fail("preamble ints " + std::to_string(pre_ints) + " do not match the mode (" + std::to_string(want_pre) +
                ")");
    const std::size_t k = std::size_t{1} << lg_k;
    auto need = [&](std::size_t n, const char* what) {
        if (len != n)
            ds_fail(std::string(what) + ": " + std::to_string(len) + " bytes, expected " + std::to_string(n));
    };

    if (img.mode != DsHllMode::hll) {
        const bool list = img.mode == DsHllMode::list;
        const std::size_t start = list ? 8 : 12;
        if (len < start) ds_fail("truncated preamble (" + std::to_string(len) + " bytes)");
        const std::uint32_t count = list ? byte(6) : ds_u32(b, 8);
        if (empty && count != 0) ds_fail("empty flag with " + std::to_string(count) + " coupons");
        if (count > (std::uint32_t{1} << 26)) ds_fail("coupon count " + std::to_string(count) + " exceeds 2^26");
        if (!list && lg_k <= 7) ds_fail("SET mode with lg_k " + std::to_string(lg_k) + " <= 7");
        std::size_t slots;  // 4-byte entries present
        if (compact) {
            slots = count;
        } else {
            int lg = lg_arr;
            if (!list && lg < 5) lg = ds_lg_table_size(count, 5);
            if (lg > 26) ds_fail("coupon array size 2^" + std::to_string(lg) + " is too large");
            slots = std::size_t{1} << lg;
            if (count > slots) ds_fail("coupon count " + std::to_string(count) + " exceeds the array");
        }
        if (slots > (len - start) / 4) ds_fail("coupon array needs more bytes than remain");
        need(start + 4 * slots, list ? "LIST image" : "SET image");
        img.coupons.reserve(count);
        for (std::size_t i = 0; i < slots; ++i) {
            const std::uint32_t c = ds_u32(b, start + 4 * i);
            if (c == 0) {
                if (compact || (list && i < count)) ds_fail("empty coupon among the first " + std::to_string(count));
                continue;
            }
            if (list && !compact && i >= count) ds_fail("coupon past the LIST count");
            img.coupons.push_back(ds_check_coupon(c));
        }
        if (img.coupons.size() != count)
            ds_fail("coupon count " + std::to_string(count) + " does not match the " +
                    std::to_string(img.coupons.size()) + " coupons present");
        return img;
    }

    // HLL mode.
    if (len < ds_hll_header) ds_fail("truncated HLL preamble (" + std::to_string(len) + " bytes, need 40)");
    const std::size_t array_bytes = ds_hll_array_bytes(img.type, lg_k);
    const std::uint32_t aux_count = ds_u32(b, 36);
    std::size_t aux_entries = 0;
    if (img.type == DataSketchesHll::hll_4) {
        if (compact) {
            aux_entries = aux_count;
        } else {
            const int lg = aux_count == 0 ? ds_lg_aux_arr_ints[lg_k] : lg_arr;
            if (lg > 26) ds_fail("exception table size 2^" + std::to_string(lg) + " is too large");
            aux_entries = std::size_t{1} << lg;
        }
        if (aux_count > aux_entries || aux_count > k)
            ds_fail("exception count " + std::to_string(aux_count) + " does not fit the table");
    } else if (aux_count != 0) {
        ds_fail("exception table in an HLL_6/HLL_8 image");
    }
    if (len < ds_hll_header + array_bytes || aux_entries > (len - ds_hll_header - array_bytes) / 4)
        ds_fail("register array needs more bytes than remain (" + std::to_string(len) + ")");
    need(ds_hll_header + array_bytes + 4 * aux_entries, "HLL image");

    img.registers.assign(k, 0);  // at most 2 bytes of registers per input byte
    const auto* a = reinterpret_cast<const unsigned char*>(b.data() + ds_hll_header);
    std::uint8_t* r = img.registers.data();
    if (img.type == DataSketchesHll::hll_8) {
        for (std::size_t i = 0; i < k; ++i) {
            if (a[i] > 63) ds_fail("register value " + std::to_string(a[i]) + " exceeds 63");
            r[i] = a[i];
        }
    } else if (img.type == DataSketchesHll::hll_6) {
        for (std::size_t i = 0; i + 4 <= k; i += 4, a += 3) {
            const std::uint32_t v = std::uint32_t{a[0]} | (std::uint32_t{a[1]} << 8) | (std::uint32_t{a[2]} << 16);
            r[i] = static_cast<std::uint8_t>(v & 63);
            r[i + 1] = static_cast<std::uint8_t>((v >> 6) & 63);
            r[i + 2] = static_cast<std::uint8_t>((v >> 12) & 63);
            r[i + 3] = static_cast<std::uint8_t>((v >> 18) & 63);
        }
    } else {
        const std::uint8_t cur_min = byte(6);
        if (cur_min > 63) ds_fail("cur_min " + std::to_string(cur_min) + " exceeds 63");
        std::size_t tokens = 0;
        for (std::size_t i = 0; i < k; ++i) {
            const std::uint8_t nibble = (a[i >> 1] >> ((i & 1) * 4)) & 15;
            if (nibble == 15) {
                r[i] = 0;  // filled from the exception table below
                ++tokens;
            } else {
                if (nibble + cur_min > 63) ds_fail("register value exceeds 63");
                r[i] = static_cast<std::uint8_t>(nibble + cur_min);
            }
        }
        if (tokens != aux_count)
            ds_fail(std::to_string(tokens) + " exception tokens but " + std::to_string(aux_count) + " exceptions");
        std::size_t found = 0;
        const std::size_t aux_at = ds_hll_header + array_bytes;
        for (std::size_t j = 0; j < aux_entries; ++j) {
            const std::uint32_t c = ds_u32(b, aux_at + 4 * j);
            if (c == 0) {
                if (compact) ds_fail("empty entry in a compact exception list");
                continue;
            }
            ds_check_coupon(c);
            const std::size_t slot = c & ((std::uint32_t{1} << 26) - 1);
            const std::uint8_t v = static_cast<std::uint8_t>(c >> 26);
            const std::size_t nib_at = slot < k ? slot : k;
            if (slot >= k || ((a[nib_at >> 1] >> ((nib_at & 1) * 4)) & 15) != 15 || r[slot] != 0)
                ds_fail("exception for slot " + std::to_string(slot) + " without a unique token");
            if (v < cur_min + 15) ds_fail("exception value " + std::to_string(v) + " below cur_min + 15");
            r[slot] = v;
            ++found;
        }
        if (found != aux_count)
            ds_fail("exception count " + std::to_string(aux_count) + " does not match " + std::to_string(found));
    }
    bool any = false;
    double kxq0 = 0, kxq1 = 0;
    {
        std::uint32_t hist[64] = {};
        for (std::size_t i = 0; i < k; ++i) ++hist[r[i]];
        for (int v = 0; v < 64; ++v) (v < 32 ? kxq0 : kxq1) += hist[v] * ds_inv_pow2(v);
        any = hist[0] != k;
    }
    if (empty && any) ds_fail("empty flag with non-zero registers");
    if (!any && !img.out_of_order && ds_f64(b, 8) != 0) ds_fail("HIP estimate of an empty sketch is not 0");
    if (!any) img.registers.clear();
    if (!img.out_of_order) {
        img.hip = ds_f64(b, 8);
        img.kxq0 = ds_f64(b, 16);
        img.kxq1 = ds_f64(b, 24);
        const double sum = kxq0 + kxq1;
        if ((flags & ds_flag_full_size) != 0) {
            // Bit 5 is "start full size" in C++ images and, in Java, "rebuild
            // cur_min and kxq" (set by unions): the stored kxq may be stale.
            img.kxq0 = kxq0;
            img.kxq1 = kxq1;
        }
        if (!std::isfinite(img.hip) || img.hip < 0 || !std::isfinite(img.kxq0) || !std::isfinite(img.kxq1) ||
            !(std::abs(img.kxq0 + img.kxq1 - sum) <= 1e-9 * sum))
            ds_fail("HIP state does not match the registers");
    }
    return img;
}

}  // namespace detail
TALLY_END_NAMESPACE
