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

#include <cstdint>

TALLY_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::uint8_t kll_ds_family = 15;
inline constexpr std::uint8_t kll_ds_preamble_short = 2;
inline constexpr std::uint8_t kll_ds_preamble_full = 5;
inline constexpr std::uint8_t kll_ds_serial_v1 = 1;
inline constexpr std::uint8_t kll_ds_serial_v2 = 2;
inline constexpr std::uint8_t kll_ds_serial_v3 = 3;
inline constexpr std::uint8_t kll_ds_flag_empty = 1;
inline constexpr std::uint8_t kll_ds_flag_sorted = 2;
inline constexpr std::uint8_t kll_ds_flag_single = 4;
inline constexpr std::size_t kll_ds_data_start = 20;
inline constexpr std::size_t kll_ds_short_size = 8;

}  // namespace detail
TALLY_END_NAMESPACE
