// tally/sketch/frequency/detail/count_min_impl.hpp: the bodies of CountMin.
// Included at the end of the public header, whose declarations it needs.
#pragma once

#include "../../../detail/abi.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numbers>
#include <span>
#include <string>
#include <type_traits>
#include <vector>
#include "../../../core/hash.hpp"
#include "../../../core/platform.hpp"
#include "../../../core/seed.hpp"
#include "../../../core/serialize.hpp"
#include "../../../detail/primitives.hpp"
#include "../../../detail/throw.hpp"
#include "../count_min.hpp"

TALLY_BEGIN_NAMESPACE

// ---- CountMin: member definitions -------------------------------------

template <class Counter>
inline auto CountMin<Counter>::with_error(double epsilon, double delta, CountMinOptions options) -> CountMin {
    detail::check_range("tally::CountMin::with_error", "epsilon", epsilon, min_epsilon(), 1.0,
                        detail::Bounds::right_open);
    detail::check_range("tally::CountMin::with_error", "delta", delta, min_delta(), 1.0,
                        detail::Bounds::right_open);
    const double w = std::min(std::ceil(std::numbers::e / epsilon), static_cast<double>(max_width));
    const double d = std::min(std::ceil(std::log(1.0 / delta)), static_cast<double>(max_depth));
    return CountMin(static_cast<std::size_t>(w), std::max<std::size_t>(1, static_cast<std::size_t>(d)), options);
}

template <class Counter>
TALLY_ALWAYS_INLINE void CountMin<Counter>::add_hash(std::uint64_t hash, std::uint64_t count) noexcept {
    if (TALLY_LIKELY(!conservative_)) {
        // The usual depths get a fully unrolled body (independent rows the
        // CPU overlaps); any other depth loops.
        switch (depth_) {
            case 4: add_rows<4>(hash, count); break;
            case 5: add_rows<5>(hash, count); break;
            case 3: add_rows<3>(hash, count); break;
            default: add_rows<0>(hash, count); break;
        }
    } else {
        add_conservative(hash, count);
    }
    total_ = detail::sat_add(total_, count);
}

template <class Counter>
inline auto CountMin<Counter>::merge(const CountMin& other) -> CountMin& {
    if (width_ != other.width_ || depth_ != other.depth_)
        detail::throw_invalid_argument("tally::CountMin::merge: shape mismatch (width " + std::to_string(width_) +
                                       " x depth " + std::to_string(depth_) + " vs width " +
                                       std::to_string(other.width_) + " x depth " +
                                       std::to_string(other.depth_) + ")");
    if (seed_ != other.seed_)
        detail::throw_invalid_argument("tally::CountMin::merge: seed mismatch (" + std::to_string(seed_.value) +
                                       " vs " + std::to_string(other.seed_.value) + ")");
    if (conservative_ != other.conservative_)
        detail::throw_invalid_argument(std::string("tally::CountMin::merge: update mode mismatch (") +
                                       mode_name(conservative_) + " vs " + mode_name(other.conservative_) + ")");
    for (std::size_t i = 0; i < cells_.size(); ++i) cells_[i] = detail::sat_add(cells_[i], other.cells_[i]);
    total_ = detail::sat_add(total_, other.total_);
    return *this;
}

template <class Counter>
inline auto CountMin<Counter>::serialize() const -> std::vector<std::byte> {
    ByteWriter out(36 + cells_.size() * sizeof(Counter));
    out.header(Family::count_min, format_version);
    out.u8(static_cast<std::uint8_t>(sizeof(Counter)));
    out.u8(conservative_ ? 1 : 0);
    out.u16(static_cast<std::uint16_t>(depth_));
    out.u64(width_);
    out.u64(seed_.value);
    out.u64(total_);
    if constexpr (std::endian::native == std::endian::little) {
        out.bytes(cells_.data(), cells_.size() * sizeof(Counter));
    } else {
        for (const Counter c : cells_) {
            if constexpr (sizeof(Counter) == 4) {
                out.u32(c);
            } else {
                out.u64(c);
            }
        }
    }
    return out.take();
}

template <class Counter>
inline auto CountMin<Counter>::deserialize(std::span<const std::byte> bytes) -> CountMin {
    ByteReader in(bytes);
    if (in.header(Family::count_min, format_version) == 1)
        detail::throw_format_error(
            "tally: CountMin: format version 1 (double-hashed rows) is no longer read; rebuild the sketch from "
            "its stream");
    const std::uint8_t counter_bytes = in.u8();
    if (counter_bytes != sizeof(Counter))
        detail::throw_format_error("tally: CountMin: counters of " + std::to_string(counter_bytes) +
                                   " bytes where " + std::to_string(sizeof(Counter)) + " were expected");
    const std::uint8_t flags = in.u8();
    format_check((flags & ~1u) == 0, "CountMin: unknown flag bits");
    const std::uint16_t depth = in.u16();
    format_check(depth >= 1 && depth <= max_depth, "CountMin: depth out of range [1, 32]");
    const std::uint64_t width = in.u64();
    format_check(width >= 1 && width <= max_width, "CountMin: width out of range [1, 2^31]");
    const std::uint64_t seed = in.u64();
    const std::uint64_t total = in.u64();
    in.count(width * depth, sizeof(Counter), max_width * max_depth, "CountMin counter");
    CountMin cm(static_cast<std::size_t>(width), depth, CountMinOptions{Seed{seed}, (flags & 1u) != 0});
    cm.total_ = total;
    for (std::size_t r = 0; r < depth; ++r) {
        Counter* row = cm.cells_.data() + r * width;
        std::uint64_t sum = 0;
        bool over = false;
        for (std::size_t j = 0; j < width; ++j) {
            Counter c;
            if constexpr (sizeof(Counter) == 4) {
                c = in.u32();
            } else {
                c = in.u64();
            }
            row[j] = c;
            over |= c > total - sum;  // sum + c > total, without overflow
            sum += over ? 0 : c;
        }
        format_check(!over, "CountMin: a row sums to more than total");
    }
    in.expect_end();
    return cm;
}

TALLY_END_NAMESPACE
