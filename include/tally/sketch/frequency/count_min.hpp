// tally/sketch/frequency/count_min.hpp: the Count-Min sketch (frequencies with one-sided error).
// Usage, proofs, measured tables and the wire format: docs/count_min.md.
#pragma once

#include "../../detail/abi.hpp"

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

#include "../../core/hash.hpp"
#include "../../core/platform.hpp"
#include "../../core/seed.hpp"
#include "../../core/serialize.hpp"
#include "../../detail/primitives.hpp"
#include "../../detail/throw.hpp"

TALLY_BEGIN_NAMESPACE

/// Construction options of CountMin: `CountMin<>(2048, 4, {.conservative = true})`.
struct CountMinOptions {
    /// Draws the row hash functions. Sketches merge only with equal seeds; take
    /// Seed::random() when an adversary chooses the items.
    Seed seed{};
    /// Conservative update (Estan & Varghese 2002): raise only the counters
    /// below the new estimate. Never worse, usually much better.
    bool conservative = false;
};

/// Count-Min sketch (Cormode & Muthukrishnan, J. Algorithms 55(1), 2005),
/// cash-register model: `depth` rows of `width` counters; add() raises one
/// counter per row, estimate() is the minimum of the item's counters.
///
/// Guarantee, with N = total() and f(x) the true count of x:
///     f(x) <= estimate(x)                                    always
///     estimate(x) <= f(x) + epsilon N, epsilon = e / width,  with probability
///                                     >= 1 - delta, delta = e^-depth
/// Row i maps the item's 64-bit hash h to ((a_i h + b_i) mod 2^64) * width / 2^64
/// with (a_i odd, b_i) drawn per row from the seed: multiply-add-shift
/// (Dietzfelbinger et al. 1997; Thorup 2015), so two items share a column
/// with probability <= 1/width in each row, independently across rows.
/// Counters saturate at Counter's maximum instead of wrapping.
///
/// Cost: add and estimate O(depth), one hash per item. Memory:
/// width * depth * sizeof(Counter) bytes plus the object (~0.6 KB).
/// Thread safety: const methods may run concurrently; add, merge, clear and
/// assignment need exclusive access (one sketch per thread, then merge).
///
///     auto cm = tally::CountMin<>::with_error(0.001, 0.01);
///     cm.add("GET /index.html", 3);
///     std::uint64_t n = cm.estimate("GET /index.html");   // >= 3
template <class Counter = std::uint32_t>
class CountMin {
    static_assert(std::same_as<Counter, std::uint32_t> || std::same_as<Counter, std::uint64_t>,
                  "tally::CountMin: Counter must be std::uint32_t or std::uint64_t");

  public:
    using counter_type = Counter;
    static constexpr std::size_t max_depth = 32;                        // delta = e^-32 ~ 1.3e-14
    static constexpr std::uint64_t max_width = std::uint64_t{1} << 31;  // 2^36 counters at most
    /// Version 2: rows hashed by multiply-add-shift. Version 1 (double
    /// hashing, rows not independent) is refused by deserialize().
    static constexpr std::uint8_t format_version = 2;

    /// width counters per row, depth rows. Throws std::invalid_argument for
    /// width outside [1, 2^31] or depth outside [1, 32].
    CountMin(std::size_t width, std::size_t depth, CountMinOptions options = {})
        : width_(checked_width(width)), depth_(checked_depth(depth)), seed_(options.seed),
          conservative_(options.conservative), cells_(checked_cells(width_, depth_), Counter{0}) {
        draw_rows();
    }
    CountMin(std::size_t width, std::size_t depth, Seed seed) : CountMin(width, depth, CountMinOptions{seed, false}) {}

    /// Sized for estimate(x) <= f(x) + epsilon * N with probability >= 1 - delta:
    /// width = ceil(e / epsilon), depth = ceil(ln(1 / delta)). Throws
    /// std::invalid_argument for epsilon outside [e / 2^31, 1) or delta
    /// outside [e^-32, 1) (the widths and depths that exist).
    [[nodiscard]] static CountMin with_error(double epsilon, double delta, CountMinOptions options = {});
    [[nodiscard]] static CountMin with_error(double epsilon, double delta, Seed seed) {
        return with_error(epsilon, delta, CountMinOptions{seed, false});
    }

    // ---- updates (exclusive access) ----------------------------------------

    /// Adds `count` occurrences of `item` (hashed with tally::Hasher).
    template <class T>
        requires Hashable<std::decay_t<T>> || std::is_convertible_v<const T&, const char*>
    void add(const T& item, std::uint64_t count = 1) noexcept {
        add_hash(hash_of(item), count);
    }

    /// Adds by a precomputed item hash (the Hasher<T> output), so
    /// add(x) == add_hash(hash_of(x)).
    TALLY_ALWAYS_INLINE void add_hash(std::uint64_t hash, std::uint64_t count = 1) noexcept;

    /// Forgets every count; keeps the shape, seed and update mode.
    void clear() noexcept {
        std::fill(cells_.begin(), cells_.end(), Counter{0});
        total_ = 0;
    }

    // ---- queries (thread-safe against each other) --------------------------

    /// Never below the true count (below min(f, Counter max) once saturated);
    /// above it by at most epsilon() * total() with probability 1 - delta().
    template <class T>
        requires Hashable<std::decay_t<T>> || std::is_convertible_v<const T&, const char*>
    [[nodiscard]] std::uint64_t estimate(const T& item) const noexcept {
        return estimate_hash(hash_of(item));
    }

    [[nodiscard]] std::uint64_t estimate_hash(std::uint64_t hash) const noexcept {
        const std::uint64_t w = width_;
        const Counter* row = cells_.data();
        Counter low = std::numeric_limits<Counter>::max();
        for (std::size_t i = 0; i < depth_; ++i, row += w) low = std::min(low, row[column(i, hash, w)]);
        return low;
    }

    /// N: the sum of every count added (and merged), saturating at 2^64 - 1.
    [[nodiscard]] std::uint64_t total() const noexcept { return total_; }
    /// True when nothing was counted (total() == 0, every counter zero).
    [[nodiscard]] bool empty() const noexcept { return total_ == 0; }
    [[nodiscard]] std::size_t width() const noexcept { return width_; }
    [[nodiscard]] std::size_t depth() const noexcept { return depth_; }
    [[nodiscard]] Seed seed() const noexcept { return seed_; }
    [[nodiscard]] bool conservative() const noexcept { return conservative_; }
    /// e / width: the additive error per unit of total().
    [[nodiscard]] double epsilon() const noexcept { return std::numbers::e / static_cast<double>(width_); }
    /// e^-depth: the probability that one estimate exceeds its bound.
    [[nodiscard]] double delta() const noexcept { return std::exp(-static_cast<double>(depth_)); }
    /// epsilon() * total(): the additive error bound of every estimate now.
    [[nodiscard]] double error_bound() const noexcept { return epsilon() * static_cast<double>(total_); }
    [[nodiscard]] std::size_t memory_bytes() const noexcept { return sizeof(*this) + cells_.size() * sizeof(Counter); }
    /// Row-major counters (depth rows of width), for inspection.
    [[nodiscard]] std::span<const Counter> counts() const noexcept { return cells_; }
    /// The column of row `row` (< depth()) that an item of hash `hash` maps to.
    [[nodiscard]] std::size_t column_of(std::size_t row, std::uint64_t hash) const noexcept {
        return row < depth_ ? column(row, hash, width_) : 0;
    }

    // ---- merge and serialization --------------------------------------------

    /// Same width, depth, seed and update mode (and, by type, Counter).
    [[nodiscard]] bool mergeable_with(const CountMin& other) const noexcept {
        return width_ == other.width_ && depth_ == other.depth_ && seed_ == other.seed_ &&
               conservative_ == other.conservative_;
    }

    /// Adds `other` counter by counter (saturating). Throws std::invalid_argument
    /// naming the mismatch, leaving *this unchanged, unless mergeable_with(other).
    CountMin& merge(const CountMin& other);

    [[nodiscard]] std::vector<std::byte> serialize() const;

    /// Throws tally::FormatError for anything but a valid version-2 encoding
    /// of a CountMin<Counter>, and for version-1 bytes (their columns came
    /// from a hash scheme this version no longer computes); never reads past
    /// `bytes`, never allocates more than the input's counters need.
    [[nodiscard]] static CountMin deserialize(std::span<const std::byte> bytes);

  private:
    static const char* mode_name(bool conservative) noexcept { return conservative ? "conservative" : "standard"; }
    static double min_epsilon() noexcept { return std::numbers::e / static_cast<double>(max_width); }
    static double min_delta() noexcept { return std::exp(-static_cast<double>(max_depth)); }

    static std::size_t checked_width(std::size_t width) {
        detail::check_range("tally::CountMin::CountMin", "width", width, std::size_t{1},
                            static_cast<std::size_t>(std::min<std::uint64_t>(max_width, SIZE_MAX)));
        return width;
    }
    static std::size_t checked_depth(std::size_t depth) {
        detail::check_range("tally::CountMin::CountMin", "depth", depth, std::size_t{1}, max_depth);
        return depth;
    }
    // width * depth counters must be addressable: checked by division, before
    // the product is formed (it wraps a 32-bit size_t).
    static std::size_t checked_cells(std::size_t width, std::size_t depth) {
        const std::size_t max_cells = static_cast<std::size_t>(PTRDIFF_MAX) / sizeof(Counter);
        if (width > max_cells / depth)
            detail::throw_invalid_argument("tally::CountMin::CountMin: width " + std::to_string(width) +
                                           " x depth " + std::to_string(depth) + " exceeds " +
                                           std::to_string(max_cells) + " counters");
        return width * depth;
    }

    // Row i's hash function: multiply-add-shift. (a_i odd, b_i) come from a
    // SplitMix64 stream started at the seed, so equal seeds mean equal rows.
    void draw_rows() noexcept {
        constexpr std::uint64_t golden = 0x9e3779b97f4a7c15ull;
        for (std::size_t i = 0; i < max_depth; ++i) {
            mul_[i] = detail::mix64(seed_.value + (2 * i) * golden) | 1;
            add_[i] = detail::mix64(seed_.value + (2 * i + 1) * golden);
        }
    }

    template <std::size_t D>  // D = 0: depth known at run time only
    TALLY_ALWAYS_INLINE void add_rows(std::uint64_t h, std::uint64_t count) noexcept {
        const std::uint64_t w = width_;
        Counter* row = cells_.data();
        const std::size_t d = D == 0 ? depth_ : D;
        const Counter c = clamp(count);
        // No counter exceeds total(), so while total() + c fits in Counter no
        // counter can overflow: one test per add instead of one per row.
        if (TALLY_LIKELY(total_ <= std::numeric_limits<Counter>::max() - c)) {
            for (std::size_t i = 0; i < d; ++i, row += w) row[column(i, h, w)] += c;
        } else {
            for (std::size_t i = 0; i < d; ++i, row += w) {
                Counter& cell = row[column(i, h, w)];
                cell = detail::sat_add(cell, c);
            }
        }
    }

    void add_conservative(std::uint64_t h, std::uint64_t count) noexcept {
        const std::uint64_t w = width_;
        Counter* row = cells_.data();
        Counter* cell[max_depth];
        Counter low = std::numeric_limits<Counter>::max();
        for (std::size_t i = 0; i < depth_; ++i, row += w) {
            cell[i] = row + column(i, h, w);
            low = std::min(low, *cell[i]);
        }
        low = detail::sat_add(low, clamp(count));
        for (std::size_t i = 0; i < depth_; ++i) *cell[i] = std::max(*cell[i], low);
    }

    // ((a h + b) mod 2^64) scaled onto [0, width) by the high half of a
    // 64 x 64 product (Lemire's reduction): any width, no division.
    TALLY_ALWAYS_INLINE std::size_t column(std::size_t i, std::uint64_t h, std::uint64_t width) const noexcept {
        const std::uint64_t g = mul_[i] * h + add_[i];
        return static_cast<std::size_t>((static_cast<detail::uint128>(g) * width) >> 64);
    }
    // Counts wider than Counter clamp once per add; a row then costs
    // add + carry-select, no 64-bit detour.
    static TALLY_ALWAYS_INLINE Counter clamp(std::uint64_t c) noexcept {
        return c > std::numeric_limits<Counter>::max() ? std::numeric_limits<Counter>::max() : static_cast<Counter>(c);
    }

    std::size_t width_;
    std::size_t depth_;
    Seed seed_;
    bool conservative_;
    std::uint64_t total_ = 0;
    std::vector<Counter> cells_;
    std::array<std::uint64_t, max_depth> mul_{};
    std::array<std::uint64_t, max_depth> add_{};
};

TALLY_END_NAMESPACE

#include "detail/count_min_impl.hpp"
