// tally/sketch/quantiles/detail/tdigest_sort.hpp: sorting the t-digest buffer.
//
// Sorting the buffer is most of the cost of TDigest::add, so unit-weight
// values are buffered as order-preserving 64-bit keys and sorted by an LSD
// radix sort (passes of 8 bits over the top 4 bytes; a pass whose byte is the
// same in every key is skipped) and an insertion pass for the low bytes:
// a few cheap moves per value instead of the ~log2(n) unpredictable
// comparisons of std::sort. Weighted records (rare: explicit
// weights, and merges) are sorted by (mean, weight) with std::sort.
#pragma once

#include "../../../detail/abi.hpp"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

TALLY_BEGIN_NAMESPACE
namespace detail {

/// Order-preserving map from double to uint64 (finite doubles; -0.0 maps
/// just below +0.0) and back.
inline std::uint64_t tdigest_key(double d) noexcept {
    const auto u = std::bit_cast<std::uint64_t>(d);
    return (u >> 63) ? ~u : (u | (std::uint64_t{1} << 63));
}
inline double tdigest_unkey(std::uint64_t k) noexcept {
    return std::bit_cast<double>((k >> 63) ? (k & ~(std::uint64_t{1} << 63)) : ~k);
}

/// Sorts keys a[0, n) ascending; tmp must hold n keys.
///
/// The radix passes skip the lowest 4 bytes: after them the keys are in
/// order of their top 32 bits (sign, exponent and 20 bits of mantissa, a
/// relative resolution of about 1e-6), so only keys that agree on those can
/// be out of order, and an insertion pass puts them right. If that pass has
/// to move more than 4n keys (many values that agree to 6 significant digits,
/// in random order), std::sort finishes the nearly sorted array instead.
inline void tdigest_radix_sort(std::uint64_t* a, std::size_t n, std::uint64_t* tmp) noexcept {
    if (n < 64) {
        std::sort(a, a + n);
        return;
    }
    constexpr int low = 4;  // bytes left to the insertion pass
    std::size_t hist[8 - low][256] = {};
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t k = a[i] >> (8 * low);
        for (int d = 0; d < 8 - low; ++d) ++hist[d][(k >> (8 * d)) & 0xff];
    }
    std::uint64_t* src = a;
    std::uint64_t* dst = tmp;
    for (int d = 0; d < 8 - low; ++d) {
        const int shift = 8 * (d + low);
        if (hist[d][(src[0] >> shift) & 0xff] == n) continue;  // one bucket: nothing to do
        std::size_t off[256];
        std::size_t sum = 0;
        for (int b = 0; b < 256; ++b) {
            off[b] = sum;
            sum += hist[d][b];
        }
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint64_t k = src[i];
            dst[off[(k >> shift) & 0xff]++] = k;
        }
        std::swap(src, dst);
    }
    if (src != a) std::memcpy(a, src, n * sizeof(std::uint64_t));
    std::size_t budget = 4 * n;
    for (std::size_t i = 1; i < n; ++i) {
        const std::uint64_t k = a[i];
        if (k >= a[i - 1]) continue;
        std::size_t j = i;
        while (j > 0 && a[j - 1] > k) {
            a[j] = a[j - 1];
            --j;
        }
        a[j] = k;
        if ((i - j) > budget) {
            std::sort(a, a + n);
            return;
        }
        budget -= i - j;
    }
}

template <class Rec>
inline bool tdigest_less(const Rec& a, const Rec& b) noexcept {
    return a.mean < b.mean || (a.mean == b.mean && a.weight < b.weight);
}

}  // namespace detail
TALLY_END_NAMESPACE
