// tally/sketch/quantiles/detail/kll_datasketches.hpp: the bytes of Apache DataSketches'
// KLL sketch (C++ kll_sketch<float|double>, Java KllFloatsSketch /
// KllDoublesSketch; compact form, serial versions 1 and 2, and the
// updatable form, serial version 3, read only).
//
//   offset size field
//   0      1    preamble ints: 2 (empty or single item), 5 (otherwise)
//   1      1    serial version: 1, or 2 for the single-item form
//   2      1    family id 15
//   3      1    flags: bit 0 empty, bit 1 level 0 sorted, bit 2 single item
//   4      2    k (8..65535), little-endian like every field below
//   6      1    m = 8
//   7      1    unused (0)
//   single item: 8  sizeof(T)  the item; end.
//   otherwise:
//   8      8    n (items seen)
//   16     2    min k (the smallest k merged in, <= k)
//   18     1    number of levels L
//   19     1    unused (0)
//   20     4L   levels[0 .. L-1]: offsets into a buffer of
//               capacity(k, L) items; levels[L] = capacity is implied
//   ..     T    min item, then T max item
//   ..     T    items[levels[0] .. capacity), level 0 first
// The updatable form (serial version 3, preamble ints 5) differs from the
// full compact one in two fields: the levels array holds all L + 1 offsets
// (levels[L] = capacity written out), and the items are all capacity(k, L)
// slots, the levels[0] free ones first (their bytes mean nothing). An empty
// updatable image has n = 0, L = 1, levels {k, k}, NaN min and max and k
// free slots; Java's direct sketches leave its empty flag clear.
#pragma once

#include "../../../detail/abi.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../../../core/serialize.hpp"
#include "../../../detail/throw.hpp"
#include "kll_compactor.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

// byte 2 (family), byte 0 (preamble ints), byte 1 (serial version)
inline constexpr std::uint8_t kll_ds_family = 15, kll_ds_preamble_short = 2, kll_ds_preamble_full = 5;
inline constexpr std::uint8_t kll_ds_serial_v1 = 1, kll_ds_serial_v2 = 2, kll_ds_serial_v3 = 3;
// byte 3's flag bits
inline constexpr std::uint8_t kll_ds_flag_empty = 1, kll_ds_flag_sorted = 2, kll_ds_flag_single = 4;
// where a full image's data starts; a single-item image's fixed part
inline constexpr std::size_t kll_ds_data_start = 20, kll_ds_short_size = 8;

/// One item as DataSketches stores it: its IEEE-754 bits, little-endian.
template <class T>
void kll_put_item(ByteWriter& w, T x) {
    if constexpr (sizeof(T) == 4)
        w.u32(std::bit_cast<std::uint32_t>(x));
    else
        w.u64(std::bit_cast<std::uint64_t>(x));
}

template <class T>
T kll_get_item(ByteReader& r) {
    if constexpr (sizeof(T) == 4)
        return std::bit_cast<T>(r.u32());
    else
        return std::bit_cast<T>(r.u64());
}

/// The fields of a DataSketches KLL image. levels are absolute offsets into a
/// buffer of capacity(k, L) items, levels[L] = capacity. kll_ds_decode leaves
/// the retained items (levels[0] .. capacity, kll_put_item's form) in
/// item_bytes, unchecked: the sketch checks the layout and the items as it
/// does for its own frame.
template <class T>
struct KllDsImage {
    std::uint16_t k = 0;
    std::uint16_t min_k = 0;
    std::uint64_t n = 0;
    std::uint32_t num_levels = 1;
    KllLevels levels{};
    T min{};
    T max{};
    bool sorted0 = false;
    std::span<const std::byte> item_bytes;
};

/// The compact image (serial version 1; 2 for a single item) of `im` whose
/// retained items, level 0 first, are `items`.
template <class T>
std::vector<std::byte> kll_ds_encode(const KllDsImage<T>& im, std::span<const T> items) {
    const bool empty = im.n == 0;
    const bool single = im.n == 1;
    ByteWriter w(kll_ds_data_start + 4 * im.num_levels + (items.size() + 2) * sizeof(T));
    w.u8(empty || single ? kll_ds_preamble_short : kll_ds_preamble_full);
    w.u8(single ? kll_ds_serial_v2 : kll_ds_serial_v1);
    w.u8(kll_ds_family);
    w.u8(static_cast<std::uint8_t>((empty ? kll_ds_flag_empty : 0) | (im.sorted0 ? kll_ds_flag_sorted : 0) |
                                   (single ? kll_ds_flag_single : 0)));
    w.u16(im.k);
    w.u8(kll_m);
    w.u8(0);
    if (empty) return w.take();
    if (!single) {
        w.u64(im.n);
        w.u16(im.min_k);
        w.u8(static_cast<std::uint8_t>(im.num_levels));
        w.u8(0);
        for (std::uint32_t h = 0; h < im.num_levels; ++h) w.u32(im.levels[h]);
        kll_put_item(w, im.min);
        kll_put_item(w, im.max);
    }
    for (const T x : items) kll_put_item(w, x);
    return w.take();
}

/// The fields of an updatable image (serial version 3) past its first 8 bytes.
template <class T>
KllDsImage<T> kll_ds_decode_updatable(ByteReader& r, std::uint16_t k, std::uint8_t flags) {
    const auto fail = [](const std::string& what) {
        throw_format_error(std::string("tally::KllSketch::from_datasketches: updatable image: ") + what);
    };
    KllDsImage<T> im;
    im.k = k;
    im.n = r.u64();
    im.min_k = r.u16();
    const std::uint32_t nl = r.u8();
    if (r.u8() != 0) fail("byte 19 (unused) is not zero");
    // Java's direct sketches leave the empty flag clear on an empty image;
    // heap ones set it, and the single-item flag at n = 1
    if ((flags & kll_ds_flag_empty) && im.n != 0) fail("the empty flag is set with n = " + std::to_string(im.n));
    if ((flags & kll_ds_flag_single) && im.n != 1) fail("the single-item flag is set with n = " + std::to_string(im.n));
    const std::uint32_t max_nl = im.n == 0 ? 1 : kll_max_levels_for(im.n);
    if (nl < 1 || nl > max_nl) fail("level count " + std::to_string(nl) + " is out of range for n = " + std::to_string(im.n));
    im.num_levels = nl;
    for (std::uint32_t h = 0; h <= nl; ++h) im.levels[h] = r.u32();
    const std::uint32_t capacity = KllCapacities(k).total(nl);
    if (im.levels[nl] != capacity) fail("the last level offset is not the capacity " + std::to_string(capacity));
    if (im.levels[0] > capacity) fail("level 0 starts past the capacity");
    im.min = kll_get_item<T>(r);
    im.max = kll_get_item<T>(r);
    // the free space below level 0: any bytes
    (void)r.bytes(std::size_t{im.levels[0]} * sizeof(T));
    im.sorted0 = (flags & kll_ds_flag_sorted) != 0;
    if (im.n == 0) {
        if (im.levels[0] != capacity || im.min_k != k) fail("an empty sketch has no items and min k = k");
        r.expect_end();
    }
    im.item_bytes = r.bytes(r.remaining());
    return im;
}

/// Any image DataSketches writes: compact (serial versions 1 and 2) or
/// updatable (3). Throws tally::FormatError naming the first bad field.
template <class T>
KllDsImage<T> kll_ds_decode(std::span<const std::byte> bytes) {
    const auto fail = [](const std::string& what) {
        throw_format_error(std::string("tally::KllSketch::from_datasketches: ") + what);
    };
    ByteReader r(bytes);
    const std::uint8_t pre = r.u8();
    const std::uint8_t ver = r.u8();
    const std::uint8_t fam = r.u8();
    const std::uint8_t flags = r.u8();
    const std::uint16_t k = r.u16();
    const std::uint8_t m = r.u8();
    if (r.u8() != 0) fail("byte 7 (unused) is not zero");
    if (fam != kll_ds_family) fail("family id " + std::to_string(fam) + " is not KLL (15)");
    if (ver != kll_ds_serial_v1 && ver != kll_ds_serial_v2 && ver != kll_ds_serial_v3)
        fail("serial version " + std::to_string(ver) + " is not 1, 2 or 3");
    if (m != kll_m) fail("m " + std::to_string(m) + " is not 8");
    if (k < kll_m) fail("k " + std::to_string(k) + " is out of range [8, 65535]");
    if (flags & ~(kll_ds_flag_empty | kll_ds_flag_sorted | kll_ds_flag_single))
        fail("unknown flag bits " + std::to_string(flags));
    const bool is_empty = (flags & kll_ds_flag_empty) != 0;
    const bool single = (flags & kll_ds_flag_single) != 0;
    if (is_empty && single) fail("flags say both empty and single item");
    if (ver == kll_ds_serial_v3) {
        if (pre != kll_ds_preamble_full)
            fail("preamble ints " + std::to_string(pre) + " where 5 is required (updatable image)");
        return kll_ds_decode_updatable<T>(r, k, flags);
    }
    const std::uint8_t want_pre = (is_empty || single) ? kll_ds_preamble_short : kll_ds_preamble_full;
    if (pre != want_pre)
        fail("preamble ints " + std::to_string(pre) + " where " + std::to_string(want_pre) + " is required");
    KllDsImage<T> im;
    im.k = k;
    im.min_k = k;
    im.sorted0 = (flags & kll_ds_flag_sorted) != 0;
    if (is_empty) {
        if (r.remaining() != 0) fail("an empty image has 8 bytes");
        return im;
    }
    if (single) {
        if (r.remaining() != sizeof(T))
            fail(std::to_string(r.remaining()) + " bytes for a single item of " + std::to_string(sizeof(T)));
        const std::uint32_t capacity = KllCapacities(k).total(1);
        im.n = 1;
        im.levels[0] = capacity - 1;
        im.levels[1] = capacity;
        im.item_bytes = r.bytes(sizeof(T));
        ByteReader item(im.item_bytes);
        im.min = im.max = kll_get_item<T>(item);
        return im;
    }
    im.n = r.u64();
    im.min_k = r.u16();
    const std::uint32_t nl = r.u8();
    if (r.u8() != 0) fail("byte 19 (unused) is not zero");
    if (nl < 1 || nl > kll_max_levels_for(im.n))
        fail("level count " + std::to_string(nl) + " is out of range for n = " + std::to_string(im.n));
    im.num_levels = nl;
    for (std::uint32_t h = 0; h < nl; ++h) im.levels[h] = r.u32();
    im.levels[nl] = KllCapacities(k).total(nl);
    if (im.levels[0] > im.levels[nl]) fail("level 0 starts past the capacity");
    im.min = kll_get_item<T>(r);
    im.max = kll_get_item<T>(r);
    im.item_bytes = r.bytes(r.remaining());
    return im;
}

}  // namespace detail
TALLY_END_NAMESPACE
