// tally/sketch/distinct/tuple.hpp: TupleSketch and ArrayOfDoublesSketch, theta
// sketches whose retained hashes carry values (spend, sessions per distinct
// user) through union, intersection and difference, in the bytes of Apache
// DataSketches' ArrayOfDoubles sketch (Druid's arrayOfDoublesSketch).
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../core/platform.hpp"
#include "../../core/serialize.hpp"
#include "../../detail/primitives.hpp"
#include "../../detail/throw.hpp"
#include "detail/datasketches_hash.hpp"
#include "detail/theta_table.hpp"
#include "detail/tuple_datasketches.hpp"
#include "detail/tuple_table.hpp"
#include "theta.hpp"

TALLY_BEGIN_NAMESPACE

namespace detail {
struct TupleAccess;
}

/// The default policy: a value adds into the summary, and the summaries of
/// one key in two sketches add (DataSketches' default for ArrayOfDoubles).
template <class Summary>
struct TupleSumPolicy {
    template <class V>
    void update(Summary& s, const V& value) const noexcept {
        s += value;
    }
    void merge(Summary& s, const Summary& other) const noexcept { s += other; }
};

/// Combine policies for tuple_intersection: how the summaries of a key that
/// every input retains become one (the first input's is the target).
struct TupleSum {
    template <class S>
    void operator()(S& s, const S& other) const noexcept {
        s += other;
    }
    void operator()(std::span<double> row, std::span<const double> other) const noexcept {
        for (std::size_t i = 0; i < row.size(); ++i) row[i] += other[i];
    }
};
struct TupleMin {
    template <class S>
    void operator()(S& s, const S& other) const noexcept {
        s = std::min(s, other);
    }
    void operator()(std::span<double> row, std::span<const double> other) const noexcept {
        for (std::size_t i = 0; i < row.size(); ++i) row[i] = std::min(row[i], other[i]);
    }
};
struct TupleMax {
    template <class S>
    void operator()(S& s, const S& other) const noexcept {
        s = std::max(s, other);
    }
    void operator()(std::span<double> row, std::span<const double> other) const noexcept {
        for (std::size_t i = 0; i < row.size(); ++i) row[i] = std::max(row[i], other[i]);
    }
};
/// Keeps the first input's summary.
struct TupleKeepFirst {
    template <class S>
    void operator()(S&, const S&) const noexcept {}
    void operator()(std::span<double>, std::span<const double>) const noexcept {}
};

/// A tuple sketch: a theta sketch (ThetaSketch: same hash, table, rebuild
/// rule and bounds; Dasgupta, Lang, Rhodes, Thaler, ICDT 2016) whose every
/// retained hash carries a Summary. Policy::update(summary, value) folds an
/// add's value into its key's summary; Policy::merge(summary, other) joins
/// the summaries of one key in a union (default: both add).
///
/// Error: distinct counts as ThetaSketch (relative standard error about
/// 1 / sqrt(k - 1)). A sum of a summary field over all keys, sum_estimate(f)
/// = sum of f over the retained / theta, is the Horvitz-Thompson estimate of
/// a theta-sample: unbiased, standard error sqrt((1 - theta) * sum f^2) /
/// theta, so sum_lower_bound / sum_upper_bound(f, s) = estimate -/+ s
/// standard errors (s = 2: about 95%); exact (theta = 1) below k keys.
///
/// Memory: (8 + sizeof(Summary)) bytes per slot, 2^5..2^(lg_k+1) slots.
///
/// Thread safety: const members may run concurrently; add, merge and clear
/// need exclusive access.
///
///     tally::TupleSketch<double> spend(12);
///     spend.add(user_id, 9.99);
///     double revenue = spend.sum_estimate([](double s) { return s; });
template <class Summary, class Policy = TupleSumPolicy<Summary>>
class TupleSketch : public detail::TupleBase<Summary> {
    using Base = detail::TupleBase<Summary>;
    static_assert(std::is_default_constructible_v<Summary> && std::is_copy_assignable_v<Summary>,
                  "tally::TupleSketch: Summary must be default-constructible and copyable");

  public:
    using summary_type = Summary;
    using policy_type = Policy;

    /// Nominal entries k = 2^lg_k, lg_k in [5, 26] (else std::invalid_argument).
    explicit TupleSketch(int lg_k = Base::default_lg_k, Policy policy = {}) : Base(check(lg_k), 1), policy_(policy) {}

    /// Counts `item` (hashed as ThetaSketch::add) and folds `value` into its
    /// summary: a new key's summary is Policy::update(Summary{}, value).
    template <class T, class V>
    void add(const T& item, const V& value) noexcept {
        detail::Hash128 h;
        if (!detail::ds_hash_item(item, h)) return;
        add_hash(h.h1, value);
    }
    /// add of an item whose MurmurHash3_x64_128 (seed 9001) first half is h1.
    template <class V>
    void add_hash(std::uint64_t h1, const V& value) noexcept {
        ++this->t_.total;
        this->t_.offer(h1 >> 1, [&](Summary* s, bool fresh) {
            if (fresh) *s = Summary{};
            policy_.update(*s, value);
        });
    }

    /// f(hash, summary) for every retained hash (in table order).
    template <class F>
    void for_each(F&& f) const {
        this->t_.each([&](std::uint64_t h, const Summary* s) { f(h, *s); });
    }
    /// The summary of retained hash h, or nullptr.
    [[nodiscard]] const Summary* find_hash(std::uint64_t h) const noexcept {
        const auto i = this->t_.find(h);
        return i < 0 ? nullptr : this->t_.row(static_cast<std::size_t>(i));
    }

    /// Estimated sum of field(summary) over all keys (see the class comment).
    template <class Field>
    [[nodiscard]] double sum_estimate(Field field) const {
        return this->t_.sum_and_error([&](const Summary* s) { return field(*s); }).first;
    }
    /// The estimate's standard error.
    template <class Field>
    [[nodiscard]] double sum_standard_error(Field field) const {
        return this->t_.sum_and_error([&](const Summary* s) { return field(*s); }).second;
    }
    template <class Field>
    [[nodiscard]] double sum_lower_bound(Field field, int num_std_devs) const {
        detail::check_range("tally::TupleSketch::sum_lower_bound", "num_std_devs", num_std_devs, 1, 3);
        const auto [e, se] = this->t_.sum_and_error([&](const Summary* s) { return field(*s); });
        return e - num_std_devs * se;
    }
    template <class Field>
    [[nodiscard]] double sum_upper_bound(Field field, int num_std_devs) const {
        detail::check_range("tally::TupleSketch::sum_upper_bound", "num_std_devs", num_std_devs, 1, 3);
        const auto [e, se] = this->t_.sum_and_error([&](const Summary* s) { return field(*s); });
        return e + num_std_devs * se;
    }

    /// Union in place (ThetaSketch::merge's rule; Policy::merge for a key
    /// both retain). Needs the same lg_k (else std::invalid_argument, *this
    /// unchanged). Merging an empty sketch changes nothing; into an empty one copies.
    TupleSketch& merge(const TupleSketch& other) {
        if (!mergeable_with(other))
            detail::throw_invalid_argument("tally::TupleSketch::merge: lg_k " + std::to_string(other.lg_k()) +
                                           " differs from this sketch's " + std::to_string(this->lg_k()) +
                                           " (use tuple_union for sketches of different lg_k)");
        if (other.empty()) return *this;
        if (this->empty() || &other == this) {
            if (&other == this) {
                const TupleSketch copy = other;
                return merge_nonempty(copy);
            }
            *this = other;
            return *this;
        }
        return merge_nonempty(other);
    }
    [[nodiscard]] bool mergeable_with(const TupleSketch& other) const noexcept { return this->lg_k() == other.lg_k(); }
    [[nodiscard]] const Policy& policy() const noexcept { return policy_; }
    [[nodiscard]] std::size_t memory_bytes() const noexcept { return sizeof(*this) + this->heap_bytes(); }

    /// The tally frame (Family::tuple; layout after ArrayOfDoublesSketch).
    /// Summaries are written as their object bytes (trivially copyable only).
    [[nodiscard]] std::vector<std::byte> serialize() const
        requires std::is_trivially_copyable_v<Summary>;
    [[nodiscard]] static TupleSketch deserialize(std::span<const std::byte> bytes)
        requires std::is_trivially_copyable_v<Summary>;

  private:
    friend struct detail::TupleAccess;
    static int check(int lg_k) {
        detail::check_range("tally::TupleSketch", "lg_k", lg_k, Base::min_lg_k, Base::max_lg_k);
        return lg_k;
    }
    TupleSketch& merge_nonempty(const TupleSketch& other) {
        this->t_.fold(other.t_, [&](Summary* s, const Summary* o) { policy_.merge(*s, *o); });
        return *this;
    }
    Policy policy_;
};

/// The Tuple sketch of DataSketches' ArrayOfDoubles: num_values doubles per
/// distinct key (1..255), added column by column on each add and on union
/// (DataSketches' default policies). Its compact image is the one Druid's
/// arrayOfDoublesSketch, DataSketches Java and C++ read and write.
///
/// Error: distinct counts as ThetaSketch; column_sum_estimate(i) is the sum
/// of column i over all keys with the Horvitz-Thompson standard error
/// sqrt((1 - theta) * sum x_i^2) / theta (bounds: -/+ s standard errors;
/// exact when theta = 1); column_mean(i) is the mean per distinct key over
/// the retained (a uniform sample of the keys).
///
/// Memory: 8 * (1 + num_values) bytes per slot, 2^5..2^(lg_k+1) slots
/// (128 KiB at lg_k 12, one value).
///
/// Thread safety: const members may run concurrently; add, merge and clear
/// need exclusive access.
///
///     tally::ArrayOfDoublesSketch day(12, 2);  // spend, sessions
///     const double v[2] = {9.99, 1};
///     day.add(user_id, v);
///     double buyers = day.estimate(), spend = day.column_sum_estimate(0);
class ArrayOfDoublesSketch : public detail::TupleBase<double> {
    using Base = detail::TupleBase<double>;

  public:
    static constexpr int max_num_values = 255;

    /// lg_k in [5, 26], num_values in [1, 255] (else std::invalid_argument).
    explicit ArrayOfDoublesSketch(int lg_k = default_lg_k, int num_values = 1)
        : Base(check(lg_k, num_values), static_cast<std::uint32_t>(num_values)) {}

    [[nodiscard]] int num_values() const noexcept { return static_cast<int>(t_.width); }
    [[nodiscard]] std::size_t memory_bytes() const noexcept { return sizeof(*this) + heap_bytes(); }

    /// Counts `item` (hashed as ThetaSketch::add) and adds values[i] to its
    /// column i; values past num_values are ignored, missing ones add 0.
    template <class T>
    void add(const T& item, std::span<const double> values) noexcept {
        detail::Hash128 h;
        if (!detail::ds_hash_item(item, h)) return;
        add_hash(h.h1, values);
    }
    template <class T>
    void add(const T& item, std::initializer_list<double> values) noexcept {
        add(item, std::span<const double>(values.begin(), values.size()));
    }
    void add_hash(std::uint64_t h1, std::span<const double> values) noexcept {
        ++t_.total;
        const std::size_t w = t_.width;
        const std::size_t n = std::min(w, values.size());
        t_.offer(h1 >> 1, [&](double* r, bool fresh) {
            if (fresh) std::fill(r, r + w, 0.0);
            for (std::size_t i = 0; i < n; ++i) r[i] += values[i];
        });
    }

    /// f(hash, std::span<const double> values) for every retained hash (in table order).
    template <class F>
    void for_each(F&& f) const {
        const std::size_t w = t_.width;
        t_.each([&](std::uint64_t h, const double* r) { f(h, std::span<const double>(r, w)); });
    }
    /// The values of retained hash h; empty when it is not retained.
    [[nodiscard]] std::span<const double> find_hash(std::uint64_t h) const noexcept {
        const auto i = t_.find(h);
        if (i < 0) return {};
        return {t_.row(static_cast<std::size_t>(i)), t_.width};
    }

    /// Estimated sums of every column over all keys.
    [[nodiscard]] std::vector<double> column_sum_estimates() const {
        std::vector<double> s(t_.width, 0.0);
        for_each([&](std::uint64_t, std::span<const double> r) {
            for (std::size_t i = 0; i < r.size(); ++i) s[i] += r[i];
        });
        for (double& v : s) v /= theta();
        return s;
    }
    /// Column i in [0, num_values) (else std::invalid_argument).
    [[nodiscard]] double column_sum_estimate(int i) const { return column(i, "column_sum_estimate").first; }
    [[nodiscard]] double column_sum_standard_error(int i) const {
        return column(i, "column_sum_standard_error").second;
    }
    [[nodiscard]] double column_sum_lower_bound(int i, int num_std_devs) const {
        detail::check_range("tally::ArrayOfDoublesSketch::column_sum_lower_bound", "num_std_devs", num_std_devs, 1, 3);
        const auto [e, se] = column(i, "column_sum_lower_bound");
        return e - num_std_devs * se;
    }
    [[nodiscard]] double column_sum_upper_bound(int i, int num_std_devs) const {
        detail::check_range("tally::ArrayOfDoublesSketch::column_sum_upper_bound", "num_std_devs", num_std_devs, 1, 3);
        const auto [e, se] = column(i, "column_sum_upper_bound");
        return e + num_std_devs * se;
    }
    /// Mean of column i per distinct key (0 with no retained key).
    [[nodiscard]] double column_mean(int i) const {
        const auto [e, se] = column(i, "column_mean");
        (void)se;
        return t_.count == 0 ? 0.0 : e * theta() / static_cast<double>(t_.count);
    }

    /// Union in place (ThetaSketch::merge's rule; values of a key both
    /// retain add). Needs the same lg_k and num_values (else
    /// std::invalid_argument, *this unchanged).
    ArrayOfDoublesSketch& merge(const ArrayOfDoublesSketch& other);
    [[nodiscard]] bool mergeable_with(const ArrayOfDoublesSketch& other) const noexcept {
        return lg_k() == other.lg_k() && num_values() == other.num_values();
    }

    /// The tally frame (Family::tuple, version 1); layout below.
    [[nodiscard]] std::vector<std::byte> serialize() const;
    [[nodiscard]] static ArrayOfDoublesSketch deserialize(std::span<const std::byte> bytes);

    /// DataSketches' compact ordered ArrayOfDoubles image (serial version 1,
    /// family 9, type 3), as compact_array_of_doubles_sketch::serialize()
    /// writes it; layout in sketch/detail/tuple_datasketches.hpp.
    [[nodiscard]] std::vector<std::byte> to_datasketches() const;
    /// Reads a compact ArrayOfDoubles image (C++ or Java, ordered or not).
    /// Checks family, type, serial version, flags, seed hash (seed 9001),
    /// num_values and every length, and that each hash lies below theta
    /// once (tally::FormatError). lg_k is raised (up to 26) until the sketch
    /// holds the image; estimates and bounds equal DataSketches'.
    [[nodiscard]] static ArrayOfDoublesSketch from_datasketches(std::span<const std::byte> bytes,
                                                                int lg_k = default_lg_k);

  private:
    friend struct detail::TupleAccess;
    static int check(int lg_k, int num_values) {
        detail::check_range("tally::ArrayOfDoublesSketch", "lg_k", lg_k, min_lg_k, max_lg_k);
        detail::check_range("tally::ArrayOfDoublesSketch", "num_values", num_values, 1, max_num_values);
        return lg_k;
    }
    [[nodiscard]] std::pair<double, double> column(int i, const char* who) const {
        if (i < 0 || i >= num_values())  // the message is built only when it is needed
            detail::check_range((std::string("tally::ArrayOfDoublesSketch::") + who).c_str(), "i", i, 0, num_values() - 1);
        const auto c = static_cast<std::size_t>(i);
        return t_.sum_and_error([c](const double* r) { return r[c]; });
    }
};

// ---- set operations --------------------------------------------------------
//
// Results follow the theta sketch framework (theta_union etc.) and carry
// summaries: union joins the summaries of a key by the sketch's union policy
// (ArrayOfDoubles: adds), intersection by the combine policy given (TupleSum,
// TupleMin, TupleMax, TupleKeepFirst or any callable (Summary&, const
// Summary&), for ArrayOfDoubles (std::span<double>, std::span<const double>)),
// A-not-B keeps A's. Rows equal DataSketches' union, intersection and a_not_b
// of the same sketches (sums added in input order).

/// lg_k of the result: 0 means the largest of the inputs' (12 for none).
template <class S>
[[nodiscard]] S tuple_union(std::span<const S> sketches, int lg_k = 0);
template <class S>
[[nodiscard]] S tuple_union(std::span<const S* const> sketches, int lg_k = 0);
template <class S>
[[nodiscard]] S tuple_union(const S& a, const S& b);

/// Of a non-empty span (else std::invalid_argument). lg_k of the first.
template <class S, class Combine>
[[nodiscard]] S tuple_intersection(std::span<const S> sketches, Combine combine);
template <class S, class Combine>
[[nodiscard]] S tuple_intersection(std::span<const S* const> sketches, Combine combine);
template <class S, class Combine>
[[nodiscard]] S tuple_intersection(const S& a, const S& b, Combine combine);
/// The keys of `a` that the distinct set `b` retains, with a's summaries.
template <class S>
[[nodiscard]] S tuple_intersection(const S& a, const ThetaSketch& b);

/// A's keys below the least theta that `b` does not retain, with A's summaries.
template <class S>
[[nodiscard]] S tuple_a_not_b(const S& a, const S& b);
template <class S>
[[nodiscard]] S tuple_a_not_b(const S& a, const ThetaSketch& b);

// ---- tally frame -----------------------------------------------------------
//
// Family::tuple, version 1, after the 8-byte frame header:
//   u8  lg_k (5..26)
//   u8  flags: 1 = non-empty (counted something though total may be 0)
//   u8  kind: 1 = ArrayOfDoublesSketch, 2 = TupleSketch
//   u8  width: num_values (1..255), or sizeof(Summary) (1..255)
//   u64 theta (1 .. 2^63 - 1)
//   varint total
//   u32 count
//   count varints: the ascending hashes as deltas (the first from 0), each > 0
//   and the last below theta; then count rows in the same order: num_values
//   f64 each, or the Summary's object bytes.
// An empty sketch has flags 0, total 0, theta 2^63 - 1 and count 0.

TALLY_END_NAMESPACE

#include "detail/tuple_impl.hpp"
