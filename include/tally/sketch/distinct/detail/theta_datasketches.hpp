// tally/sketch/distinct/detail/theta_datasketches.hpp: Apache DataSketches' compact
// theta sketch image (the bytes of CompactSketch.toByteArray() in Java,
// compact_theta_sketch::serialize() in C++, Druid's thetaSketch columns).
// Little-endian; the first 8 bytes are the preamble:
//
//   byte 0    preamble longs: 1 (empty, or one hash and theta = 1),
//             2 (count; v4: theta), 3 (count and theta)
//   byte 1    serial version: 3 (64-bit hashes), 4 (delta bit-packed)
//   byte 2    sketch type 3 (compact)
//   byte 3-4  v3: unused (0); v4: bits per delta, bytes of the count
//   byte 5    flags: 1 big-endian, 2 read-only, 4 empty, 8 compact, 16 ordered
//   byte 6-7  seed hash: the low 16 bits of MurmurHash3_x64_128(seed, 0).h1
//   v3        [u32 count, u32 0] [u64 theta] u64 hashes...
//   v4        [u64 theta] count (1-4 bytes, LE) then the deltas between
//             ascending hashes (the first from 0), each in `bits` bits,
//             most significant bit first, packed without gaps.
//
// Java's UpdateSketch image (family 2) is read too: ds_theta_decode_update.
// Serial versions 1 and 2 (older Java) are read too: v1 has 3 preamble longs
// (count at byte 8, theta at 16) and no seed hash; v2 has the seed hash and
// 1, 2 or 3 preamble longs like v3, without flags.
//
// All functions are pure and thread-safe.
#pragma once

#include "../../../detail/abi.hpp"

#include "../../../core/detail/byte_order.hpp"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "../../../core/serialize.hpp"
#include "../../../detail/primitives.hpp"
#include "../../../detail/throw.hpp"
#include "theta_table.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::uint16_t ds_theta_seed_hash = 0x93cc;  // DataSketches' default seed 9001
inline constexpr std::uint8_t ds_theta_type_compact = 3;
inline constexpr std::uint8_t ds_theta_type_quickselect = 2;  // Java's UpdateSketch
inline constexpr std::uint8_t ds_theta_flag_big_endian = 1;
inline constexpr std::uint8_t ds_theta_flag_read_only = 2;
inline constexpr std::uint8_t ds_theta_flag_empty = 4;
inline constexpr std::uint8_t ds_theta_flag_compact = 8;
inline constexpr std::uint8_t ds_theta_flag_ordered = 16;
inline constexpr const char* ds_theta_who = "tally::ThetaSketch::from_datasketches: ";

struct DsThetaImage {
    bool empty = true;
    std::uint64_t theta = theta_max;
    std::vector<std::uint64_t> hashes;  // ascending, distinct, each in [1, theta)
};



/// The compact ordered image of an (empty flag, theta, ascending hashes)
/// state, as DataSketches' compact_theta_sketch::serialize() writes it, or
/// serialize_compressed() when `compressed` (version 4 where DataSketches
/// uses it: ordered, at least one hash, not a lone hash at theta = 1).
inline std::vector<std::byte> ds_theta_encode(bool empty, std::uint64_t theta, const std::vector<std::uint64_t>& h,
                                              bool compressed) {
    const bool estimation = !empty && theta < theta_max;
    const std::size_t n = h.size();
    const std::uint8_t seed_hi = static_cast<std::uint8_t>(ds_theta_seed_hash >> 8);
    const std::uint8_t seed_lo = static_cast<std::uint8_t>(ds_theta_seed_hash & 0xff);
    if (compressed && n > 0 && !(n == 1 && !estimation)) {
        std::uint64_t prev = 0;
        std::uint64_t ored = 0;
        for (const std::uint64_t v : h) {
            ored |= v - prev;
            prev = v;
        }
        const int bits = static_cast<int>(std::bit_width(ored));
        const int count_bytes = (static_cast<int>(std::bit_width(static_cast<std::uint32_t>(n))) + 7) / 8;
        const std::size_t pre = estimation ? 16 : 8;
        const std::size_t packed = (static_cast<std::size_t>(bits) * n + 7) / 8;
        std::vector<std::byte> out(pre + static_cast<std::size_t>(count_bytes) + packed, std::byte{0});
        out[0] = static_cast<std::byte>(estimation ? 2 : 1);
        out[1] = std::byte{4};
        out[2] = static_cast<std::byte>(ds_theta_type_compact);
        out[3] = static_cast<std::byte>(bits);
        out[4] = static_cast<std::byte>(count_bytes);
        out[5] = static_cast<std::byte>(ds_theta_flag_compact | ds_theta_flag_read_only | ds_theta_flag_ordered);
        out[6] = static_cast<std::byte>(seed_lo);
        out[7] = static_cast<std::byte>(seed_hi);
        if (estimation) store_le(out.data() + 8, theta, 8);
        store_le(out.data() + pre, n, count_bytes);
        // MSB-first bit stream: accumulate into a 64-bit window, flush bytes.
        std::size_t at = pre + static_cast<std::size_t>(count_bytes);
        uint128 acc = 0;  // at most 63 + 7 bits pending
        int pending = 0;
        prev = 0;
        for (const std::uint64_t v : h) {
            acc = (acc << bits) | (v - prev);
            prev = v;
            pending += bits;
            while (pending >= 8) {
                pending -= 8;
                out[at++] = static_cast<std::byte>(static_cast<std::uint8_t>(acc >> pending));
            }
            acc &= (static_cast<uint128>(1) << pending) - 1;
        }
        if (pending > 0) out[at++] = static_cast<std::byte>(static_cast<std::uint8_t>(acc << (8 - pending)));
        return out;
    }
    const int pre_longs = estimation ? 3 : (empty || n == 1) ? 1 : 2;
    std::vector<std::byte> out(8 * static_cast<std::size_t>(pre_longs) + 8 * n, std::byte{0});
    out[0] = static_cast<std::byte>(pre_longs);
    out[1] = std::byte{3};
    out[2] = static_cast<std::byte>(ds_theta_type_compact);
    out[5] = static_cast<std::byte>(ds_theta_flag_compact | ds_theta_flag_read_only | ds_theta_flag_ordered |
                                    (empty ? ds_theta_flag_empty : 0));
    out[6] = static_cast<std::byte>(seed_lo);
    out[7] = static_cast<std::byte>(seed_hi);
    if (pre_longs > 1) store_le(out.data() + 8, n, 4);
    if (estimation) store_le(out.data() + 16, theta, 8);
    std::size_t at = 8 * static_cast<std::size_t>(pre_longs);
    for (const std::uint64_t v : h) {
        store_le(out.data() + at, v, 8);
        at += 8;
    }
    return out;
}

[[noreturn]] inline void ds_theta_fail(const std::string& what) { throw_format_error(ds_theta_who + what); }

inline void ds_theta_need_size(std::span<const std::byte> b, std::size_t expected, const char* what) {
    if (b.size() != expected)
        ds_theta_fail(std::string(what) + ": " + std::to_string(b.size()) + " bytes where the header implies " +
                      std::to_string(expected));
}

inline void ds_theta_check_seed(std::uint16_t seed_hash) {
    if (seed_hash != ds_theta_seed_hash)
        ds_theta_fail("seed hash " + std::to_string(seed_hash) + " is not that of seed 9001 (" +
                      std::to_string(ds_theta_seed_hash) + ")");
}

/// Checks theta and the hashes (each in [1, theta), distinct), sorting them
/// when the image is unordered; `ordered` images must be ascending.
inline void ds_theta_check_hashes(DsThetaImage& img, bool ordered) {
    if (img.theta == 0 || img.theta > theta_max)
        ds_theta_fail("theta " + std::to_string(img.theta) + " is out of range [1, 2^63 - 1]");
    if (!ordered) std::sort(img.hashes.begin(), img.hashes.end());
    std::uint64_t prev = 0;
    for (const std::uint64_t v : img.hashes) {
        if (v == 0 || v >= img.theta) ds_theta_fail("hash " + std::to_string(v) + " is not in [1, theta)");
        if (v <= prev) ds_theta_fail(ordered ? "hashes of an ordered image are not ascending and distinct"
                                             : "duplicate hash");
        prev = v;
    }
}

/// Reads `count` little-endian u64 hashes at `at`, after the caller checked
/// the size.
inline void ds_theta_read_hashes(std::span<const std::byte> b, std::size_t at, std::uint64_t count,
                                 DsThetaImage& img) {
    img.hashes.resize(static_cast<std::size_t>(count));
    for (std::size_t i = 0; i < img.hashes.size(); ++i) img.hashes[i] = load_le(b.data() + at + 8 * i, 8);
}

/// Decodes Java's UpdateSketch image (family 2, QuickSelect, serial version
/// 3: what UpdateSketch.toByteArray() writes and a direct sketch holds):
///   byte 0    bits 0-5 preamble longs (3), bits 6-7 lg resize factor (any)
///   byte 1    serial version 3;  byte 2  family 2
///   byte 3    lg nominal entries lg_k (4..26)
///   byte 4    lg table size (5..lg_k + 1)
///   byte 5    flags: only 4 (empty) may be set
///   byte 6-7  seed hash
///   8         u32 retained count;  12  f32 p (0, 1];  16  u64 theta
///   24        the hash table: 2^(lg table size) u64 slots, 0 when free
/// The retained hashes are the non-zero slots, exactly `count` of them, each
/// below theta once; the image is exactly 24 + 8 * 2^(lg table size) bytes.
inline DsThetaImage ds_theta_decode_update(std::span<const std::byte> b) {
    const auto u8 = [&](std::size_t at) { return std::to_integer<std::uint8_t>(b[at]); };
    if (b.size() < 24) ds_theta_need_size(b, 24, "update sketch preamble");
    if ((u8(0) & 0x3f) != 3)
        ds_theta_fail("preamble longs " + std::to_string(u8(0) & 0x3f) + " of an update sketch is not 3");
    if (u8(1) != 3) ds_theta_fail("serial version " + std::to_string(u8(1)) + " of an update sketch is not 3");
    const int lg_nom = u8(3);
    const int lg_arr = u8(4);
    if (lg_nom < 4 || lg_nom > 26) ds_theta_fail("lg nominal entries " + std::to_string(lg_nom) + " is out of range [4, 26]");
    if (lg_arr < 5 || lg_arr > lg_nom + 1)
        ds_theta_fail("lg table size " + std::to_string(lg_arr) + " is out of range [5, " + std::to_string(lg_nom + 1) + "]");
    const std::uint8_t flags = u8(5);
    if (flags & ~ds_theta_flag_empty)
        ds_theta_fail("flags " + std::to_string(flags) + " of an update sketch (only 4, empty, may be set)");
    ds_theta_check_seed(static_cast<std::uint16_t>(load_le(b.data() + 6, 2)));
    const std::size_t slots = std::size_t{1} << lg_arr;
    ds_theta_need_size(b, 24 + 8 * slots, "update sketch image");
    const std::uint64_t count = load_le(b.data() + 8, 4);
    const float p = std::bit_cast<float>(static_cast<std::uint32_t>(load_le(b.data() + 12, 4)));
    if (!(p > 0.0f && p <= 1.0f)) ds_theta_fail("sampling probability p is not in (0, 1]");
    DsThetaImage img;
    img.theta = load_le(b.data() + 16, 8);
    img.hashes.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(count, slots)));
    for (std::size_t i = 0; i < slots; ++i) {
        const std::uint64_t v = load_le(b.data() + 24 + 8 * i, 8);
        if (v != 0) img.hashes.push_back(v);
    }
    if (img.hashes.size() != count)
        ds_theta_fail("retained count " + std::to_string(count) + " where the table holds " +
                      std::to_string(img.hashes.size()) + " hashes");
    if (flags & ds_theta_flag_empty) {
        if (count != 0) ds_theta_fail("an empty update sketch holds " + std::to_string(count) + " hashes");
        return DsThetaImage{};  // DataSketches' compact form of it has theta = 1
    }
    img.empty = false;
    ds_theta_check_hashes(img, false);
    return img;
}

/// Decodes a compact theta image of serial version 1-4, or Java's update
/// sketch image (ds_theta_decode_update); every length, the sketch type, the
/// seed hash and each hash are checked (FormatError).
inline DsThetaImage ds_theta_decode(std::span<const std::byte> b) {
    if (b.size() < 8) ds_theta_fail("image of " + std::to_string(b.size()) + " bytes is shorter than its 8-byte preamble");
    const auto u8 = [&](std::size_t at) { return std::to_integer<std::uint8_t>(b[at]); };
    if (u8(2) == ds_theta_type_quickselect) return ds_theta_decode_update(b);
    const int pre_longs = u8(0);
    const int version = u8(1);
    if (u8(2) != ds_theta_type_compact)
        ds_theta_fail("sketch type " + std::to_string(u8(2)) + " is not 3 (compact theta sketch) or 2 (update sketch)");
    DsThetaImage img;
    const auto seed_hash = static_cast<std::uint16_t>(load_le(b.data() + 6, 2));
    if (version == 3 || version == 4) {
        const std::uint8_t flags = u8(5);
        if (flags & ds_theta_flag_big_endian) ds_theta_fail("big-endian images are not supported");
        if (version == 3) {
            const bool ordered = (flags & ds_theta_flag_ordered) != 0;
            if (pre_longs < 1 || pre_longs > 3)
                ds_theta_fail("preamble longs " + std::to_string(pre_longs) + " is out of range [1, 3]");
            if (flags & ds_theta_flag_empty) {
                if (b.size() != 8 && b.size() != 8 * static_cast<std::size_t>(pre_longs))
                    ds_theta_need_size(b, 8, "empty image");
                return img;
            }
            ds_theta_check_seed(seed_hash);
            img.empty = false;
            if (pre_longs == 1) {
                ds_theta_need_size(b, 16, "single-hash image");
                ds_theta_read_hashes(b, 8, 1, img);
            } else {
                if (b.size() < 8 * static_cast<std::size_t>(pre_longs))
                    ds_theta_need_size(b, 8 * static_cast<std::size_t>(pre_longs), "preamble");
                const std::uint64_t count = load_le(b.data() + 8, 4);
                if (pre_longs == 3) img.theta = load_le(b.data() + 16, 8);
                ds_theta_need_size(b, 8 * (static_cast<std::size_t>(pre_longs) + count), "image");
                ds_theta_read_hashes(b, 8 * static_cast<std::size_t>(pre_longs), count, img);
            }
            ds_theta_check_hashes(img, ordered);
            return img;
        }
        // version 4
        ds_theta_check_seed(seed_hash);
        img.empty = false;
        if (pre_longs != 1 && pre_longs != 2)
            ds_theta_fail("preamble longs " + std::to_string(pre_longs) + " of a version 4 image is not 1 or 2");
        const int bits = u8(3);
        const int count_bytes = u8(4);
        if (bits < 1 || bits > 63) ds_theta_fail("bits per delta " + std::to_string(bits) + " is out of range [1, 63]");
        if (count_bytes < 1 || count_bytes > 4)
            ds_theta_fail("count bytes " + std::to_string(count_bytes) + " is out of range [1, 4]");
        const std::size_t pre = 8 * static_cast<std::size_t>(pre_longs);
        if (b.size() < pre + static_cast<std::size_t>(count_bytes))
            ds_theta_need_size(b, pre + static_cast<std::size_t>(count_bytes), "preamble");
        if (pre_longs == 2) img.theta = load_le(b.data() + 8, 8);
        const std::uint64_t count = load_le(b.data() + pre, count_bytes);
        const std::size_t data = pre + static_cast<std::size_t>(count_bytes);
        ds_theta_need_size(b, data + (static_cast<std::size_t>(bits) * count + 7) / 8, "image");
        img.hashes.resize(static_cast<std::size_t>(count));
        std::size_t at = data;
        uint128 acc = 0;
        int have = 0;
        std::uint64_t prev = 0;
        const uint128 mask = (static_cast<uint128>(1) << bits) - 1;
        for (std::size_t i = 0; i < img.hashes.size(); ++i) {
            while (have < bits) {
                acc = (acc << 8) | std::to_integer<std::uint8_t>(b[at++]);
                have += 8;
            }
            have -= bits;
            const auto delta = static_cast<std::uint64_t>((acc >> have) & mask);
            acc &= (static_cast<uint128>(1) << have) - 1;
            prev += delta;  // wraps only for corrupt input, caught below
            img.hashes[i] = prev;
        }
        ds_theta_check_hashes(img, true);  // deltas: ascending by construction
        return img;
    }
    if (version == 1) {
        if (pre_longs != 3) ds_theta_fail("preamble longs " + std::to_string(pre_longs) + " of a version 1 image is not 3");
        if (b.size() < 24) ds_theta_need_size(b, 24, "preamble");
        const std::uint64_t count = load_le(b.data() + 8, 4);
        img.theta = load_le(b.data() + 16, 8);
        if (count == 0 && img.theta == theta_max) {
            ds_theta_need_size(b, 24, "empty image");
            return img;
        }
        img.empty = false;
        ds_theta_need_size(b, 24 + 8 * count, "image");
        ds_theta_read_hashes(b, 24, count, img);
        ds_theta_check_hashes(img, true);
        return img;
    }
    if (version == 2) {
        ds_theta_check_seed(seed_hash);
        if (pre_longs < 1 || pre_longs > 3)
            ds_theta_fail("preamble longs " + std::to_string(pre_longs) + " is out of range [1, 3]");
        const std::size_t pre = 8 * static_cast<std::size_t>(pre_longs);
        if (b.size() < pre) ds_theta_need_size(b, pre, "preamble");
        if (pre_longs == 1) {
            ds_theta_need_size(b, 8, "empty image");
            return img;
        }
        const std::uint64_t count = load_le(b.data() + 8, 4);
        if (pre_longs == 3) img.theta = load_le(b.data() + 16, 8);
        if (count == 0 && img.theta == theta_max) {
            ds_theta_need_size(b, pre, "empty image");
            return img;
        }
        img.empty = false;
        ds_theta_need_size(b, pre + 8 * count, "image");
        ds_theta_read_hashes(b, pre, count, img);
        ds_theta_check_hashes(img, true);
        return img;
    }
    ds_theta_fail("serial version " + std::to_string(version) + " is not 1, 2, 3 or 4");
}

}  // namespace detail
TALLY_END_NAMESPACE
