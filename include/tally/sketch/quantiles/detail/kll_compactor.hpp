// tally/sketch/quantiles/detail/kll_compactor.hpp: the level arithmetic and the
// compaction kernels of KllSketch (Karnin, Lang, Liberty, "Optimal Quantile
// Approximation in Streams", FOCS 2016), with the level capacities, the
// buffer layout and the compaction schedule of Apache DataSketches' KLL
// variant, so that a sketch's levels are laid out as DataSketches lays them.
//
// Layout: one array of `capacity` items; level h occupies
// [levels[h], levels[h + 1]), level 0 lowest, levels[num_levels] = capacity,
// free space below levels[0]. Level h items weigh 2^h. Levels above 0 are
// sorted; level 0 is sorted only when a flag says so.
#pragma once

#include "../../../detail/abi.hpp"
#include "kll_kernels.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

TALLY_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::uint8_t kll_m = 8;             ///< smallest level capacity
inline constexpr std::size_t kll_max_levels = 64;    ///< n < 2^64 needs at most 64 levels
inline constexpr std::size_t kll_level_slots = kll_max_levels + 2;
inline constexpr std::size_t kll_depth_table = 32;   ///< depths past 22 are below m for every k

using KllLevels = std::array<std::uint32_t, kll_level_slots>;


/// round(k * (2/3)^depth), computed as DataSketches does (2k 2^d / 3^d, + 1, / 2).
constexpr std::uint16_t kll_cap_at_depth(std::uint16_t k, std::uint32_t depth) noexcept {
    if (depth >= kll_depth_table) return 0;
    std::uint64_t p3 = 1;
    for (std::uint32_t i = 0; i < depth; ++i) p3 *= 3;
    const std::uint64_t twok = std::uint64_t{k} << 1;
    return static_cast<std::uint16_t>((((twok << depth) / p3) + 1) >> 1);
}

/// Level capacities of one k, by depth (num_levels - height - 1).
/// An owned array of T (new T[n] / delete[]): the part of std::unique_ptr<T[]>
/// KllSketch uses, without <memory>, which costs a fifth of a second in every
/// translation unit that includes it.
template <class T>
class KllArray {
  public:
    KllArray() noexcept = default;
    explicit KllArray(T* p) noexcept : p_(p) {}
    KllArray(KllArray&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
    KllArray& operator=(KllArray&& o) noexcept {
        reset(std::exchange(o.p_, nullptr));
        return *this;
    }
    KllArray(const KllArray&) = delete;
    KllArray& operator=(const KllArray&) = delete;
    ~KllArray() { delete[] p_; }

    void reset(T* p = nullptr) noexcept { delete[] std::exchange(p_, p); }
    [[nodiscard]] T* get() const noexcept { return p_; }
    T& operator[](std::size_t i) const noexcept { return p_[i]; }
    explicit operator bool() const noexcept { return p_ != nullptr; }

  private:
    T* p_ = nullptr;
};

struct KllCapacities {
    std::array<std::uint16_t, kll_depth_table> by_depth{};
    explicit constexpr KllCapacities(std::uint16_t k) noexcept {
        for (std::uint32_t d = 0; d < kll_depth_table; ++d) by_depth[d] = std::max<std::uint16_t>(kll_m, kll_cap_at_depth(k, d));
    }
    /// Capacity of level `height` in a sketch of `num_levels` levels.
    constexpr std::uint32_t level(std::uint32_t num_levels, std::uint32_t height) const noexcept {
        const std::uint32_t depth = num_levels - height - 1;
        return depth < kll_depth_table ? by_depth[depth] : kll_m;
    }
    constexpr std::uint32_t total(std::uint32_t num_levels) const noexcept {
        std::uint32_t t = 0;
        for (std::uint32_t h = 0; h < num_levels; ++h) t += level(num_levels, h);
        return t;
    }
};

/// 1 + floor(log2 n) (1 for n = 0): the most levels n items can fill.
constexpr std::uint32_t kll_max_levels_for(std::uint64_t n) noexcept {
    std::uint32_t lg = 0;
    while (lg < 63 && (n >> (lg + 1)) != 0) ++lg;
    return 1 + lg;
}

/// Compacts one level of a sketch whose whole buffer is full, as
/// DataSketches' update path does: level `h` is at or over capacity; its items
/// (but one, if odd) are sorted (level 0), halved by `offset` and merged into
/// level h + 1; the levels below move up into the space freed. levels[h + 2]
/// must exist (the caller added a top level when h was the top). When h is 0,
/// lowest and highest take in the smallest and largest item compacted (half
/// of them leave the sketch).
template <class T>
inline void kll_compact_level(T* items, std::uint32_t* levels, std::uint32_t h, bool level0_sorted,
                              std::uint32_t offset, T& lowest, T& highest) noexcept {
    const std::uint32_t raw_beg = levels[h];
    const std::uint32_t raw_lim = levels[h + 1];
    const std::uint32_t pop_above = levels[h + 2] - raw_lim;
    const std::uint32_t raw_pop = raw_lim - raw_beg;
    const bool odd = (raw_pop & 1) != 0;
    const std::uint32_t adj_beg = raw_beg + (odd ? 1 : 0);
    const std::uint32_t adj_pop = raw_pop - (odd ? 1 : 0);
    const std::uint32_t half = adj_pop / 2;
    const std::uint32_t free_beg = levels[0];

    if (h == 0 && !level0_sorted) kll_sort(items + adj_beg, adj_pop);
    if (h == 0 && adj_pop > 0) {
        lowest = items[adj_beg] < lowest ? items[adj_beg] : lowest;
        highest = highest < items[adj_beg + adj_pop - 1] ? items[adj_beg + adj_pop - 1] : highest;
    }
    if (pop_above == 0) {
        kll_halve_up(items, adj_beg, adj_pop, offset);
    } else {
        kll_halve_down(items, adj_beg, adj_pop, offset);
        kll_merge_up(items, adj_beg, half, raw_lim, pop_above);
    }
    levels[h + 1] -= half;
    if (odd) {
        levels[h] = levels[h + 1] - 1;
        items[levels[h]] = items[raw_beg];
    } else {
        levels[h] = levels[h + 1];
    }
    if (h > 0) {
        // the levels below move up by `half`
        std::copy_backward(items + free_beg, items + raw_beg, items + raw_beg + half);
        for (std::uint32_t l = 0; l < h; ++l) levels[l] += half;
    }
}

struct KllCompressResult {
    std::uint32_t num_levels;
    std::uint32_t capacity;
    std::uint32_t num_items;
};

/// One sweep over the levels of a work buffer (DataSketches' general
/// compress): a level is compacted once if the buffer holds at least its
/// capacity and the level at least its own; otherwise it moves down as is.
/// `in` holds num_levels + 1 bounds (room for two more), `out` receives the
/// result's bounds from 0. Levels above 0 must be sorted. `bit()` returns the
/// next random offset (0 or 1).
template <class T, class Bit>
inline KllCompressResult kll_general_compress(const KllCapacities& caps, std::uint32_t num_levels, T* items,
                                              std::uint32_t* in, std::uint32_t* out, bool level0_sorted,
                                              Bit&& bit) noexcept {
    std::uint32_t count = in[num_levels] - in[0];
    std::uint32_t target = caps.total(num_levels);
    out[0] = 0;
    for (std::uint32_t h = 0;; ++h) {
        if (h == num_levels - 1) in[h + 2] = in[h + 1];
        const std::uint32_t beg = in[h];
        const std::uint32_t lim = in[h + 1];
        const std::uint32_t pop = lim - beg;
        if (count < target || pop < caps.level(num_levels, h)) {
            if (beg != out[h]) std::copy(items + beg, items + lim, items + out[h]);
            out[h + 1] = out[h] + pop;
        } else {
            const std::uint32_t above = in[h + 2] - lim;
            const bool odd = (pop & 1) != 0;
            const std::uint32_t adj_beg = beg + (odd ? 1 : 0);
            const std::uint32_t adj_pop = pop - (odd ? 1 : 0);
            const std::uint32_t half = adj_pop / 2;
            if (odd) {
                items[out[h]] = items[beg];
                out[h + 1] = out[h] + 1;
            } else {
                out[h + 1] = out[h];
            }
            if (h == 0 && !level0_sorted) kll_sort(items + adj_beg, adj_pop);
            const std::uint32_t offset = bit();
            if (above == 0) {
                kll_halve_up(items, adj_beg, adj_pop, offset);
            } else {
                kll_halve_down(items, adj_beg, adj_pop, offset);
                kll_merge_up(items, adj_beg, half, lim, above);
            }
            count -= half;
            in[h + 1] -= half;
            if (h == num_levels - 1) {
                ++num_levels;
                target += caps.level(num_levels, 0);
            }
        }
        if (h == num_levels - 1) break;
    }
    return {num_levels, target, count};
}

/// The total weight of a level layout (sizes times 2^h); false on overflow.
inline bool kll_total_weight(const std::uint32_t* levels, std::uint32_t num_levels, std::uint64_t& total) noexcept {
    total = 0;
    for (std::uint32_t h = 0; h < num_levels; ++h) {
        const std::uint64_t size = levels[h + 1] - levels[h];
        if (size == 0) continue;
        if (h >= 64 || size > (~std::uint64_t{0} >> h)) return false;
        const std::uint64_t w = size << h;
        if (total > ~std::uint64_t{0} - w) return false;
        total += w;
    }
    return true;
}

/// splitmix64 (Steele, Lea, Flood 2014): the compaction offsets.
constexpr std::uint64_t kll_splitmix(std::uint64_t& state) noexcept {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

}  // namespace detail
TALLY_END_NAMESPACE
