// tally/sketch/quantiles/tdigest.hpp: TDigest, a merging t-digest for quantiles with
// accurate tails (p99, p99.9) that merges across threads, nodes and time.
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numbers>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../core/platform.hpp"
#include "../../core/serialize.hpp"
#include "../../detail/primitives.hpp"
#include "detail/tdigest_pass.hpp"
#include "detail/tdigest_postgres.hpp"
#include "detail/tdigest_scale.hpp"
#include "detail/tdigest_sort.hpp"
#include "../../detail/throw.hpp"

TALLY_BEGIN_NAMESPACE

/// TDigest: a merging t-digest (Dunning & Ertl, "Computing extremely accurate
/// quantiles using t-digests", arXiv:1902.04023) over weighted real values:
/// quantile, cdf, rank and trimmed-mean queries, mergeable across threads,
/// nodes and time. Values go into a buffer of 10 * compression entries; a full
/// buffer is sorted and merged into the centroids in one greedy pass under a
/// k1 (arcsine) scale in the middle and a logarithmic scale in the tails.
/// Tied values (integers, rounded latencies, a repeated constant) are point
/// masses: a run of equal values heavier than 1/16 of a centroid's size limit
/// is kept as two centroids of equal mean, quantile(q) of a rank inside it
/// returns that value exactly, and cdf(x) counts all of it at x (inclusive:
/// the fraction of the weight <= x).
/// Error (rank, empirical, not a proven bound): the distance from q to the
/// rank interval [F(x-), F(x)] of x = quantile(q) is <= 0.005 for q in
/// [0.01, 0.99] and <= 0.0005 at q = 0.001 and 0.999, at compression 100, for
/// single digests and 16-way merges, on continuous and on tied data
/// (tests/test_tdigest.cpp checks both on nine distributions). The min and
/// max are exact; one value answers itself for every q.
/// Cost: add amortised O(1); quantile and cdf a binary search; merge
/// O(centroids). Memory: ~compression centroids of 16 bytes (1.6 KB at 100;
/// at most 16 * compression + 1024 with ties) plus a ~40 KB buffer at 100.
/// Thread safety: one writer; the const queries, serialize and observers may
/// run concurrently on a flushed digest (call flush() before sharing it).
/// Errors: bad arguments throw std::invalid_argument, digest unchanged;
/// try_add is the noexcept form. Queries on an empty digest return NaN (0 for
/// rank). Details, tables and the wire format: docs/tdigest.md.
///
///     tally::TDigest d;                       // compression 100
///     for (double ms : latencies) d.add(ms);
///     double p99 = d.quantile(0.99);          // global.merge(d) across threads
class TDigest {
  public:
    /// One centroid: the mean of the values it summarises and their total weight.
    struct Centroid {
        double mean;
        double weight;
        friend bool operator==(const Centroid&, const Centroid&) = default;
    };

    static constexpr double min_compression = 10;
    static constexpr double max_compression = 10000;
    static constexpr int format_version = 1;

    /// An empty digest. Allocates nothing: the buffers come with the first
    /// value added. Throws std::invalid_argument unless 10 <= compression <= 10000.
    explicit TDigest(double compression = 100);

    /// A digest of the given centroids (for codecs of other t-digest formats):
    /// means finite and non-decreasing, weights positive and finite, total
    /// finite; min/max exact bounds of the data (min <= first mean, last mean
    /// <= max), or the first and the largest mean in the overload without them.
    /// Centroids are kept as given (one merge pass compacts them when there
    /// are more than deserialize accepts). Throws std::invalid_argument
    /// naming the first bad centroid or parameter.
    [[nodiscard]] static TDigest from_centroids(std::span<const Centroid> centroids, double compression = 100);
    [[nodiscard]] static TDigest from_centroids(std::span<const Centroid> centroids, double min, double max,
                                                double compression);

    // ---- adding ----------------------------------------------------------

    /// Adds `x` with `weight`. Throws std::invalid_argument (digest unchanged)
    /// if x is NaN or infinite, weight is not positive and finite, or the total
    /// weight would overflow.
    void add(double x, double weight = 1);
    /// As add, but returns false (digest unchanged) instead of throwing,
    /// also when the buffer cannot be allocated (the first add allocates it).
    bool try_add(double x, double weight = 1) noexcept;
    /// Merges the buffer into the centroids (queries do this on their own).
    void flush() noexcept;
    /// Forgets every value; keeps the compression and the buffers.
    void clear() noexcept;

    // ---- queries ---------------------------------------------------------

    /// Estimated q-quantile: the value at rank q * total() of the
    /// interpolated distribution (a point mass's value for the ranks it holds);
    /// quantile(0) = min(), quantile(1) = max(). NaN when empty. Throws
    /// std::invalid_argument unless 0 <= q <= 1.
    [[nodiscard]] double quantile(double q);
    [[nodiscard]] double quantile(double q) const;

    /// Estimated fraction of the total weight at values <= x, in [0, 1]
    /// (0 below min(), 1 at and above max(); a point mass at x counts in
    /// full). NaN when empty. Throws std::invalid_argument if x is NaN.
    [[nodiscard]] double cdf(double x);
    [[nodiscard]] double cdf(double x) const;

    /// Estimated total weight (with unit weights: the number of values) at
    /// values <= x: cdf(x) * total(). 0 when empty. Throws
    /// std::invalid_argument if x is NaN.
    [[nodiscard]] double rank(double x);
    [[nodiscard]] double rank(double x) const;

    /// Estimated mean of the values whose rank lies between the lo- and
    /// hi-quantile; trimmed_mean(0, 1) is the exact mean (up to rounding).
    /// NaN when empty. Throws std::invalid_argument unless 0 <= lo < hi <= 1.
    [[nodiscard]] double trimmed_mean(double lo, double hi);
    [[nodiscard]] double trimmed_mean(double lo, double hi) const;

    /// Total weight added (the number of values with unit weights).
    [[nodiscard]] double total() const noexcept { return total_; }
    [[nodiscard]] bool empty() const noexcept { return total_ == 0; }
    /// Exact smallest and largest value added; NaN when empty.
    [[nodiscard]] double min() const noexcept { return empty() ? std::numeric_limits<double>::quiet_NaN() : min_; }
    [[nodiscard]] double max() const noexcept { return empty() ? std::numeric_limits<double>::quiet_NaN() : max_; }
    [[nodiscard]] double compression() const noexcept { return compression_; }

    /// The centroids, sorted by mean, after flushing the buffer; valid until
    /// the digest is next modified.
    std::span<const Centroid> centroids();
    /// Bytes held: the object and its heap (centroids, query view, buffer, scratch).
    [[nodiscard]] std::size_t memory_bytes() const noexcept;

    // ---- MergeableSummary ------------------------------------------------

    /// Same compression (exactly) is required.
    [[nodiscard]] bool mergeable_with(const TDigest& other) const noexcept { return compression_ == other.compression_; }

    /// Flushes both digests' buffers and runs one merge pass over the union
    /// of their centroids: exactly commutative, the identity for an empty
    /// digest, not bit-exactly associative. Throws std::invalid_argument
    /// (digest unchanged) on a compression mismatch or a total that would overflow.
    TDigest& merge(const TDigest& other);

    /// The tally frame, family tdigest (docs/tdigest.md), written after
    /// flushing the buffer (so it is canonical for the summarised data).
    [[nodiscard]] std::vector<std::byte> serialize() const;
    /// Throws tally::FormatError for anything but a valid encoding; checks
    /// every length against the bytes present before allocating.
    [[nodiscard]] static TDigest deserialize(std::span<const std::byte> bytes);

    // ---- PostgreSQL `tdigest` extension (docs/postgres.md) -----------------

    /// The extension's text form ("flags 1 count N compression C centroids K
    /// (mean, count) ..."), which the server accepts as a tdigest value; means
    /// in shortest round-trip form. The extension counts integers: centroid
    /// weights become the steps of the rounded cumulative weight (total kept,
    /// each within 1). C is compression() unless `postgres_compression` (in
    /// [10, 10000]) is given: the server re-compacts a digest to its own,
    /// coarser scale whenever it answers, and 10 * compression() keeps this
    /// digest's resolution there (docs/postgres.md). Throws
    /// std::invalid_argument if the digest is empty (store NULL), C or the
    /// total weight is not an integer, or postgres_compression is out of range.
    [[nodiscard]] std::string to_postgres(int postgres_compression = 0) const;
    /// Parses the text the server prints for a tdigest value (flags 1, or 0:
    /// the pre-1.2 sum form) into a digest of those centroids at compression
    /// C; min() and max() are the outer centroids' means (the text has no
    /// others). Throws tally::FormatError on malformed text.
    [[nodiscard]] static TDigest from_postgres(std::string_view text);

  private:
    // an empty placeholder that allocates nothing (for merge)
    TDigest(double compression, int) noexcept : compression_(compression) {}

    // the most centroids deserialize accepts at this compression
    static std::uint64_t max_centroids(double compression) noexcept {
        return 16 * static_cast<std::uint64_t>(std::ceil(compression)) + 1024;
    }
    static void check_q(double q, const char* what);
    static void check_x(double x, const char* what);
    static void check_trim(double lo, double hi);
    template <class F>
    std::invoke_result_t<F&, const TDigest&> with_flushed(F&& f) const;
    void compress(bool recs_are_centroids = false) noexcept;
    bool allocate_buffers() noexcept;
    void build_view() noexcept;
    template <bool Upper>
    static std::size_t first_at_least(const double* a, std::size_t n, double x) noexcept;
    template <class Visit>
    void walk_knots(Visit&& visit) const;
    double quantile_flushed(double q) const noexcept;
    double cdf_flushed(double x) const noexcept;
    double mean_of_f(double a, double b) const noexcept;
    static void add_to_mean(double& mean, double& weight, double v, double w) noexcept;
    double trimmed_mean_flushed(double lo, double hi) const noexcept;

    double compression_;
    std::size_t cap_ = 0;    // buffered entries that trigger a pass
    std::size_t nkeys_ = 0;  // entries in keys_
    std::size_t nrecs_ = 0;  // entries in recs_
    double total_ = 0;
    double min_ = std::numeric_limits<double>::infinity();
    double max_ = -std::numeric_limits<double>::infinity();
    std::vector<Centroid> centroids_;     // sorted by mean
    std::vector<std::uint64_t> keys_;     // unit-weight values as sort keys
    std::vector<std::uint64_t> key_tmp_;  // radix sort ping-pong
    std::vector<Centroid> recs_;          // weighted values (and merge input)
    std::vector<Centroid> scratch_;       // output of a pass, swapped in
    std::vector<double> knot_pos_;        // query view: knot ranks (build_view)
    std::vector<double> knot_val_;        // query view: knot values
};

TALLY_END_NAMESPACE

#include "detail/tdigest_impl.hpp"
