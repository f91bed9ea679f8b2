// tally/sketch/distinct/theta.hpp: ThetaSketch, distinct counting with set algebra
// (union, intersection, difference) in the hash and bytes of Apache
// DataSketches' theta sketches.
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../../core/platform.hpp"
#include "../../core/serialize.hpp"
#include "../../detail/primitives.hpp"
#include "../../detail/throw.hpp"
#include "detail/datasketches_hash.hpp"
#include "detail/theta_bounds.hpp"
#include "detail/theta_datasketches.hpp"
#include "detail/theta_table.hpp"

TALLY_BEGIN_NAMESPACE

namespace detail {
struct ThetaAccess;
}

/// A theta sketch: the distinct-count sketch of the theta sketch framework
/// (Dasgupta, Lang, Rhodes, Thaler, "A Framework for Estimating Stream
/// Expression Cardinalities", ICDT 2016), as Apache DataSketches' update
/// sketch (KMV / QuickSelect) builds it. Items hash to 63-bit values
/// (MurmurHash3_x64_128, seed 9001, h1 >> 1, DataSketches' item bytes); the
/// sketch keeps every hash below a threshold theta, and at least the k = 2^lg_k
/// smallest: when 15/16 of its 2k-slot table is used, it keeps the k smallest
/// and theta becomes the next one.
/// Unlike HyperLogLog, sketches intersect and subtract: theta_union,
/// theta_intersection and theta_a_not_b return sketches (theta = the least
/// of the inputs', the hashes below it that the expression keeps), and
/// DataSketches reads and writes their bytes (to_datasketches,
/// from_datasketches), so tally sketches combine with Java, C++, Python,
/// Druid and Hive sketches of the same items.
/// Error: estimate() = num_retained() / theta(); its relative standard error is
/// about 1 / sqrt(k - 1) for a sketch and for a union. An intersection or
/// difference of size m out of a union of size u keeps about k * m / u hashes,
/// so its relative error is about sqrt(u / m) / sqrt(k): small overlaps are
/// estimated poorly (docs/theta.md). lower_bound(s) / upper_bound(s) are
/// DataSketches' binomial bounds for s = 1, 2, 3 standard deviations
/// (about 68%, 95%, 99.7%); they apply to set-operation results too.
/// Memory: 8 bytes per slot, 2^5..2^(lg_k+1) slots as the sketch grows (64 KiB
/// at lg_k = 12). Thread safety: const members run concurrently; add, merge, clear alone.
///
///     tally::ThetaSketch yesterday(12), today(12);
///     for (auto id : yesterday_ids) yesterday.add(id);  // today likewise
///     const auto churned = tally::theta_a_not_b(yesterday, today);
///     double lost = churned.estimate(), hi = churned.upper_bound(2);
class ThetaSketch {
  public:
    static constexpr int min_lg_k = detail::theta_min_lg_k;
    static constexpr int max_lg_k = detail::theta_max_lg_k;
    static constexpr std::uint8_t format_version = 1;  // of the Family::theta frame
    static constexpr int default_lg_k = 12;
    /// theta as a 64-bit integer is a fraction of 2^63 - 1 (DataSketches' MAX_THETA).
    static constexpr std::uint64_t max_theta = detail::theta_max;
    /// DataSketches' default seed and its 16-bit seed hash, written in every image.
    static constexpr std::uint64_t seed = detail::ds_default_seed;
    static constexpr std::uint16_t seed_hash = detail::ds_theta_seed_hash;

    /// Nominal entries k = 2^lg_k, lg_k in [5, 26] (else std::invalid_argument).
    explicit ThetaSketch(int lg_k = default_lg_k);

    /// Counts `item`, hashed as DataSketches' update(item): integers as 8
    /// little-endian bytes of their signed value, doubles canonicalised
    /// (-0.0 as 0.0, one NaN), strings and byte spans as bytes; empty strings
    /// and null pointers are ignored (as DataSketches ignores them).
    template <class T>
    void add(const T& item) noexcept;
    /// Counts an item whose MurmurHash3_x64_128 (seed 9001) first half is
    /// `h1`: the sketch keeps h1 >> 1, so add_hash(h1) is add(item).
    void add_hash(std::uint64_t h1) noexcept;

    /// Estimated distinct items: num_retained() / theta(); 0 when empty.
    [[nodiscard]] double estimate() const noexcept;
    /// DataSketches' binomial bounds at num_std_devs in [1, 3] (else
    /// std::invalid_argument); both are num_retained() outside estimation mode.
    [[nodiscard]] double lower_bound(int num_std_devs) const;
    [[nodiscard]] double upper_bound(int num_std_devs) const;
    /// The sampling threshold as a fraction in (0, 1], and as DataSketches' integer.
    [[nodiscard]] double theta() const noexcept;
    [[nodiscard]] std::uint64_t theta64() const noexcept { return theta_; }
    /// Hashes retained (below theta).
    [[nodiscard]] std::uint32_t num_retained() const noexcept { return count_; }
    /// theta < 1 and not empty: the estimate is a sample's, not an exact count.
    [[nodiscard]] bool is_estimation_mode() const noexcept { return theta_ < max_theta && !empty(); }
    [[nodiscard]] int lg_k() const noexcept { return lg_k_; }
    /// The retained 63-bit hashes in ascending order.
    [[nodiscard]] std::vector<std::uint64_t> hashes() const;
    /// Whether the 63-bit hash `h` (as hashes() lists them) is retained.
    [[nodiscard]] bool contains_hash(std::uint64_t h) const noexcept;

    /// Union in place (the framework's rule: theta = min of both, the hashes
    /// below it, trimmed to the k smallest). Needs the same lg_k (else
    /// std::invalid_argument, *this unchanged); theta_union takes any lg_k.
    /// Merging an empty sketch changes nothing; merging into an empty one copies.
    ThetaSketch& merge(const ThetaSketch& other);
    [[nodiscard]] bool mergeable_with(const ThetaSketch& other) const noexcept { return lg_k_ == other.lg_k_; }

    /// add calls that counted an item, summed over merges and unions
    /// (intersections and differences carry their first input's); 0 for a
    /// sketch read from DataSketches bytes, which do not record it.
    [[nodiscard]] std::uint64_t total() const noexcept { return total_; }
    /// No item was ever counted (DataSketches' is_empty()).
    [[nodiscard]] bool empty() const noexcept { return !nonempty_ && total_ == 0; }
    /// Back to a new sketch of the same lg_k.
    void clear() noexcept;
    [[nodiscard]] std::size_t memory_bytes() const noexcept {
        return sizeof(*this) + (slots_.capacity() + sorted_.capacity()) * sizeof(std::uint64_t);
    }

    /// The tally frame (Family::theta, version 1); layout after the class.
    [[nodiscard]] std::vector<std::byte> serialize() const;
    /// Reads serialize() bytes; tally::FormatError for anything else.
    [[nodiscard]] static ThetaSketch deserialize(std::span<const std::byte> bytes);

    /// DataSketches' compact ordered image: serial version 3, or version 4
    /// (delta bit-packed) when `compressed` and DataSketches would compress.
    /// Layout in sketch/detail/theta_datasketches.hpp.
    [[nodiscard]] std::vector<std::byte> to_datasketches(bool compressed = false) const;
    /// Reads a compact theta image of serial version 1-4 (Java, C++, Python,
    /// Druid). Checks the sketch type, the seed hash (seed 9001) and every
    /// length, and that each hash lies below theta once (tally::FormatError).
    /// The sketch gets lg_k (raised, up to 26, until it holds the image's
    /// hashes); estimates and bounds equal DataSketches' for the same bytes.
    [[nodiscard]] static ThetaSketch from_datasketches(std::span<const std::byte> bytes, int lg_k = default_lg_k);

  private:
    friend struct detail::ThetaAccess;
    void offer(std::uint64_t h) noexcept;
    void insert(std::uint64_t h) noexcept;
    void grow_or_rebuild() noexcept;
    void expand() noexcept;
    void assign_hashes(const std::uint64_t* h, std::size_t n, std::uint64_t theta);
    void fold_by_selection(const ThetaSketch& other);
    void merge_sorted(const ThetaSketch& other);
    void keep_sorted(std::vector<std::uint64_t>& h, std::uint64_t t);

    std::uint64_t theta_ = max_theta;
    std::uint64_t total_ = 0;
    std::uint32_t count_ = 0;
    std::uint32_t capacity_ = 0;
    std::uint8_t lg_k_ = default_lg_k;
    std::uint8_t lg_size_ = 0;
    bool nonempty_ = false;  // counted something before (total_ may be 0: DataSketches images, set operations)
    // Two forms: compact (slots_ empty, sorted_ ascending) for new sketches,
    // set-operation results and decoded bytes; a hash table (slots_, sorted_
    // empty) from the first hash an add keeps.
    std::vector<std::uint64_t> slots_;
    std::vector<std::uint64_t> sorted_;
};

/// The union of two sketches: theta = min(theta_a, theta_b), the distinct
/// hashes below it, trimmed to the k smallest (k = 2^max(lg_k)). Same result
/// as DataSketches' theta_union of the two. Empty when both are.
[[nodiscard]] ThetaSketch theta_union(const ThetaSketch& a, const ThetaSketch& b);
/// The union of many; lg_k 0 means the largest of the inputs' (12 for none).
[[nodiscard]] ThetaSketch theta_union(std::span<const ThetaSketch> sketches, int lg_k = 0);
[[nodiscard]] ThetaSketch theta_union(std::span<const ThetaSketch* const> sketches, int lg_k = 0);

/// The intersection: theta = min of the inputs', the hashes below it retained
/// by every input. Empty when any input is. lg_k of the first input.
[[nodiscard]] ThetaSketch theta_intersection(const ThetaSketch& a, const ThetaSketch& b);
/// Of a non-empty span (else std::invalid_argument).
[[nodiscard]] ThetaSketch theta_intersection(std::span<const ThetaSketch> sketches);
[[nodiscard]] ThetaSketch theta_intersection(std::span<const ThetaSketch* const> sketches);

/// The difference A-not-B: theta = min(theta_a, theta_b), the hashes of `a`
/// below it that `b` does not retain. a itself when a or b is empty.
[[nodiscard]] ThetaSketch theta_a_not_b(const ThetaSketch& a, const ThetaSketch& b);

// ---- tally frame -----------------------------------------------------------
//
// Family::theta, version 1, after the 8-byte frame header:
//   u8  lg_k (5..26)
//   u8  flags: 1 = non-empty (counted something though total may be 0)
//   u64 theta (1 .. 2^63 - 1)
//   varint total
//   u32 count (<= floor(15/16 * 2^(lg_k+1)))
//   count varints: the ascending hashes as deltas (the first from 0), each > 0
//   and the last below theta.
// An empty sketch has flags 0, total 0, theta 2^63 - 1 and count 0.

TALLY_END_NAMESPACE

#include "detail/theta_impl.hpp"
