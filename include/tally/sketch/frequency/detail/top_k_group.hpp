// tally/sketch/frequency/detail/top_k_group.hpp: the 16-slot tag groups of tally::TopK's
// table (SSE2, and a portable SWAR path). Not for direct use.
//
// Every slot has a one-byte tag: 0x80 when the slot is empty, else 7 bits of
// the item's hash (0..127). A group is 16 consecutive tags at a multiple of
// 16; one compare of all 16 against a tag gives the slots that may hold an
// item, and their high bits give the empty slots, as in the SwissTable
// design of Abseil (M. Kulukundis, "Designing a fast, efficient,
// cache-friendly hash table, step by step", CppCon 2017). Both paths return
// the same exact 16-bit masks (bit j: slot j), which tests/test_top_k.cpp
// checks; the SWAR path runs where SSE2 is missing (arm64) or under
// TALLY_NO_SIMD.
#pragma once

#include "../../../detail/abi.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../../../core/detail/simd.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::size_t top_k_group_width = 16;
/// A slot's tag. An enum rather than std::uint8_t: a store through it may not
/// alias the table's other fields (a char type may alias anything), so the
/// compiler keeps them in registers across tag stores.
enum class TopKTag : std::uint8_t {};
inline constexpr TopKTag top_k_empty_tag{0x80};

/// The tag of a full slot: the top 7 bits of the hash (the bits below pick the group).
[[nodiscard]] constexpr TopKTag top_k_tag(std::uint64_t h) noexcept {
    return TopKTag(h >> 57);
}

/// Set bits of a 16-bit mask (std::popcount is a library call on baseline x86-64).
[[nodiscard]] constexpr std::size_t popcount16(std::uint32_t x) noexcept {
    x = x - ((x >> 1) & 0x5555u);
    x = (x & 0x3333u) + ((x >> 2) & 0x3333u);
    x = (x + (x >> 4)) & 0x0f0fu;
    return (x + (x >> 8)) & 0x1fu;
}

/// The portable group: two 64-bit words, byte j of the group in byte j mod 8
/// (little-endian order) of word j / 8.
struct TopKGroupSwar {
    std::uint64_t lo, hi;

    [[nodiscard]] static TopKGroupSwar load(const TopKTag* p) noexcept {
        TopKGroupSwar g;
        std::memcpy(&g.lo, p, 8);
        std::memcpy(&g.hi, p + 8, 8);
        if constexpr (std::endian::native == std::endian::big) {
            g.lo = byte_swap(g.lo);
            g.hi = byte_swap(g.hi);
        }
        return g;
    }
    /// Slots whose tag equals `tag` (a full slot's tag, < 0x80).
    [[nodiscard]] std::uint32_t match(TopKTag tag) const noexcept {
        const std::uint64_t t = 0x0101010101010101ull * static_cast<std::uint8_t>(tag);
        return zero_bytes(lo ^ t) | (zero_bytes(hi ^ t) << 8);
    }
    /// Empty slots (tag 0x80; full tags are < 0x80).
    [[nodiscard]] std::uint32_t empty() const noexcept {
        return compress(lo & 0x8080808080808080ull) | (compress(hi & 0x8080808080808080ull) << 8);
    }

    /// Empties the 16 tags at p whose bit in `keep` is clear.
    static void keep_only(TopKTag* p, std::uint32_t keep) noexcept {
        std::uint8_t b[16];
        std::memcpy(b, p, 16);
        for (int j = 0; j < 16; ++j)
            if (((keep >> j) & 1u) == 0) b[j] = 0x80;
        std::memcpy(p, b, 16);
    }

  private:
    // The high bit of each byte (bits 7, 15, ..., 63) to bits 0..7: the eight
    // partial products of the multiply land on distinct bits, so nothing carries.
    static constexpr std::uint32_t compress(std::uint64_t high_bits) noexcept {
        return static_cast<std::uint32_t>(((high_bits >> 7) * 0x0102040810204080ull) >> 56);
    }
    // Exact: (x & 0x7f) + 0x7f never carries into the next byte, so only the
    // bytes that are zero keep their high bit clear.
    static constexpr std::uint32_t zero_bytes(std::uint64_t x) noexcept {
        constexpr std::uint64_t low7 = 0x7f7f7f7f7f7f7f7full;
        return compress(~(((x & low7) + low7) | x) & 0x8080808080808080ull);
    }
    static constexpr std::uint64_t byte_swap(std::uint64_t x) noexcept {
        std::uint64_t r = 0;
        for (int i = 0; i < 8; ++i) r |= ((x >> (8 * i)) & 0xff) << (56 - 8 * i);
        return r;
    }
};

#if TALLY_SIMD_X86
struct TopKGroupSse2 {
    simd::I8x16 v;

    [[nodiscard]] static TopKGroupSse2 load(const TopKTag* p) noexcept { return {simd::load16<simd::I8x16>(p)}; }
    [[nodiscard]] std::uint32_t match(TopKTag tag) const noexcept {
        const auto equal = v == simd::splat16<simd::I8x16>(static_cast<std::uint8_t>(tag));
        return static_cast<std::uint32_t>(__builtin_ia32_pmovmskb128(reinterpret_cast<simd::I8x16>(equal)));
    }
    [[nodiscard]] std::uint32_t empty() const noexcept {
        return static_cast<std::uint32_t>(__builtin_ia32_pmovmskb128(v));
    }
    static void keep_only(TopKTag* p, std::uint32_t keep) noexcept {
        // Byte j of `spread & sel` holds bit j mod 8 of its half's mask byte,
        // so it equals `sel` exactly when slot j is kept.
        using simd::U8x16;
        const auto sel = reinterpret_cast<U8x16>(simd::splat16<simd::U64x2>(0x8040201008040201ull));
        const auto spread = reinterpret_cast<U8x16>(
            simd::U64x2{0x0101010101010101ull * (keep & 0xff), 0x0101010101010101ull * ((keep >> 8) & 0xff)});
        const auto kept = reinterpret_cast<U8x16>((spread & sel) == sel);
        const auto old = simd::load16<U8x16>(p);
        simd::store16(p, (kept & old) | (~kept & simd::splat16<U8x16>(0x80)));
    }
};
using TopKGroup = TopKGroupSse2;
#else
using TopKGroup = TopKGroupSwar;
#endif

}  // namespace detail
TALLY_END_NAMESPACE
