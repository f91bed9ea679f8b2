// tally/sketch/distinct/detail/tuple_datasketches.hpp: Apache DataSketches' compact
// ArrayOfDoubles tuple sketch image (compact_array_of_doubles_sketch::
// serialize() in C++, ArrayOfDoublesCompactSketch.toByteArray() in Java,
// Druid's arrayOfDoublesSketch columns). Little-endian:
//
//   byte 0      preamble longs: 1
//   byte 1      serial version: 1
//   byte 2      family: 9 (tuple)
//   byte 3      sketch type: 3 (compact ArrayOfDoubles)
//   byte 4      flags: 1 big-endian, 2 sampling (Java), 4 empty,
//               8 has entries, 16 ordered (C++ writes it; Java images are
//               in table order)
//   byte 5      num_values (1..255)
//   byte 6-7    seed hash: low 16 bits of MurmurHash3_x64_128(seed, 0).h1
//   byte 8-15   theta (u64, a fraction of 2^63 - 1)
//   if has entries:
//   byte 16-19  count (u32), byte 20-23 unused
//   count u64 hashes, then count rows of num_values f64 (row after row)
//
// All functions are pure and thread-safe.
#pragma once

#include "../../../detail/abi.hpp"

#include "../../../core/detail/byte_order.hpp"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "../../../detail/throw.hpp"
#include "theta_datasketches.hpp"
#include "theta_table.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

// byte 2 (family), byte 3 (sketch type), byte 1 (serial version)
inline constexpr std::uint8_t ds_tuple_family = 9, ds_aod_type_compact = 3, ds_aod_serial_version = 1;
// byte 4's flag bits
inline constexpr std::uint8_t ds_aod_flag_big_endian = 1, ds_aod_flag_sampling = 2, ds_aod_flag_empty = 4,
                              ds_aod_flag_has_entries = 8, ds_aod_flag_ordered = 16;

struct DsAodImage {
    bool empty = true;
    std::uint8_t num_values = 1;
    std::uint64_t theta = theta_max;
    std::vector<std::uint64_t> hashes;  // ascending, distinct, each in [1, theta)
    std::vector<double> values;         // hashes.size() rows of num_values
};

/// The compact ordered image of (empty, theta, ascending hashes, their rows).
inline std::vector<std::byte> ds_aod_encode(bool empty, std::uint64_t theta, std::uint8_t num_values,
                                            const std::vector<std::uint64_t>& hashes,
                                            const std::vector<double>& values) {
    const std::size_t n = hashes.size();
    std::vector<std::byte> out(16 + (n > 0 ? 8 : 0) + n * (8 + 8 * static_cast<std::size_t>(num_values)), std::byte{0});
    out[0] = std::byte{1};
    out[1] = static_cast<std::byte>(ds_aod_serial_version);
    out[2] = static_cast<std::byte>(ds_tuple_family);
    out[3] = static_cast<std::byte>(ds_aod_type_compact);
    out[4] = static_cast<std::byte>((empty ? ds_aod_flag_empty : 0) | (n > 0 ? ds_aod_flag_has_entries : 0) |
                                    ds_aod_flag_ordered);
    out[5] = static_cast<std::byte>(num_values);
    store_le(out.data() + 6, ds_theta_seed_hash, 2);
    store_le(out.data() + 8, theta, 8);
    if (n == 0) return out;
    store_le(out.data() + 16, n, 4);
    std::size_t at = 24;
    for (const std::uint64_t h : hashes) {
        store_le(out.data() + at, h, 8);
        at += 8;
    }
    for (const double v : values) {
        store_le(out.data() + at, std::bit_cast<std::uint64_t>(v), 8);
        at += 8;
    }
    return out;
}

[[noreturn]] inline void ds_aod_fail(const std::string& what) {
    throw_format_error("tally::ArrayOfDoublesSketch::from_datasketches: " + what);
}

/// Decodes a compact ArrayOfDoubles image; checks the preamble, serial
/// version, family, type, flags, seed hash (when it has entries), theta,
/// num_values, every length and each hash (in [1, theta), distinct), and
/// sorts an unordered image's rows by hash. At most `max_count` entries.
inline DsAodImage ds_aod_decode(std::span<const std::byte> b, std::uint64_t max_count) {
    if (b.size() < 16) ds_aod_fail("image of " + std::to_string(b.size()) + " bytes is shorter than its 16-byte preamble");
    const auto u8 = [&](std::size_t at) { return std::to_integer<std::uint8_t>(b[at]); };
    if (u8(0) != 1) ds_aod_fail("preamble longs " + std::to_string(u8(0)) + " is not 1");
    if (u8(1) != ds_aod_serial_version) ds_aod_fail("serial version " + std::to_string(u8(1)) + " is not 1");
    if (u8(2) != ds_tuple_family) ds_aod_fail("family " + std::to_string(u8(2)) + " is not 9 (tuple)");
    if (u8(3) != ds_aod_type_compact)
        ds_aod_fail("sketch type " + std::to_string(u8(3)) + " is not 3 (compact ArrayOfDoubles)");
    const std::uint8_t flags = u8(4);
    if (flags & ds_aod_flag_big_endian) ds_aod_fail("big-endian images are not supported");
    if (flags & ~(ds_aod_flag_sampling | ds_aod_flag_empty | ds_aod_flag_has_entries | ds_aod_flag_ordered))
        ds_aod_fail("unknown flag bits " + std::to_string(flags));
    DsAodImage img;
    img.num_values = u8(5);
    if (img.num_values == 0) ds_aod_fail("num_values 0 is out of range [1, 255]");
    img.theta = load_le(b.data() + 8, 8);
    if (img.theta == 0 || img.theta > theta_max)
        ds_aod_fail("theta " + std::to_string(img.theta) + " is out of range [1, 2^63 - 1]");
    img.empty = (flags & ds_aod_flag_empty) != 0;
    const bool has_entries = (flags & ds_aod_flag_has_entries) != 0;
    if (!has_entries) {
        if (b.size() != 16) ds_aod_fail(std::to_string(b.size()) + " bytes where an image without entries has 16");
        if (img.empty) img.theta = theta_max;  // Java writes p for an empty sampled sketch
        return img;
    }
    if (img.empty) ds_aod_fail("the empty flag is set on an image with entries");
    const auto seed_hash = static_cast<std::uint16_t>(load_le(b.data() + 6, 2));
    if (seed_hash != ds_theta_seed_hash)
        ds_aod_fail("seed hash " + std::to_string(seed_hash) + " is not that of seed 9001 (" +
                    std::to_string(ds_theta_seed_hash) + ")");
    if (b.size() < 24) ds_aod_fail(std::to_string(b.size()) + " bytes where an image with entries has at least 24");
    const std::uint64_t count = load_le(b.data() + 16, 4);
    if (count == 0) ds_aod_fail("the has-entries flag is set on an image of 0 entries");
    if (count > max_count)
        ds_aod_fail(std::to_string(count) + " entries exceed the " + std::to_string(max_count) + " a sketch holds");
    const std::size_t row_bytes = 8 * static_cast<std::size_t>(img.num_values);
    const std::size_t expected = 24 + static_cast<std::size_t>(count) * (8 + row_bytes);
    if (b.size() != expected)
        ds_aod_fail(std::to_string(b.size()) + " bytes where the header implies " + std::to_string(expected));
    const std::size_t n = static_cast<std::size_t>(count);
    img.hashes.resize(n);
    img.values.resize(n * img.num_values);
    for (std::size_t i = 0; i < n; ++i) img.hashes[i] = load_le(b.data() + 24 + 8 * i, 8);
    const std::size_t vat = 24 + 8 * n;
    for (std::size_t i = 0; i < img.values.size(); ++i)
        img.values[i] = std::bit_cast<double>(load_le(b.data() + vat + 8 * i, 8));
    if (!std::is_sorted(img.hashes.begin(), img.hashes.end())) {
        if (flags & ds_aod_flag_ordered) ds_aod_fail("hashes of an ordered image are not ascending");
        std::vector<std::uint32_t> order(n);
        std::iota(order.begin(), order.end(), 0u);
        std::sort(order.begin(), order.end(), [&](std::uint32_t x, std::uint32_t y) { return img.hashes[x] < img.hashes[y]; });
        std::vector<std::uint64_t> h(n);
        std::vector<double> v(img.values.size());
        for (std::size_t i = 0; i < n; ++i) {
            h[i] = img.hashes[order[i]];
            std::copy_n(img.values.begin() + static_cast<std::ptrdiff_t>(order[i] * row_bytes / 8), img.num_values,
                        v.begin() + static_cast<std::ptrdiff_t>(i * img.num_values));
        }
        img.hashes.swap(h);
        img.values.swap(v);
    }
    std::uint64_t prev = 0;
    for (const std::uint64_t h : img.hashes) {
        if (h == 0 || h >= img.theta) ds_aod_fail("hash " + std::to_string(h) + " is not in [1, theta)");
        if (h == prev) ds_aod_fail("duplicate hash " + std::to_string(h));
        prev = h;
    }
    return img;
}

}  // namespace detail
TALLY_END_NAMESPACE
