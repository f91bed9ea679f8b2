// tally/core/detail/cpu_features.hpp: which optional instruction sets the CPU
// runs, for kernels compiled with a target attribute and chosen at run time
// (BloomFilter's blocks, UltraLogLog's merge).
#pragma once

#include "../../detail/abi.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

/// x86-64 with GCC or Clang, and TALLY_NO_SIMD not defined: AVX2 (and SSSE3)
/// kernels exist in this build (whether the CPU runs them is cpu_has_avx2(),
/// cpu_has_ssse3()).
#if !defined(TALLY_NO_SIMD) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TALLY_DETAIL_X86_AVX2_KERNELS 1
#else
#define TALLY_DETAIL_X86_AVX2_KERNELS 0
#endif

#if TALLY_DETAIL_X86_AVX2_KERNELS
/// AVX2 is usable: compiled in with -mavx2, else asked of the CPU once.
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
/// the CPU once.
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

}  // namespace detail
TALLY_END_NAMESPACE
