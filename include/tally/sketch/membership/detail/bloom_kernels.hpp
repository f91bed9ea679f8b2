// tally/sketch/membership/detail/bloom_kernels.hpp: the per-key kernels of tally::BloomFilter
// (scalar, AVX2, NEON) and the exact sizing formula. Not for direct use.
//
// A block of W bits is held as W/32 32-bit words ("slots"). The filter's k
// lanes are contiguous runs of L = W/k bits (L >= 32, a power of two). For a
// key with 32-bit in-block hash x, lane i sets lane bit
//     idx_i = (x * salt_i mod 2^32) >> (32 - log2 L),
// i.e. block bit i*L + idx_i. The SIMD kernels compute the same thing per
// slot: slot g belongs to lane g / (L/32) and covers lane bits
// [base_g, base_g + 32) with base_g = (g mod (L/32)) * 32, so it receives
// 1 << (idx - base_g) when 0 <= idx - base_g < 32 and nothing otherwise. AVX2's
// variable shift yields 0 for counts >= 32 (a negative difference is a huge
// unsigned count), NEON's needs the count clamped to [-1, 32]. When L = 64
// the AVX2 kernel works in 64-bit words instead (one word per lane, the slot
// pair 2i, 2i+1 on a little-endian machine). Every path sets identical bits,
// which tests/test_bloom_filter.cpp checks for every k.
#pragma once

#include "../../../detail/abi.hpp"

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "../../../core/detail/simd.hpp"
#if TALLY_SIMD_NEON
#include <arm_neon.h>
#endif
#include "../../../core/hash.hpp"
#include "../../../core/platform.hpp"
#include "../../../detail/primitives.hpp"

// The per-key AVX2 kernels as inline assembly, for callers built without AVX
// (a build with -mavx but not -mavx2 calls the out-of-line kernels).
#define TALLY_BLOOM_AVX2_ASM (TALLY_SIMD_X86 && !TALLY_SIMD_AVX_BUILD)

#if defined(__GNUC__) || defined(__clang__)
#define TALLY_BLOOM_NOINLINE __attribute__((noinline))
#else
#define TALLY_BLOOM_NOINLINE
#endif

TALLY_BEGIN_NAMESPACE
namespace detail {

/// The salt (odd multiplier) of lane i: SplitMix64 outputs, forced odd. Part
/// of the wire format (every format version so far): changing them moves every bit.
constexpr std::uint32_t bloom_salt(std::uint32_t lane) noexcept {
    return static_cast<std::uint32_t>(mix64(0x5bd1e9955bd1e995ull + lane) >> 32) | 1u;
}

struct BloomSalts {
    std::uint32_t v[128];
};
inline constexpr BloomSalts bloom_salts = [] {
    BloomSalts s{};
    for (std::uint32_t i = 0; i < 128; ++i) s.v[i] = bloom_salt(i);
    return s;
}();

/// Lookup tables of one (W, k) layout, held by each filter so that the kernels
/// read them from L1 and need no per-call arithmetic on k.
template <std::size_t W>
struct BloomLayout {
    static constexpr std::size_t slots = W / 32;
    alignas(32) std::uint32_t slot_salt[slots] = {};  // salt of the lane holding slot g
    alignas(32) std::uint32_t slot_base[slots] = {};  // first lane bit slot g holds
    alignas(32) std::uint32_t lane_salt[slots] = {};  // salt of lane i (i < k), 0 beyond
    std::uint32_t k = 0;                              // lanes = bits set per key
    std::uint32_t lane_log2 = 0;                      // log2 L
    std::uint32_t shift = 0;                          // 32 - log2 L

    /// k must be a power of two in [1, W/32].
    static BloomLayout make(std::uint32_t k) noexcept {
        BloomLayout t;
        t.k = k;
        std::uint32_t lane_bits = static_cast<std::uint32_t>(W) / k;
        while ((1u << t.lane_log2) < lane_bits) ++t.lane_log2;
        t.shift = 32 - t.lane_log2;
        const std::uint32_t slots_per_lane = lane_bits / 32;
        for (std::uint32_t g = 0; g < slots; ++g) {
            t.slot_salt[g] = bloom_salts.v[g / slots_per_lane];
            t.slot_base[g] = (g % slots_per_lane) * 32;
        }
        for (std::uint32_t i = 0; i < k; ++i) t.lane_salt[i] = bloom_salts.v[i];
        return t;
    }
};

/// The per-filter remix of a key's hash (identity for seed 0), with the seed
/// test decided at compile time (the batch loops) or at run time.
template <bool Seeded>
TALLY_ALWAYS_INLINE std::uint64_t bloom_rehash_if(std::uint64_t h, std::uint64_t seed) noexcept {
    if constexpr (Seeded) {
        return mix64(h ^ seed);
    } else {
        (void)seed;
        return h;
    }
}
TALLY_ALWAYS_INLINE std::uint64_t bloom_rehash(std::uint64_t h, std::uint64_t seed) noexcept {
    // Unseeded is the fall-through: no taken branch around the remix per key.
    if (TALLY_UNLIKELY(seed != 0)) return bloom_rehash_if<true>(h, seed);
    return h;
}

/// Block of hash h among nblocks: Lemire's fastrange on the high bits.
TALLY_ALWAYS_INLINE std::size_t bloom_block_index(std::uint64_t h, std::uint64_t nblocks) noexcept {
    return static_cast<std::size_t>((static_cast<uint128>(h) * nblocks) >> 64);
}

// ---------------------------------------------------------------- scalar

// One kernel per k, so that the lane count, shifts and salts are constants
// and the loop unrolls into immediate multiplies; the runtime k picks one
// through a short chain of well-predicted compares.
template <std::size_t W, std::uint32_t K>
TALLY_ALWAYS_INLINE void bloom_add_scalar_k(std::uint32_t* block, std::uint32_t x) noexcept {
    constexpr std::uint32_t lane_log2 = static_cast<std::uint32_t>(std::countr_zero(W / K));
    for (std::uint32_t i = 0; i < K; ++i) {
        const std::uint32_t bit = (i << lane_log2) + ((x * bloom_salts.v[i]) >> (32 - lane_log2));
        block[bit >> 5] |= 1u << (bit & 31);
    }
}

template <std::size_t W, std::uint32_t K>
TALLY_ALWAYS_INLINE bool bloom_contains_scalar_k(const std::uint32_t* block, std::uint32_t x) noexcept {
    // Branch-free: a miss is as likely to fail in the last lane as the first,
    // so an early exit mostly buys mispredictions.
    constexpr std::uint32_t lane_log2 = static_cast<std::uint32_t>(std::countr_zero(W / K));
    std::uint32_t missing = 0;
    for (std::uint32_t i = 0; i < K; ++i) {
        const std::uint32_t bit = (i << lane_log2) + ((x * bloom_salts.v[i]) >> (32 - lane_log2));
        missing |= ~block[bit >> 5] & (1u << (bit & 31));
    }
    return missing == 0;
}

template <std::size_t W, std::uint32_t K = 1>
TALLY_ALWAYS_INLINE void bloom_add_scalar(std::uint32_t* block, std::uint32_t x, const BloomLayout<W>& t) noexcept {
    if constexpr (K < W / 32) {
        if (t.k != K) return bloom_add_scalar<W, K * 2>(block, x, t);
    }
    bloom_add_scalar_k<W, K>(block, x);
}

template <std::size_t W, std::uint32_t K = 1>
TALLY_ALWAYS_INLINE bool bloom_contains_scalar(const std::uint32_t* block, std::uint32_t x,
                                               const BloomLayout<W>& t) noexcept {
    if constexpr (K < W / 32) {
        if (t.k != K) return bloom_contains_scalar<W, K * 2>(block, x, t);
    }
    return bloom_contains_scalar_k<W, K>(block, x);
}

// ---------------------------------------------------------------- AVX2
#if TALLY_SIMD_X86
#define TALLY_BLOOM_TARGET_AVX2 __attribute__((target("avx2")))

// The block is read and written as a vector of u32 (simd::U32x8): a u32
// vector is known to alias only the words of the block, while a store
// through an intrinsics type (which may alias anything) makes the compiler
// reload every member of the filter (and total()) after each key
// (docs/bloom_filter.md has the measurement).
using bloom_u32x8 = simd::U32x8;
using simd::U64x4;

/// 1 << count per lane, 0 where count >= width (a negative difference is a
/// huge unsigned count): vpsllvd / vpsllvq's rule, which the shift operator
/// does not promise.
TALLY_SIMD_AVX2_FN bloom_u32x8 bloom_avx2_shift_one(bloom_u32x8 count) noexcept {
    return reinterpret_cast<bloom_u32x8>(__builtin_ia32_psllv8si(reinterpret_cast<simd::I32x8>(simd::splat32<bloom_u32x8>(1)),
                                                                 reinterpret_cast<simd::I32x8>(count)));
}
TALLY_SIMD_AVX2_FN U64x4 bloom_avx2_shift_one(U64x4 count) noexcept {
    return reinterpret_cast<U64x4>(__builtin_ia32_psllv4di(reinterpret_cast<simd::I64x4>(simd::splat32<U64x4>(1)),
                                                           reinterpret_cast<simd::I64x4>(count)));
}

/// Whether no bit is set in v (vptest).
TALLY_SIMD_AVX2_FN bool bloom_avx2_none(bloom_u32x8 v) noexcept {
    const auto q = reinterpret_cast<simd::I64x4>(v);
    return __builtin_ia32_ptestz256(q, q) != 0;
}

template <std::size_t W>
TALLY_SIMD_AVX2_FN bloom_u32x8 bloom_avx2_bits(bloom_u32x8 vx, unsigned shift, std::size_t v,
                                               const BloomLayout<W>& t) noexcept {
    const auto salt = simd::load32<bloom_u32x8>(t.slot_salt + 8 * v);
    const auto base = simd::load32<bloom_u32x8>(t.slot_base + 8 * v);
    return bloom_avx2_shift_one(((vx * salt) >> shift) - base);
}

// 64-bit lanes (L = 64: k = 8 in a 64-byte block, the 1% and 0.1% layout):
// each lane is one little-endian u64 word of the block, so one multiply gives
// eight lane bits and a 64-bit variable shift places each; no per-slot base.
// Sets the same bits as the slot form below.
template <std::size_t W>
TALLY_SIMD_AVX2_FN void bloom_avx2_lane64_bits(bloom_u32x8 vx, std::size_t v, const BloomLayout<W>& t, U64x4& lo,
                                               U64x4& hi) noexcept {
    const auto salt = simd::load32<bloom_u32x8>(t.lane_salt + 8 * v);
    const bloom_u32x8 idx = (vx * salt) >> 26;
    lo = bloom_avx2_shift_one(simd::widen(__builtin_shufflevector(idx, idx, 0, 1, 2, 3)));
    hi = bloom_avx2_shift_one(simd::widen(__builtin_shufflevector(idx, idx, 4, 5, 6, 7)));
}

template <std::size_t W>
TALLY_SIMD_AVX2_FN void bloom_add_avx2_core(std::uint32_t* block, std::uint32_t x, const BloomLayout<W>& t) noexcept {
    static_assert(W % 256 == 0);
    const auto vx = simd::splat32<bloom_u32x8>(x);
    auto* p = reinterpret_cast<bloom_u32x8*>(block);  // blocks are aligned to >= 32 bytes
    if constexpr (W % 512 == 0) {
        if (t.lane_log2 == 6) {
            for (std::size_t v = 0; v < W / 512; ++v) {
                U64x4 lo, hi;
                bloom_avx2_lane64_bits(vx, v, t, lo, hi);
                p[2 * v] |= reinterpret_cast<bloom_u32x8>(lo);
                p[2 * v + 1] |= reinterpret_cast<bloom_u32x8>(hi);
            }
            return;
        }
    }
    const unsigned shift = t.shift;  // read once: a store to the block may alias a u32 field
    for (std::size_t v = 0; v < W / 256; ++v) p[v] |= bloom_avx2_bits(vx, shift, v, t);
}

template <std::size_t W>
TALLY_SIMD_AVX2_FN bool bloom_contains_avx2_core(const std::uint32_t* block, std::uint32_t x,
                                                 const BloomLayout<W>& t) noexcept {
    static_assert(W % 256 == 0);
    const auto vx = simd::splat32<bloom_u32x8>(x);
    const auto* p = reinterpret_cast<const bloom_u32x8*>(block);
    bloom_u32x8 missing{};
    if constexpr (W % 512 == 0) {
        if (t.lane_log2 == 6) {
            for (std::size_t v = 0; v < W / 512; ++v) {
                U64x4 lo, hi;
                bloom_avx2_lane64_bits(vx, v, t, lo, hi);
                missing |= ~p[2 * v] & reinterpret_cast<bloom_u32x8>(lo);
                missing |= ~p[2 * v + 1] & reinterpret_cast<bloom_u32x8>(hi);
            }
            return bloom_avx2_none(missing);
        }
    }
    const unsigned shift = t.shift;
    for (std::size_t v = 0; v < W / 256; ++v) missing |= ~p[v] & bloom_avx2_bits(vx, shift, v, t);
    return bloom_avx2_none(missing);
}

// Out-of-line entry points: a caller built without -mavx2 cannot inline
// these, so per-key calls cost a call; the batch loops below pay it once.
template <std::size_t W>
TALLY_BLOOM_TARGET_AVX2 void bloom_add_avx2(std::uint32_t* block, std::uint32_t x, const BloomLayout<W>& t) noexcept {
    bloom_add_avx2_core<W>(block, x, t);
}

template <std::size_t W>
TALLY_BLOOM_TARGET_AVX2 bool bloom_contains_avx2(const std::uint32_t* block, std::uint32_t x,
                                                 const BloomLayout<W>& t) noexcept {
    return bloom_contains_avx2_core<W>(block, x, t);
}

// The 64-byte, k = 8 layout (the 1% and 0.1% filters on x86-64) once more,
// for one key per call: salts as constants, no branch on the layout, the
// whole block test in one function; the same bits as the general entry
// points above. Measured side by side (pre-hashed contains, 100K keys, in
// cache): 1.56-1.68 ns against 1.88-3.06 ns for the general kernel; out of
// cache the two were within the noise of the machine.
// Lanes j..j+3 as u64 words: the salts sit in the even u32 slots with 0 in
// the odd ones, so one 32-bit multiply and shift leave each lane's 6-bit
// index zero-extended in its 64-bit word (no widening, no lane crossing).
template <int First>
TALLY_SIMD_AVX2_FN U64x4 bloom_avx2_k8_bits(bloom_u32x8 vx) noexcept {
    constexpr auto s = [](int i) { return bloom_salts.v[First + i]; };
    const bloom_u32x8 salt = {s(0), 0, s(1), 0, s(2), 0, s(3), 0};
    return bloom_avx2_shift_one(reinterpret_cast<U64x4>((vx * salt) >> 26));
}

TALLY_BLOOM_TARGET_AVX2 inline void bloom_add_avx2_k8(std::uint32_t* block, std::uint32_t x) noexcept {
    const auto vx = simd::splat32<bloom_u32x8>(x);
    auto* p = reinterpret_cast<bloom_u32x8*>(block);
    p[0] |= reinterpret_cast<bloom_u32x8>(bloom_avx2_k8_bits<0>(vx));
    p[1] |= reinterpret_cast<bloom_u32x8>(bloom_avx2_k8_bits<4>(vx));
}

TALLY_BLOOM_TARGET_AVX2 inline bool bloom_contains_avx2_k8(const std::uint32_t* block, std::uint32_t x) noexcept {
    const auto vx = simd::splat32<bloom_u32x8>(x);
    const auto* p = reinterpret_cast<const bloom_u32x8*>(block);
    return bloom_avx2_none((~p[0] & reinterpret_cast<bloom_u32x8>(bloom_avx2_k8_bits<0>(vx))) |
                           (~p[1] & reinterpret_cast<bloom_u32x8>(bloom_avx2_k8_bits<4>(vx))));
}

// The 32-byte, k = 8 layout (BloomFilter<32> at 1% and below): eight lanes
// of one 32-bit word each, so the whole block is one 256-bit word, one
// multiply gives the eight lane bits and one 32-bit variable shift places
// them (the Impala/Parquet split-block kernel). The same bits as the general
// entry points above.
TALLY_SIMD_AVX2_FN bloom_u32x8 bloom_avx2_w256k8_mask(std::uint32_t x) noexcept {
    const bloom_u32x8 salt = {bloom_salts.v[0], bloom_salts.v[1], bloom_salts.v[2], bloom_salts.v[3],
                              bloom_salts.v[4], bloom_salts.v[5], bloom_salts.v[6], bloom_salts.v[7]};
    return bloom_avx2_shift_one((simd::splat32<bloom_u32x8>(x) * salt) >> 27);
}

TALLY_BLOOM_TARGET_AVX2 inline void bloom_add_avx2_w256k8(std::uint32_t* block, std::uint32_t x) noexcept {
    *reinterpret_cast<bloom_u32x8*>(block) |= bloom_avx2_w256k8_mask(x);
}

TALLY_BLOOM_TARGET_AVX2 inline bool bloom_contains_avx2_w256k8(const std::uint32_t* block, std::uint32_t x) noexcept {
    // vptest's carry flag: every bit of the mask is set in the block
    const auto q = reinterpret_cast<simd::I64x4>(*reinterpret_cast<const bloom_u32x8*>(block));
    return __builtin_ia32_ptestc256(q, reinterpret_cast<simd::I64x4>(bloom_avx2_w256k8_mask(x))) != 0;
}

// The same two k = 8 kernels for a caller built without AVX (baseline
// x86-64, AVX2 found at run time). Such a caller cannot inline a function
// compiled for AVX2, so the kernels above would cost it one out-of-line call
// per key. The assembler has no such limit: here the same instructions are
// inline assembly, which inlines into the caller's loop, and run only where
// the filter has found AVX2 (k8_). Measured against FastFilter's
// split-block filter in docs/bloom_filter.md.
// - Adds use 128-bit (VEX.128) instructions on register operands only, and
//   the C++ ORs the two halves into the block as u32 vectors. VEX.128 leaves
//   the upper register halves zero, so no vzeroupper is needed. With a memory
//   operand in the assembly, GCC kept total() in memory and reloaded the
//   filter's fields after every add, as a store through __m256i does.
// - Lookups use 256-bit instructions and end with vzeroupper (code built
//   without AVX keeps nothing in the upper halves; without it the SSE code
//   after the lookup ran slower on this machine). They store nothing, so
//   their memory operands cost nothing in the caller's loop.
// - `asm inline` (GCC): GCC otherwise sizes an assembly block by its line
//   count and stops splitting the caller's loop on the filter's layout and
//   seed, which leaves an out-of-line call in the loop and the fields in
//   memory.
#if TALLY_BLOOM_AVX2_ASM
typedef std::uint32_t bloom_u32x4 __attribute__((vector_size(16)));

// GCC's `asm inline` (GCC 9 and later); Clang does not size assembly by its
// lines, and older Clang releases do not accept the qualifier.
#if defined(__clang__)
#define TALLY_BLOOM_ASM __asm__
#else
#define TALLY_BLOOM_ASM __asm__ __inline__
#endif

struct BloomWords8 {
    alignas(32) std::uint32_t v[8];
};

// How a lookup's answer leaves the assembly. The caller typically adds it to
// a count (`hits += contains(h)`), and every operation that waits on the
// block's load per key costs time in cache: Clang adds the carry flag
// directly (`adc`), but GCC turns a flag output into setb, movzbl and add.
// For GCC the assembly therefore sets the low byte of a register it zeroed
// first, which GCC adds as it is (setb, add): 0.91 -> 0.86 ns per
// pre-hashed lookup, 1.51 -> 1.34 ns hashing the key (docs/bloom_filter.md).
#if defined(__clang__)
#define TALLY_BLOOM_ANSWER_ZERO ""
#define TALLY_BLOOM_ANSWER_SET(cc) ""
#define TALLY_BLOOM_ANSWER_OUT(cc, var) "=@cc" #cc(var)
using BloomAnswer = bool;
TALLY_ALWAYS_INLINE bool bloom_answer(bool a) noexcept { return a; }
#else
#define TALLY_BLOOM_ANSWER_ZERO "xor %k[answer], %k[answer]\n\t"
#define TALLY_BLOOM_ANSWER_SET(cc) "set" #cc " %b[answer]\n\t"
#define TALLY_BLOOM_ANSWER_OUT(cc, var) [answer] "=&r"(var)
using BloomAnswer = std::uint64_t;
// 0 or 1; saying so lets GCC add it to a count without a zero test.
TALLY_ALWAYS_INLINE bool bloom_answer(std::uint64_t a) noexcept {
    if (a > 1) __builtin_unreachable();
    return a != 0;
}
#endif

// 32-byte kernel: the eight lane salts; 64-byte kernel: four 64-bit lanes
// per vector, the salt in the even u32 slot (salt, 0, salt, 0, ...).
inline constexpr BloomWords8 bloom_asm_w256_salts = {{bloom_salts.v[0], bloom_salts.v[1], bloom_salts.v[2],
                                                      bloom_salts.v[3], bloom_salts.v[4], bloom_salts.v[5],
                                                      bloom_salts.v[6], bloom_salts.v[7]}};
inline constexpr BloomWords8 bloom_asm_k8_salts[2] = {
    {{bloom_salts.v[0], 0, bloom_salts.v[1], 0, bloom_salts.v[2], 0, bloom_salts.v[3], 0}},
    {{bloom_salts.v[4], 0, bloom_salts.v[5], 0, bloom_salts.v[6], 0, bloom_salts.v[7], 0}}};
inline constexpr std::uint32_t bloom_asm_one32 = 1;
inline constexpr std::uint64_t bloom_asm_one64 = 1;

// Vector values (not objects in memory) for the add kernels' register operands.
#define TALLY_BLOOM_SALTS4(a, b, c, d) \
    (bloom_u32x4{bloom_salts.v[a], bloom_salts.v[b], bloom_salts.v[c], bloom_salts.v[d]})
#define TALLY_BLOOM_SALTS2(a, b) (bloom_u32x4{bloom_salts.v[a], 0, bloom_salts.v[b], 0})

TALLY_ALWAYS_INLINE void bloom_add_asm_w256k8(std::uint32_t* block, std::uint32_t x) noexcept {
    bloom_u32x4 lo, hi;
    TALLY_BLOOM_ASM(
        "vmovd %[x], %[hi]\n\t"
        "vpbroadcastd %[hi], %[hi]\n\t"
        "vpmulld %[s0], %[hi], %[lo]\n\t"
        "vpmulld %[s1], %[hi], %[hi]\n\t"
        "vpsrld $27, %[lo], %[lo]\n\t"
        "vpsrld $27, %[hi], %[hi]\n\t"
        "vpsllvd %[lo], %[one], %[lo]\n\t"
        "vpsllvd %[hi], %[one], %[hi]"
        : [lo] "=&x"(lo), [hi] "=&x"(hi)
        : [x] "r"(x), [s0] "x"(TALLY_BLOOM_SALTS4(0, 1, 2, 3)), [s1] "x"(TALLY_BLOOM_SALTS4(4, 5, 6, 7)),
          [one] "x"(bloom_u32x4{1, 1, 1, 1}));
    auto* p = reinterpret_cast<bloom_u32x4*>(block);
    p[0] |= lo;
    p[1] |= hi;
}

TALLY_ALWAYS_INLINE bool bloom_contains_asm_w256k8(const std::uint32_t* block, std::uint32_t x) noexcept {
    bloom_u32x4 m, t;
    BloomAnswer all_set;
    TALLY_BLOOM_ASM(
        TALLY_BLOOM_ANSWER_ZERO
        "vmovd %[x], %x[m]\n\t"
        "vpbroadcastd %x[m], %t[m]\n\t"
        "vpmulld %[salt], %t[m], %t[m]\n\t"
        "vpsrld $27, %t[m], %t[m]\n\t"
        "vpbroadcastd %[one], %t[t]\n\t"
        "vpsllvd %t[m], %t[t], %t[m]\n\t"
        "vmovdqa %[blk], %t[t]\n\t"
        "vptest %t[m], %t[t]\n\t"  // CF: no bit of the mask is missing from the block
        TALLY_BLOOM_ANSWER_SET(c)
        "vzeroupper"
        : [m] "=&x"(m), [t] "=&x"(t), TALLY_BLOOM_ANSWER_OUT(c, all_set)
        : [x] "r"(x), [salt] "m"(bloom_asm_w256_salts), [one] "m"(bloom_asm_one32),
          [blk] "m"(*reinterpret_cast<const BloomWords8*>(block)));
    return bloom_answer(all_set);
}

TALLY_ALWAYS_INLINE void bloom_add_asm_k8(std::uint32_t* block, std::uint32_t x) noexcept {
    bloom_u32x4 vx, m0, m1, m2, m3;
    TALLY_BLOOM_ASM(
        "vmovd %[x], %[vx]\n\t"
        "vpbroadcastd %[vx], %[vx]\n\t"
        "vpmulld %[s0], %[vx], %[m0]\n\t"
        "vpmulld %[s1], %[vx], %[m1]\n\t"
        "vpmulld %[s2], %[vx], %[m2]\n\t"
        "vpmulld %[s3], %[vx], %[m3]\n\t"
        "vpsrld $26, %[m0], %[m0]\n\t"
        "vpsrld $26, %[m1], %[m1]\n\t"
        "vpsrld $26, %[m2], %[m2]\n\t"
        "vpsrld $26, %[m3], %[m3]\n\t"
        "vpsllvq %[m0], %[one], %[m0]\n\t"
        "vpsllvq %[m1], %[one], %[m1]\n\t"
        "vpsllvq %[m2], %[one], %[m2]\n\t"
        "vpsllvq %[m3], %[one], %[m3]"
        : [vx] "=&x"(vx), [m0] "=&x"(m0), [m1] "=&x"(m1), [m2] "=&x"(m2), [m3] "=&x"(m3)
        : [x] "r"(x), [s0] "x"(TALLY_BLOOM_SALTS2(0, 1)), [s1] "x"(TALLY_BLOOM_SALTS2(2, 3)),
          [s2] "x"(TALLY_BLOOM_SALTS2(4, 5)), [s3] "x"(TALLY_BLOOM_SALTS2(6, 7)), [one] "x"(bloom_u32x4{1, 0, 1, 0}));
    auto* p = reinterpret_cast<bloom_u32x4*>(block);
    p[0] |= m0;
    p[1] |= m1;
    p[2] |= m2;
    p[3] |= m3;
}

TALLY_ALWAYS_INLINE bool bloom_contains_asm_k8(const std::uint32_t* block, std::uint32_t x) noexcept {
    bloom_u32x4 m0, m1, t;
    BloomAnswer all_set;
    TALLY_BLOOM_ASM(
        TALLY_BLOOM_ANSWER_ZERO
        "vmovd %[x], %x[m1]\n\t"
        "vpbroadcastd %x[m1], %t[m1]\n\t"
        "vpmulld %[s0], %t[m1], %t[m0]\n\t"
        "vpmulld %[s1], %t[m1], %t[m1]\n\t"
        "vpsrld $26, %t[m0], %t[m0]\n\t"
        "vpsrld $26, %t[m1], %t[m1]\n\t"
        "vpbroadcastq %[one], %t[t]\n\t"
        "vpsllvq %t[m0], %t[t], %t[m0]\n\t"
        "vpsllvq %t[m1], %t[t], %t[m1]\n\t"
        "vmovdqa %[b0], %t[t]\n\t"
        "vpandn %t[m0], %t[t], %t[m0]\n\t"  // mask bits missing from the block
        "vmovdqa %[b1], %t[t]\n\t"
        "vpandn %t[m1], %t[t], %t[m1]\n\t"
        "vpor %t[m0], %t[m1], %t[m1]\n\t"
        "vptest %t[m1], %t[m1]\n\t"  // ZF: no bit of the mask is missing from the block
        TALLY_BLOOM_ANSWER_SET(z)
        "vzeroupper"
        : [m0] "=&x"(m0), [m1] "=&x"(m1), [t] "=&x"(t), TALLY_BLOOM_ANSWER_OUT(z, all_set)
        : [x] "r"(x), [s0] "m"(bloom_asm_k8_salts[0]), [s1] "m"(bloom_asm_k8_salts[1]), [one] "m"(bloom_asm_one64),
          [b0] "m"(*reinterpret_cast<const BloomWords8*>(block)),
          [b1] "m"(*reinterpret_cast<const BloomWords8*>(block + 8)));
    return bloom_answer(all_set);
}
#undef TALLY_BLOOM_ANSWER_ZERO
#undef TALLY_BLOOM_ANSWER_SET
#undef TALLY_BLOOM_ANSWER_OUT
#undef TALLY_BLOOM_SALTS4
#undef TALLY_BLOOM_SALTS2
#undef TALLY_BLOOM_ASM
#endif  // TALLY_BLOOM_AVX2_ASM

/// The block of W bits that (rehashed) hash h selects in `blocks`.
template <std::size_t W, class Byte>
TALLY_ALWAYS_INLINE Byte* bloom_block_at(Byte* blocks, std::uint64_t nblocks, std::uint64_t h) noexcept {
    return blocks + bloom_block_index(h, nblocks) * (W / 8);
}

// The batch loop, instantiated per (seeded, prefetching) so that neither
// test sits in the per-key path: add when the blocks are writable (Byte is
// unsigned char), contains into out when they are const.
template <std::size_t W, bool Seeded, bool Prefetch, class Byte>
TALLY_BLOOM_TARGET_AVX2 TALLY_ALWAYS_INLINE void bloom_loop_avx2(Byte* blocks, std::uint64_t nblocks,
                                                                 std::uint64_t seed, const std::uint64_t* hashes,
                                                                 std::size_t n, std::size_t ahead, bool* out,
                                                                 const BloomLayout<W>& t) noexcept {
    for (std::size_t i = 0; i < n; ++i) {
        if constexpr (Prefetch)
            if (i + ahead < n)
                prefetch_read(bloom_block_at<W>(blocks, nblocks, bloom_rehash_if<Seeded>(hashes[i + ahead], seed)));
        const std::uint64_t h = bloom_rehash_if<Seeded>(hashes[i], seed);
        Byte* block = bloom_block_at<W>(blocks, nblocks, h);
        if constexpr (std::is_const_v<Byte>)
            out[i] = bloom_contains_avx2_core<W>(reinterpret_cast<const std::uint32_t*>(block),
                                                 static_cast<std::uint32_t>(h), t);
        else
            bloom_add_avx2_core<W>(reinterpret_cast<std::uint32_t*>(block), static_cast<std::uint32_t>(h), t);
    }
}

template <std::size_t W, class Byte>
TALLY_BLOOM_TARGET_AVX2 TALLY_ALWAYS_INLINE void bloom_batch_avx2(Byte* blocks, std::uint64_t nblocks,
                                                                  std::uint64_t seed, const std::uint64_t* hashes,
                                                                  std::size_t n, std::size_t ahead, bool* out,
                                                                  const BloomLayout<W>& t) noexcept {
    if (seed == 0) {
        if (ahead == 0) return bloom_loop_avx2<W, false, false>(blocks, nblocks, seed, hashes, n, ahead, out, t);
        return bloom_loop_avx2<W, false, true>(blocks, nblocks, seed, hashes, n, ahead, out, t);
    }
    if (ahead == 0) return bloom_loop_avx2<W, true, false>(blocks, nblocks, seed, hashes, n, ahead, out, t);
    return bloom_loop_avx2<W, true, true>(blocks, nblocks, seed, hashes, n, ahead, out, t);
}

/// add for each of n hashes, prefetching `ahead` keys in advance (none when
/// ahead is 0: a filter that fits in cache only pays for the address).
/// `blocks` is the storage of nblocks blocks of W bits; `seed` as in BloomFilter.
template <std::size_t W>
TALLY_BLOOM_TARGET_AVX2 void bloom_add_many_avx2(unsigned char* blocks, std::uint64_t nblocks, std::uint64_t seed,
                                                 const std::uint64_t* hashes, std::size_t n, std::size_t ahead,
                                                 const BloomLayout<W>& t) noexcept {
    bloom_batch_avx2<W>(blocks, nblocks, seed, hashes, n, ahead, nullptr, t);
}

/// out[i] = contains for each of n hashes; returns the number of positives.
template <std::size_t W>
TALLY_BLOOM_TARGET_AVX2 std::size_t bloom_contains_many_avx2(const unsigned char* blocks, std::uint64_t nblocks,
                                                             std::uint64_t seed, const std::uint64_t* hashes,
                                                             std::size_t n, std::size_t ahead, bool* out,
                                                             const BloomLayout<W>& t) noexcept {
    bloom_batch_avx2<W>(blocks, nblocks, seed, hashes, n, ahead, out, t);
    // Counted afterwards, 32 answers (bytes of 0 or 1) per byte-sum, rather
    // than once per key inside the loop.
    const auto* bytes = reinterpret_cast<const unsigned char*>(out);
    U64x4 sums{};
    std::size_t i = 0;
    for (; i + 32 <= n; i += 32)  // vpsadbw against zero: the sum of each 8 bytes
        sums += reinterpret_cast<U64x4>(__builtin_ia32_psadbw256(simd::load32<simd::I8x32>(bytes + i), simd::I8x32{}));
    std::size_t positives = static_cast<std::size_t>(sums[0] + sums[1] + sums[2] + sums[3]);
    for (; i < n; ++i) positives += bytes[i];
    return positives;
}
#endif

// ---------------------------------------------------------------- NEON
#if TALLY_SIMD_NEON
TALLY_ALWAYS_INLINE uint32x4_t bloom_neon_bits(uint32x4_t vx, int32x4_t neg_shift, const std::uint32_t* salt,
                                               const std::uint32_t* base) noexcept {
    const uint32x4_t idx = vshlq_u32(vmulq_u32(vx, vld1q_u32(salt)), neg_shift);  // >> shift
    int32x4_t d = vsubq_s32(vreinterpretq_s32_u32(idx), vreinterpretq_s32_u32(vld1q_u32(base)));
    // NEON shifts read only the low byte of the count: clamp to [-1, 32],
    // where 1 >> 1 and 1 << 32 are both 0.
    d = vmaxq_s32(vminq_s32(d, vdupq_n_s32(32)), vdupq_n_s32(-1));
    return vshlq_u32(vdupq_n_u32(1), d);
}

template <std::size_t W>
inline void bloom_add_neon(std::uint32_t* block, std::uint32_t x, const BloomLayout<W>& t) noexcept {
    static_assert(W % 128 == 0);
    const uint32x4_t vx = vdupq_n_u32(x);
    const int32x4_t neg_shift = vdupq_n_s32(-static_cast<std::int32_t>(t.shift));
    for (std::size_t v = 0; v < W / 128; ++v) {
        const uint32x4_t bits = bloom_neon_bits(vx, neg_shift, t.slot_salt + 4 * v, t.slot_base + 4 * v);
        vst1q_u32(block + 4 * v, vorrq_u32(vld1q_u32(block + 4 * v), bits));
    }
}

template <std::size_t W>
inline bool bloom_contains_neon(const std::uint32_t* block, std::uint32_t x, const BloomLayout<W>& t) noexcept {
    static_assert(W % 128 == 0);
    const uint32x4_t vx = vdupq_n_u32(x);
    const int32x4_t neg_shift = vdupq_n_s32(-static_cast<std::int32_t>(t.shift));
    uint32x4_t missing = vdupq_n_u32(0);
    for (std::size_t v = 0; v < W / 128; ++v) {
        const uint32x4_t bits = bloom_neon_bits(vx, neg_shift, t.slot_salt + 4 * v, t.slot_base + 4 * v);
        missing = vorrq_u32(missing, vbicq_u32(bits, vld1q_u32(block + 4 * v)));  // bits & ~block
    }
    return vmaxvq_u32(missing) == 0;
}
#endif

/// Whether this build and CPU have a SIMD kernel for W-bit blocks.
template <std::size_t W>
inline bool bloom_simd_available() noexcept {
#if TALLY_SIMD_X86
    return W % 256 == 0 && cpu_has_avx2();
#elif TALLY_SIMD_NEON
    return W % 128 == 0;
#else
    return false;
#endif
}

/// Name of the SIMD kernel this build would use ("avx2", "neon", "none").
template <std::size_t W>
inline const char* bloom_simd_name() noexcept {
    if (!bloom_simd_available<W>()) return "none";
    return TALLY_SIMD_X86 ? "avx2" : "neon";
}

// ---------------------------------------------------------------- sizing

/// ln(m!) for integer m >= 0 (Stirling's series beyond 16; lgamma is not
/// thread-safe on every libc, as it writes the global signgam).
inline double bloom_log_factorial(double m) noexcept {
    if (m < 16) {
        double r = 0;
        for (double i = 2; i <= m; i += 1) r += std::log(i);
        return r;
    }
    const double inv = 1.0 / m;
    return m * std::log(m) - m + 0.5 * std::log(2 * 3.14159265358979323846 * m) + inv / 12.0 - inv * inv * inv / 360.0;
}

inline double bloom_pow(double b, std::uint32_t e) noexcept {
    double r = 1.0;
    while (e != 0) {
        if (e & 1u) r *= b;
        b *= b;
        e >>= 1;
    }
    return r;
}

/// Exact false-positive rate of a split-block filter whose blocks receive
/// Poisson(lambda) keys, with k lanes of lane_bits bits each:
///     FPR = sum_j Poisson(j; lambda) * (1 - (1 - 1/lane_bits)^j)^k.
/// The sum starts at the mode and walks outwards until the remaining
/// Poisson mass cannot move the result in its 15th significant digit.
inline double bloom_blocked_fpr(double lambda, double lane_bits, std::uint32_t k) noexcept {
    if (!(lambda > 0)) return 0.0;
    const double r = 1.0 - 1.0 / lane_bits;  // chance one key leaves a given lane bit clear
    const double mode = std::floor(lambda);
    const double p_mode = std::exp(-lambda + mode * std::log(lambda) - bloom_log_factorial(mode));
    const double r_mode = std::pow(r, mode);
    double sum = p_mode * bloom_pow(1.0 - r_mode, k);
    // Upwards: inner(j) <= 1, and once j > lambda the Poisson tail beyond j is
    // at most p_j / (1 - lambda / (j + 1)).
    double p = p_mode;
    double q = r_mode;
    const double limit = mode + 60.0 * std::sqrt(lambda) + 200.0;
    for (double j = mode + 1; j <= limit; j += 1) {
        p *= lambda / j;
        q *= r;
        sum += p * bloom_pow(1.0 - q, k);
        if (j > lambda + 1 && p * (j + 1) / (j + 1 - lambda) < 1e-16 * sum) break;
        if (p < 1e-300) break;
    }
    // Downwards: both the Poisson weight and inner(j) shrink, so stop once a
    // term is negligible.
    p = p_mode;
    q = r_mode;
    for (double j = mode; j >= 1; j -= 1) {
        p *= j / lambda;  // p_{j-1}
        q /= r;
        const double term = p * bloom_pow(1.0 - q, k);
        sum += term;
        if (term < 1e-17 * sum || p < 1e-300) break;
    }
    return sum;
}

/// Largest number of bytes a BloomFilter may occupy (2^46, 64 TiB), which
/// also bounds what deserialize will allocate.
inline constexpr std::uint64_t bloom_max_bytes =
    std::numeric_limits<std::size_t>::max() / 2 < (std::uint64_t{1} << 46)
        ? static_cast<std::uint64_t>(std::numeric_limits<std::size_t>::max() / 2)
        : (std::uint64_t{1} << 46);

/// Smallest block count B with bloom_blocked_fpr(n / B) <= fpp for W-bit
/// blocks and k lanes, or 0 when it would exceed max_blocks.
inline std::uint64_t bloom_blocks_for(double n, double fpp, double W, std::uint32_t k,
                                      std::uint64_t max_blocks) noexcept {
    const double lane_bits = W / k;
    auto meets = [&](std::uint64_t b) { return bloom_blocked_fpr(n / static_cast<double>(b), lane_bits, k) <= fpp; };
    // No filter beats log2(1/fpp) bits per key, so start the search there.
    const double start = std::floor(n * std::log2(1.0 / fpp) / W);
    std::uint64_t lo = 0;  // invariant: lo fails (0 blocks always fails)
    std::uint64_t hi =
        start < 1 ? 1 : (start > static_cast<double>(max_blocks) ? max_blocks : static_cast<std::uint64_t>(start));
    while (!meets(hi)) {
        if (hi >= max_blocks) return 0;
        lo = hi;
        hi = hi > max_blocks / 2 ? max_blocks : hi * 2;
    }
    while (hi - lo > 1) {
        const std::uint64_t mid = lo + (hi - lo) / 2;
        if (meets(mid))
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

/// Bits per key a W-bit, k-lane layout needs for fpp with unlimited blocks
/// (the continuous version of bloom_blocks_for; used to document sizing).
inline double bloom_bits_per_key(double fpp, double W, std::uint32_t k) noexcept {
    double lo = 0.01, hi = 4096.0;
    for (int it = 0; it < 200; ++it) {
        const double mid = 0.5 * (lo + hi);
        if (bloom_blocked_fpr(W / mid, W / k, k) <= fpp)
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

}  // namespace detail
TALLY_END_NAMESPACE
