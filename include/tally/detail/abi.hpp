// tally/detail/abi.hpp: the inline namespace every tally name lives in.
//
// TALLY_CACHE_LINE_SIZE and TALLY_NO_SIMD change the layout and the code of
// tally's types, so the namespace that holds them is named after the library
// version and both settings, e.g. tally::v0_1_cl64_simd (as fmt and abseil tag
// theirs). Two translation units built with different settings then name
// different types and functions, and a program that mixes them fails to link
// instead of passing objects between two layouts. Users never write the tag:
// tally::Gcra is the name, and specialisations (tally::Hasher<MyType>) go in
// `namespace tally { ... }` as before. Do not forward-declare tally's types;
// include their headers.
#pragma once

#include "../version.hpp"

// The effective cache line: core/platform.hpp's tally::cache_line_size.
#if defined(TALLY_CACHE_LINE_SIZE)
#define TALLY_DETAIL_CACHE_LINE_SIZE TALLY_CACHE_LINE_SIZE
#elif defined(__APPLE__) && defined(__aarch64__)
#define TALLY_DETAIL_CACHE_LINE_SIZE 128  // M-series L1/L2 line
#else
#define TALLY_DETAIL_CACHE_LINE_SIZE 64
#endif

#if TALLY_DETAIL_CACHE_LINE_SIZE == 16
#define TALLY_DETAIL_ABI_CL cl16
#elif TALLY_DETAIL_CACHE_LINE_SIZE == 32
#define TALLY_DETAIL_ABI_CL cl32
#elif TALLY_DETAIL_CACHE_LINE_SIZE == 64
#define TALLY_DETAIL_ABI_CL cl64
#elif TALLY_DETAIL_CACHE_LINE_SIZE == 128
#define TALLY_DETAIL_ABI_CL cl128
#elif TALLY_DETAIL_CACHE_LINE_SIZE == 256
#define TALLY_DETAIL_ABI_CL cl256
#elif TALLY_DETAIL_CACHE_LINE_SIZE == 512
#define TALLY_DETAIL_ABI_CL cl512
#elif TALLY_DETAIL_CACHE_LINE_SIZE == 1024
#define TALLY_DETAIL_ABI_CL cl1024
#else
#error "TALLY_CACHE_LINE_SIZE must be a power of two in [16, 1024]"
#endif

#if defined(TALLY_NO_SIMD)
#define TALLY_DETAIL_ABI_SIMD nosimd
#else
#define TALLY_DETAIL_ABI_SIMD simd
#endif

#define TALLY_DETAIL_ABI_JOIN2(major, minor, cl, simd) v##major##_##minor##_##cl##_##simd
#define TALLY_DETAIL_ABI_JOIN(major, minor, cl, simd) TALLY_DETAIL_ABI_JOIN2(major, minor, cl, simd)

/// The inline namespace's name, e.g. v0_1_cl64_simd.
#define TALLY_ABI_NAMESPACE \
    TALLY_DETAIL_ABI_JOIN(TALLY_VERSION_MAJOR, TALLY_VERSION_MINOR, TALLY_DETAIL_ABI_CL, TALLY_DETAIL_ABI_SIMD)

/// Open and close tally's namespace in a tally header (never in user code).
#define TALLY_BEGIN_NAMESPACE \
    namespace tally {         \
    inline namespace TALLY_ABI_NAMESPACE {
#define TALLY_END_NAMESPACE \
    }                       \
    }
