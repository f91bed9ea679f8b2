// tally/sketch/top_k.hpp: Space-Saving heavy hitters with per-item error bounds.
//
// TopK<T> keeps k counters and answers "which items are the most frequent,
// and how often did each appear (within a stated interval)?". It holds every
// item whose frequency exceeds N/k, and it merges.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/hash.hpp"
#include "../core/serialize.hpp"
#include "../detail/throw.hpp"

namespace tally {
namespace detail {

template <class T>
inline constexpr bool top_k_is_string = std::is_same_v<T, std::string>;

// The key types TopK<T>'s lookups accept: T itself, and for std::string
// anything convertible to std::string_view (no string is built on a hit).
template <class T, class K>
concept TopKKey = (!top_k_is_string<T> && std::is_convertible_v<const K&, const T&>) ||
                  (top_k_is_string<T> && std::is_convertible_v<const K&, std::string_view>);

// Items as TopK stores them: every NaN is one item, as Hasher<float> hashes it.
template <class T, class K>
TALLY_ALWAYS_INLINE bool top_k_equal(const T& a, const K& b) noexcept {
    if constexpr (std::is_floating_point_v<T>) {
        return a == b || (std::isnan(a) && std::isnan(b));
    } else {
        return a == b;
    }
}

TALLY_ALWAYS_INLINE std::uint64_t top_k_sat_add(std::uint64_t a, std::uint64_t b) noexcept {
    std::uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<std::uint64_t>::max() : r;
}

}  // namespace detail

/// Space-Saving heavy hitters (Metwally, Agrawal, El Abbadi, "Efficient
/// computation of frequent and top-k elements in data streams", ICDT 2005),
/// weighted, with a 4-ary min-heap over the k counters and an open-addressing
/// index from item to counter, and the merge of mergeable summaries (see below).
///
/// Each monitored item x has a count c(x) and an error e(x). With N = total()
/// (sum of all weights added, over every merged input) and f(x) the true
/// frequency, TopK keeps a floor F (floor()) with:
///     c(x) - e(x) <= f(x) <= c(x)          for every monitored x
///     f(x) <= F                            for every unmonitored x
///     e(x) <= F <= N / k
/// Hence every item with f(x) > F, in particular every item with
/// f(x) > N / k, is monitored, and every count is within N / k of the truth.
/// estimate(x) = c(x) or F is never below f(x); lower_bound(x) never above.
///
/// Update (Space-Saving): a monitored item's count grows by the weight; a new
/// item takes a free counter, or else evicts the minimum counter m, taking
/// count m + w and error m, and F becomes m. The minimum is taken in a total
/// order (count, then hash), so the evicted item never depends on layout.
///
/// Merge (Agarwal, Cormode, Huang, Phillips, Wei, Yi, "Mergeable Summaries",
/// PODS 2012 / ACM TODS 38(4) 2013, Section 2: Misra-Gries and Space-Saving
/// summaries are isomorphic and merge with error N/k over the union; the
/// Space-Saving form of the combine step is also Cafaro, Pulimeno, Tempesta,
/// "A parallel space saving algorithm for frequent items and the Hurwitz zeta
/// distribution", Information Sciences 329, 2016): every item monitored by
/// either side gets upper = (c_A(x) or F_A) + (c_B(x) or F_B) and
/// lower = (c_A(x) - e_A(x) or 0) + (c_B(x) - e_B(x) or 0); the k largest
/// uppers are kept (count = upper, error = upper - lower), and the new floor is
/// the (k+1)-th largest upper, or F_A + F_B when at most k items remain. Every
/// item outside both summaries has upper F_A + F_B, which is at most every
/// other upper, so F' bounds every unmonitored item. F' <= N/k: the kept
/// counts sum to at most sum_A + sum_B <= N_A + N_B (a kept item absent from A
/// contributes F_A, at most the count of some A item not kept), and F' is at
/// most their minimum. So the merged summary carries exactly the guarantee
/// above for the concatenated stream, however many merges produced it.
/// merge is exactly commutative (the result depends only on the two inputs'
/// contents, in a total order) and empty is an exact identity; it is NOT
/// exactly associative (which items survive truncation to k depends on the
/// grouping), but every grouping satisfies the guarantee above.
///
/// Memory: per counter, a node (sizeof(T) + 32 bytes), a heap slot (24 bytes)
/// and at most two 4-byte index slots: about (sizeof(T) + 72) * k bytes, plus
/// the heap buffers of long std::string items (memory_bytes() reports it).
/// Storage grows as the summary fills, never beyond k counters.
///
/// Thread safety: const methods (estimate, lower_bound, contains, top,
/// serialize, accessors) are safe to call concurrently; add, merge and
/// assignment need exclusive access. For parallel ingest keep one TopK per
/// thread and merge.
///
/// Exceptions: add() allocates while the summary fills and copies an item
/// that enters, so it may throw std::bad_alloc (or what T's copy throws); it
/// then leaves the summary unchanged. Lookups are noexcept.
///
/// Example:
///     tally::TopK<std::string> top(100);
///     for (auto& path : requests) top.add(path);
///     for (auto& e : top.top(10))   // true count in [e.count - e.error, e.count]
///         std::printf("%s in [%llu, %llu]\n", e.item.c_str(),
///                     (unsigned long long)e.lower_bound(), (unsigned long long)e.count);
///
/// Serialized format (Family::top_k, version 1), little-endian; only for
/// arithmetic T and std::string:
///
///   offset  size   field
///   0       8      frame header ("TALY", family 4, version 1, 0, 0)
///   8       1      item kind: 1 unsigned integer, 2 signed integer,
///                  3 floating point (IEEE bits), 4 string
///   9       1      item bytes: sizeof(T) for kinds 1-3, 0 for strings
///   10      2      reserved, zero
///   12      8      k, in [1, max_k]
///   20      8      total N
///   28      8      floor F
///   36      8      n, the number of entries, <= k
///   44      ...    n entries, in top() order: the item (kinds 1-3: item
///                  bytes, LE; kind 4: u32 length, then the bytes), then
///                  u64 count, u64 error
///
/// deserialize() enforces the invariants above (error <= count, error <= F,
/// F == 0 unless n == k, F <= every count, sum of counts <= N, no duplicate
/// item), so every decoded summary keeps the guarantee of its encoder.
template <class T>
class TopK {
    static constexpr bool is_string = detail::top_k_is_string<T>;

  public:
    using value_type = T;
    static constexpr std::size_t max_k = std::size_t{1} << 28;
    static constexpr std::uint8_t format_version = 1;

    /// One monitored item: the true frequency lies in [count - error, count].
    struct Entry {
        T item;
        std::uint64_t count;
        std::uint64_t error;
        [[nodiscard]] std::uint64_t lower_bound() const noexcept { return count - error; }
    };

    /// Keeps k counters. Throws std::invalid_argument for k outside [1, 2^28].
    explicit TopK(std::size_t k) : k_(k) {
        if (k < 1 || k > max_k)
            detail::throw_invalid_argument("tally::TopK: k " + std::to_string(k) + " is out of range [1, " +
                                           std::to_string(max_k) + "]");
    }

    // ---- updates (exclusive access) ----------------------------------------

    /// Adds `count` occurrences of `item` (count 0 is a no-op). For
    /// TopK<std::string>, `item` may be anything convertible to string_view.
    template <class K>
        requires detail::TopKKey<T, K>
    void add(const K& item, std::uint64_t count = 1) {
        if (count == 0) return;
        if constexpr (is_string) {
            const std::string_view key(item);
            add_impl(key, Hasher<std::string_view>{}(key), count);
        } else if constexpr (std::is_floating_point_v<T>) {
            // One stored form per item: +0 for either zero, the quiet NaN for
            // every NaN, so equal items always serialize alike.
            T key = item;
            if (key == T(0)) key = T(0);
            if (std::isnan(key)) key = std::numeric_limits<T>::quiet_NaN();
            add_impl(key, Hasher<T>{}(key), count);
        } else {
            const T& key = item;
            add_impl(key, Hasher<T>{}(key), count);
        }
    }

    // ---- queries (thread-safe against each other) --------------------------

    /// Upper bound on the frequency: the count when monitored, else floor().
    template <class K>
        requires detail::TopKKey<T, K>
    [[nodiscard]] std::uint64_t estimate(const K& item) const noexcept {
        const std::uint32_t i = find_key(item);
        return i == npos ? floor_ : nodes_[i].count;
    }
    /// Lower bound on the frequency: count - error when monitored, else 0.
    template <class K>
        requires detail::TopKKey<T, K>
    [[nodiscard]] std::uint64_t lower_bound(const K& item) const noexcept {
        const std::uint32_t i = find_key(item);
        return i == npos ? 0 : nodes_[i].count - nodes_[i].error;
    }
    template <class K>
        requires detail::TopKKey<T, K>
    [[nodiscard]] bool contains(const K& item) const noexcept {
        return find_key(item) != npos;
    }

    /// The monitored items by count, largest first (ties: smaller error, then
    /// hash), at most n of them.
    [[nodiscard]] std::vector<Entry> top(std::size_t n = std::numeric_limits<std::size_t>::max()) const {
        std::vector<std::uint32_t> order = canonical_order();
        if (order.size() > n) order.resize(n);
        std::vector<Entry> out;
        out.reserve(order.size());
        for (const std::uint32_t i : order) out.push_back(Entry{nodes_[i].item, nodes_[i].count, nodes_[i].error});
        return out;
    }

    /// N: the sum of all weights added (and merged), saturating at 2^64 - 1.
    [[nodiscard]] std::uint64_t total() const noexcept { return total_; }
    /// F: an upper bound on the frequency of every unmonitored item; <= N/k.
    [[nodiscard]] std::uint64_t floor() const noexcept { return floor_; }
    [[nodiscard]] std::size_t k() const noexcept { return k_; }
    [[nodiscard]] std::size_t size() const noexcept { return nodes_.size(); }
    [[nodiscard]] bool empty() const noexcept { return nodes_.empty(); }
    [[nodiscard]] std::size_t memory_bytes() const noexcept {
        return sizeof(*this) + nodes_.capacity() * sizeof(Node) + heap_.capacity() * sizeof(HeapSlot) +
               slots_.capacity() * sizeof(std::uint32_t);
    }

    // ---- merge and serialization --------------------------------------------

    /// Same k (and, by type, T).
    [[nodiscard]] bool mergeable_with(const TopK& other) const noexcept { return k_ == other.k_; }

    /// The Agarwal et al. merge described above. Throws std::invalid_argument
    /// naming the mismatch, leaving *this unchanged, unless mergeable_with(other).
    TopK& merge(const TopK& other) {
        if (k_ != other.k_)
            detail::throw_invalid_argument("tally::TopK::merge: k mismatch (" + std::to_string(k_) + " vs " +
                                           std::to_string(other.k_) + ")");
        struct Candidate {
            const Node* node;
            std::uint64_t upper;
            std::uint64_t lower;
        };
        std::vector<Candidate> cand;
        cand.reserve(nodes_.size() + other.nodes_.size());
        for (const Node& a : nodes_) {
            const std::uint32_t j = other.find_hashed(a.item, a.hash);
            const std::uint64_t ub = j == npos ? other.floor_ : other.nodes_[j].count;
            const std::uint64_t lb = j == npos ? 0 : other.nodes_[j].count - other.nodes_[j].error;
            cand.push_back({&a, detail::top_k_sat_add(a.count, ub), detail::top_k_sat_add(a.count - a.error, lb)});
        }
        for (const Node& b : other.nodes_) {
            if (find_hashed(b.item, b.hash) != npos) continue;
            cand.push_back({&b, detail::top_k_sat_add(floor_, b.count), b.count - b.error});
        }
        std::sort(cand.begin(), cand.end(), [](const Candidate& x, const Candidate& y) {
            if (x.upper != y.upper) return x.upper > y.upper;
            if (x.lower != y.lower) return x.lower > y.lower;
            return x.node->hash < y.node->hash;
        });
        TopK result(k_);
        result.total_ = detail::top_k_sat_add(total_, other.total_);
        result.floor_ = cand.size() > k_ ? cand[k_].upper : detail::top_k_sat_add(floor_, other.floor_);
        if (cand.size() > k_) cand.resize(k_);
        result.nodes_.reserve(cand.size());
        for (const Candidate& c : cand)
            result.nodes_.push_back(Node{c.node->item, c.node->hash, c.upper, c.upper - c.lower, 0});
        result.rebuild_index(false);
        *this = std::move(result);
        return *this;
    }

    [[nodiscard]] std::vector<std::byte> serialize() const
        requires(std::is_arithmetic_v<T> || is_string)
    {
        ByteWriter out(44 + nodes_.size() * (item_wire_bytes() + 16));
        out.header(Family::top_k, format_version);
        out.u8(item_kind());
        out.u8(static_cast<std::uint8_t>(is_string ? 0 : sizeof(T)));
        out.u16(0);
        out.u64(k_);
        out.u64(total_);
        out.u64(floor_);
        out.u64(nodes_.size());
        for (const std::uint32_t i : canonical_order()) {
            const Node& n = nodes_[i];
            write_item(out, n.item);
            out.u64(n.count);
            out.u64(n.error);
        }
        return out.take();
    }

    /// Throws tally::FormatError for anything but a valid encoding of a
    /// TopK<T>; never reads past `bytes`; allocates in proportion to the
    /// entries actually present, whatever k the bytes claim.
    [[nodiscard]] static TopK deserialize(std::span<const std::byte> bytes)
        requires(std::is_arithmetic_v<T> || is_string)
    {
        ByteReader in(bytes);
        in.header(Family::top_k, format_version);
        const std::uint8_t kind = in.u8();
        const std::uint8_t size = in.u8();
        if (kind != item_kind() || size != (is_string ? 0 : sizeof(T)))
            detail::throw_format_error("tally::TopK: item kind " + std::to_string(kind) + "/" + std::to_string(size) +
                                       " bytes where " + std::to_string(item_kind()) + "/" +
                                       std::to_string(is_string ? 0 : sizeof(T)) + " was expected");
        format_check(in.u16() == 0, "TopK: reserved bytes are not zero");
        const std::uint64_t k = in.u64();
        format_check(k >= 1 && k <= max_k, "TopK: k out of range [1, 2^28]");
        TopK s(static_cast<std::size_t>(k));
        s.total_ = in.u64();
        s.floor_ = in.u64();
        const std::uint64_t n = in.count(in.u64(), item_wire_bytes() + 16, k, "TopK entry");
        format_check(n == k || s.floor_ == 0, "TopK: nonzero floor in a summary that is not full");
        s.nodes_.reserve(static_cast<std::size_t>(n));
        std::uint64_t sum = 0;
        for (std::uint64_t e = 0; e < n; ++e) {
            T item = read_item(in);
            const std::uint64_t count = in.u64();
            const std::uint64_t error = in.u64();
            format_check(error <= count, "TopK: entry error exceeds its count");
            format_check(error <= s.floor_, "TopK: entry error exceeds the floor");
            format_check(count >= s.floor_, "TopK: entry count below the floor");
            sum = detail::top_k_sat_add(sum, count);
            const std::uint64_t h = hash_item(item);
            s.nodes_.push_back(Node{std::move(item), h, count, error, 0});
        }
        format_check(sum <= s.total_, "TopK: counts sum to more than total");
        in.expect_end();
        format_check(s.rebuild_index(true), "TopK: duplicate item");
        return s;
    }

  private:
    static constexpr std::uint32_t npos = std::numeric_limits<std::uint32_t>::max();

    struct Node {
        T item;
        std::uint64_t hash;
        std::uint64_t count;
        std::uint64_t error;
        std::uint32_t heap_pos;
    };
    struct HeapSlot {
        std::uint64_t count;
        std::uint64_t hash;
        std::uint32_t node;
    };

    static std::uint64_t hash_item(const T& item) noexcept {
        if constexpr (is_string) {
            return Hasher<std::string_view>{}(std::string_view(item));
        } else {
            return Hasher<T>{}(item);
        }
    }

    template <class K>
    std::uint32_t find_key(const K& item) const noexcept {
        if constexpr (is_string) {
            const std::string_view key(item);
            return find_hashed(key, Hasher<std::string_view>{}(key));
        } else {
            const T& key = item;
            return find_hashed(key, Hasher<T>{}(key));
        }
    }

    template <class K>
    std::uint32_t find_hashed(const K& key, std::uint64_t h) const noexcept {
        if (slots_.empty()) return npos;
        for (std::size_t s = h & mask_;; s = (s + 1) & mask_) {
            const std::uint32_t v = slots_[s];
            if (v == 0) return npos;
            const Node& n = nodes_[v - 1];
            if (n.hash == h && detail::top_k_equal(n.item, key)) return v - 1;
        }
    }

    template <class K>
    void add_impl(const K& key, std::uint64_t h, std::uint64_t count) {
        const std::uint32_t i = find_hashed(key, h);
        if (i != npos) {
            Node& n = nodes_[i];
            n.count = detail::top_k_sat_add(n.count, count);
            heap_[n.heap_pos].count = n.count;
            sift_down(n.heap_pos);
        } else if (nodes_.size() < k_) {
            insert_new(key, h, count);  // may throw, before any change
        } else {
            replace_min(key, h, count);  // may throw, before any change
        }
        total_ = detail::top_k_sat_add(total_, count);
    }

    template <class K>
    void insert_new(const K& key, std::uint64_t h, std::uint64_t count) {
        // Everything that can throw happens before the first change.
        Node node{T(key), h, count, 0, static_cast<std::uint32_t>(heap_.size())};
        if (nodes_.size() == nodes_.capacity()) nodes_.reserve(std::min<std::size_t>(k_, 2 * nodes_.size() + 8));
        if (heap_.size() == heap_.capacity()) heap_.reserve(std::min<std::size_t>(k_, 2 * heap_.size() + 8));
        if (2 * (nodes_.size() + 1) > slots_.size()) grow_slots(std::max<std::size_t>(16, 2 * slots_.size()));
        const auto idx = static_cast<std::uint32_t>(nodes_.size());
        nodes_.push_back(std::move(node));
        heap_.push_back(HeapSlot{count, h, idx});
        slot_insert(idx, h);
        sift_up(nodes_[idx].heap_pos);
    }

    template <class K>
    void replace_min(const K& key, std::uint64_t h, std::uint64_t count) {
        T item(key);  // may throw; nothing has changed yet
        const std::uint32_t idx = heap_[0].node;
        Node& n = nodes_[idx];
        slot_erase(idx, n.hash);
        const std::uint64_t m = n.count;
        n.item = std::move(item);
        n.hash = h;
        n.count = detail::top_k_sat_add(m, count);
        n.error = m;
        heap_[0].count = n.count;
        heap_[0].hash = h;
        floor_ = m;
        slot_insert(idx, h);
        sift_down(0);
    }

    // ---- the min-heap over (count, hash) ----
    // A 4-ary heap whose slots carry their own keys: the sift loops compare
    // contiguous slots (four children in 96 bytes) instead of chasing node
    // indexes, and half as many levels as a binary heap. Node::count is the
    // authority for queries; HeapSlot::count mirrors it.
    static constexpr std::size_t arity = 4;
    static TALLY_ALWAYS_INLINE bool less(const HeapSlot& x, const HeapSlot& y) noexcept {
        // One 128-bit comparison (cmp + sbb, no branch): counts tie often
        // near the bottom, where a short-circuit mispredicts.
        return ((static_cast<detail::uint128_t>(x.count) << 64) | x.hash) <
               ((static_cast<detail::uint128_t>(y.count) << 64) | y.hash);
    }
    // The smaller of two heap positions, without a branch.
    TALLY_ALWAYS_INLINE std::size_t smaller(std::size_t a, std::size_t b) const noexcept {
        const std::size_t take_b = 0 - static_cast<std::size_t>(less(heap_[b], heap_[a]));
        return a ^ ((a ^ b) & take_b);
    }
    TALLY_ALWAYS_INLINE void place(std::size_t pos, const HeapSlot& slot) noexcept {
        heap_[pos] = slot;
        nodes_[slot.node].heap_pos = static_cast<std::uint32_t>(pos);
    }
    void sift_down(std::size_t pos) noexcept {
        const std::size_t n = heap_.size();
        const HeapSlot moving = heap_[pos];
        for (;;) {
            const std::size_t first = arity * pos + 1;
            if (first >= n) break;
            const std::size_t last = std::min(first + arity, n);
            std::size_t best = first;
            if (TALLY_LIKELY(last - first == arity)) {
                best = smaller(smaller(first, first + 1), smaller(first + 2, first + 3));
            } else {
                for (std::size_t c = first + 1; c < last; ++c) best = smaller(best, c);
            }
            if (!less(heap_[best], moving)) break;
            place(pos, heap_[best]);
            pos = best;
        }
        place(pos, moving);
    }
    void sift_up(std::size_t pos) noexcept {
        const HeapSlot moving = heap_[pos];
        while (pos > 0) {
            const std::size_t parent = (pos - 1) / arity;
            if (!less(moving, heap_[parent])) break;
            place(pos, heap_[parent]);
            pos = parent;
        }
        place(pos, moving);
    }

    // ---- the index: linear probing, slot = node index + 1, 0 = empty ----
    void slot_insert(std::uint32_t idx, std::uint64_t h) noexcept {
        std::size_t s = h & mask_;
        while (slots_[s] != 0) s = (s + 1) & mask_;
        slots_[s] = idx + 1;
    }
    void slot_erase(std::uint32_t idx, std::uint64_t h) noexcept {
        std::size_t i = h & mask_;
        while (slots_[i] != idx + 1) i = (i + 1) & mask_;
        // Backward-shift deletion (Knuth, TAOCP 6.4 Algorithm R): no tombstones.
        for (std::size_t j = (i + 1) & mask_; slots_[j] != 0; j = (j + 1) & mask_) {
            const std::size_t home = nodes_[slots_[j] - 1].hash & mask_;
            if (((j - home) & mask_) >= ((j - i) & mask_)) {
                slots_[i] = slots_[j];
                i = j;
            }
        }
        slots_[i] = 0;
    }
    void grow_slots(std::size_t n) {
        std::vector<std::uint32_t> fresh(n, 0);  // may throw; nothing has changed yet
        slots_.swap(fresh);
        mask_ = n - 1;
        for (std::uint32_t i = 0; i < nodes_.size(); ++i) slot_insert(i, nodes_[i].hash);
    }

    // Rebuilds index and heap from nodes_; false when two nodes hold the same item.
    bool rebuild_index(bool check_duplicates) {
        const std::size_t want = std::bit_ceil(std::max<std::size_t>(16, 2 * nodes_.size()));
        slots_.assign(want, 0);
        mask_ = want - 1;
        for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
            if (check_duplicates && find_hashed(nodes_[i].item, nodes_[i].hash) != npos) return false;
            slot_insert(i, nodes_[i].hash);
        }
        heap_.resize(nodes_.size());
        for (std::uint32_t i = 0; i < nodes_.size(); ++i) place(i, HeapSlot{nodes_[i].count, nodes_[i].hash, i});
        for (std::size_t p = heap_.size() / arity + 1; p-- > 0;)
            if (p < heap_.size()) sift_down(p);
        return true;
    }

    std::vector<std::uint32_t> canonical_order() const {
        std::vector<std::uint32_t> order(nodes_.size());
        for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
        std::sort(order.begin(), order.end(), [this](std::uint32_t a, std::uint32_t b) {
            const Node& x = nodes_[a];
            const Node& y = nodes_[b];
            if (x.count != y.count) return x.count > y.count;
            if (x.error != y.error) return x.error < y.error;
            if (x.hash != y.hash) return x.hash < y.hash;
            return a < b;
        });
        return order;
    }

    // ---- item encoding ----
    static constexpr std::uint8_t item_kind() noexcept {
        if constexpr (is_string) {
            return 4;
        } else if constexpr (std::is_floating_point_v<T>) {
            return 3;
        } else if constexpr (std::is_signed_v<T>) {
            return 2;
        } else {
            return 1;
        }
    }
    static constexpr std::size_t item_wire_bytes() noexcept { return is_string ? 4 : sizeof(T); }
    template <std::size_t N>
    using uint_of = std::conditional_t<
        N == 1, std::uint8_t,
        std::conditional_t<N == 2, std::uint16_t, std::conditional_t<N == 4, std::uint32_t, std::uint64_t>>>;

    static void write_item(ByteWriter& out, const T& item) {
        if constexpr (is_string) {
            format_check(item.size() <= std::numeric_limits<std::uint32_t>::max(), "TopK: item longer than 4 GiB");
            out.string(item);
        } else {
            static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                          "tally::TopK serializes items of 1, 2, 4 or 8 bytes");
            using U = uint_of<sizeof(T)>;
            U bits;
            std::memcpy(&bits, &item, sizeof(T));
            if constexpr (sizeof(T) == 1) {
                out.u8(bits);
            } else if constexpr (sizeof(T) == 2) {
                out.u16(bits);
            } else if constexpr (sizeof(T) == 4) {
                out.u32(bits);
            } else {
                out.u64(bits);
            }
        }
    }
    static T read_item(ByteReader& in) {
        if constexpr (is_string) {
            return in.string();
        } else {
            using U = uint_of<sizeof(T)>;
            U bits;
            if constexpr (sizeof(T) == 1) {
                bits = in.u8();
            } else if constexpr (sizeof(T) == 2) {
                bits = in.u16();
            } else if constexpr (sizeof(T) == 4) {
                bits = in.u32();
            } else {
                bits = in.u64();
            }
            if constexpr (std::is_same_v<T, bool>) {
                format_check(bits <= 1, "TopK: bool item is neither 0 nor 1");
            }
            T item;
            std::memcpy(&item, &bits, sizeof(T));
            return item;
        }
    }

    std::size_t k_;
    std::uint64_t total_ = 0;
    std::uint64_t floor_ = 0;
    std::vector<Node> nodes_;           // the monitored items; index stable until merge
    std::vector<HeapSlot> heap_;        // 4-ary min-heap by (count, hash)
    std::vector<std::uint32_t> slots_;  // item -> node index + 1
    std::size_t mask_ = 0;
};

}  // namespace tally
