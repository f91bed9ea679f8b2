// tally/sketch/count_min.hpp: the Count-Min sketch (frequencies with one-sided error).
//
// CountMin<Counter> answers "how often did this item appear?" in fixed memory.
// Estimates never fall below the truth; the excess is additive, so the
// sketch is accurate for the head of a distribution and meaningless for its
// tail. Optional conservative update (Estan & Varghese 2002) tightens it.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numbers>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/hash.hpp"
#include "../core/platform.hpp"
#include "../core/serialize.hpp"
#include "../detail/throw.hpp"

namespace tally {

/// Construction options of CountMin (designated initialisers read well:
/// `CountMin<>(2048, 4, {.conservative = true})`).
struct CountMinOptions {
    /// Selects the hash function: sketches merge only with equal seeds, and
    /// different seeds make collisions independent between sketches.
    std::uint64_t seed = 0;
    /// Conservative update (Estan & Varghese 2002): raise only the counters
    /// that are below the new estimate. Never worse, usually much better, but
    /// it forbids decrements (which tally does not offer in either mode).
    bool conservative = false;
};

/// Count-Min sketch (Cormode & Muthukrishnan, "An improved data stream
/// summary: the count-min sketch and its applications", J. Algorithms 55(1),
/// 2005), cash-register model: counts are non-negative, nothing is removed.
///
/// Layout: `depth` rows of `width` counters. add() raises one counter per
/// row; estimate() is the minimum over the item's counters, each of which
/// holds the item's own count plus whatever else collided there.
///
/// Guarantee, with N = total() (sum of all counts added) and f(x) the true
/// count of x:
///     f(x) <= estimate(x)                                   always
///     estimate(x) <= f(x) + epsilon * N,  epsilon = e / width,
///         with probability >= 1 - delta, delta = e^-depth (per query).
/// `with_error(epsilon, delta)` sizes width = ceil(e / epsilon) and
/// depth = ceil(ln(1 / delta)). Counters saturate at Counter's maximum
/// instead of wrapping: a saturated counter still bounds every count below
/// that maximum, so estimate(x) >= min(f(x), max Counter) always holds.
///
/// Conservative update: on add(x, c) the new estimate v = min + c is written
/// only into the item's counters that are below v. Each counter still bounds
/// the count of every item mapped to it, so the lower bound is unchanged and
/// estimates are never above those of the standard update on the same stream
/// (tests check this key by key). It cannot support decrements: counters no
/// longer hold sums, so nothing can be subtracted. Merging conservative
/// sketches sums them; the sum still bounds every item's count from above and
/// stays below the standard sketch of the union (so the epsilon * N bound
/// holds), but it loses the extra tightness conservative update gave each
/// input, and conservative updates after a merge remain correct.
///
/// Hashing: one 64-bit hash per item (tally::Hasher<T>, remixed with SplitMix64
/// when seed != 0). Row i's column is fastrange32(h1 + i * h2) with h1, h2 the
/// low and high 32-bit halves (Kirsch & Mitzenmacher, "Less hashing, same
/// performance: building a better Bloom filter", Random Structures &
/// Algorithms 33(2), 2008) and fastrange32(g) = (g * width) >> 32 (Lemire
/// 2019), which honours any width exactly, not just powers of two, at the cost
/// of one multiply (no division). Why that is enough: the Count-Min bound
/// needs, per row, that two distinct items collide with probability ~1/width
/// (pairwise independence) so that Markov's inequality gives P[row error >
/// epsilon N] <= 1/e; with h1, h2 independent and uniform (hash64 modelled as
/// a random function), g_i(x) is uniform and independent of g_i(y), so each
/// row meets that exactly, up to fastrange rounding of at most width / 2^32.
/// Across rows double hashing is only pairwise independent (two items whose
/// h1 and h2 both nearly agree collide in every row, probability ~depth /
/// width^2 per pair instead of width^-depth); Kirsch & Mitzenmacher show this
/// costs nothing asymptotically for Bloom filters, and the tests check the
/// 1 - delta fraction empirically. A per-row full hash would cost depth hashes
/// per add for no measurable gain.
///
/// Memory: width * depth * sizeof(Counter) bytes plus the 64-byte object
/// (with_error(0.001, 0.01): 2719 x 5 x 4 B = 54 KB).
///
/// Thread safety: const methods (estimate, total, serialize, accessors) are
/// safe to call concurrently; add, add_hash, merge, clear and assignment need
/// exclusive access. For parallel ingest keep one sketch per thread and merge.
///
/// Example:
///     auto cm = tally::CountMin<>::with_error(0.001, 0.01);
///     cm.add("GET /index.html");
///     cm.add(std::string("GET /index.html"), 3);
///     std::uint64_t n = cm.estimate("GET /index.html");   // >= 4
///
/// Serialized format (Family::count_min, version 1), little-endian:
///
///   offset  size             field
///   0       8                frame header ("TALY", family 3, version 1, 0, 0)
///   8       1                counter bytes: 4 or 8 (must equal sizeof(Counter))
///   9       1                flags: bit 0 = conservative; other bits zero
///   10      2                depth, in [1, max_depth]
///   12      8                width, in [1, max_width]
///   20      8                seed
///   28      8                total (N)
///   36      W*D*counter      counters, row-major (row 0 first), each LE
///
/// deserialize() also checks that every row sums to at most total (true of
/// every sketch this class can produce), so corrupted counters are refused.
template <class Counter = std::uint32_t>
class CountMin {
    static_assert(std::same_as<Counter, std::uint32_t> || std::same_as<Counter, std::uint64_t>,
                  "tally::CountMin: Counter must be std::uint32_t or std::uint64_t");

  public:
    using counter_type = Counter;
    static constexpr std::size_t max_depth = 32;                       // delta = e^-32 ~ 1.3e-14
    static constexpr std::uint64_t max_width = std::uint64_t{1} << 31;  // fastrange32 needs <= 2^32
    static constexpr std::uint8_t format_version = 1;

    /// width counters per row, depth rows. Throws std::invalid_argument for
    /// width outside [1, 2^31] or depth outside [1, 32].
    CountMin(std::size_t width, std::size_t depth, CountMinOptions options = {})
        : width_(checked_width(width)), depth_(checked_depth(depth)), seed_(options.seed),
          conservative_(options.conservative), cells_(width_ * depth_, Counter{0}) {}

    /// Sized for estimate(x) <= f(x) + epsilon * N with probability >= 1 - delta:
    /// width = ceil(e / epsilon), depth = ceil(ln(1 / delta)). Throws
    /// std::invalid_argument for epsilon or delta outside (0, 1), or when the
    /// resulting width or depth exceeds its maximum.
    [[nodiscard]] static CountMin with_error(double epsilon, double delta, CountMinOptions options = {}) {
        if (!(epsilon > 0.0 && epsilon < 1.0))
            detail::throw_invalid_argument("tally::CountMin: epsilon " + num(epsilon) +
                                           " is out of range (0, 1)");
        if (!(delta > 0.0 && delta < 1.0))
            detail::throw_invalid_argument("tally::CountMin: delta " + num(delta) + " is out of range (0, 1)");
        const double w = std::ceil(std::numbers::e / epsilon);
        const double d = std::ceil(std::log(1.0 / delta));
        if (!(w <= static_cast<double>(max_width)))
            detail::throw_invalid_argument("tally::CountMin: width " + num(w) + " (from epsilon " + num(epsilon) +
                                           ") is out of range [1, " + std::to_string(max_width) + "]");
        if (!(d <= static_cast<double>(max_depth)))
            detail::throw_invalid_argument("tally::CountMin: depth " + num(d) + " (from delta " + num(delta) +
                                           ") is out of range [1, " + std::to_string(max_depth) + "]");
        return CountMin(static_cast<std::size_t>(w), std::max<std::size_t>(1, static_cast<std::size_t>(d)),
                        options);
    }

    // ---- updates (exclusive access) ----------------------------------------

    /// Adds `count` occurrences of `item` (hashed with tally::Hasher).
    template <class T>
        requires Hashable<std::decay_t<T>> || std::is_convertible_v<const T&, const char*>
    void add(const T& item, std::uint64_t count = 1) noexcept {
        add_hash(hash_of(item), count);
    }

    /// Adds by a precomputed item hash (the Hasher<T> output; the seed is
    /// applied here, so add(x) == add_hash(hash_of(x))).
    TALLY_ALWAYS_INLINE void add_hash(std::uint64_t hash, std::uint64_t count = 1) noexcept {
        const std::uint64_t h = seeded(hash);
        if (TALLY_LIKELY(!conservative_)) {
            // The usual depths get a fully unrolled body (no loop counter,
            // independent rows the CPU overlaps); any other depth loops.
            switch (depth_) {
                case 4: add_rows<4>(h, count, depth_); break;
                case 5: add_rows<5>(h, count, depth_); break;
                case 3: add_rows<3>(h, count, depth_); break;
                default: add_rows<0>(h, count, depth_); break;
            }
        } else {
            add_conservative(h, count);
        }
        total_ = count > std::numeric_limits<std::uint64_t>::max() - total_ ? std::numeric_limits<std::uint64_t>::max()
                                                                            : total_ + count;
    }

    /// Forgets everything; keeps the shape and options.
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
        const std::uint64_t h = seeded(hash);
        std::uint32_t g = static_cast<std::uint32_t>(h);
        const std::uint32_t step = static_cast<std::uint32_t>(h >> 32);
        const std::uint64_t w = width_;
        const Counter* row = cells_.data();
        Counter low = std::numeric_limits<Counter>::max();
        for (std::size_t i = 0; i < depth_; ++i, row += w, g += step) low = std::min(low, row[column(g, w)]);
        return low;
    }

    /// N: the sum of every count added (and merged), saturating at 2^64 - 1.
    [[nodiscard]] std::uint64_t total() const noexcept { return total_; }
    [[nodiscard]] std::size_t width() const noexcept { return width_; }
    [[nodiscard]] std::size_t depth() const noexcept { return depth_; }
    [[nodiscard]] std::uint64_t seed() const noexcept { return seed_; }
    [[nodiscard]] bool conservative() const noexcept { return conservative_; }
    /// e / width: the additive error per unit of total().
    [[nodiscard]] double epsilon() const noexcept { return std::numbers::e / static_cast<double>(width_); }
    /// e^-depth: the probability that one estimate exceeds its bound.
    [[nodiscard]] double delta() const noexcept { return std::exp(-static_cast<double>(depth_)); }
    /// epsilon() * total(): the additive error bound of every estimate now.
    [[nodiscard]] double error_bound() const noexcept { return epsilon() * static_cast<double>(total_); }
    [[nodiscard]] std::size_t memory_bytes() const noexcept { return sizeof(*this) + cells_.size() * sizeof(Counter); }
    /// Row-major counters (depth rows of width), for inspection.
    [[nodiscard]] std::span<const Counter> counters() const noexcept { return cells_; }

    // ---- merge and serialization --------------------------------------------

    /// Same width, depth, seed and update mode (and, by type, Counter).
    [[nodiscard]] bool mergeable_with(const CountMin& other) const noexcept {
        return width_ == other.width_ && depth_ == other.depth_ && seed_ == other.seed_ &&
               conservative_ == other.conservative_;
    }

    /// Adds `other` counter by counter (saturating). Throws std::invalid_argument
    /// naming the mismatch, leaving *this unchanged, unless mergeable_with(other).
    CountMin& merge(const CountMin& other) {
        if (width_ != other.width_ || depth_ != other.depth_)
            detail::throw_invalid_argument("tally::CountMin::merge: shape mismatch (width " + std::to_string(width_) +
                                           " x depth " + std::to_string(depth_) + " vs width " +
                                           std::to_string(other.width_) + " x depth " +
                                           std::to_string(other.depth_) + ")");
        if (seed_ != other.seed_)
            detail::throw_invalid_argument("tally::CountMin::merge: seed mismatch (" + std::to_string(seed_) +
                                           " vs " + std::to_string(other.seed_) + ")");
        if (conservative_ != other.conservative_)
            detail::throw_invalid_argument(std::string("tally::CountMin::merge: update mode mismatch (") +
                                           mode_name(conservative_) + " vs " + mode_name(other.conservative_) + ")");
        for (std::size_t i = 0; i < cells_.size(); ++i) sat_add(cells_[i], other.cells_[i]);
        total_ = other.total_ > std::numeric_limits<std::uint64_t>::max() - total_
                     ? std::numeric_limits<std::uint64_t>::max()
                     : total_ + other.total_;
        return *this;
    }

    [[nodiscard]] std::vector<std::byte> serialize() const {
        ByteWriter out(36 + cells_.size() * sizeof(Counter));
        out.header(Family::count_min, format_version);
        out.u8(static_cast<std::uint8_t>(sizeof(Counter)));
        out.u8(conservative_ ? 1 : 0);
        out.u16(static_cast<std::uint16_t>(depth_));
        out.u64(width_);
        out.u64(seed_);
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

    /// Throws tally::FormatError for anything but a valid encoding of a
    /// CountMin<Counter>; never reads past `bytes`, never allocates more than
    /// the input's counters need.
    [[nodiscard]] static CountMin deserialize(std::span<const std::byte> bytes) {
        ByteReader in(bytes);
        in.header(Family::count_min, format_version);
        const std::uint8_t counter_bytes = in.u8();
        if (counter_bytes != sizeof(Counter))
            detail::throw_format_error("tally::CountMin: counters of " + std::to_string(counter_bytes) +
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
        CountMin cm(static_cast<std::size_t>(width), depth, CountMinOptions{seed, (flags & 1u) != 0});
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

  private:
    static std::string num(double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", v);
        return buf;
    }
    static const char* mode_name(bool conservative) noexcept { return conservative ? "conservative" : "standard"; }

    static std::size_t checked_width(std::size_t width) {
        if (width < 1 || width > max_width)
            detail::throw_invalid_argument("tally::CountMin: width " + std::to_string(width) +
                                           " is out of range [1, " + std::to_string(max_width) + "]");
        return width;
    }
    static std::size_t checked_depth(std::size_t depth) {
        if (depth < 1 || depth > max_depth)
            detail::throw_invalid_argument("tally::CountMin: depth " + std::to_string(depth) +
                                           " is out of range [1, " + std::to_string(max_depth) + "]");
        return depth;
    }

    template <std::size_t D>  // D = 0: depth known at run time only
    TALLY_ALWAYS_INLINE void add_rows(std::uint64_t h, std::uint64_t count, std::size_t depth) noexcept {
        std::uint32_t g = static_cast<std::uint32_t>(h);
        const std::uint32_t step = static_cast<std::uint32_t>(h >> 32);
        const std::uint64_t w = width_;
        Counter* row = cells_.data();
        const std::size_t d = D == 0 ? depth : D;
        const Counter c = clamp(count);
        for (std::size_t i = 0; i < d; ++i, row += w, g += step) sat_add(row[column(g, w)], c);
    }

    void add_conservative(std::uint64_t h, std::uint64_t count) noexcept {
        std::uint32_t g = static_cast<std::uint32_t>(h);
        const std::uint32_t step = static_cast<std::uint32_t>(h >> 32);
        const std::uint64_t w = width_;
        Counter* row = cells_.data();
        Counter* cell[max_depth];
        Counter low = std::numeric_limits<Counter>::max();
        for (std::size_t i = 0; i < depth_; ++i, row += w, g += step) {
            cell[i] = row + column(g, w);
            low = std::min(low, *cell[i]);
        }
        sat_add(low, clamp(count));
        for (std::size_t i = 0; i < depth_; ++i) *cell[i] = std::max(*cell[i], low);
    }

    TALLY_ALWAYS_INLINE std::uint64_t seeded(std::uint64_t hash) const noexcept {
        // Seed 0 keeps the Hasher output as is (already well mixed); any other
        // seed remixes it so that collisions, not just positions, change.
        return seed_ == 0 ? hash : detail::mix64(hash ^ seed_);
    }
    static TALLY_ALWAYS_INLINE std::size_t column(std::uint32_t g, std::uint64_t width) noexcept {
        return static_cast<std::size_t>((static_cast<std::uint64_t>(g) * width) >> 32);
    }
    // Counts wider than Counter clamp once per add; a row then costs
    // add + carry-select, no 64-bit detour.
    static TALLY_ALWAYS_INLINE Counter clamp(std::uint64_t c) noexcept {
        return c > std::numeric_limits<Counter>::max() ? std::numeric_limits<Counter>::max() : static_cast<Counter>(c);
    }
    static TALLY_ALWAYS_INLINE void sat_add(Counter& cell, Counter c) noexcept {
        Counter r;
        cell = __builtin_add_overflow(cell, c, &r) ? std::numeric_limits<Counter>::max() : r;
    }

    std::size_t width_;
    std::size_t depth_;
    std::uint64_t seed_;
    bool conservative_;
    std::uint64_t total_ = 0;
    std::vector<Counter> cells_;
};

}  // namespace tally
