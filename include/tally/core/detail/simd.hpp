// tally/core/detail/simd.hpp: the one place that reads the compiler's
// instruction-set macros and TALLY_NO_SIMD, includes the intrinsics headers,
// and asks the CPU what it runs. Every vector kernel is guarded by a switch
// from here, and chosen at run time by its family's *_kernels.hpp dispatcher.
//
//   TALLY_SIMD_X86       x86-64 with GCC or Clang: SSE2 kernels (the x86-64
//                        baseline) and AVX2 kernels compiled with target
//                        attributes, run when cpu_has_avx2()
//   TALLY_SIMD_NEON      arm64 with Advanced SIMD (every arm64 CPU)
//   TALLY_SIMD_AVX_BUILD the whole translation unit is built for AVX (-mavx or
//                        later), so 256-bit code needs no target attribute
//
// With TALLY_NO_SIMD defined all three are 0 and no vector code is compiled:
// the scalar references run everywhere.
//
// x86-64 kernels are written on the vector types below (the GCC and Clang
// vector extension: operators, ?: per lane, __builtin_shufflevector, and a
// few __builtin_ia32_* for what has no operator) rather than on <immintrin.h>,
// which alone costs about half a second of every translation unit that
// includes it. Inside a function built for a target (TALLY_SIMD_AVX2_FN) the
// compilers emit that target's instructions for them.
#pragma once

#include "../../detail/abi.hpp"

#include <type_traits>

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

#if TALLY_SIMD_X86
/// A kernel helper built for AVX2 and inlined into its AVX2 callers.
#define TALLY_SIMD_AVX2_FN __attribute__((target("avx2"), always_inline)) inline
#endif

#if TALLY_SIMD_X86 && defined(__AVX__)
#define TALLY_SIMD_AVX_BUILD 1
#else
#define TALLY_SIMD_AVX_BUILD 0
#endif

TALLY_BEGIN_NAMESPACE
namespace detail {

#if TALLY_SIMD_X86
namespace simd {
// Lane types named by element and count; the integer ones match the
// builtins' own element types (long long, char), so no cast is needed there.
using F64x4 = double __attribute__((vector_size(32)));
using I64x4 = long long __attribute__((vector_size(32)));
using U64x4 = unsigned long long __attribute__((vector_size(32)));
using I32x8 = int __attribute__((vector_size(32)));
using U32x8 = unsigned __attribute__((vector_size(32)));
using I8x32 = char __attribute__((vector_size(32)));
using U8x32 = unsigned char __attribute__((vector_size(32)));
using I32x4 = int __attribute__((vector_size(16)));
using U32x4 = unsigned __attribute__((vector_size(16)));
using U64x2 = unsigned long long __attribute__((vector_size(16)));
using U16x8 = unsigned short __attribute__((vector_size(16)));
using I8x16 = char __attribute__((vector_size(16)));
using U8x16 = unsigned char __attribute__((vector_size(16)));

/// Every lane of a 16-byte vector = e (converted to the lane type).
template <class V, class E>
__attribute__((always_inline)) inline V splat16(E e) noexcept {
    static_assert(sizeof(V) == 16);
    return V{} + static_cast<std::remove_cvref_t<decltype(V{}[0])>>(e);
}

/// Every lane of a 32-byte vector = e, inside AVX2 kernels.
template <class V, class E>
TALLY_SIMD_AVX2_FN V splat32(E e) noexcept {
    static_assert(sizeof(V) == 32);
    return V{} + static_cast<std::remove_cvref_t<decltype(V{}[0])>>(e);
}

/// Unaligned 16-byte load and store (SSE2, the x86-64 baseline).
template <class V>
__attribute__((always_inline)) inline V load16(const void* p) noexcept {
    static_assert(sizeof(V) == 16);
    V v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
template <class V>
__attribute__((always_inline)) inline void store16(void* p, V v) noexcept {
    static_assert(sizeof(V) == 16);
    __builtin_memcpy(p, &v, sizeof v);
}

/// Unaligned 32-byte load and store, inside AVX2 kernels.
template <class V>
TALLY_SIMD_AVX2_FN V load32(const void* p) noexcept {
    static_assert(sizeof(V) == 32);
    V v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
template <class V>
TALLY_SIMD_AVX2_FN void store32(void* p, V v) noexcept {
    static_assert(sizeof(V) == 32);
    __builtin_memcpy(p, &v, sizeof v);
}

/// Four u32 lanes widened to u64 (vpmovzxdq): GCC lowers the generic
/// conversion to two 128-bit halves, so it gets the instruction's builtin.
TALLY_SIMD_AVX2_FN U64x4 widen(U32x4 v) noexcept {
#if defined(__clang__)
    return __builtin_convertvector(v, U64x4);
#else
    return reinterpret_cast<U64x4>(__builtin_ia32_pmovzxdq256(reinterpret_cast<I32x4>(v)));
#endif
}
}  // namespace simd

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
