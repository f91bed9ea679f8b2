// tally/sketch/distinct/detail/ultraloglog_kernels.hpp: the register union of two
// UltraLogLog sketches (UltraLogLog::merge), as a scalar rule, an SSE2 kernel,
// an AVX2 kernel chosen at run time, and a NEON kernel on arm64.
//
// A register is 4 h + two bits: h the top position of the hash prefixes it
// has seen, the bits whether positions h - 1 and h - 2 were seen too. The
// union of registers x and y is hi = max(x, y) plus the bits that lo =
// min(x, y) puts into hi's window: lo's two bits when both tops are equal
// (distance 0), 2 | lo's bit 1 when lo's top is one position lower (distance
// 4 in register units), 1 when two lower (8), nothing from 12 on. From p = 4
// on (m >= 16) a non-zero register is at least 4 (p - 1) >= 12, so a zero lo
// is at distance 0 (both zero) or >= 12 and needs no test of its own; the
// vector kernels run only there.
#pragma once

#include "../../../detail/abi.hpp"

#include <cstddef>
#include <cstdint>

#include "../../../core/detail/simd.hpp"
#if TALLY_SIMD_NEON
#include <arm_neon.h>
#endif


TALLY_BEGIN_NAMESPACE
namespace detail {

/// a[i] = union of a[i] and b[i] for i in [from, m).
inline void ull_merge_scalar(std::uint8_t* __restrict a, const std::uint8_t* __restrict b, std::size_t from,
                             std::size_t m) noexcept {
    for (std::size_t i = from; i < m; ++i) {
        const std::uint8_t x = a[i], y = b[i];
        const std::uint8_t hi = x < y ? y : x;
        const std::uint8_t lo = x < y ? x : y;
        const auto d4 = static_cast<std::uint8_t>((hi & 0xfc) - (lo & 0xfc));
        const auto g = static_cast<std::uint8_t>((lo & 3) | 4);
        auto e = static_cast<std::uint8_t>(d4 == 0 ? g : 0);
        e = static_cast<std::uint8_t>(e | (d4 == 4 ? static_cast<std::uint8_t>(g >> 1) : 0));
        e = static_cast<std::uint8_t>(e | (d4 == 8 ? static_cast<std::uint8_t>(g >> 2) : 0));
        a[i] = static_cast<std::uint8_t>(hi | (lo != 0 ? static_cast<std::uint8_t>(e & 3) : 0));
    }
}

#if TALLY_SIMD_X86
/// The union over the whole 16-register blocks of [0, m), m >= 16; returns
/// where the scalar rule takes over.
inline std::size_t ull_merge_sse2(std::uint8_t* __restrict a, const std::uint8_t* __restrict b,
                                  std::size_t m) noexcept {
    using simd::U8x16;
    const U8x16 fc = simd::splat16<U8x16>(0xfc), one = simd::splat16<U8x16>(1), two = simd::splat16<U8x16>(2);
    const U8x16 three = simd::splat16<U8x16>(3), four = simd::splat16<U8x16>(4), eight = simd::splat16<U8x16>(8);
    std::size_t i = 0;
    for (; i + 16 <= m; i += 16) {
        const U8x16 x = simd::load16<U8x16>(a + i), y = simd::load16<U8x16>(b + i);
        const U8x16 hi = x > y ? x : y, lo = x < y ? x : y;
        const U8x16 d4 = (hi & fc) - (lo & fc);
        // Distance 1 takes lo's bit 1 to bit 0 with a 16-bit shift (the x86
        // baseline has no byte shift); the final mask drops what the shift
        // brings in from the neighbouring byte.
        const U8x16 lo_shifted = reinterpret_cast<U8x16>(reinterpret_cast<simd::U16x8>(lo) >> 1);
        const U8x16 same = reinterpret_cast<U8x16>(d4 == U8x16{}) & lo;
        const U8x16 below1 = reinterpret_cast<U8x16>(d4 == four) & (lo_shifted | two);
        const U8x16 below2 = reinterpret_cast<U8x16>(d4 == eight) & one;
        simd::store16(a + i, hi | ((same | below1 | below2) & three));
    }
    return i;
}
#endif

#if TALLY_SIMD_X86
/// The union over the whole 16-register blocks of [0, m), m >= 16, on a CPU
/// with AVX2, 32 registers a step (a last 16 go through the SSE2 step): the
/// bits come from one table lookup (pshufb) indexed by
/// t = min((hi | 3) - lo, 15) = min(distance + 3 - lo's two bits, 15), which
/// costs three operations where distance | lo's bits costs six.
__attribute__((target("avx2"))) inline std::size_t ull_merge_avx2(std::uint8_t* __restrict a,
                                                                   const std::uint8_t* __restrict b,
                                                                   std::size_t m) noexcept {
    // t = 3 - bits at distance 0 (the bits are lo's), 7 - bits at distance 4
    // (2 | lo's bit 1), 11 - bits at distance 8 (1), 12..15 from 12 on (none);
    // both registers zero is t = 3 (none). pshufb looks up within each
    // 128-bit lane, so each lane holds the table.
    using simd::U8x32;
    const simd::I8x32 bits = {3, 2, 1, 0, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0,  //
                              3, 2, 1, 0, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0};
    const U8x32 three = simd::splat32<U8x32>(3), fifteen = simd::splat32<U8x32>(15);
    std::size_t i = 0;
    for (; i + 32 <= m; i += 32) {
        const U8x32 x = simd::load32<U8x32>(a + i), y = simd::load32<U8x32>(b + i);
        const U8x32 hi = x > y ? x : y, lo = x < y ? x : y;
        // (hi | 3) >= hi >= lo: no byte wraps.
        const U8x32 d = (hi | three) - lo;
        const U8x32 t = d < fifteen ? d : fifteen;
        const auto looked_up = __builtin_ia32_pshufb256(bits, reinterpret_cast<simd::I8x32>(t));
        simd::store32(a + i, hi | reinterpret_cast<U8x32>(looked_up));
    }
    if (i + 16 <= m) i += ull_merge_sse2(a + i, b + i, 16);  // m = 16
    return i;
}
#endif

#if TALLY_SIMD_NEON
/// The union over the whole 16-register blocks of [0, m), m >= 16, with the
/// AVX2 kernel's lookup (tbl indexed by min((hi | 3) - lo, 15)). Returns where
/// the scalar rule takes over.
inline std::size_t ull_merge_neon(std::uint8_t* __restrict a, const std::uint8_t* __restrict b,
                                  std::size_t m) noexcept {
    static constexpr std::uint8_t table[16] = {3, 2, 1, 0, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0};
    const uint8x16_t bits = vld1q_u8(table);
    const uint8x16_t three = vdupq_n_u8(3), fifteen = vdupq_n_u8(15);
    std::size_t i = 0;
    for (; i + 16 <= m; i += 16) {
        const uint8x16_t x = vld1q_u8(a + i), y = vld1q_u8(b + i);
        const uint8x16_t hi = vmaxq_u8(x, y), lo = vminq_u8(x, y);
        const uint8x16_t t = vminq_u8(vsubq_u8(vorrq_u8(hi, three), lo), fifteen);
        vst1q_u8(a + i, vorrq_u8(hi, vqtbl1q_u8(bits, t)));
    }
    return i;
}
#endif

/// a[i] = union of a[i] and b[i] for every i < m (m = 2^p registers).
inline void ull_merge_registers(std::uint8_t* __restrict a, const std::uint8_t* __restrict b,
                                std::size_t m) noexcept {
    std::size_t i = 0;
#if TALLY_SIMD_X86
    if (m >= 16) i = cpu_has_avx2() ? ull_merge_avx2(a, b, m) : ull_merge_sse2(a, b, m);
#endif
#if TALLY_SIMD_NEON
    if (m >= 16) i = ull_merge_neon(a, b, m);
#endif
    ull_merge_scalar(a, b, i, m);
}

}  // namespace detail
TALLY_END_NAMESPACE
