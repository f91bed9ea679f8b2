// tally/sketch/membership/detail/bloom_filter_impl.hpp: the bodies of BloomFilter.
// Included at the end of the public header, whose declarations it needs.
#pragma once

#include "../../../detail/abi.hpp"

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
#include "../../../core/hash.hpp"
#include "../../../core/platform.hpp"
#include "../../../core/seed.hpp"
#include "../../../core/serialize.hpp"
#include "bloom_kernels.hpp"
#include "../../../detail/primitives.hpp"
#include "../../../detail/throw.hpp"
#include "../bloom_filter.hpp"

TALLY_BEGIN_NAMESPACE

// ---- BloomFilter: member definitions -------------------------------------

template <std::size_t BlockBytes>
inline BloomFilter<BlockBytes>::BloomFilter(std::size_t expected_items, double fpp, Seed seed) : seed_(seed.value), expected_items_(expected_items), fpp_(fpp) {
    detail::check_range("tally::BloomFilter::BloomFilter", "expected_items", expected_items, std::size_t{1},
                        std::numeric_limits<std::size_t>::max());
    detail::check_range("tally::BloomFilter::BloomFilter", "fpp", fpp, 0.0, 1.0, detail::Bounds::open);
    const std::uint64_t max_blocks = detail::bloom_max_bytes / BlockBytes;
    // Fewest blocks wins; among equals (small filters), the lowest rate.
    const double n = static_cast<double>(expected_items);
    std::uint64_t best_blocks = 0;
    std::uint32_t best_k = 0;
    double best_fpr = 1.0;
    for (std::uint32_t k = 1; k <= block_bits / 32; k *= 2) {
        const std::uint64_t b = detail::bloom_blocks_for(n, fpp, static_cast<double>(block_bits), k, max_blocks);
        if (b == 0 || (best_blocks != 0 && b > best_blocks)) continue;
        const double fpr =
            detail::bloom_blocked_fpr(n / static_cast<double>(b), static_cast<double>(block_bits / k), k);
        if (best_blocks == 0 || b < best_blocks || fpr < best_fpr) {
            best_blocks = b;
            best_k = k;
            best_fpr = fpr;
        }
    }
    if (best_blocks == 0)
        detail::throw_invalid_argument("tally::BloomFilter::BloomFilter: expected_items " +
                                       std::to_string(expected_items) + " at fpp " + detail::format_number(fpp) +
                                       " needs more than " + std::to_string(detail::bloom_max_bytes) +
                                       " bytes (the maximum)");
    init(static_cast<std::size_t>(best_blocks), best_k);
}

template <std::size_t BlockBytes>
template <std::ranges::input_range R>
requires Hashable<std::decay_t<std::ranges::range_value_t<R>>>
inline void BloomFilter<BlockBytes>::add_range(R&& items) noexcept {
    std::uint64_t buf[64];
    std::size_t n = 0;
    for (auto&& item : items) {
        buf[n++] = hash_of(item);
        if (n == 64) {
            add_hashes(std::span<const std::uint64_t>(buf, n));
            n = 0;
        }
    }
    if (n != 0) add_hashes(std::span<const std::uint64_t>(buf, n));
}

template <std::size_t BlockBytes>
inline void BloomFilter<BlockBytes>::add_hashes(std::span<const std::uint64_t> hashes) noexcept {
    const std::size_t n = hashes.size();
    total_ = detail::sat_add(total_, static_cast<std::uint64_t>(n));
#if TALLY_SIMD_X86
    if constexpr (block_bits % 256 == 0)
        if (TALLY_LIKELY(simd_) && n != 0)
            return detail::bloom_add_many_avx2<block_bits>(reinterpret_cast<unsigned char*>(blocks_.data()),
                                                           blocks_.size(), seed_, hashes.data(), n,
                                                           batch_prefetch_distance(), layout_);
#endif
    const std::size_t ahead = batch_prefetch_distance();
    for (std::size_t i = 0; i < n; ++i) {
        if (ahead != 0 && i + ahead < n) prefetch_hash(hashes[i + ahead]);
        add_block(hashes[i]);
    }
}

template <std::size_t BlockBytes>
inline auto BloomFilter<BlockBytes>::contains_hashes(std::span<const std::uint64_t> hashes, std::span<bool> out) const -> std::size_t {
    if (hashes.size() != out.size())
        detail::throw_invalid_argument("tally::BloomFilter::contains_hashes: out.size() " +
                                       std::to_string(out.size()) + " differs from hashes.size() " +
                                       std::to_string(hashes.size()));
    const std::size_t n = hashes.size();
#if TALLY_SIMD_X86
    if constexpr (block_bits % 256 == 0)
        if (TALLY_LIKELY(simd_) && n != 0)
            return detail::bloom_contains_many_avx2<block_bits>(
                reinterpret_cast<const unsigned char*>(blocks_.data()), blocks_.size(), seed_, hashes.data(), n,
                batch_prefetch_distance(), out.data(), layout_);
#endif
    std::size_t positives = 0;
    const std::size_t ahead = batch_prefetch_distance();
    for (std::size_t i = 0; i < n; ++i) {
        if (ahead != 0 && i + ahead < n) prefetch_hash(hashes[i + ahead]);
        out[i] = contains_block(hashes[i]);
        positives += out[i] ? 1 : 0;
    }
    return positives;
}

template <std::size_t BlockBytes>
inline auto BloomFilter<BlockBytes>::estimated_fpp() const noexcept -> double {
    const std::uint32_t k = layout_.k;
    const std::uint32_t words_per_lane = static_cast<std::uint32_t>(words_per_block) / k;
    const double inv_lane = 1.0 / static_cast<double>(block_bits / k);
    double total = 0;
    for (const Block& b : blocks_) {
        double product = 1.0;
        for (std::uint32_t i = 0; i < k && product != 0.0; ++i) {
            std::uint32_t set = 0;
            for (std::uint32_t w = 0; w < words_per_lane; ++w) set += std::popcount(b.w[i * words_per_lane + w]);
            product *= set * inv_lane;
        }
        total += product;
    }
    return total / static_cast<double>(blocks_.size());
}

template <std::size_t BlockBytes>
inline auto BloomFilter<BlockBytes>::merge(const BloomFilter& other) -> BloomFilter& {
    if (blocks_.size() != other.blocks_.size())
        detail::throw_invalid_argument("tally::BloomFilter::merge: block count " + std::to_string(blocks_.size()) +
                                       " does not match " + std::to_string(other.blocks_.size()));
    if (layout_.k != other.layout_.k)
        detail::throw_invalid_argument("tally::BloomFilter::merge: hash count k " + std::to_string(layout_.k) +
                                       " does not match " + std::to_string(other.layout_.k));
    if (seed_ != other.seed_)
        detail::throw_invalid_argument("tally::BloomFilter::merge: seed " + std::to_string(seed_) +
                                       " does not match " + std::to_string(other.seed_));
    for (std::size_t i = 0; i < blocks_.size(); ++i)
        for (std::size_t w = 0; w < words_per_block; ++w) blocks_[i].w[w] |= other.blocks_[i].w[w];
    total_ = detail::sat_add(total(), other.total());
    single_adds_ = 0;
    return *this;
}

template <std::size_t BlockBytes>
inline auto BloomFilter<BlockBytes>::serialize() const -> std::vector<std::byte> {
    ByteWriter out(52 + bit_bytes());
    out.header(Family::bloom_filter, format_version);
    out.u16(static_cast<std::uint16_t>(BlockBytes));
    out.u8(static_cast<std::uint8_t>(layout_.k));
    out.u8(0);
    out.u64(seed_);
    out.u64(expected_items_);
    out.f64(fpp_);
    out.u64(blocks_.size());
    out.u64(total());
    if constexpr (std::endian::native == std::endian::little) {
        out.bytes(blocks_.data(), bit_bytes());
    } else {
        for (const Block& b : blocks_)
            for (std::uint32_t w : b.w) out.u32(w);
    }
    return out.take();
}

template <std::size_t BlockBytes>
inline auto BloomFilter<BlockBytes>::deserialize(std::span<const std::byte> bytes) -> BloomFilter {
    ByteReader in(bytes);
    const std::uint8_t version = in.header(Family::bloom_filter, format_version);
    const std::uint16_t bb = in.u16();
    if (bb != BlockBytes)
        detail::throw_format_error("tally: BloomFilter block_bytes " + std::to_string(bb) + " where " +
                                   std::to_string(BlockBytes) + " was expected");
    const std::uint8_t k = in.u8();
    format_check(k >= 1 && k <= block_bits / 32 && (k & (k - 1)) == 0,
                 "BloomFilter k is not a power of two in [1, block_bits / 32]");
    format_check(in.u8() == 0, "BloomFilter reserved byte is not zero");
    const std::uint64_t seed = in.u64();
    const std::uint64_t expected = in.u64();
    format_check(expected >= 1 && static_cast<std::uint64_t>(static_cast<std::size_t>(expected)) == expected,
                 "BloomFilter expected_items is out of range");
    const double fpp = in.f64();
    format_check(fpp > 0.0 && fpp < 1.0, "BloomFilter fpp is not in (0, 1)");
    const std::uint64_t nblocks =
        in.count(in.u64(), BlockBytes, detail::bloom_max_bytes / BlockBytes, "BloomFilter block");
    format_check(nblocks >= 1, "BloomFilter block count is zero");
    const std::uint64_t total = version >= 2 ? in.u64() : 0;
    in.count(nblocks, BlockBytes, detail::bloom_max_bytes / BlockBytes, "BloomFilter block");
    BloomFilter f(Raw{}, seed, expected, fpp);
    f.init(static_cast<std::size_t>(nblocks), k);
    const auto payload = in.bytes(static_cast<std::size_t>(nblocks) * BlockBytes);
    if constexpr (std::endian::native == std::endian::little) {
        std::memcpy(f.blocks_.data(), payload.data(), payload.size());
    } else {
        ByteReader words(payload);
        for (Block& b : f.blocks_)
            for (std::uint32_t& w : b.w) w = words.u32();
    }
    in.expect_end();
    if (version >= 2) {
        f.total_ = total;
    } else if (f.set_bits() != 0) {
        const double n = std::round(f.estimate());
        f.total_ = n < 18446744073709551615.0 ? std::max<std::uint64_t>(1, static_cast<std::uint64_t>(n))
                                              : std::numeric_limits<std::uint64_t>::max();
    }
    return f;
}

namespace detail {
template <std::size_t BlockBytes>
void bloom_force_scalar(BloomFilter<BlockBytes>& f, bool scalar) noexcept {
    f.select_kernels(!scalar && bloom_simd_available<BloomFilter<BlockBytes>::block_bits>());
}
}  // namespace detail

TALLY_END_NAMESPACE
