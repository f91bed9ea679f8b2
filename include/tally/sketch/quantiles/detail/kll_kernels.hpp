// tally/sketch/quantiles/detail/kll_kernels.hpp: KllSketch's sort, merge and
// halving kernels and their dispatchers. The scalar kernels (Batcher sort and
// merge networks, branch-free and search merges) are the reference and run
// everywhere; kll_kernels_avx2.hpp holds the AVX2 forms for double. Each
// operation (kll_sort, kll_merge_into, kll_merge_up, kll_halve_down,
// kll_halve_up) is its own dispatcher: the only place that asks the CPU
// (cpu_has_avx2) which kernel runs. Every kernel gives the same items in the
// same order (tests/test_kll.cpp runs each against the standard library).
#pragma once

#include "../../../detail/abi.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "../../../core/detail/simd.hpp"
#include "kll_kernels_avx2.hpp"

#if defined(__GNUC__) || defined(__clang__)
#define TALLY_KLL_INLINE inline __attribute__((always_inline))
#else
#define TALLY_KLL_INLINE inline
#endif

TALLY_BEGIN_NAMESPACE
namespace detail {

/// a, b = min, max, in the form compilers turn into minsd/maxsd on x86-64
/// rather than into unpredictable branches.
template <class T>
TALLY_KLL_INLINE void kll_cswap(T& a, T& b) noexcept {
    // exactly minsd/maxsd (the second operand when neither is less), which
    // the compilers emit for these selects on x86-64 without a branch
    const T lo = a < b ? a : b;
    const T hi = a > b ? a : b;
    a = lo;
    b = hi;
}

/// The number of items of the sorted run [run, run + n) below v (with
/// OrEqual, at or below it), n >= 1, by a branch-free binary search whose trip
/// count depends on n alone: the searches of one merge are independent, so the
/// CPU overlaps them.
template <bool OrEqual, class T>
TALLY_KLL_INLINE std::uint32_t kll_count_below(const T* run, std::uint32_t n, T v) noexcept {
    const T* base = run;
    while (n > 1) {
        const std::uint32_t half = n / 2;
        const bool below = OrEqual ? !(v < base[half - 1]) : base[half - 1] < v;
        base += static_cast<std::size_t>(below) * half;  // a multiply, not a branch
        n -= half;
    }
    const bool below = OrEqual ? !(v < *base) : *base < v;
    return static_cast<std::uint32_t>(base - run) + (below ? 1 : 0);
}

/// Runs up to this long may merge by search (kll_merge_by_search).
inline constexpr std::uint32_t kll_search_merge_max = 64;

/// Whether merging runs of nx and ny items by search beats the compare-select
/// loop: a search step costs about a fifth of the loop's step per item (a
/// dependent compare, select and load), so search while the searches average
/// under four steps an item.
constexpr bool kll_prefer_search(std::uint32_t nx, std::uint32_t ny) noexcept {
    if (nx > kll_search_merge_max) return false;
    const auto steps = [](std::uint32_t n) { return static_cast<std::uint32_t>(std::bit_width(n)); };
    return nx * steps(ny) + ny * steps(nx) < 4 * (nx + ny);
}

/// Merges sorted x (nx <= kll_search_merge_max) and sorted y, ties y first,
/// into out, which must not overlap x and may overlap y only from below
/// (out + nx <= y): each item goes straight to its final index (its index in
/// its run plus the other run's items before it), so the work is independent
/// searches rather than one compare-load chain through every item. y is read
/// in order and each y item lands at most nx below where it was read.
template <class T>
inline void kll_merge_by_search(const T* x, std::uint32_t nx, const T* y, std::uint32_t ny, T* out) noexcept {
    std::uint32_t at[kll_search_merge_max];
    for (std::uint32_t i = 0; i < nx; ++i) at[i] = i + (ny ? kll_count_below<true>(y, ny, x[i]) : 0);
    if (nx) {
        for (std::uint32_t j = 0; j < ny; ++j) {
            const T v = y[j];
            out[j + kll_count_below<false>(x, nx, v)] = v;
        }
    } else {
        for (std::uint32_t j = 0; j < ny; ++j) out[j] = y[j];
    }
    for (std::uint32_t i = 0; i < nx; ++i) out[at[i]] = x[i];
}

/// Merges a short sorted x (1 <= nx <= kll_search_merge_max) into a much
/// longer sorted y, ties y first, into `out` (not overlapping x; y only from
/// below, out + nx <= y): one search per x item, then y moves in the chunks
/// between them (block copies) instead of one compare per y item.
template <class T>
inline void kll_merge_gallop(const T* x, std::uint32_t nx, const T* y, std::uint32_t ny, T* out) noexcept {
    std::uint32_t at[kll_search_merge_max];  // y items at or below each x item
    for (std::uint32_t i = 0; i < nx; ++i) at[i] = kll_count_below<true>(y, ny, x[i]);
    std::uint32_t done = 0;  // y items already moved
    for (std::uint32_t i = 0; i < nx; ++i) {
        // out + done + i < y + done: each chunk moves down, so a forward copy is safe
        std::copy(y + done, y + at[i], out + done + i);
        out[at[i] + i] = x[i];
        done = at[i];
    }
    if (out + nx != y) std::copy(y + done, y + ny, out + done + nx);
}

/// Runs both at least this long merge by 8-blocks through the AVX2 network
/// (kll_merge_long_avx2) where the CPU has it.
inline constexpr std::uint32_t kll_long_merge_min = 16;

/// Merges up to this many items in all run through kll_merge_keys' branch-free
/// loop. Longer ones are mostly merges of two levels, evenly spaced samples
/// of the same stream whose items alternate in a pattern branch prediction
/// learns: a compare and branch is cheaper there (measured on the 16-shard
/// merge), while short merges of fresh items mispredict about every other item.
inline constexpr std::uint32_t kll_branch_free_merge_max = 64;

/// Whether x is short enough against y for kll_merge_gallop.
constexpr bool kll_prefer_gallop(std::uint32_t nx, std::uint32_t ny) noexcept {
    return nx >= 1 && nx <= kll_search_merge_max && ny >= 8 * nx;
}

/// The unsigned integer of T's width, and a signed key whose order is T's
/// (for every non-NaN value; -0 sorts just below +0, which compare equal).
/// The key is its own inverse: flipping the magnitude bits of negatives.
template <class T>
using KllBits = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;

template <class T>
TALLY_KLL_INLINE std::make_signed_t<KllBits<T>> kll_order_key(KllBits<T> bits) noexcept {
    using S = std::make_signed_t<KllBits<T>>;
    constexpr int sign = sizeof(T) * 8 - 1;
    return static_cast<S>(bits ^ (static_cast<KllBits<T>>(static_cast<S>(bits) >> sign) >> 1));
}

/// Merges sorted x and y, ties y first, into `out` (not overlapping x; y
/// only from below, out + nx <= y). The compare-select chain runs on the
/// items' order keys in integer registers, where selects are conditional
/// moves; a floating-point select compiles to a branch that mispredicts
/// about every other item on random data.
template <class T>
inline void kll_merge_keys(const T* x, std::uint32_t nx, const T* y, std::uint32_t ny, T* out) noexcept {
    using U = KllBits<T>;
    const auto load = [](const T* p) {
        U bits;
        std::memcpy(&bits, p, sizeof bits);
        return kll_order_key<T>(bits);
    };
    const auto store = [](T* p, std::make_signed_t<U> key) {
        const U bits = static_cast<U>(kll_order_key<T>(static_cast<U>(key)));
        std::memcpy(p, &bits, sizeof bits);
    };
    const T* ex = x + nx;
    const T* ey = y + ny;
    if (nx > 1 && ny > 1) {
        // the next key of both runs is loaded before the compare decides which
        // one is needed, so the load overlaps the compare
        auto a = load(x), b = load(y);
        while (x + 1 < ex && y + 1 < ey) {
            const auto a1 = load(x + 1), b1 = load(y + 1);
            const bool take_x = a < b;
            store(out++, take_x ? a : b);
            x += take_x;
            y += !take_x;
            // masks rather than selects: compilers turn a pair of selects on
            // one condition back into a branch
            const U m = U{0} - static_cast<U>(take_x);
            a = static_cast<decltype(a)>((static_cast<U>(a1) & m) | (static_cast<U>(a) & ~m));
            b = static_cast<decltype(b)>((static_cast<U>(b) & m) | (static_cast<U>(b1) & ~m));
        }
    }
    while (x != ex && y != ey) {
        const auto a = load(x), b = load(y);
        const bool take_x = a < b;
        store(out++, take_x ? a : b);
        x += take_x;
        y += !take_x;
    }
    while (x != ex) *out++ = *x++;
    while (y != ey && out != y) *out++ = *y++;  // in place, the rest of y is already there
}

/// Merges two sorted runs into `out` (not overlapping either), ties x first:
/// two levels of sketches (evenly spaced samples of their streams), so a long
/// merge runs through a compare and branch that prediction learns.
template <class T>
inline void kll_merge_into(const T* x, std::uint32_t nx, const T* y, std::uint32_t ny, T* out) noexcept {
    if (nx == 0 || ny == 0) {
        std::copy(y, y + ny, std::copy(x, x + nx, out));
        return;
    }
#if TALLY_SIMD_X86
    if constexpr (std::is_same_v<T, double>) {
        if (nx >= kll_long_merge_min && ny >= kll_long_merge_min && cpu_has_avx2()) {
            kll_merge_long_avx2(x, nx, y, ny, out);
            return;
        }
    }
#endif
    if (kll_prefer_gallop(nx, ny)) {
        kll_merge_gallop(x, nx, y, ny, out);  // ties: equal items, either order
        return;
    }
    if (kll_prefer_gallop(ny, nx)) {
        kll_merge_gallop(y, ny, x, nx, out);  // ties x first
        return;
    }
    if (kll_prefer_search(ny, nx)) {
        kll_merge_by_search(y, ny, x, nx, out);  // ties x first
        return;
    }
    const T* ex = x + nx;
    const T* ey = y + ny;
    if (nx > 1 && ny > 1) {
        // the next item of both runs is loaded before the compare decides
        // which one is needed, so the loop's chain is compare-select, not
        // compare-advance-load
        T a = *x, b = *y;
        while (x + 1 < ex && y + 1 < ey) {
            const T a1 = x[1], b1 = y[1];
            const bool take_y = b < a;
            *out++ = take_y ? b : a;
            y += take_y;
            x += !take_y;
            a = take_y ? a : a1;
            b = take_y ? b1 : b;
        }
    }
    while (x != ex && y != ey) {
        const T a = *x;
        const T b = *y;
        const bool take_y = b < a;
        *out++ = take_y ? b : a;
        y += take_y;
        x += !take_y;
    }
    while (x != ex) *out++ = *x++;
    while (y != ey) *out++ = *y++;
}

/// Batcher's odd-even merge sort network on `Inputs` inputs (a power of two),
/// its merge passes from `FromPass` on, generated by the iterative form of
/// the construction (Knuth, TAOCP 5.2.2, M). From pass 1 it sorts (8 inputs:
/// 19 comparators, 16: 63); its last pass alone (FromPass = Inputs / 2)
/// merges two sorted halves (8 + 8: 25 comparators, 16 + 16: 65).
template <std::uint32_t Inputs, std::uint32_t FromPass>
struct KllBatcherNetwork {
    std::uint8_t lo[96]{};
    std::uint8_t hi[96]{};
    std::uint32_t size = 0;
    constexpr KllBatcherNetwork() {
        for (std::uint32_t p = FromPass; p < Inputs; p <<= 1)
            for (std::uint32_t k = p; k >= 1; k >>= 1)
                for (std::uint32_t j = k % p; j + k < Inputs; j += 2 * k)
                    for (std::uint32_t i = 0; i < k && i + j + k < Inputs; ++i)
                        if ((i + j) / (2 * p) == (i + j + k) / (2 * p)) {
                            lo[size] = static_cast<std::uint8_t>(i + j);
                            hi[size] = static_cast<std::uint8_t>(i + j + k);
                            ++size;
                        }
    }
};
template <std::uint32_t N>
inline constexpr KllBatcherNetwork<N, 1> kll_sort_network{};
template <std::uint32_t N>
inline constexpr KllBatcherNetwork<2 * N, N> kll_merge_network{};
static_assert(kll_sort_network<8>.size == 19 && kll_sort_network<16>.size == 63);
static_assert(kll_merge_network<8>.size == 25 && kll_merge_network<16>.size == 65);

template <const auto& Net, class T, std::size_t... I>
TALLY_KLL_INLINE void kll_apply_network(T* v, std::index_sequence<I...>) noexcept {
    (kll_cswap(v[Net.lo[I]], v[Net.hi[I]]), ...);
}

/// Sorts up to N (8 or 16) items: padded with +inf, through the network, in registers.
template <std::uint32_t N, class T>
__attribute__((noinline)) inline void kll_sort_small(T* first, std::uint32_t n) noexcept {
    T v[N];
    for (std::uint32_t i = 0; i < N; ++i) v[i] = i < n ? first[i] : std::numeric_limits<T>::infinity();
    kll_apply_network<kll_sort_network<N>>(v, std::make_index_sequence<kll_sort_network<N>.size>{});
    for (std::uint32_t i = 0; i < n; ++i) first[i] = v[i];
}

/// max(a, b) without a branch (maxsd / maxss on x86-64).
template <class T>
TALLY_KLL_INLINE T kll_max(T a, T b) noexcept {
    return a > b ? a : b;  // maxsd's rule: b unless a is greater
}

/// Item i of a run of n >= 1, or +inf past its end, without a branch: the
/// index stays in the run (nothing past it is read) and the item is raised
/// to +inf by a max with +inf, or kept by a max with -inf.
template <class T>
TALLY_KLL_INLINE T kll_padded(const T* run, std::uint32_t n, std::uint32_t i) noexcept {
    using U = KllBits<T>;
    constexpr U inf_bits = std::bit_cast<U>(std::numeric_limits<T>::infinity());
    constexpr U sign = U{1} << (sizeof(T) * 8 - 1);
    const U pad = inf_bits | (static_cast<U>(i < n) * sign);
    return kll_max(run[i < n ? i : 0], std::bit_cast<T>(pad));
}

template <std::uint32_t N, class T, std::size_t... I>
TALLY_KLL_INLINE void kll_load_padded(T* v, const T* x, std::uint32_t nx, const T* y, std::uint32_t ny,
                                      std::index_sequence<I...>) noexcept {
    ((v[I] = kll_padded(x, nx, static_cast<std::uint32_t>(I))), ...);
    ((v[N + I] = kll_padded(y, ny, static_cast<std::uint32_t>(I))), ...);
}

/// Merges sorted x (1 <= nx <= N) and sorted y (1 <= ny <= N) into out
/// (which may overlap either: every item is loaded first) through a merge
/// network in registers, each run padded with +inf to N: a fixed sequence
/// of min/max with no branch on the items, where the loops of a merge of a
/// few items mispredict at every exit.
template <std::uint32_t N, class T>
__attribute__((noinline)) inline void kll_merge_network_into(const T* x, std::uint32_t nx, const T* y, std::uint32_t ny,
                                             T* out) noexcept {
    T v[2 * N];
    kll_load_padded<N>(v, x, nx, y, ny, std::make_index_sequence<N>{});
    kll_apply_network<kll_merge_network<N>>(v, std::make_index_sequence<kll_merge_network<N>.size>{});
    const std::uint32_t n = nx + ny;
    for (std::uint32_t i = 0; i < n; ++i) out[i] = v[i];
}

/// Sorts a run in place without data-dependent branches up to 512 items:
/// a sort network up to 16, two and a merge network up to 32; above, runs of
/// 16 through the network, then branch-free merge passes through a stack
/// buffer; std::sort above 512.
template <class T>
inline void kll_sort(T* first, std::uint32_t n) noexcept {
    constexpr std::uint32_t small = 512;
#if TALLY_SIMD_X86
    if constexpr (std::is_same_v<T, double>) {
        if (n <= 32 && cpu_has_avx2()) {
            kll_sort32_avx2(first, n);
            return;
        }
    }
#endif
    if (n <= 8) {
        kll_sort_small<8>(first, n);
        return;
    }
    if (n <= 16) {
        kll_sort_small<16>(first, n);
        return;
    }
    if (n <= 32) {
        kll_sort_small<16>(first, 16);
        kll_sort_small<16>(first + 16, n - 16);
        kll_merge_network_into<16>(first, 16, first + 16, n - 16, first);
        return;
    }
    if (n > small) {
        std::sort(first, first + n);
        return;
    }
    std::uint32_t block = 16;
#if TALLY_SIMD_X86
    if constexpr (std::is_same_v<T, double>) {
        if (cpu_has_avx2()) block = 32;
    }
#endif
    for (std::uint32_t i = 0; i < n; i += block) {
        const std::uint32_t len = std::min(block, n - i);
#if TALLY_SIMD_X86
        if constexpr (std::is_same_v<T, double>) {
            if (block == 32) {
                kll_sort32_avx2(first + i, len);
                continue;
            }
        }
#endif
        kll_sort_small<16>(first + i, len);
    }
    T scratch[small];
    T* src = first;
    T* dst = scratch;
    for (std::uint32_t width = block; width < n; width *= 2) {
        for (std::uint32_t lo = 0; lo < n; lo += 2 * width) {
            const std::uint32_t mid = std::min(lo + width, n);
            const std::uint32_t hi = std::min(lo + 2 * width, n);
            kll_merge_keys(src + lo, mid - lo, src + mid, hi - mid, dst + lo);
        }
        std::swap(src, dst);
    }
    if (src != first) std::copy(src, src + n, first);
}

/// Keeps every other item of buf[start, start + length) (length even), the
/// odd or even ones by `offset`, in the lower half.
template <class T>
inline void kll_halve_down(T* buf, std::uint32_t start, std::uint32_t length, std::uint32_t offset) noexcept {
#if TALLY_SIMD_X86
    if constexpr (std::is_same_v<T, double>) {
        if (length >= 16 && cpu_has_avx2()) {
            kll_halve_down_avx2(buf, start, length, offset);
            return;
        }
    }
#endif
    const std::uint32_t half = length / 2;
    const T* src = buf + start + offset;
    T* dst = buf + start;
    for (std::uint32_t i = 0; i < half; ++i) dst[i] = src[2 * i];
}

/// As kll_halve_down, into the upper half.
template <class T>
inline void kll_halve_up(T* buf, std::uint32_t start, std::uint32_t length, std::uint32_t offset) noexcept {
#if TALLY_SIMD_X86
    if constexpr (std::is_same_v<T, double>) {
        if (length >= 16 && cpu_has_avx2()) {
            kll_halve_up_avx2(buf, start, length, offset);
            return;
        }
    }
#endif
    const std::uint32_t half = length / 2;
    T* base = buf + start;
    // item j of the result (j in [0, half)) lands at half + j from 2j + offset
    for (std::uint32_t j = half; j-- > 0;) base[half + j] = base[2 * j + offset];
}

/// Merges sorted buf[a, a + na) with sorted buf[b, b + nb) into buf[a + na ...),
/// where b = a + 2 * na: the output never overtakes the unread part of b.
/// Equal items compare equal, so the kernels may order them either way (the
/// scalar loops put b's first, as DataSketches does).
template <class T>
inline void kll_merge_up(T* buf, std::uint32_t a, std::uint32_t na, std::uint32_t b, std::uint32_t nb) noexcept {
#if TALLY_SIMD_X86
    if constexpr (std::is_same_v<T, double>) {
        // the network up to 16 + 16; 8-blocks when both runs have 16 or more;
        // the network up to 32 + 32 unless one run is a few items against
        // many, where a search per short item and block copies win
        if (na >= 1 && nb >= 1 && na <= 32 && nb <= 32 && cpu_has_avx2()) {
            const bool both_short = na <= 16 && nb <= 16;
            const bool one_short = na < kll_long_merge_min || nb < kll_long_merge_min;
            if (both_short || (one_short && !kll_prefer_gallop(na, nb))) {
                kll_merge32_avx2(buf + a, na, buf + b, nb, buf + a + na);
                return;
            }
        }
        if (na >= kll_long_merge_min && nb >= kll_long_merge_min && cpu_has_avx2()) {
            kll_merge_long_avx2(buf + a, na, buf + b, nb, buf + a + na);
            return;
        }
    }
#endif
    if (na >= 1 && nb >= 1 && na <= 16 && nb <= 16) {
        if (na <= 8 && nb <= 8)
            kll_merge_network_into<8>(buf + a, na, buf + b, nb, buf + a + na);
        else
            kll_merge_network_into<16>(buf + a, na, buf + b, nb, buf + a + na);
        return;
    }
    if (kll_prefer_gallop(na, nb)) {
        kll_merge_gallop(buf + a, na, buf + b, nb, buf + a + na);
        return;
    }
    if (kll_prefer_search(na, nb)) {
        kll_merge_by_search(buf + a, na, buf + b, nb, buf + a + na);
        return;
    }
    if (na + nb <= kll_branch_free_merge_max) {
        kll_merge_keys(buf + a, na, buf + b, nb, buf + a + na);
        return;
    }
    const T* pa = buf + a;
    const T* const ea = pa + na;
    const T* pb = buf + b;
    const T* const eb = pb + nb;
    T* out = buf + a + na;
    if (na > 8 && nb > 8) {  // longer runs: as kll_merge_into
        T xa = *pa, xb = *pb;
        while (pa + 1 < ea && pb + 1 < eb) {
            const T a1 = pa[1], b1 = pb[1];
            const bool take_a = xa < xb;
            *out++ = take_a ? xa : xb;
            pa += take_a;
            pb += !take_a;
            xa = take_a ? a1 : xa;
            xb = take_a ? xb : b1;
        }
    }
    while (pa != ea && pb != eb) {
        const T xa = *pa;
        const T xb = *pb;
        const bool take_a = xa < xb;
        *out++ = take_a ? xa : xb;
        pa += take_a;
        pb += !take_a;
    }
    while (pa != ea) *out++ = *pa++;
    // the rest of b is already in place
}

}  // namespace detail
TALLY_END_NAMESPACE
