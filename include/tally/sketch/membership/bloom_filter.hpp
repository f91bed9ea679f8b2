// tally/sketch/membership/bloom_filter.hpp: BloomFilter, set membership in one cache line
// per key, sized with the exact false-positive formula of its layout.
#pragma once

#include "../../detail/abi.hpp"

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../../core/hash.hpp"
#include "../../core/platform.hpp"
#include "../../core/seed.hpp"
#include "../../core/serialize.hpp"
#include "detail/bloom_kernels.hpp"
#include "../../detail/primitives.hpp"
#include "../../detail/throw.hpp"

TALLY_BEGIN_NAMESPACE

template <std::size_t BlockBytes>
class BloomFilter;

namespace detail {
/// Test hook: make `f` use the portable scalar kernel (true) or the SIMD one
/// where this build and CPU have it (false). Both set identical bits.
template <std::size_t BlockBytes>
void bloom_force_scalar(BloomFilter<BlockBytes>& f, bool scalar) noexcept;
}  // namespace detail

/// A split-block Bloom filter (Putze, Sanders & Singler, WEA 2007, in the
/// Impala/Parquet split-block form): set membership with no false negatives,
/// every key touching one block of BlockBytes (a cache line by default).
///
/// Guarantee: after `expected_items` distinct keys the false-positive rate is
/// at most `fpp`. The block count B is the smallest whose exact rate
///     FPR(n, B) = sum_j Poisson(j; n/B) * (1 - (1 - 1/L)^j)^k
/// (k lanes of L bits per block) meets fpp; 64-byte blocks need 10.10
/// bits/key at 1%, 15.72 at 0.1%. estimated_fpp() gives the exact rate for
/// the bits as they are, over_capacity() says when it passed fpp.
///
/// Hashing: one 64-bit hash per key (Hasher<T>, remixed with the seed when it
/// is not 0); take Seed::random() when an adversary chooses the keys. SIMD
/// kernels (AVX2 picked at run time, NEON) set the same bits as the scalar one.
/// Cost: add and contains O(1), one cache line; the batch calls prefetch.
/// Memory: B * BlockBytes bytes (bits_per_item() * expected_items / 8) plus
/// ~3 * BlockBytes of tables in the object. A moved-from filter may only be
/// assigned to or destroyed.
/// Thread safety: add*, merge, clear and assignment need exclusive access;
/// const members may run concurrently with each other.
/// Sizing tables, measurements and the wire format: docs/bloom_filter.md.
///
///     tally::BloomFilter<> seen(1'000'000, 0.01);  // 1.2 MiB, <= 1% false positives
///     if (!seen.contains(url)) { seen.add(url); crawl(url); }
///     if (seen.over_capacity()) { /* rebuild bigger */ }
template <std::size_t BlockBytes = cache_line_size>
class BloomFilter {
    static_assert(BlockBytes >= 16 && BlockBytes <= 512 && (BlockBytes & (BlockBytes - 1)) == 0,
                  "tally::BloomFilter: BlockBytes must be a power of two in [16, 512]");

  public:
    static constexpr std::size_t block_bytes = BlockBytes;
    static constexpr std::size_t block_bits = 8 * BlockBytes;
    /// Version 2 adds total(); version 1 bytes are still read.
    static constexpr std::uint8_t format_version = 2;

    /// Sized so that the false-positive rate after `expected_items` distinct
    /// keys is at most `fpp`. Throws std::invalid_argument for
    /// expected_items == 0, fpp outside (0, 1), or a size over 2^46 bytes
    /// (checked on the block count before any size is multiplied out).
    BloomFilter(std::size_t expected_items, double fpp, Seed seed = Seed{});

    // ------------------------------------------------------------ hot path

    /// Inserts `item` (hashed with Hasher<T>).
    template <class T>
    requires Hashable<std::decay_t<T>>
    void add(const T& item) noexcept { add_hash(hash_of(item)); }

    /// False only if `item` was never added (no false negatives).
    template <class T>
    requires Hashable<std::decay_t<T>>
    [[nodiscard]] bool contains(const T& item) const noexcept { return contains_hash(hash_of(item)); }

    /// Inserts a key by its 64-bit hash (all 64 bits should be well mixed).
    void add_hash(std::uint64_t h) noexcept {
        ++single_adds_;
        if constexpr (has_k8_kernel) {
            if (TALLY_LIKELY(k8_unseeded_)) return add_k8(block_of(h), static_cast<std::uint32_t>(h));
            return add_block_general(h);
        }
        add_block(h);
    }

    /// Membership of a key by its 64-bit hash.
    [[nodiscard]] bool contains_hash(std::uint64_t h) const noexcept {
        if constexpr (has_k8_kernel) {
            if (TALLY_LIKELY(k8_)) {
                h = detail::bloom_rehash(h, seed_);
                return contains_k8(block_of(h), static_cast<std::uint32_t>(h));
            }
            return contains_general(h);
        }
        return contains_block(h);
    }

  private:
    // k = 8 in a 32- or 64-byte block (the 1% and 0.1% layouts) on x86-64
    // has a kernel of its own with the salts as constants, inlined into the
    // caller (AVX2 intrinsics with -mavx2, inline assembly otherwise) behind
    // one flag test, which the compiler hoists out of a caller's loop.
    // Lookups remix a seeded key inline; adds test k8_unseeded_ instead, and
    // a seeded filter's adds go out of line with the other layouts: with
    // the seed test an add loop over hashed keys grew too large for the
    // compiler to split on the flag (docs/bloom_filter.md). The general path
    // is out of line so that the caller's loop stays small enough for the
    // compiler to keep the filter's fields in registers.
    static constexpr bool has_k8_kernel = TALLY_SIMD_X86 && (block_bits == 256 || block_bits == 512);

    TALLY_ALWAYS_INLINE static void add_k8(std::uint32_t* block, std::uint32_t x) noexcept {
#if TALLY_BLOOM_AVX2_ASM
        if constexpr (block_bits == 512) detail::bloom_add_asm_k8(block, x);
        if constexpr (block_bits == 256) detail::bloom_add_asm_w256k8(block, x);
#elif TALLY_SIMD_X86
        if constexpr (block_bits == 512) detail::bloom_add_avx2_k8(block, x);
        if constexpr (block_bits == 256) detail::bloom_add_avx2_w256k8(block, x);
#else
        (void)block;
        (void)x;
#endif
    }
    TALLY_ALWAYS_INLINE static bool contains_k8(const std::uint32_t* block, std::uint32_t x) noexcept {
#if TALLY_BLOOM_AVX2_ASM
        if constexpr (block_bits == 512) return detail::bloom_contains_asm_k8(block, x);
        if constexpr (block_bits == 256) return detail::bloom_contains_asm_w256k8(block, x);
#elif TALLY_SIMD_X86
        if constexpr (block_bits == 512) return detail::bloom_contains_avx2_k8(block, x);
        if constexpr (block_bits == 256) return detail::bloom_contains_avx2_w256k8(block, x);
#endif
        (void)block;
        (void)x;
        return false;
    }

    TALLY_BLOOM_NOINLINE void add_block_general(std::uint64_t h) noexcept {
        add_block(h);
    }
    TALLY_BLOOM_NOINLINE bool contains_general(std::uint64_t h) const noexcept {
        return contains_block(h);
    }

    TALLY_ALWAYS_INLINE void add_block(std::uint64_t h) noexcept {
        h = detail::bloom_rehash(h, seed_);
        std::uint32_t* block = block_of(h);
        const auto x = static_cast<std::uint32_t>(h);
        if constexpr (has_k8_kernel)
            if (TALLY_LIKELY(k8_)) return add_k8(block, x);
#if TALLY_SIMD_X86
        if constexpr (block_bits % 256 == 0)
            if (TALLY_LIKELY(simd_)) return detail::bloom_add_avx2<block_bits>(block, x, layout_);
#elif TALLY_SIMD_NEON
        if constexpr (block_bits % 128 == 0)
            if (TALLY_LIKELY(simd_)) return detail::bloom_add_neon<block_bits>(block, x, layout_);
#endif
        detail::bloom_add_scalar<block_bits>(block, x, layout_);
    }

    TALLY_ALWAYS_INLINE bool contains_block(std::uint64_t h) const noexcept {
        h = detail::bloom_rehash(h, seed_);
        const std::uint32_t* block = block_of(h);
        const auto x = static_cast<std::uint32_t>(h);
        if constexpr (has_k8_kernel)
            if (TALLY_LIKELY(k8_)) return contains_k8(block, x);
#if TALLY_SIMD_X86
        if constexpr (block_bits % 256 == 0)
            if (TALLY_LIKELY(simd_)) return detail::bloom_contains_avx2<block_bits>(block, x, layout_);
#elif TALLY_SIMD_NEON
        if constexpr (block_bits % 128 == 0)
            if (TALLY_LIKELY(simd_)) return detail::bloom_contains_neon<block_bits>(block, x, layout_);
#endif
        return detail::bloom_contains_scalar<block_bits>(block, x, layout_);
    }

  public:
    /// Prefetches the line a later add_hash/contains_hash(h) touches; issue it
    /// a few keys ahead to overlap cache misses in large filters.
    void prefetch_hash(std::uint64_t h) const noexcept {
        h = detail::bloom_rehash(h, seed_);
        prefetch_read(block_of(h));
    }

    /// add(item) for every item of a range, hashed in batches of 64 and
    /// inserted through add_hashes (faster than one add per item once the
    /// filter is larger than the cache).
    template <std::ranges::input_range R>
        requires Hashable<std::decay_t<std::ranges::range_value_t<R>>>
    void add_range(R&& items) noexcept;

    /// add_hash for every hash, prefetching a few keys ahead so that the
    /// cache misses of a filter larger than the cache overlap (and, on the
    /// AVX2 path, paying the dispatch once per batch instead of once per key).
    void add_hashes(std::span<const std::uint64_t> hashes) noexcept;

    /// out[i] = contains_hash(hashes[i]) for every i, prefetching ahead like
    /// add_hashes. Returns how many were positive. Throws
    /// std::invalid_argument unless out.size() == hashes.size().
    std::size_t contains_hashes(std::span<const std::uint64_t> hashes, std::span<bool> out) const;

    // ------------------------------------------------------------ fill

    /// The exact probability that a key not in the set tests positive, from
    /// the bits as they are (uniformly random hash assumed). O(m).
    [[nodiscard]] double estimated_fpp() const noexcept;

    /// Estimated number of distinct keys added (Swamidass-Baldi, see the class
    /// comment); +infinity once every bit is set. O(m).
    [[nodiscard]] double estimate() const noexcept {
        const double m = static_cast<double>(blocks_.size()) * block_bits;
        const double x = static_cast<double>(set_bits());
        if (x >= m) return std::numeric_limits<double>::infinity();
        return std::log1p(-x / m) / std::log1p(-static_cast<double>(layout_.k) / m);
    }

    /// True once estimated_fpp() exceeds the requested fpp(): the filter holds
    /// more than it was sized for and no longer keeps its promise. O(m).
    [[nodiscard]] bool over_capacity() const noexcept {
        return estimated_fpp() > fpp_;
    }

    /// Number of set bits. O(m).
    [[nodiscard]] std::uint64_t set_bits() const noexcept {
        std::uint64_t x = 0;
        for (const Block& b : blocks_)
            for (std::uint32_t w : b.w) x += static_cast<std::uint64_t>(std::popcount(w));
        return x;
    }

    // ------------------------------------------------------------ geometry

    [[nodiscard]] double bits_per_item() const noexcept {
        return static_cast<double>(blocks_.size()) * block_bits / static_cast<double>(expected_items_);
    }
    /// The false-positive rate the exact formula predicts at expected_items
    /// (at most fpp(); the block count is rounded up).
    [[nodiscard]] double design_fpp() const noexcept {
        return detail::bloom_blocked_fpr(static_cast<double>(expected_items_) / static_cast<double>(blocks_.size()),
                                         static_cast<double>(block_bits / layout_.k), layout_.k);
    }
    [[nodiscard]] std::size_t expected_items() const noexcept {
        return static_cast<std::size_t>(expected_items_);
    }
    [[nodiscard]] double fpp() const noexcept {
        return fpp_;
    }
    [[nodiscard]] Seed seed() const noexcept {
        return Seed{seed_};
    }
    /// Number of keys added (with repeats; add calls and add_hashes entries,
    /// summed by merge), saturating at 2^64 - 1. Not the distinct count: see
    /// estimate().
    [[nodiscard]] std::uint64_t total() const noexcept {
        return detail::sat_add(total_, static_cast<std::uint64_t>(single_adds_));
    }
    /// True when no key was added.
    [[nodiscard]] bool empty() const noexcept {
        return total() == 0;
    }
    [[nodiscard]] std::size_t block_count() const noexcept {
        return blocks_.size();
    }
    /// Bits set (and tested) per key.
    [[nodiscard]] unsigned hash_count() const noexcept {
        return layout_.k;
    }
    /// Bytes held: the blocks plus the object (its lookup tables).
    [[nodiscard]] std::size_t memory_bytes() const noexcept {
        return blocks_.size() * BlockBytes + sizeof(*this);
    }
    /// The bit array's bytes (block_count() * BlockBytes), as serialized.
    [[nodiscard]] std::size_t bit_bytes() const noexcept {
        return blocks_.size() * BlockBytes;
    }
    /// Removes every key; keeps the size, layout and seed.
    void clear() noexcept {
        for (Block& b : blocks_)
            for (std::uint32_t& w : b.w) w = 0;
        total_ = 0;
        single_adds_ = 0;
    }

    // ------------------------------------------------------------ merge

    /// Same block count, k and seed (BlockBytes is the type): then merge is a
    /// bitwise OR and gives exactly the filter of the union.
    [[nodiscard]] bool mergeable_with(const BloomFilter& other) const noexcept {
        return blocks_.size() == other.blocks_.size() && layout_.k == other.layout_.k && seed_ == other.seed_;
    }

    /// Union. The target keeps its own expected_items and fpp. Throws
    /// std::invalid_argument naming the mismatch (target unchanged).
    BloomFilter& merge(const BloomFilter& other);

    // ------------------------------------------------------------ wire

    [[nodiscard]] std::vector<std::byte> serialize() const;

    /// Throws FormatError for anything but a valid encoding of a
    /// BloomFilter<BlockBytes>; never allocates more than the input holds.
    /// Version 1 bytes (no total) read with total() = the rounded
    /// estimate() of their bits.
    [[nodiscard]] static BloomFilter deserialize(std::span<const std::byte> bytes);

  private:
    static constexpr std::size_t words_per_block = BlockBytes / 4;
    static constexpr std::size_t prefetch_distance = 8;  // ~ misses in flight per core
    // Up to this size a filter is assumed to sit in L2 (256 KiB or more on
    // every current core), where prefetching only costs the extra address.
    static constexpr std::size_t prefetch_free_bytes = std::size_t{256} << 10;
    std::size_t batch_prefetch_distance() const noexcept {
        return memory_bytes() <= prefetch_free_bytes ? 0 : prefetch_distance;
    }
    struct alignas(BlockBytes) Block {
        std::uint32_t w[words_per_block];
    };
    static_assert(sizeof(Block) == BlockBytes);

    struct Raw {};
    BloomFilter(Raw, std::uint64_t seed, std::uint64_t expected, double fpp) noexcept
        : seed_(seed), expected_items_(expected), fpp_(fpp) {}

    void init(std::size_t nblocks, std::uint32_t k) {
        blocks_.assign(nblocks, Block{});
        layout_ = detail::BloomLayout<block_bits>::make(k);
        select_kernels(detail::bloom_simd_available<block_bits>());
    }

    // The kernel flags, derived from the layout, the seed and whether the
    // SIMD kernels may run; set together so that they cannot disagree.
    void select_kernels(bool simd) noexcept {
        simd_ = simd;
        k8_ = simd && layout_.k == 8;
        k8_unseeded_ = k8_ && seed_ == 0;
    }

    TALLY_ALWAYS_INLINE std::uint32_t* block_of(std::uint64_t h) noexcept {
        return blocks_[detail::bloom_block_index(h, blocks_.size())].w;
    }
    TALLY_ALWAYS_INLINE const std::uint32_t* block_of(std::uint64_t h) const noexcept {
        return blocks_[detail::bloom_block_index(h, blocks_.size())].w;
    }

    friend void detail::bloom_force_scalar<BlockBytes>(BloomFilter&, bool) noexcept;

    detail::BloomLayout<block_bits> layout_{};
    std::vector<Block> blocks_;
    std::uint64_t seed_ = 0;
    // total() is total_ (batches, merges, deserialized bytes; saturating)
    // plus single_adds_ (add/add_hash calls). The per-key count is of a 64-bit
    // type other than std::uint64_t: keys read from a std::uint64_t array may
    // alias a std::uint64_t member, which makes the compiler store the count
    // after every key of a caller's loop; this type keeps it in a register.
    // It counts only calls made on this object (and the objects it was
    // copied from), so it cannot wrap: 2^64 calls take centuries.
    // (Where unsigned long is 32 bits and std::uint64_t is unsigned long
    // long, there is no other type and the count stays a std::uint64_t.)
    using SingleAddCount =
        std::conditional_t<!std::is_same_v<std::uint64_t, unsigned long long>, unsigned long long,
                           std::conditional_t<sizeof(unsigned long) == 8, unsigned long, std::uint64_t>>;
    static_assert(sizeof(SingleAddCount) == 8);
    std::uint64_t total_ = 0;
    SingleAddCount single_adds_ = 0;
    std::uint64_t expected_items_ = 0;
    double fpp_ = 0;
    bool simd_ = false;
    bool k8_ = false;           // simd_ and k = 8: the specialised per-key kernel
    bool k8_unseeded_ = false;  // k8_ and seed 0: add_hash's inline kernel
};

TALLY_END_NAMESPACE

#include "detail/bloom_filter_impl.hpp"
