// tally/sketch/distinct/detail/hyperloglog_sparse.hpp: the sparse representation of
// tally::HyperLogLog, after HLL++ (Heule, Nunkesser, Hall, "HyperLogLog in
// Practice", EDBT 2013, section 5.3).
//
// While a sketch is small it keeps one 32-bit entry per distinct index of a
// higher precision p' instead of 2^p registers:
//
//   entry = (index' << 6) | rank'
//
//   mode tally:        p' = 25, index' = top 25 bits of the hash,
//                      rank' = leading zeros of the other 39 bits + 1 (1..40)
//   mode redis:        p' = 25, index' = low 25 bits,
//                      rank' = trailing zeros of the other 39 bits + 1 (1..40)
//   mode datasketches: p' = 26, index' = low 26 bits of the first hash half
//                      (DataSketches' coupon address), rank' = DataSketches'
//                      register value of the second half (1..63)
//
// so the entry of a DataSketches coupon (value << 26 | address) is a bijection.
// Entries are kept sorted with one entry per index' (the largest rank'; mode
// datasketches: one per (index', rank') pair, as DataSketches counts coupons). The
// register of precision p <= p' that an entry sets, and its value, follow from
// the entry alone (hll_sparse_register), exactly as a dense sketch of that
// precision would have set them from the same hash. Estimates while sparse are
// linear counting over the 2^p' indexes: m' ln(m' / (m' - k)) for k entries.
//
// All functions are pure and thread-safe.
#pragma once

#include "../../../detail/abi.hpp"

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "hyperloglog_datasketches.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

/// HllHashMode::datasketches's value (hyperloglog.hpp asserts they agree):
/// the one mode whose sparse entries differ.
inline constexpr std::uint8_t hll_mode_datasketches = 2;

/// p' of the sparse index by mode byte (DataSketches keeps 26 bits, the others 25).
constexpr int hll_sparse_precision(std::uint8_t mode) noexcept { return mode == hll_mode_datasketches ? 26 : 25; }

/// The largest rank' of an entry by mode byte.
constexpr int hll_sparse_max_rank(std::uint8_t mode) noexcept {
    return mode == hll_mode_datasketches ? ds_hll_max_rank : 64 - 25 + 1;
}

TALLY_ALWAYS_INLINE std::uint32_t hll_sparse_entry_tally(std::uint64_t hash) noexcept {
    const auto index = static_cast<std::uint32_t>(hash >> (64 - 25));
    const auto rank = static_cast<std::uint32_t>(std::countl_zero((hash << 25) | (std::uint64_t{1} << 24)) + 1);
    return (index << 6) | rank;
}

TALLY_ALWAYS_INLINE std::uint32_t hll_sparse_entry_redis(std::uint64_t hash) noexcept {
    const auto index = static_cast<std::uint32_t>(hash & ((std::uint64_t{1} << 25) - 1));
    const auto rank = static_cast<std::uint32_t>(std::countr_zero((hash >> 25) | (std::uint64_t{1} << 39)) + 1);
    return (index << 6) | rank;
}

/// Mode datasketches: h1 gives the address, h2 the rank (add_hash passes the
/// same value twice, as its dense path does).
TALLY_ALWAYS_INLINE std::uint32_t hll_sparse_entry_ds(std::uint64_t h1, std::uint64_t h2) noexcept {
    const auto index = static_cast<std::uint32_t>(h1 & ((std::uint64_t{1} << 26) - 1));
    return (index << 6) | ds_hll_rank(h2);
}

struct HllRegisterUpdate {
    std::size_t index;
    std::uint8_t rank;
};

/// The register of precision p (4 <= p <= p') an entry sets, and the value.
inline HllRegisterUpdate hll_sparse_register(std::uint32_t entry, int p, std::uint8_t mode) noexcept {
    const std::uint32_t index = entry >> 6;
    const auto rank = static_cast<std::uint8_t>(entry & 63);
    const int k = 25 - p;  // index bits below (tally) or above (redis) the register
    if (mode == 0) {
        const std::uint32_t low = index & ((std::uint32_t{1} << k) - 1);
        const int r = low != 0 ? k - static_cast<int>(std::bit_width(low)) + 1 : k + rank;
        return {static_cast<std::size_t>(index >> k), static_cast<std::uint8_t>(r)};
    }
    const std::size_t reg = index & ((std::uint32_t{1} << p) - 1);
    if ((mode & 15) == 3) {  // postgres: the redis rule, capped at 2^regwidth - 1 (regwidth in the high nibble)
        const std::uint32_t high = index >> p;
        const int r = high != 0 ? std::countr_zero(high) + 1 : k + rank;
        const int cap = (1 << (mode >> 4)) - 1;
        return {reg, static_cast<std::uint8_t>(r < cap ? r : cap)};
    }
    if (mode == 1) {
        const std::uint32_t high = index >> p;
        const int r = high != 0 ? std::countr_zero(high) + 1 : k + rank;
        return {reg, static_cast<std::uint8_t>(r)};
    }
    return {reg, rank};
}

/// Linear counting over the 2^p' sparse indexes with k of them occupied.
inline double hll_sparse_estimate(std::size_t k, std::uint8_t mode) noexcept {
    if (k == 0) return 0.0;
    const double m = std::ldexp(1.0, hll_sparse_precision(mode));
    return -m * std::log1p(-static_cast<double>(k) / m);
}

/// The most entries a sparse sketch of precision p holds: m / 4 (4 bytes each,
/// so never more than the 2^p-byte register array), and at least 8, the size
/// of a DataSketches LIST (at p = 4 that is 16 bytes over the 16 registers);
/// at most 2^16 (m / 4 at p = 18, the largest p outside mode datasketches).
constexpr std::size_t hll_sparse_limit(int p) noexcept {
    const std::size_t quarter = (std::size_t{1} << p) / 4;
    return quarter < 8 ? 8 : quarter > (std::size_t{1} << 16) ? std::size_t{1} << 16 : quarter;
}

/// The limit for a sketch of hash mode `mode` (a mode byte): in mode
/// datasketches (2) DataSketches' promotion point, so that the sketch turns
/// dense, and HIP starts, where an HllSketch of the same items leaves coupon
/// mode. Its LIST of 8 coupons goes to HLL mode below lg_k 8; from lg_k 8 its
/// SET goes once it holds more than 3/4 of 2^(lg_k - 3) coupons: the sparse
/// sketch holds one entry more than the largest SET, as the HllSketch does
/// the moment it promotes. Not capped at 2^16: at lg_k 20 and 21 (mode
/// datasketches only) that is 98,305 and 196,609 entries, 4 bytes each,
/// under 2/5 of the 2^lg_k registers; the sorted inserts that fill them cost
/// about 0.25 s and 1 s once per sketch.
constexpr std::size_t hll_sparse_limit(int p, std::uint8_t mode) noexcept {
    if ((mode & 15) != 2) return hll_sparse_limit(p);
    if (p < 8) return 8;
    return 3 * (std::size_t{1} << (p - 5)) + 1;
}

/// The most entries a decoded sparse sketch (a DataSketches image or a tally
/// frame) may hold: what adds fill, hll_sparse_limit(p, mode) (a DataSketches
/// SET holds at most one entry fewer).
constexpr std::size_t hll_sparse_decoded_limit(int p, std::uint8_t mode) noexcept {
    return hll_sparse_limit(p, mode);
}

}  // namespace detail
TALLY_END_NAMESPACE
