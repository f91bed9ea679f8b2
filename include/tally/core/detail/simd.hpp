// tally/core/detail/simd.hpp: the one place that reads the compiler's
// instruction-set macros and TALLY_NO_SIMD, includes the intrinsics headers,
// and asks the CPU what it runs. Every vector kernel is guarded by a switch
// from here, and chosen at run time by its family's *_kernels.hpp dispatcher.
//
//   TALLY_SIMD_X86       x86-64 with GCC or Clang: SSE2 kernels (the x86-64
//                        baseline) and SSSE3/AVX2 kernels compiled with target
//                        attributes, run when cpu_has_ssse3()/cpu_has_avx2()
//   TALLY_SIMD_NEON      arm64 with Advanced SIMD (every arm64 CPU)
//   TALLY_SIMD_AVX_BUILD the whole translation unit is built for AVX (-mavx or
//                        later), so 256-bit code needs no target attribute
//
// With TALLY_NO_SIMD defined all three are 0 and no intrinsic is compiled:
// the scalar references run everywhere. The intrinsics headers are included
// by the kernel files that use them, under these switches (<immintrin.h>
// alone costs most of a second of compile time).
#pragma once

#include "../../detail/abi.hpp"

#if !defined(TALLY_NO_SIMD) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TALLY_SIMD_X86 1
#else
#define TALLY_SIMD_X86 0
#endif

#if !defined(TALLY_NO_SIMD) && defined(__aarch64__) && defined(__ARM_NEON)
#define TALLY_SIMD_NEON 1
#else
#define TALLY_SIMD_NEON 0
#endif

#if TALLY_SIMD_X86 && defined(__AVX__)
#define TALLY_SIMD_AVX_BUILD 1
#else
#define TALLY_SIMD_AVX_BUILD 0
#endif

TALLY_BEGIN_NAMESPACE
namespace detail {

#if TALLY_SIMD_X86
/// AVX2 is usable: compiled in with -mavx2, else asked of the CPU once.
/// Called only from the *_kernels.hpp dispatchers.
inline bool cpu_has_avx2() noexcept {
#if defined(__AVX2__)
    return true;
#else
    static const bool has = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") != 0;
    }();
    return has;
#endif
}

/// SSSE3 (pshufb) is usable: compiled in with -mssse3 or later, else asked of
/// the CPU once. Called only from the *_kernels.hpp dispatchers.
inline bool cpu_has_ssse3() noexcept {
#if defined(__SSSE3__)
    return true;
#else
    static const bool has = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("ssse3") != 0;
    }();
    return has;
#endif
}
#endif

/// x rounded on its own: the compiler may not fuse it into the add that
/// follows (-ffp-contract=fast with FMA hardware, clang's default on arm64),
/// which would round differently from the Java references tally matches.
[[nodiscard]] inline double rounded(double x) noexcept {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __asm__("" : "+x"(x));
#elif defined(__GNUC__) && defined(__aarch64__)
    __asm__("" : "+w"(x));
#else
    volatile double v = x;
    x = v;
#endif
    return x;
}

/// A spin-wait hint (pause, yield): lets a sibling hyperthread run and saves power.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

}  // namespace detail
TALLY_END_NAMESPACE
