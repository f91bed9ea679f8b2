// tally/core/platform.hpp: cache geometry, prefetch and branch hints.
//
// cache_line_size is the unit every slot layout in tally is built from. It is a
// compile-time constant (not the standard library interference-size constant, which
// clang 14 and Apple libc++ lack) so that layouts and the static_asserts on them
// are the same on every compiler for a given target.
#pragma once

#include <cstddef>

namespace tally {

#if defined(TALLY_CACHE_LINE_SIZE)
inline constexpr std::size_t cache_line_size = TALLY_CACHE_LINE_SIZE;
#elif defined(__APPLE__) && defined(__aarch64__)
inline constexpr std::size_t cache_line_size = 128;  // M-series L1/L2 line
#else
inline constexpr std::size_t cache_line_size = 64;
#endif

static_assert(cache_line_size >= 16 && (cache_line_size & (cache_line_size - 1)) == 0,
              "TALLY_CACHE_LINE_SIZE must be a power of two, at least 16");

// Padding between independently written atomics. x86-64 parts prefetch the
// adjacent line in pairs, so two writers 64 bytes apart still contend; Apple
// arm64 lines are 128 bytes already.
#if defined(__x86_64__) || defined(_M_X64) || (defined(__APPLE__) && defined(__aarch64__))
inline constexpr std::size_t false_sharing_size = cache_line_size < 128 ? 128 : cache_line_size;
#else
inline constexpr std::size_t false_sharing_size = cache_line_size;
#endif

static_assert(false_sharing_size >= cache_line_size && (false_sharing_size & (false_sharing_size - 1)) == 0);

}  // namespace tally

#if defined(__GNUC__) || defined(__clang__)
#define TALLY_LIKELY(x) __builtin_expect(!!(x), 1)
#define TALLY_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TALLY_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define TALLY_LIKELY(x) (x)
#define TALLY_UNLIKELY(x) (x)
#define TALLY_ALWAYS_INLINE inline
#endif

namespace tally {

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

}  // namespace tally
