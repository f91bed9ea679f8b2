// tally/sketch/distinct/detail/tuple_table.hpp: the state of a tuple sketch: the theta
// sketch's hash table (theta_table.hpp: same sizes, growth and rebuild rule,
// so the retained hashes are the ones a ThetaSketch of the same items keeps)
// with `width` values of type V beside each slot, and the set operations of
// the theta sketch framework over it.
//
// Rows: slot i's values are vals[i * width, (i + 1) * width). A free slot's
// row holds stale values; a row is written whole when its hash is inserted.
//
// Functions are thread-safe over distinct tables.
#pragma once

#include "../../../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "../../../detail/primitives.hpp"
#include "theta_bounds.hpp"
#include "theta_table.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

template <class V>
struct TupleTable {
    // The spare arrays of rehash, per thread and value type; kept up to
    // keep_bytes.
    struct TupleSpare {
        static constexpr std::size_t keep_bytes = std::size_t{2} << 20;
        std::vector<std::uint64_t> slots;
        std::vector<V> vals;
        void trim() noexcept {
            if (slots.capacity() * sizeof(std::uint64_t) + vals.capacity() * sizeof(V) > keep_bytes) {
                std::vector<std::uint64_t>().swap(slots);
                std::vector<V>().swap(vals);
            }
        }
    };
    static TupleSpare& tuple_spare() noexcept {
        thread_local TupleSpare spare;
        return spare;
    }

    std::vector<std::uint64_t> slots;  // empty until the first hash is kept
    std::vector<V> vals;
    std::uint64_t theta = theta_max;
    std::uint64_t total = 0;  // add calls that counted an item, summed over merges
    std::uint32_t count = 0;
    std::uint32_t capacity = 0;
    std::uint32_t width = 1;
    std::uint8_t lg_k = 12;
    std::uint8_t lg_size = 0;
    bool nonempty = false;  // counted something (total may be 0: decoded images, set operations)

    TupleTable() = default;
    TupleTable(int lg, std::uint32_t w) : width(w), lg_k(static_cast<std::uint8_t>(lg)) {}

    [[nodiscard]] bool empty() const noexcept { return !nonempty && total == 0; }
    [[nodiscard]] std::size_t k() const noexcept { return std::size_t{1} << lg_k; }
    [[nodiscard]] double theta_fraction() const noexcept {
        return static_cast<double>(theta) / static_cast<double>(theta_max);
    }
    [[nodiscard]] bool is_estimation_mode() const noexcept { return theta < theta_max && !empty(); }
    V* row(std::size_t i) noexcept { return vals.data() + i * width; }
    const V* row(std::size_t i) const noexcept { return vals.data() + i * width; }

    void clear() noexcept {
        slots = {};
        vals = {};
        theta = theta_max;
        total = 0;
        count = 0;
        capacity = 0;
        lg_size = 0;
        nonempty = false;
    }

    // A table of 2^lg slots holding this table's rows below `below`
    // (allocation failure terminates in the noexcept callers, as any add
    // that must grow its table does). The new arrays come from this thread's
    // spare pair and the old ones go back to it, so merges in a loop reuse
    // memory the allocator would otherwise map and fault in afresh.
    void rehash(int lg, std::uint64_t below) {
        TupleSpare& sp = tuple_spare();
        const std::size_t size = std::size_t{1} << lg;
        sp.slots.assign(size, 0);
        sp.vals.resize(size * width);  // keeps the capacity; rows are written whole on insert
        const std::size_t mask = size - 1;
        std::uint32_t n = 0;
        for (std::size_t i = 0; i < slots.size(); ++i) {
            const std::uint64_t h = slots[i];
            if (h == 0 || h >= below) continue;
            const std::size_t j = theta_probe(sp.slots.data(), mask, h);
            sp.slots[j] = h;
            std::copy(row(i), row(i) + width, sp.vals.data() + j * width);
            ++n;
        }
        slots.swap(sp.slots);
        vals.swap(sp.vals);
        sp.trim();
        lg_size = static_cast<std::uint8_t>(lg);
        capacity = theta_capacity(lg, lg_k);
        count = n;
    }

    void grow_or_rebuild() noexcept {
        if (lg_size <= lg_k) {
            rehash(std::min(lg_size + theta_lg_resize, lg_k + 1), theta_max + 1);
            return;
        }
        trim_to_k();
    }

    // The union rule's trim: the k smallest kept, theta the (k+1)-th. A
    // table past 3/4 full, or with many to drop, is rebuilt below the cut
    // (erasing from long clusters costs more); else they are erased in place.
    void trim_to_k() noexcept {
        std::vector<std::uint64_t>& buf = theta_scratch().pool;
        const std::size_t excess = count - k();
        if (4 * std::size_t{count} > 3 * slots.size() || 2 * excess > k()) {
            theta = theta_find_cut(slots, count, theta, k(), buf, false).t;
            rehash(lg_k + 1, theta);
        } else {
            V* const v = vals.data();
            const std::size_t w = width;
            theta = theta_trim_table(slots, count, theta, k(), buf, [v, w](std::size_t from, std::size_t to) {
                std::copy(v + from * w, v + (from + 1) * w, v + to * w);
            });
            count = static_cast<std::uint32_t>(k());
            if (lg_size > lg_k + 1) rehash(lg_k + 1, theta);
        }
        theta_scratch().trim();
    }

    /// Inserts h (a 63-bit hash) if it is below theta, else nothing;
    /// fold(row, fresh) writes the row whole when fresh, else folds into it.
    template <class Fold>
    TALLY_ALWAYS_INLINE void offer(std::uint64_t h, Fold&& fold) noexcept {
        if (h - 1 >= theta - 1) return;  // 0 and h >= theta
        if (slots.empty()) rehash(theta_start_lg_size(lg_k), 0);
        const std::size_t i = theta_probe(slots.data(), slots.size() - 1, h);
        if (slots[i] == h) {
            fold(row(i), false);
            return;
        }
        slots[i] = h;
        fold(row(i), true);
        if (++count > capacity) grow_or_rebuild();
    }

    /// Slot of h, or -1.
    [[nodiscard]] std::ptrdiff_t find(std::uint64_t h) const noexcept {
        if (slots.empty() || h == 0) return -1;
        const std::size_t i = theta_probe(slots.data(), slots.size() - 1, h);
        return slots[i] == h ? static_cast<std::ptrdiff_t>(i) : -1;
    }

    /// f(hash, row) for every retained hash, in slot order.
    template <class F>
    void each(F&& f) const {
        for (std::size_t i = 0; i < slots.size(); ++i)
            if (slots[i] != 0) f(slots[i], row(i));
    }

    /// The slots of the retained hashes, by ascending hash.
    [[nodiscard]] std::vector<std::uint32_t> sorted_slots() const {
        std::vector<std::uint32_t> order;
        order.reserve(count);
        for (std::size_t i = 0; i < slots.size(); ++i)
            if (slots[i] != 0) order.push_back(static_cast<std::uint32_t>(i));
        std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return slots[a] < slots[b]; });
        return order;
    }

    /// Union in place: the other's rows below the least theta folded in
    /// (combine(row, other_row) for a hash both keep, a copy for a new one),
    /// then the k smallest kept. The same rows as DataSketches' union of the
    /// two, whatever the other's lg_k.
    template <class Combine>
    void fold(const TupleTable& other, Combine&& combine) {
        total += other.total;
        if (other.empty()) return;
        nonempty = true;
        bool purge = false;  // own hashes at or above the new theta must go
        if (other.theta < theta) {
            theta = other.theta;
            purge = !slots.empty();
        }
        // The other's hashes spread uniformly below its theta: about this many
        // fall below ours. Room for them up front keeps the table at most 3/4
        // full (growth steps, rebuilds and long probes on the way cost more
        // than one larger table; the trim brings it back to 2^(lg_k+1) slots).
        const double incoming = static_cast<double>(other.count) *
                                std::min(1.0, static_cast<double>(theta) / static_cast<double>(other.theta));
        const double want = (4.0 / 3.0) * (static_cast<double>(count) + incoming);
        if (want > static_cast<double>(slots.size()) || purge) {
            int lg = std::max<int>(lg_size, theta_start_lg_size(lg_k));
            while (static_cast<double>(std::size_t{1} << lg) < want && lg < lg_k + 2) ++lg;
            if (lg != lg_size || slots.empty() || purge) rehash(lg, theta);
        }
        const std::size_t w = width;
        for (std::size_t i = 0; i < other.slots.size(); ++i) {
            const std::uint64_t h = other.slots[i];
            const V* src = other.row(i);
            offer(h, [&](V* dst, bool fresh) {
                if (fresh)
                    std::copy(src, src + w, dst);
                else
                    combine(dst, src);
            });
        }
        if (count > k())
            trim_to_k();
        else if (lg_size > lg_k + 1)
            rehash(lg_k + 1, theta_max + 1);
    }

    /// Estimate and bounds as ThetaSketch's.
    [[nodiscard]] double estimate() const noexcept { return static_cast<double>(count) / theta_fraction(); }
    [[nodiscard]] double lower_bound(int s) const noexcept {
        return is_estimation_mode() ? theta_lower_bound(count, theta_fraction(), s) : static_cast<double>(count);
    }
    [[nodiscard]] double upper_bound(int s) const noexcept {
        return is_estimation_mode() ? theta_upper_bound(count, theta_fraction(), s) : static_cast<double>(count);
    }

    /// Sum of value(row) over the retained, over theta, and its standard
    /// error: each item is in the sample with probability theta, so the
    /// Horvitz-Thompson sum has variance (1 - theta) / theta^2 * sum x^2 over
    /// the sample (the unbiased estimate of (1 - theta) / theta * sum x^2).
    template <class Value>
    [[nodiscard]] std::pair<double, double> sum_and_error(Value value) const {
        double s = 0, s2 = 0;
        each([&](std::uint64_t, const V* r) {
            const double x = static_cast<double>(value(r));
            s += x;
            s2 += x * x;
        });
        const double t = theta_fraction();
        return {s / t, std::sqrt((1.0 - t) * s2) / t};
    }
};

/// A set-operation result: `emit(put)` calls put(h) for each kept hash
/// (distinct, below theta, at most upper_count of them) and writes the
/// whole row at the pointer put returns.
template <class V, class Emit>
TupleTable<V> tuple_table_of(int lg_k, std::uint32_t width, bool empty, std::uint64_t theta, std::uint64_t total,
                             std::size_t upper_count, Emit&& emit) {
    TupleTable<V> t(lg_k, width);
    if (empty) return t;
    t.nonempty = true;
    t.total = total;
    t.theta = theta;
    if (upper_count == 0) return t;
    // Sized for the count alone (growth resumes from any size), so a decoded
    // image allocates in proportion to its bytes; an intersection may hold
    // more than 2^(lg_k+1) slots do at 15/16.
    int lg = 1;
    while (upper_count > theta_capacity(lg, lg_k)) ++lg;
    t.rehash(lg, 0);
    const std::size_t mask = t.slots.size() - 1;
    emit([&](std::uint64_t h) -> V* {
        const std::size_t j = theta_probe(t.slots.data(), mask, h);
        t.slots[j] = h;
        ++t.count;
        return t.row(j);
    });
    return t;
}

/// What TupleSketch and ArrayOfDoublesSketch answer alike: the observers of
/// ThetaSketch over the table (estimates and bounds are ThetaSketch's for
/// the same hashes and theta).
template <class V>
class TupleBase {
  public:
    static constexpr int min_lg_k = theta_min_lg_k;
    static constexpr int max_lg_k = theta_max_lg_k;
    static constexpr std::uint8_t format_version = 1;  // of the Family::tuple frame
    static constexpr int default_lg_k = 12;
    static constexpr std::uint64_t max_theta = theta_max;

    /// Estimated distinct items: num_retained() / theta(); 0 when empty.
    [[nodiscard]] double estimate() const noexcept { return t_.estimate(); }
    /// ThetaSketch's binomial bounds at num_std_devs in [1, 3] (else std::invalid_argument).
    [[nodiscard]] double lower_bound(int num_std_devs) const {
        check_range("tally::TupleSketch::lower_bound", "num_std_devs", num_std_devs, 1, 3);
        return t_.lower_bound(num_std_devs);
    }
    [[nodiscard]] double upper_bound(int num_std_devs) const {
        check_range("tally::TupleSketch::upper_bound", "num_std_devs", num_std_devs, 1, 3);
        return t_.upper_bound(num_std_devs);
    }
    [[nodiscard]] double theta() const noexcept { return t_.theta_fraction(); }
    [[nodiscard]] std::uint64_t theta64() const noexcept { return t_.theta; }
    [[nodiscard]] std::uint32_t num_retained() const noexcept { return t_.count; }
    [[nodiscard]] bool is_estimation_mode() const noexcept { return t_.is_estimation_mode(); }
    [[nodiscard]] int lg_k() const noexcept { return t_.lg_k; }
    [[nodiscard]] std::uint64_t total() const noexcept { return t_.total; }
    [[nodiscard]] bool empty() const noexcept { return t_.empty(); }
    [[nodiscard]] bool contains_hash(std::uint64_t h) const noexcept { return t_.find(h) >= 0; }
    /// The retained 63-bit hashes in ascending order.
    [[nodiscard]] std::vector<std::uint64_t> hashes() const {
        std::vector<std::uint64_t> out;
        out.reserve(t_.count);
        for (const std::uint32_t i : t_.sorted_slots()) out.push_back(t_.slots[i]);
        return out;
    }
    void clear() noexcept { t_.clear(); }

  protected:
    [[nodiscard]] std::size_t heap_bytes() const noexcept {
        return t_.slots.capacity() * sizeof(std::uint64_t) + t_.vals.capacity() * sizeof(V);
    }
    TupleBase() = default;
    TupleBase(int lg_k, std::uint32_t width) : t_(lg_k, width) {}
    TupleTable<V> t_;
};

}  // namespace detail
TALLY_END_NAMESPACE
