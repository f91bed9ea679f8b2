// tally/core/platform.hpp: cache geometry, prefetch and branch hints.
//
// cache_line_size is the unit every slot layout in tally is built from. It is a
// compile-time constant (not the standard library interference-size constant, which
// clang 14 and Apple libc++ lack) so that layouts and the static_asserts on them
// are the same on every compiler for a given target.
#pragma once

#include "../detail/abi.hpp"

#include <cstddef>

TALLY_BEGIN_NAMESPACE

/// 128 on Apple arm64 (the M-series L1/L2 line), 64 elsewhere, or
/// TALLY_CACHE_LINE_SIZE (a power of two in [16, 1024]). It is part of the ABI
/// namespace (detail/abi.hpp), since every slot layout depends on it.
inline constexpr std::size_t cache_line_size = TALLY_DETAIL_CACHE_LINE_SIZE;

static_assert(cache_line_size >= 16 && cache_line_size <= 1024 && (cache_line_size & (cache_line_size - 1)) == 0,
              "TALLY_CACHE_LINE_SIZE must be a power of two in [16, 1024]");

// Padding between independently written atomics. x86-64 parts prefetch the
// adjacent line in pairs, so two writers 64 bytes apart still contend; Apple
// arm64 lines are 128 bytes already.
#if defined(__x86_64__) || defined(_M_X64) || (defined(__APPLE__) && defined(__aarch64__))
inline constexpr std::size_t false_sharing_size = cache_line_size < 128 ? 128 : cache_line_size;
#else
inline constexpr std::size_t false_sharing_size = cache_line_size;
#endif

static_assert(false_sharing_size >= cache_line_size && (false_sharing_size & (false_sharing_size - 1)) == 0);

TALLY_END_NAMESPACE

#if defined(__GNUC__) || defined(__clang__)
#define TALLY_LIKELY(x) __builtin_expect(!!(x), 1)
#define TALLY_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TALLY_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define TALLY_LIKELY(x) (x)
#define TALLY_UNLIKELY(x) (x)
#define TALLY_ALWAYS_INLINE inline
#endif

TALLY_BEGIN_NAMESPACE

// Always inlined: g++ 12 finds these free of side effects, so a call it does
// not inline (as into a loop built for another target, like the AVX2 batch
// loops of BloomFilter) is deleted, prefetch and all.
/// Hint that the line holding `p` will be read soon. Never faults, any pointer.
TALLY_ALWAYS_INLINE void prefetch_read(const void* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 0, 3);
#else
    (void)p;
#endif
}

/// Hint that the line holding `p` will be written soon. Never faults, any pointer.
TALLY_ALWAYS_INLINE void prefetch_write(const void* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 1, 3);
#else
    (void)p;
#endif
}

TALLY_END_NAMESPACE
