// tally/sketch/quantiles/detail/kll_kernels_avx2.hpp: KllSketch<double>'s compaction kernels
// for x86-64 CPUs with AVX2, chosen at run time: level 0's sort and merges of
// up to 32 + 32 items as bitonic networks on four doubles a register
// (Batcher, "Sorting networks and their applications", AFIPS 1968), longer
// merges by 8-blocks through the same network, and halving four at a time.
// kll_kernels.hpp's scalar kernels give the same results elsewhere, and its
// dispatchers choose these where the CPU runs AVX2.
//
// A sort of up to 16 items: four registers, each column sorted by a 4-input
// network and the 4x4 block transposed, so that each register is a sorted
// run; then bitonic merges of runs, doubling, to one sorted run. A merge of
// two sorted runs: the second reversed behind the first is bitonic, and a
// bitonic merge sorts it. Runs shorter than their registers are padded with
// +inf, loaded and stored through lane masks (nothing past a run is read or
// written).
#pragma once

#include "../../../core/detail/simd.hpp"
#include "../../../detail/abi.hpp"

#include <cstdint>

#if TALLY_SIMD_X86

TALLY_BEGIN_NAMESPACE
namespace detail {

#define TALLY_KLL_AVX2 TALLY_SIMD_AVX2_FN
using simd::F64x4;

/// All ones in the lanes of start .. start + 3 that fall below n.
TALLY_KLL_AVX2 simd::I64x4 kll_avx2_lanes_below(std::uint32_t n, std::uint32_t start) noexcept {
    const long long s = start, e = n;
    return simd::I64x4{e, e, e, e} > simd::I64x4{s, s + 1, s + 2, s + 3};
}

/// Lanes start .. start + 3 of a run of n items, +inf past its end.
TALLY_KLL_AVX2 F64x4 kll_avx2_load(const double* run, std::uint32_t n, std::uint32_t start) noexcept {
    const simd::I64x4 in = kll_avx2_lanes_below(n, start);
    // no lane is read where the mask is clear, so past the run the address
    // may be any valid one
    const double* at = start < n ? run + start : run;
    const F64x4 v = __builtin_ia32_maskloadpd256(reinterpret_cast<const F64x4*>(at), in);
    constexpr double inf = __builtin_inf();
    return in ? v : F64x4{inf, inf, inf, inf};
}

/// Stores the lanes of v that fall in [0, n) at out + start.
TALLY_KLL_AVX2 void kll_avx2_store(double* out, std::uint32_t n, std::uint32_t start, F64x4 v) noexcept {
    double* at = start < n ? out + start : out;
    __builtin_ia32_maskstorepd256(reinterpret_cast<F64x4*>(at), kll_avx2_lanes_below(n, start), v);
}

/// a, b = min, max per lane, with minpd/maxpd's rule (the second operand
/// unless the first is less, or greater).
TALLY_KLL_AVX2 void kll_avx2_cx(F64x4& a, F64x4& b) noexcept {
    const F64x4 lo = a < b ? a : b;
    b = a > b ? a : b;
    a = lo;
}

/// Sorts a bitonic sequence of four lanes.
TALLY_KLL_AVX2 F64x4 kll_avx2_clean(F64x4 v) noexcept {
    F64x4 t = __builtin_shufflevector(v, v, 2, 3, 0, 1);
    F64x4 lo = v < t ? v : t, hi = v > t ? v : t;
    v = __builtin_shufflevector(lo, hi, 0, 1, 6, 7);
    t = __builtin_shufflevector(v, v, 1, 0, 3, 2);
    lo = v < t ? v : t;
    hi = v > t ? v : t;
    return __builtin_shufflevector(lo, hi, 0, 5, 2, 7);
}

/// Sorts v[0 .. R) (4R lanes, register-major), a bitonic sequence.
template <int R>
TALLY_KLL_AVX2 void kll_avx2_bitonic(F64x4* v) noexcept {
    for (int d = R / 2; d >= 1; d /= 2)
        for (int i = 0; i < R; ++i)
            if ((i & d) == 0) kll_avx2_cx(v[i], v[i + d]);
    for (int i = 0; i < R; ++i) v[i] = kll_avx2_clean(v[i]);
}

/// v[0 .. R) and v[R .. 2R) sorted, each: sorts v[0 .. 2R).
template <int R>
TALLY_KLL_AVX2 void kll_avx2_merge(F64x4* v) noexcept {
    // the second run reversed: registers in reverse order, lanes reversed
    for (int i = 0; i < R / 2; ++i) {
        const F64x4 t = v[R + i];
        v[R + i] = v[2 * R - 1 - i];
        v[2 * R - 1 - i] = t;
    }
    for (int i = R; i < 2 * R; ++i) v[i] = __builtin_shufflevector(v[i], v[i], 3, 2, 1, 0);
    kll_avx2_bitonic<2 * R>(v);
}

/// Sorts the 16 lanes of v[0 .. 4).
TALLY_KLL_AVX2 void kll_avx2_sort16(F64x4* v) noexcept {
    // each column through a 4-input network
    kll_avx2_cx(v[0], v[1]);
    kll_avx2_cx(v[2], v[3]);
    kll_avx2_cx(v[0], v[2]);
    kll_avx2_cx(v[1], v[3]);
    kll_avx2_cx(v[1], v[2]);
    // transpose: each register becomes a sorted column
    const F64x4 t0 = __builtin_shufflevector(v[0], v[1], 0, 4, 2, 6);
    const F64x4 t1 = __builtin_shufflevector(v[0], v[1], 1, 5, 3, 7);
    const F64x4 t2 = __builtin_shufflevector(v[2], v[3], 0, 4, 2, 6);
    const F64x4 t3 = __builtin_shufflevector(v[2], v[3], 1, 5, 3, 7);
    v[0] = __builtin_shufflevector(t0, t2, 0, 1, 4, 5);
    v[1] = __builtin_shufflevector(t1, t3, 0, 1, 4, 5);
    v[2] = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
    v[3] = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
    kll_avx2_merge<1>(v);
    kll_avx2_merge<1>(v + 2);
    kll_avx2_merge<2>(v);
}

/// Sorts first[0 .. n), n <= 32.
__attribute__((target("avx2"))) inline void kll_sort32_avx2(double* first, std::uint32_t n) noexcept {
    F64x4 v[8];
    if (n <= 16) {
        for (std::uint32_t r = 0; r < 4; ++r) v[r] = kll_avx2_load(first, n, 4 * r);
        kll_avx2_sort16(v);
        for (std::uint32_t r = 0; r < 4; ++r) kll_avx2_store(first, n, 4 * r, v[r]);
        return;
    }
    for (std::uint32_t r = 0; r < 8; ++r) v[r] = kll_avx2_load(first, n, 4 * r);
    kll_avx2_sort16(v);
    kll_avx2_sort16(v + 4);
    kll_avx2_merge<4>(v);
    for (std::uint32_t r = 0; r < 8; ++r) kll_avx2_store(first, n, 4 * r, v[r]);
}

/// Merges sorted x and y (1 to 4R items each), padded to R registers each.
template <int R>
TALLY_KLL_AVX2 void kll_avx2_merge_padded(const double* x, std::uint32_t nx, const double* y, std::uint32_t ny,
                                          double* out) noexcept {
    F64x4 v[2 * R];
    for (int r = 0; r < R; ++r) {
        v[r] = kll_avx2_load(x, nx, 4 * r);
        v[R + r] = kll_avx2_load(y, ny, 4 * r);
    }
    kll_avx2_merge<R>(v);
    for (int r = 0; r < 2 * R; ++r) kll_avx2_store(out, nx + ny, 4 * r, v[r]);
}

/// Merges sorted x (1 <= nx <= 32) and sorted y (1 <= ny <= 32) into out,
/// which may overlap either (every item is loaded first): both padded to 8,
/// 16 or 32 lanes, whichever holds the longer.
__attribute__((target("avx2"))) inline void kll_merge32_avx2(const double* x, std::uint32_t nx, const double* y,
                                                             std::uint32_t ny, double* out) noexcept {
    const std::uint32_t longer = nx > ny ? nx : ny;
    if (longer <= 8)
        kll_avx2_merge_padded<2>(x, nx, y, ny, out);
    else if (longer <= 16)
        kll_avx2_merge_padded<4>(x, nx, y, ny, out);
    else
        kll_avx2_merge_padded<8>(x, nx, y, ny, out);
}

/// Merges sorted x and y (nx, ny >= 8) into out, which must not overlap x
/// and may overlap y only from below (out + nx <= y): the classic merge of
/// sorted blocks through a network (Inoue et al., "AA-Sort", PACT 2007;
/// Chhugani et al., VLDB 2008). The network merges the 8 largest items so
/// far with the next 8-block of whichever run has the smaller next item and
/// writes out the lower 8; the runs' last partial blocks and the 8 held are
/// merged by a scalar loop. Writing stays behind reading: out + written <=
/// y + read from y.
__attribute__((target("avx2"))) inline void kll_merge_long_avx2(const double* x, std::uint32_t nx, const double* y,
                                                                std::uint32_t ny, double* out) noexcept {
    F64x4 v[4];
    v[0] = simd::load32<F64x4>(x);
    v[1] = simd::load32<F64x4>(x + 4);
    v[2] = simd::load32<F64x4>(y);
    v[3] = simd::load32<F64x4>(y + 4);
    kll_avx2_merge<2>(v);
    simd::store32(out, v[0]);
    simd::store32(out + 4, v[1]);
    std::uint32_t i = 8, j = 8;
    double* o = out + 8;
    while (i + 8 <= nx && j + 8 <= ny) {
        const bool take_x = x[i] < y[j];
        const double* next = take_x ? x + i : y + j;  // a select: which run is data, not a branch
        i += take_x ? 8 : 0;
        j += take_x ? 0 : 8;
        v[0] = v[2];
        v[1] = v[3];
        v[2] = simd::load32<F64x4>(next);
        v[3] = simd::load32<F64x4>(next + 4);
        kll_avx2_merge<2>(v);
        simd::store32(o, v[0]);
        simd::store32(o + 4, v[1]);
        o += 8;
    }
    // the 8 held, merged with the run that has under 8 left (into s), then
    // s merged with the other run's rest (which may be long, and is y in place)
    double held[8];
    simd::store32(held, v[2]);
    simd::store32(held + 4, v[3]);
    const bool x_short = nx - i < 8;
    const double* short_run = x_short ? x + i : y + j;
    const std::uint32_t short_n = x_short ? nx - i : ny - j;
    const double* long_run = x_short ? y + j : x + i;
    const double* const long_end = x_short ? y + ny : x + nx;
    double s[16];
    std::uint32_t ns = 0;
    {
        std::uint32_t a = 0, b = 0;
        while (a < 8 && b < short_n) s[ns++] = short_run[b] < held[a] ? short_run[b++] : held[a++];
        while (a < 8) s[ns++] = held[a++];
        while (b < short_n) s[ns++] = short_run[b++];
    }
    std::uint32_t a = 0;
    while (a < ns && long_run != long_end) *o++ = *long_run < s[a] ? *long_run++ : s[a++];
    while (a < ns) *o++ = s[a++];
    while (long_run != long_end && o != long_run) *o++ = *long_run++;  // in place, the rest of y is there
}

/// s0 s2 s4 s6 of a = s0 s1 s2 s3 and b = s4 s5 s6 s7.
TALLY_KLL_AVX2 F64x4 kll_avx2_evens(F64x4 a, F64x4 b) noexcept {
    return __builtin_shufflevector(a, b, 0, 2, 4, 6);
}

/// kll_halve_down for double: buf[start + i] = buf[start + offset + 2 i] for
/// i < length / 2, four at a time; every load stays inside the level and
/// every store lands below what is still to be read.
__attribute__((target("avx2"))) inline void kll_halve_down_avx2(double* buf, std::uint32_t start, std::uint32_t length,
                                                                std::uint32_t offset) noexcept {
    const std::uint32_t half = length / 2;
    const double* src = buf + start + offset;
    double* dst = buf + start;
    std::uint32_t i = 0;
    for (; offset + 2 * i + 8 <= length; i += 4) {
        const F64x4 a = simd::load32<F64x4>(src + 2 * i);      // s0 s1 s2 s3
        const F64x4 b = simd::load32<F64x4>(src + 2 * i + 4);  // s4 s5 s6 s7
        simd::store32(dst + i, kll_avx2_evens(a, b));
    }
    for (; i < half; ++i) dst[i] = src[2 * i];
}

/// kll_halve_up for double: buf[start + half + j] = buf[start + offset + 2 j]
/// for j < half = length / 2, from the top down, four at a time; every load
/// stays inside the level and every store lands above what is still to be
/// read.
__attribute__((target("avx2"))) inline void kll_halve_up_avx2(double* buf, std::uint32_t start, std::uint32_t length,
                                                              std::uint32_t offset) noexcept {
    const std::uint32_t half = length / 2;
    double* base = buf + start;
    std::uint32_t j = half;
    // a block [j - 4, j) reads up to index 2 j + offset - 1: inside the level
    // once 2 j + offset <= length
    if (j > 0 && 2 * j + offset > length) {
        --j;
        base[half + j] = base[2 * j + offset];
    }
    for (; j >= 4; j -= 4) {
        const double* src = base + 2 * (j - 4) + offset;
        const F64x4 a = simd::load32<F64x4>(src);      // s0 s1 s2 s3
        const F64x4 b = simd::load32<F64x4>(src + 4);  // s4 s5 s6 s7
        simd::store32(base + half + j - 4, kll_avx2_evens(a, b));
    }
    while (j-- > 0) base[half + j] = base[2 * j + offset];
}

#undef TALLY_KLL_AVX2

}  // namespace detail
TALLY_END_NAMESPACE
#endif
