// tally/sketch/tuple.hpp: TupleSketch and ArrayOfDoublesSketch, theta
// sketches whose retained hashes carry values (spend, sessions per distinct
// user) through union, intersection and difference, in the bytes of Apache
// DataSketches' ArrayOfDoubles sketch (Druid's arrayOfDoublesSketch).
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/platform.hpp"
#include "../core/serialize.hpp"
#include "../detail/primitives.hpp"
#include "../detail/throw.hpp"
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
        if (!detail::ds_hll_hash_item(item, h)) return;
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
        if (!detail::ds_hll_hash_item(item, h)) return;
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

// ---- implementation --------------------------------------------------------

namespace detail {

inline constexpr std::uint8_t tuple_kind_aod = 1;
inline constexpr std::uint8_t tuple_kind_summary = 2;

template <class S>
struct TupleTraits;
template <class Summary, class Policy>
struct TupleTraits<TupleSketch<Summary, Policy>> {
    using value_type = Summary;
};
template <>
struct TupleTraits<ArrayOfDoublesSketch> {
    using value_type = double;
};

struct TupleAccess {
    template <class S>
    static auto& table(S& s) noexcept {
        return s.t_;
    }
    template <class S>
    static const auto& table(const S& s) noexcept {
        return s.t_;
    }
    // A sketch like `proto` (its policy, num_values) holding table t.
    template <class S, class T>
    static S with_table(const S& proto, T&& t) {
        S s = like(proto, t.lg_k);
        s.t_ = std::forward<T>(t);
        return s;
    }
    template <class Summary, class Policy>
    static TupleSketch<Summary, Policy> like(const TupleSketch<Summary, Policy>& proto, int lg_k) {
        return TupleSketch<Summary, Policy>(lg_k, proto.policy_);
    }
    static ArrayOfDoublesSketch like(const ArrayOfDoublesSketch& proto, int lg_k) {
        return ArrayOfDoublesSketch(lg_k, proto.num_values());
    }
    // Union policy on rows.
    template <class Summary, class Policy>
    static auto union_rows(const TupleSketch<Summary, Policy>& s) {
        return [&p = s.policy_](Summary* d, const Summary* o) { p.merge(*d, *o); };
    }
    static auto union_rows(const ArrayOfDoublesSketch& s) {
        return [w = s.t_.width](double* d, const double* o) {
            for (std::size_t i = 0; i < w; ++i) d[i] += o[i];
        };
    }
};

// A combine policy on rows.
template <class Summary, class Policy, class Combine>
auto tuple_combine_rows(const TupleSketch<Summary, Policy>&, Combine& c) {
    return [&c](Summary* d, const Summary* o) { c(*d, *o); };
}
template <class Combine>
auto tuple_combine_rows(const ArrayOfDoublesSketch& s, Combine& c) {
    return [&c, w = static_cast<std::size_t>(s.num_values())](double* d, const double* o) {
        c(std::span<double>(d, w), std::span<const double>(o, w));
    };
}

template <class S>
void tuple_check_width(const S& a, const S& b, const char* who) {
    if constexpr (std::is_same_v<S, ArrayOfDoublesSketch>) {
        if (a.num_values() != b.num_values())
            throw_invalid_argument(std::string(who) + ": num_values " + std::to_string(b.num_values()) +
                                   " differs from the first sketch's " + std::to_string(a.num_values()));
    } else {
        (void)a;
        (void)b;
        (void)who;
    }
}

template <class S, class Get>
S tuple_union_of(std::size_t m, Get get, int lg_k) {
    if (m == 0) {
        if constexpr (std::is_same_v<S, ArrayOfDoublesSketch>)
            return ArrayOfDoublesSketch(lg_k == 0 ? ArrayOfDoublesSketch::default_lg_k : lg_k);
        else
            return S(lg_k == 0 ? S::default_lg_k : lg_k);
    }
    int max_lg = get(0).lg_k();
    for (std::size_t i = 1; i < m; ++i) {
        max_lg = std::max(max_lg, get(i).lg_k());
        tuple_check_width(get(0), get(i), "tally::tuple_union");
    }
    if (lg_k == 0) lg_k = max_lg;
    check_range("tally::tuple_union", "lg_k", lg_k, S::min_lg_k, S::max_lg_k);
    S r = TupleAccess::like(get(0), lg_k);
    auto& t = TupleAccess::table(r);
    const auto rows = TupleAccess::union_rows(get(0));
    std::size_t i = 0;
    if (get(0).lg_k() == lg_k) t = TupleAccess::table(get(i++));  // a copy costs less than a fold into nothing
    for (; i < m; ++i) t.fold(TupleAccess::table(get(i)), rows);
    if (t.count > t.k()) t.trim_to_k();
    return r;
}

template <class S, class Get, class Combine>
S tuple_intersection_of(std::size_t m, Get get, Combine& combine) {
    if (m == 0) throw_invalid_argument("tally::tuple_intersection: no sketches (need at least one)");
    using V = typename TupleTraits<S>::value_type;
    const S& first = get(0);
    std::uint64_t theta = theta_max;
    bool any_empty = false;
    std::size_t upper = TupleAccess::table(first).count;
    for (std::size_t i = 0; i < m; ++i) {
        tuple_check_width(first, get(i), "tally::tuple_intersection");
        any_empty |= get(i).empty();
        theta = std::min(theta, get(i).theta64());
        upper = std::min<std::size_t>(upper, get(i).retained());
    }
    const auto& ft = TupleAccess::table(first);
    const auto rows = tuple_combine_rows(first, combine);
    const std::size_t w = ft.width;
    std::vector<const V*> found(m);
    auto t = tuple_table_of<V>(first.lg_k(), ft.width, any_empty, theta, first.total(), upper, [&](auto put) {
        ft.each([&](std::uint64_t h, const V* r) {
            if (h >= theta) return;
            for (std::size_t i = 1; i < m; ++i) {
                const auto& ti = TupleAccess::table(get(i));
                const auto at = ti.find(h);
                if (at < 0) return;
                found[i] = ti.row(static_cast<std::size_t>(at));
            }
            V* d = put(h);
            std::copy(r, r + w, d);
            for (std::size_t i = 1; i < m; ++i) rows(d, found[i]);
        });
    });
    if (t.count == 0 && theta == theta_max) t = TupleTable<V>(first.lg_k(), ft.width);
    return TupleAccess::with_table(first, std::move(t));
}

// A's rows below theta (min of both) that keep(h) accepts.
template <class S, class Keep>
S tuple_filter_of(const S& a, std::uint64_t theta, std::size_t upper, Keep keep) {
    using V = typename TupleTraits<S>::value_type;
    const auto& at = TupleAccess::table(a);
    const std::size_t w = at.width;
    auto t = tuple_table_of<V>(a.lg_k(), at.width, a.empty(), theta, a.total(), upper, [&](auto put) {
        at.each([&](std::uint64_t h, const V* r) {
            if (h < theta && keep(h)) std::copy(r, r + w, put(h));
        });
    });
    if (t.count == 0 && theta == theta_max) t = TupleTable<V>(a.lg_k(), at.width);
    return TupleAccess::with_table(a, std::move(t));
}

}  // namespace detail

template <class S>
S tuple_union(std::span<const S> sketches, int lg_k) {
    return detail::tuple_union_of<S>(
        sketches.size(), [&](std::size_t i) -> const S& { return sketches[i]; }, lg_k);
}
template <class S>
S tuple_union(std::span<const S* const> sketches, int lg_k) {
    return detail::tuple_union_of<S>(
        sketches.size(), [&](std::size_t i) -> const S& { return *sketches[i]; }, lg_k);
}
template <class S>
S tuple_union(const S& a, const S& b) {
    const S* both[2] = {&a, &b};
    return tuple_union(std::span<const S* const>(both, 2), 0);
}

template <class S, class Combine>
S tuple_intersection(std::span<const S> sketches, Combine combine) {
    return detail::tuple_intersection_of<S>(
        sketches.size(), [&](std::size_t i) -> const S& { return sketches[i]; }, combine);
}
template <class S, class Combine>
S tuple_intersection(std::span<const S* const> sketches, Combine combine) {
    return detail::tuple_intersection_of<S>(
        sketches.size(), [&](std::size_t i) -> const S& { return *sketches[i]; }, combine);
}
template <class S, class Combine>
S tuple_intersection(const S& a, const S& b, Combine combine) {
    const S* both[2] = {&a, &b};
    return tuple_intersection(std::span<const S* const>(both, 2), combine);
}
template <class S>
S tuple_intersection(const S& a, const ThetaSketch& b) {
    const std::uint64_t theta = std::min(a.theta64(), b.theta64());
    if (a.empty() || b.empty()) {
        S r = detail::TupleAccess::like(a, a.lg_k());
        return r;
    }
    return detail::tuple_filter_of(a, theta, std::min<std::size_t>(a.retained(), b.retained()),
                                   [&](std::uint64_t h) { return b.contains_hash(h); });
}

template <class S>
S tuple_a_not_b(const S& a, const S& b) {
    detail::tuple_check_width(a, b, "tally::tuple_a_not_b");
    if (a.empty() || b.empty()) return a;
    return detail::tuple_filter_of(a, std::min(a.theta64(), b.theta64()), a.retained(),
                                   [&](std::uint64_t h) { return !b.contains_hash(h); });
}
template <class S>
S tuple_a_not_b(const S& a, const ThetaSketch& b) {
    if (a.empty() || b.empty()) return a;
    return detail::tuple_filter_of(a, std::min(a.theta64(), b.theta64()), a.retained(),
                                   [&](std::uint64_t h) { return !b.contains_hash(h); });
}

// ---- ArrayOfDoublesSketch --------------------------------------------------

inline ArrayOfDoublesSketch& ArrayOfDoublesSketch::merge(const ArrayOfDoublesSketch& other) {
    if (!mergeable_with(other))
        detail::throw_invalid_argument("tally::ArrayOfDoublesSketch::merge: lg_k " + std::to_string(other.lg_k()) +
                                       " and num_values " + std::to_string(other.num_values()) +
                                       " differ from this sketch's " + std::to_string(lg_k()) + " and " +
                                       std::to_string(num_values()) + " (tuple_union takes any lg_k)");
    if (other.empty()) return *this;
    if (&other == this) {
        const ArrayOfDoublesSketch copy = other;
        return merge(copy);
    }
    if (empty()) {
        *this = other;
        return *this;
    }
    t_.fold(other.t_, detail::TupleAccess::union_rows(*this));
    return *this;
}

namespace detail {

// Frame bytes shared by both classes: width bytes per row, written by put_row.
template <class V, class PutRow>
std::vector<std::byte> tuple_frame_encode(const TupleTable<V>& t, std::uint8_t kind, std::size_t width_byte,
                                          std::size_t row_bytes, PutRow put_row) {
    const std::vector<std::uint32_t> order = t.sorted_slots();
    ByteWriter w(8 + 28 + order.size() * (9 + row_bytes));
    w.header(Family::tuple, 1);
    w.u8(t.lg_k);
    w.u8(t.empty() ? 0 : 1);
    w.u8(kind);
    w.u8(static_cast<std::uint8_t>(width_byte));
    w.u64(t.theta);
    w.varint(t.total);
    w.u32(static_cast<std::uint32_t>(order.size()));
    std::uint64_t prev = 0;
    for (const std::uint32_t i : order) {
        w.varint(t.slots[i] - prev);
        prev = t.slots[i];
    }
    for (const std::uint32_t i : order) put_row(w, t.row(i));
    return w.take();
}

// Reads the frame into a table; get_row(reader, row) reads one row.
template <class V, class GetRow>
TupleTable<V> tuple_frame_decode(std::span<const std::byte> bytes, std::uint8_t kind, std::size_t width_byte,
                                 std::uint32_t width, std::size_t row_bytes, const char* who, GetRow get_row) {
    ByteReader r(bytes);
    r.header(Family::tuple, 1);
    const int lg_k = r.u8();
    format_check(lg_k >= theta_min_lg_k && lg_k <= theta_max_lg_k, "TupleSketch: lg_k is out of range [5, 26]");
    const std::uint8_t flags = r.u8();
    format_check(flags <= 1, "TupleSketch: unknown flag bits");
    const std::uint8_t got_kind = r.u8();
    if (got_kind != kind) throw_format_error(std::string(who) + ": the frame is of another tuple sketch kind");
    const std::uint8_t got_width = r.u8();
    if (width_byte != 0 && got_width != width_byte)
        throw_format_error(std::string(who) + ": the frame's summary width " + std::to_string(got_width) +
                           " is not this type's " + std::to_string(width_byte));
    if (width_byte == 0) {
        format_check(got_width >= 1, "ArrayOfDoublesSketch: num_values 0 is out of range [1, 255]");
        width = got_width;
        row_bytes = 8 * std::size_t{got_width};
    }
    const std::uint64_t theta = r.u64();
    format_check(theta >= 1 && theta <= theta_max, "TupleSketch: theta is out of range [1, 2^63 - 1]");
    const std::uint64_t total = r.varint();
    const std::uint64_t count = r.count(r.u32(), 1 + row_bytes, theta_capacity(lg_k + 1, lg_k), "TupleSketch hash");
    if (flags == 0)
        format_check(total == 0 && theta == theta_max && count == 0,
                     "TupleSketch: an empty sketch has total 0, theta 1 and no hashes");
    std::vector<std::uint64_t> h(static_cast<std::size_t>(count));
    std::uint64_t prev = 0;
    for (auto& v : h) {
        const std::uint64_t d = r.varint();
        format_check(d > 0 && d < theta - prev, "TupleSketch: hashes are not ascending below theta");
        prev += d;
        v = prev;
    }
    std::size_t j = 0;
    TupleTable<V> t = tuple_table_of<V>(lg_k, width, flags == 0, theta, total, h.size(), [&](auto put) {
        for (; j < h.size(); ++j) get_row(r, put(h[j]), width);
    });
    r.expect_end();
    return t;
}

}  // namespace detail

inline std::vector<std::byte> ArrayOfDoublesSketch::serialize() const {
    const std::size_t w = t_.width;
    return detail::tuple_frame_encode(t_, detail::tuple_kind_aod, w, 8 * w, [w](ByteWriter& out, const double* r) {
        for (std::size_t i = 0; i < w; ++i) out.f64(r[i]);
    });
}

inline ArrayOfDoublesSketch ArrayOfDoublesSketch::deserialize(std::span<const std::byte> bytes) {
    auto t = detail::tuple_frame_decode<double>(bytes, detail::tuple_kind_aod, 0, 1, 8, "tally::ArrayOfDoublesSketch",
                                                [](ByteReader& in, double* r, std::uint32_t w) {
                                                    for (std::uint32_t i = 0; i < w; ++i) r[i] = in.f64();
                                                });
    ArrayOfDoublesSketch s(t.lg_k, static_cast<int>(t.width));
    s.t_ = std::move(t);
    return s;
}

inline std::vector<std::byte> ArrayOfDoublesSketch::to_datasketches() const {
    const std::vector<std::uint32_t> order = t_.sorted_slots();
    std::vector<std::uint64_t> h;
    std::vector<double> v;
    h.reserve(order.size());
    v.reserve(order.size() * t_.width);
    for (const std::uint32_t i : order) {
        h.push_back(t_.slots[i]);
        v.insert(v.end(), t_.row(i), t_.row(i) + t_.width);
    }
    return detail::ds_aod_encode(empty(), empty() ? max_theta : t_.theta, static_cast<std::uint8_t>(t_.width), h, v);
}

inline ArrayOfDoublesSketch ArrayOfDoublesSketch::from_datasketches(std::span<const std::byte> bytes, int lg_k) {
    detail::check_range("tally::ArrayOfDoublesSketch::from_datasketches", "lg_k", lg_k, min_lg_k, max_lg_k);
    detail::DsAodImage img = detail::ds_aod_decode(bytes, detail::theta_capacity(max_lg_k + 1, max_lg_k));
    while (lg_k < max_lg_k && img.hashes.size() > detail::theta_capacity(lg_k + 1, lg_k)) ++lg_k;
    const std::size_t w = img.num_values;
    auto t = detail::tuple_table_of<double>(lg_k, img.num_values, img.empty, img.theta, 0, img.hashes.size(),
                                            [&](auto put) {
                                                for (std::size_t i = 0; i < img.hashes.size(); ++i)
                                                    std::copy_n(img.values.data() + i * w, w, put(img.hashes[i]));
                                            });
    ArrayOfDoublesSketch s(lg_k, img.num_values);
    s.t_ = std::move(t);
    return s;
}

// ---- TupleSketch bytes -----------------------------------------------------

template <class Summary, class Policy>
std::vector<std::byte> TupleSketch<Summary, Policy>::serialize() const
    requires std::is_trivially_copyable_v<Summary>
{
    static_assert(sizeof(Summary) <= 255, "tally::TupleSketch::serialize: Summary larger than 255 bytes");
    return detail::tuple_frame_encode(this->t_, detail::tuple_kind_summary, sizeof(Summary), sizeof(Summary),
                                      [](ByteWriter& out, const Summary* s) {
                                          std::byte b[sizeof(Summary)];
                                          std::memcpy(b, s, sizeof(Summary));
                                          for (const std::byte x : b) out.u8(std::to_integer<std::uint8_t>(x));
                                      });
}

template <class Summary, class Policy>
TupleSketch<Summary, Policy> TupleSketch<Summary, Policy>::deserialize(std::span<const std::byte> bytes)
    requires std::is_trivially_copyable_v<Summary>
{
    auto t = detail::tuple_frame_decode<Summary>(bytes, detail::tuple_kind_summary, sizeof(Summary), 1,
                                                 sizeof(Summary), "tally::TupleSketch",
                                                 [](ByteReader& in, Summary* s, std::uint32_t) {
                                                     in.bytes_into(s, sizeof(Summary));
                                                 });
    TupleSketch s(t.lg_k);
    s.t_ = std::move(t);
    return s;
}

TALLY_END_NAMESPACE
