// tally/sketch/frequency/top_k.hpp: frequent items (heavy hitters) with a deterministic
// error bound, in a flat table maintained by batch purges. Guide:
// docs/top_k.md (guarantee proof, memory, measurements, wire format).
#pragma once

#include "../../detail/abi.hpp"

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

#include "../../core/hash.hpp"
#include "../../core/platform.hpp"
#include "../../core/seed.hpp"
#include "../../core/serialize.hpp"
#include "../common/item_codec.hpp"
#include "../common/detail/item_codec.hpp"
#include "../../detail/primitives.hpp"
#include "../../detail/throw.hpp"
#include "detail/top_k_group.hpp"
#include "detail/top_k_key.hpp"
#include "detail/top_k_string.hpp"

#if defined(__GNUC__) || defined(__clang__)
#define TALLY_DETAIL_TOP_K_NOINLINE __attribute__((noinline))
#else
#define TALLY_DETAIL_TOP_K_NOINLINE
#endif

TALLY_BEGIN_NAMESPACE

/// Frequent items: Misra-Gries counters ("Finding repeated elements", Sci.
/// Comput. Program. 2, 1982) in one open-addressed table of 16-slot groups
/// with a tag byte per slot, probed 16 at a time (SSE2), purged in batches
/// at a quantile of the counts (Anderson et al., "A high-performance
/// algorithm for identifying frequent items in data streams", IMC 2017);
/// merged as in Agarwal et al., "Mergeable summaries", PODS 2012.
///
/// Guarantee (deterministic): with N = total(), f(x) the true frequency and
/// D = error_bound(),  D <= (N - sum of held counts) / k() <= N / k(), and
///     lower_bound(x) <= f(x) <= estimate(x) = lower_bound(x) + D,
/// so every item with f(x) > N / k() is held (contains(x)). TopK(k) sizes
/// the table so that k() >= k; a table of L slots holds up to 7L/8 counters
/// and has k() = 3L/8. Merges and weighted adds keep the guarantee.
///
/// Cost: add is O(1) amortized (one group probe, without a branch on hit or
/// miss for small trivially copyable T and strings of <= 16 bytes; a purge
/// every > L/2 new items, O(L)). Memory: L slots of sizeof(T) + 8 bytes plus
/// a tag byte (std::string: 33 bytes, plus the bytes of held strings over 16
/// bytes), allocated as the table fills.
/// Thread safety: const methods may run concurrently; add, merge, clear need
/// exclusive access. Lookups are noexcept; add may throw std::bad_alloc and
/// then leaves the summary unchanged. Seed::random() for untrusted items.
///
///     tally::TopK<std::string> top(100);       // every item above N/100 held
///     for (auto& path : requests) top.add(path);
///     for (auto& e : top.top(10)) use(e.item, e.lower_bound(), e.count);
template <class T>
class TopK {
    static constexpr bool is_string = detail::top_k_is_string<T>;
    static_assert(is_string || (std::is_default_constructible_v<T> && std::is_copy_assignable_v<T>),
                  "tally::TopK<T> stores items inline: T must be default-constructible and copy-assignable");

  public:
    using value_type = T;
    /// Largest k accepted by TopK(k).
    static constexpr std::size_t max_k = std::size_t{1} << 28;
    static constexpr unsigned min_lg_slots = 4;
    static constexpr unsigned max_lg_slots = 30;
    static constexpr std::uint8_t format_version = 3;

    /// One held item: the true frequency lies in [count - error, count].
    struct Entry {
        T item;
        std::uint64_t count;
        std::uint64_t error;
        [[nodiscard]] std::uint64_t lower_bound() const noexcept { return count - error; }
    };

    /// Answers top-k reliably: k() >= k. Throws std::invalid_argument for k
    /// outside [1, max_k].
    explicit TopK(std::size_t k, Seed seed = Seed{}) : TopK(lg_for_k(k), seed, 0) {}

    /// The smallest table with at least `counters` counters (k() = 3/7 of them).
    [[nodiscard]] static TopK with_counters(std::size_t counters, Seed seed = Seed{}) {
        detail::check_range("tally::TopK::with_counters", "counters", counters, std::size_t{1}, max_counters(max_lg_slots));
        unsigned lg = min_lg_slots;
        while (max_counters(lg) < counters) ++lg;
        return TopK(lg, seed, 0);
    }

    /// The largest table whose memory_bytes() never exceeds `bytes` (for
    /// std::string, plus the string arena: at most 4x the most string bytes
    /// held at once, plus 64).
    [[nodiscard]] static TopK with_memory(std::size_t bytes, Seed seed = Seed{}) {
        detail::check_range("tally::TopK::with_memory", "bytes", bytes, table_bytes(min_lg_slots),
                            std::numeric_limits<std::size_t>::max());
        unsigned lg = min_lg_slots;
        while (lg < max_lg_slots && table_bytes(lg + 1) <= bytes) ++lg;
        return TopK(lg, seed, 0);
    }

    // ---- updates (exclusive access) ----------------------------------------

    /// Adds `count` occurrences of `item` (count 0 is a no-op). For
    /// TopK<std::string>, `item` may be anything convertible to string_view.
    template <class K>
        requires detail::TopKKey<T, K>
    void add(const K& item, std::uint64_t count = 1) {
        if (count == 0) return;
        if constexpr (is_string) {
            const StrKey key = detail::top_k_string_key(std::string_view(item));
            if (TALLY_LIKELY(key.len <= detail::top_k_inline_max)) {
                add_fast(key, hash_key(key), count);
            } else {
                add_slow(key, hash_key(key), count);
            }
        } else {
            const T key = canonical(item);
            if constexpr (branch_free) {
                add_fast(key, slot_hash(key), count);
            } else {
                add_slow(key, slot_hash(key), count);
            }
        }
    }

    /// Forgets every item; keeps the table size, k() and the seed.
    void clear() noexcept;

    // ---- queries (thread-safe against each other) --------------------------

    /// Upper bound on the frequency: held count + error_bound(), else error_bound().
    template <class K>
        requires detail::TopKKey<T, K>
    [[nodiscard]] std::uint64_t estimate(const K& item) const noexcept {
        const std::size_t i = find_key(item);
        return i == npos ? offset_ : detail::sat_add(slots_[i].count, offset_);
    }
    /// Lower bound on the frequency: the held count, else 0.
    template <class K>
        requires detail::TopKKey<T, K>
    [[nodiscard]] std::uint64_t lower_bound(const K& item) const noexcept {
        const std::size_t i = find_key(item);
        return i == npos ? 0 : slots_[i].count;
    }
    template <class K>
        requires detail::TopKKey<T, K>
    [[nodiscard]] bool contains(const K& item) const noexcept {
        return find_key(item) != npos;
    }

    /// The held items by count, largest first (ties by hash), at most n.
    [[nodiscard]] std::vector<Entry> top(std::size_t n = std::numeric_limits<std::size_t>::max()) const;

    /// N: the sum of all counts added and merged, saturating at 2^64 - 1.
    [[nodiscard]] std::uint64_t total() const noexcept { return total_; }
    /// D: the largest error of any estimate; <= N / k().
    [[nodiscard]] std::uint64_t error_bound() const noexcept { return offset_; }
    /// k of the guarantee: every item above N / k() is held.
    [[nodiscard]] std::size_t k() const noexcept { return k_; }
    /// Most counters held at once (7/8 of the table's slots).
    [[nodiscard]] std::size_t counters() const noexcept { return max_counters(lg_max_); }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] bool empty() const noexcept { return total_ == 0; }
    [[nodiscard]] Seed seed() const noexcept { return seed_; }
    [[nodiscard]] std::size_t memory_bytes() const noexcept {
        std::size_t bytes =
            sizeof(*this) + slots_.capacity() * sizeof(Slot) + tags_.capacity() * sizeof(detail::TopKTag);
        if constexpr (is_string) bytes += arena_.capacity();
        return bytes;
    }

    // ---- merge and serialization --------------------------------------------

    /// Same number of counters (seeds may differ: items are rehashed).
    [[nodiscard]] bool mergeable_with(const TopK& other) const noexcept { return lg_max_ == other.lg_max_; }

    /// Adds the other summary's counts and error bounds, then, if more than
    /// counters() items remain, subtracts the (counters()+1)-th largest count
    /// from every count (Agarwal et al.). k() becomes the smaller of the two.
    /// Throws std::invalid_argument, leaving *this unchanged, unless
    /// mergeable_with(other).
    TopK& merge(const TopK& other);

    /// The bytes documented in docs/top_k.md (version 3). Throws
    /// tally::FormatError for a string item longer than 4 GiB.
    [[nodiscard]] std::vector<std::byte> serialize() const
        requires detail::WireItem<T>
;

    /// Reads versions 3 and 2, and version 1 (the Space-Saving format of earlier
    /// releases, converted as in Agarwal et al.). Throws tally::FormatError
    /// for anything but a valid encoding of a TopK<T>; never reads past
    /// `bytes`; allocates in proportion to the entries present.
    [[nodiscard]] static TopK deserialize(std::span<const std::byte> bytes)
        requires detail::WireItem<T>
;

  private:
    using Codec = detail::WireCodec<std::conditional_t<detail::WireItem<T>, T, std::string>>;
    static constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();

    struct FixedSlot {
        T item;
        std::uint64_t count;  // 0: empty
    };
    // Up to 16 bytes: (a, b) as wyhash reads them (detail/top_k_string.hpp),
    // no arena. Longer: a = the hash, b = 0, the bytes at arena_[offset].
    struct StringSlot {
        std::uint64_t count;  // 0: empty
        std::uint64_t a;
        std::uint64_t b;
        std::uint32_t len;
        std::uint32_t offset;
    };
    using StrKey = detail::TopKStringKey;
    using Slot = std::conditional_t<is_string, StringSlot, FixedSlot>;

    TopK(unsigned lg_max, Seed seed, int) : lg_max_(lg_max), k_(guarantee_k(lg_max)), seed_(seed) {
        if constexpr (is_string) wy_seed_ = detail::top_k_wy_seed(seed.value);
    }

    // A table of L slots holds up to 7L/8 items (the most that groups of 16
    // probed by tags carry without long probe paths) and purges at rank
    // 3L/8, which frees at least L/2 + 1 slots per purge.
    static constexpr std::size_t max_counters(unsigned lg) noexcept { return (std::size_t{7} << lg) / 8; }
    // Version 2 summaries were written by tables that held at most 3L/4 items.
    static constexpr std::size_t max_counters_v2(unsigned lg) noexcept { return (std::size_t{3} << lg) / 4; }
    static constexpr std::size_t guarantee_k(unsigned lg) noexcept { return (std::size_t{3} << lg) / 8; }
    static constexpr std::size_t table_bytes(unsigned lg) noexcept {
        return sizeof(TopK) + (std::size_t{1} << lg) * (sizeof(Slot) + sizeof(detail::TopKTag));
    }
    static unsigned lg_for_k(std::size_t k) {
        detail::check_range("tally::TopK::TopK", "k", k, std::size_t{1}, max_k);
        unsigned lg = min_lg_slots;
        while (guarantee_k(lg) < k) ++lg;
        return lg;
    }

    // ---- hashing: Hasher<T>, mixed with the seed when there is one ----
    template <class K>
    static T canonical(const K& item) noexcept {
        T key = item;
        if constexpr (std::is_floating_point_v<T>) {
            // One stored form per item: +0 for either zero, the quiet NaN for every NaN.
            if (key == T(0)) key = T(0);
            if (std::isnan(key)) key = std::numeric_limits<T>::quiet_NaN();
        }
        return key;
    }
    // hash64 of the bytes, seeded; for up to 16 bytes from the key's (a, b).
    TALLY_ALWAYS_INLINE std::uint64_t hash_key(const StrKey& key) const noexcept
        requires is_string
    {
        if (TALLY_LIKELY(key.len <= detail::top_k_inline_max))
            return detail::top_k_short_hash(key.a, key.b, key.len, wy_seed_);
        return hash64(key.data, key.len, seed_.value);
    }
    TALLY_ALWAYS_INLINE std::uint64_t hash_key(const T& key) const noexcept
        requires(!is_string)
    {
        const std::uint64_t h = Hasher<T>{}(key);
        return seed_.value == 0 ? h : detail::mix64(h ^ seed_.value);
    }
    // Where a fixed-size item sits. Integers under the default seed take one
    // multiply (Knuth's multiplicative hashing: the table reads the product's
    // top bits, which depend on every bit of the key); everything else takes
    // hash_key. The order of equal counts in top() is by hash_key either way.
    TALLY_ALWAYS_INLINE std::uint64_t slot_hash(const T& key) const noexcept
        requires(!is_string)
    {
        if constexpr (std::is_integral_v<T>) {
            if (seed_.value == 0) return static_cast<std::uint64_t>(key) * 0x9e3779b97f4a7c15ull;
        }
        return hash_key(key);
    }
    // The tag is the hash's top 7 bits (detail::top_k_tag), the home group the bits below them.
    TALLY_ALWAYS_INLINE std::size_t home_of(std::uint64_t h) const noexcept {
        return static_cast<std::size_t>(h >> home_shift_) & home_mask_;
    }
    std::uint64_t stored_hash(std::size_t i) const noexcept {
        if constexpr (is_string) {
            return hash_of_slot(slots_[i]);
        } else {
            return hash_key(slots_[i].item);
        }
    }

    // The held string's bytes: in `buf` (16 bytes) when short, else in the arena.
    std::string_view view_at(std::size_t i, char* buf) const noexcept
        requires is_string
    {
        const Slot& s = slots_[i];
        if (s.len <= detail::top_k_inline_max) {
            detail::top_k_string_bytes(s.a, s.b, s.len, buf);
            return std::string_view(buf, s.len);
        }
        return std::string_view(arena_.data() + s.offset, s.len);
    }
    StrKey key_at(std::size_t i) const noexcept
        requires is_string
    {
        const Slot& s = slots_[i];
        if (s.len <= detail::top_k_inline_max) return StrKey{nullptr, s.len, s.a, s.b};
        return StrKey{arena_.data() + s.offset, s.len, 0, 0};
    }
    // The bytes a held string keeps in the arena.
    static std::size_t arena_len(const Slot& s) noexcept
        requires is_string
    {
        return s.len > detail::top_k_inline_max ? s.len : 0;
    }
    T item_at(std::size_t i) const {
        if constexpr (is_string) {
            char buf[detail::top_k_inline_max];
            return std::string(view_at(i, buf));
        } else {
            return slots_[i].item;
        }
    }

    // ---- the table: groups of 16 slots with one tag byte each ----
    // (detail/top_k_group.hpp). An item lives in the first group, from its
    // home group (home_of(h)) on, that had a free slot when it was
    // placed, so a lookup stops at the first group with a free slot. Nothing
    // is deleted between purges, and purge() re-places what it keeps, so that
    // stays true. A slot is free iff its tag is empty iff its count is 0.
    using Group = detail::TopKGroup;
    static constexpr std::size_t group_width = detail::top_k_group_width;
    // Small trivially copyable items take the add without a hit/miss branch.
    static constexpr bool branch_free = !is_string && std::is_trivially_copyable_v<T> && sizeof(T) <= 16;

    template <class K>
    std::size_t find_key(const K& item) const noexcept {
        if constexpr (is_string) {
            const StrKey key = detail::top_k_string_key(std::string_view(item));
            return find_hashed(key, hash_key(key));
        } else {
            const T key = canonical(item);
            return find_hashed(key, slot_hash(key));
        }
    }

    template <class K>
    TALLY_ALWAYS_INLINE bool slot_holds(const Slot& s, const K& key, std::uint64_t h) const noexcept {
        if constexpr (is_string) {
            if (key.len <= detail::top_k_inline_max) return s.len == key.len && s.a == key.a && s.b == key.b;
            return s.len == key.len && s.a == h && std::memcmp(arena_.data() + s.offset, key.data, key.len) == 0;
        } else {
            (void)h;
            return detail::top_k_equal(s.item, key);
        }
    }

    // `free_slot`, when given, gets the first free slot on the path if the item is absent.
    template <class K>
    std::size_t find_hashed(const K& key, std::uint64_t h, std::size_t* free_slot = nullptr) const noexcept {
        if (slots_.empty()) return npos;
        const detail::TopKTag tag = detail::top_k_tag(h);
        for (std::size_t base = home_of(h);; base = (base + group_width) & mask_) {
            const Group g = Group::load(tags_.data() + base);
            for (std::uint32_t m = g.match(tag); m != 0; m &= m - 1) {
                const std::size_t i = base + static_cast<std::size_t>(std::countr_zero(m));
                if (slot_holds(slots_[i], key, h)) return i;
            }
            if (const std::uint32_t e = g.empty(); e != 0) {
                if (free_slot != nullptr) *free_slot = base + static_cast<std::size_t>(std::countr_zero(e));
                return npos;
            }
        }
    }

    // The first free slot on h's probe path (there is one: size_ <= 7L/8).
    std::size_t empty_from(std::uint64_t h) const noexcept {
        for (std::size_t base = home_of(h);; base = (base + group_width) & mask_) {
            const std::uint32_t e = Group::load(tags_.data() + base).empty();
            if (e != 0) return base + static_cast<std::size_t>(std::countr_zero(e));
        }
    }

    // The common case without a branch on hit or miss (on a Zipf stream
    // either is frequent, and a mispredicted branch costs more than the rest
    // of the add): the item is the first tag match of its home group, if that
    // slot holds it, else it takes the group's first free slot. Either way
    // that slot gets the item, its tag, and count + weight (a free slot's
    // count is 0). Another match to check, a full home group or a full table
    // take add_slow.
    template <class K>
    TALLY_ALWAYS_INLINE void add_fast(const K& key, std::uint64_t h, std::uint64_t count) {
        if (TALLY_UNLIKELY(size_ >= limit_)) return add_cold(key, h, count);
        const std::size_t base = home_of(h);
        const detail::TopKTag tag = detail::top_k_tag(h);
        const Group g = Group::load(tags_.data() + base);
        const std::uint32_t match = g.match(tag);
        const std::uint32_t empty = g.empty();
        Slot* const s = slots_.data() + base;
        // Integer arithmetic rather than && or ?:, and countr_zero of a
        // nonzero word (bit 16 is a stop), so that compilers keep it branch-free.
        constexpr std::uint32_t stop = 1u << group_width;
        const auto first = static_cast<std::uint32_t>(std::countr_zero(match | stop)) & (group_width - 1);
        const std::uint32_t hit = (match >> first) & static_cast<std::uint32_t>(fast_equal(s[first], key));
        const std::uint32_t other = static_cast<std::uint32_t>((match & (match - 1)) != 0);
        if (TALLY_UNLIKELY((hit ^ 1u) & (static_cast<std::uint32_t>(empty == 0) | other)))
            return add_cold(key, h, count);
        const std::uint32_t take = 0u - hit;  // all ones on a hit
        const auto at = static_cast<std::size_t>(std::countr_zero((match & take) | (empty & ~take) | stop));
        // The held count is read with the item, not after `at` is known (a
        // free slot's count is 0), and a hit writes its tag to a sink: a later
        // group load then never waits on a byte store that changed nothing.
        const std::uint64_t held = s[first].count & (std::uint64_t{0} - hit);
        fast_store(s[at], key);
        s[at].count = detail::sat_add(held, count);
        detail::TopKTag* const tag_at = tags_.data() + base + at;
        *(hit != 0 ? &tag_sink_ : tag_at) = tag;
        size_ += hit ^ 1u;
        total_ = detail::sat_add(total_, count);
    }

    // add_fast's item compare and store: integer operations only, so that
    // the compiler keeps the add free of branches. Strings here are short.
    TALLY_ALWAYS_INLINE static bool fast_equal(const Slot& s, const T& key) noexcept
        requires(!is_string)
    {
        return detail::top_k_equal(s.item, key);
    }
    TALLY_ALWAYS_INLINE static bool fast_equal(const Slot& s, const StrKey& key) noexcept
        requires is_string
    {
        return static_cast<bool>(static_cast<unsigned>(s.a == key.a) & static_cast<unsigned>(s.b == key.b) &
                                 static_cast<unsigned>(s.len == key.len));
    }
    TALLY_ALWAYS_INLINE static void fast_store(Slot& s, const T& key) noexcept
        requires(!is_string)
    {
        s.item = key;
    }
    TALLY_ALWAYS_INLINE static void fast_store(Slot& s, const StrKey& key) noexcept
        requires is_string
    {
        s.a = key.a;
        s.b = key.b;
        s.len = static_cast<std::uint32_t>(key.len);
    }

    template <class K>
    TALLY_DETAIL_TOP_K_NOINLINE void add_cold(const K& key, std::uint64_t h, std::uint64_t count) {
        add_slow(key, h, count);
    }

    // A lookup, then on a miss everything that can throw (table growth,
    // string storage) before the first change.
    template <class K>
    TALLY_ALWAYS_INLINE void add_slow(const K& key, std::uint64_t h, std::uint64_t count) {
        std::size_t free_slot = npos;
        const std::size_t i = find_hashed(key, h, &free_slot);
        if (i != npos) {
            slots_[i].count = detail::sat_add(slots_[i].count, count);
        } else {
            if constexpr (is_string) {
                if (key.len > detail::top_k_inline_max) reserve_string(key.len);
            }
            if (size_ >= limit_) {  // full, or no table yet
                if (lg_slots_ < lg_max_) {
                    grow(slots_.empty() ? min_lg_slots : lg_slots_ + 1);
                } else {
                    purge();
                }
                free_slot = empty_from(h);
            }
            place_at(free_slot, key, h, count);
        }
        total_ = detail::sat_add(total_, count);
    }

    // Inserts an item known to be absent into a table with room for it.
    template <class K>
    void place_new(const K& key, std::uint64_t h, std::uint64_t count) noexcept {
        place_at(empty_from(h), key, h, count);
    }
    template <class K>
    TALLY_ALWAYS_INLINE void place_at(std::size_t at, const K& key, std::uint64_t h, std::uint64_t count) noexcept {
        Slot& s = slots_[at];
        if constexpr (is_string) {
            s.len = static_cast<std::uint32_t>(key.len);
            if (key.len <= detail::top_k_inline_max) {
                s.a = key.a;
                s.b = key.b;
            } else {
                s.a = h;
                s.b = 0;
                s.offset = static_cast<std::uint32_t>(arena_.size());
                arena_.insert(arena_.end(), key.data, key.data + key.len);  // capacity reserved
                arena_live_ += key.len;
            }
        } else {
            s.item = key;
        }
        s.count = count;
        tags_[at] = detail::top_k_tag(h);
        ++size_;
    }

    static unsigned lg_for_size(std::size_t n) noexcept {
        unsigned lg = min_lg_slots;
        while (max_counters(lg) < n) ++lg;
        return lg;
    }

    // Makes the table large enough for n items (n <= counters()).
    void reserve_for(std::size_t n) {
        const unsigned lg = std::min(lg_max_, lg_for_size(n));
        if (slots_.empty() || lg > lg_slots_) grow(lg);
    }

    void grow(unsigned lg) {
        const std::size_t n = std::size_t{1} << lg;
        std::vector<Slot> fresh(n);  // these two may throw; nothing has changed yet
        std::vector<detail::TopKTag> fresh_tags(n, detail::top_k_empty_tag);
        fresh.swap(slots_);
        tags_.swap(fresh_tags);
        lg_slots_ = lg;
        mask_ = n - 1;
        home_mask_ = mask_ & ~(group_width - 1);
        home_shift_ = 57 - lg;
        limit_ = max_counters(lg);
        for (Slot& s : fresh)
            if (s.count != 0) {
                const std::uint64_t h = hash_of_slot(s);
                const std::size_t at = empty_from(h);
                slots_[at] = std::move(s);
                tags_[at] = detail::top_k_tag(h);
            }
    }
    std::uint64_t hash_of_slot(const Slot& s) const noexcept {
        if constexpr (is_string) {
            if (s.len <= detail::top_k_inline_max) return detail::top_k_short_hash(s.a, s.b, s.len, wy_seed_);
            return s.a;
        } else {
            return slot_hash(s.item);
        }
    }

    // Room for one more string of `len` bytes, compacting the arena (dropping
    // the bytes of purged items) when it would grow anyway.
    TALLY_ALWAYS_INLINE void reserve_string(std::size_t len)
        requires is_string
    {
        if (TALLY_UNLIKELY(arena_.size() + len > arena_.capacity())) grow_arena(len);
    }
    TALLY_DETAIL_TOP_K_NOINLINE void grow_arena(std::size_t len)
        requires is_string
    {
        const std::size_t live = arena_live_ + len;
        if (live > std::numeric_limits<std::uint32_t>::max())
            detail::throw_invalid_argument("tally::TopK::add: held items would exceed 4 GiB of string bytes");
        if (arena_.size() - arena_live_ >= arena_live_) {
            std::vector<char> fresh;
            fresh.reserve(std::max<std::size_t>(64, std::min<std::size_t>(2 * live, 0xFFFFFFFFull)));
            fresh.resize(arena_live_);  // arena_live_: the held strings' bytes
            std::size_t at = 0;
            for (Slot& s : slots_)
                if (s.count != 0 && s.len > detail::top_k_inline_max) {
                    std::memcpy(fresh.data() + at, arena_.data() + s.offset, s.len);
                    s.offset = static_cast<std::uint32_t>(at);
                    at += s.len;
                }
            arena_.swap(fresh);
        } else {
            arena_.reserve(std::max<std::size_t>(
                64, std::min<std::size_t>(std::max(2 * arena_.capacity(), arena_.size() + len), 0xFFFFFFFFull)));
        }
    }

    // The batch purge: subtract m, the r-th largest count (r = 3L/8 >= k()),
    // from every count and free the slots that reach zero. At least r counts
    // lose m each, so the removed weight is >= k() * m while D grows by m;
    // at least counters() - r + 1 slots are freed.
    void purge() noexcept {
        const std::size_t r = guarantee_k(lg_slots_);
        std::uint64_t m;
        if (last_threshold_ == 1) {
            // Most purges of a stream of unit adds subtract 1, which is never
            // above the r-th largest (all size_ >= r held counts are >= 1):
            // subtract it first. If r counts are still held, the r-th largest
            // was m' + 1 with m' the r-th largest of what is left; subtracting
            // m' next ends in the same state as subtracting m' + 1 at once.
            m = 1;
            if (subtract(1) >= r) {
                const std::uint64_t more = select_rth_largest(r);
                subtract(more);
                m += more;
            }
        } else {
            m = rth_largest(r);
            subtract(m);
        }
        last_threshold_ = m;
        offset_ = detail::sat_add(offset_, m);
    }

    // Subtracts m from every count (m <= the r-th largest), frees the slots
    // that reach zero and re-places what is left; returns size_, the items held.
    std::size_t subtract(std::uint64_t m) noexcept {
        std::size_t start = 0;  // a group with a free slot: no probe path crosses it
        while (Group::load(tags_.data() + start).empty() == 0) start += group_width;
        // One sweep over the groups in probe order after `start`: every group
        // before the current one is final, so a survivor away from home moves
        // to the first free slot on its path, which is never past where it was.
        // Only a group after one that was full can hold items away from home.
        std::size_t held = 0;
        bool after_full = false;
        for (std::size_t step = 1; step <= slots_.size() / group_width; ++step) {
            const std::size_t base = (start + step * group_width) & mask_;
            Slot* const group = slots_.data() + base;
            detail::TopKTag* const group_tags = tags_.data() + base;
            const bool was_full = Group::load(group_tags).empty() == 0;
            std::uint32_t full = 0;
            for (std::size_t j = 0; j < group_width; ++j) {  // branch-free: survival is a coin toss
                const std::uint64_t c = group[j].count;
                const std::uint64_t left = c - std::min(c, m);
                group[j].count = left;
                const auto kept = static_cast<std::uint32_t>(left != 0);
                if constexpr (is_string)
                    arena_live_ -= arena_len(group[j]) & (std::size_t{0} - (static_cast<std::uint32_t>(c != 0) & (kept ^ 1u)));
                full |= kept << j;
            }
            Group::keep_only(group_tags, full);
            held += detail::popcount16(full);
            if (!after_full) full = 0;
            after_full = was_full;
            for (; full != 0; full &= full - 1) {
                const std::size_t i = base + static_cast<std::size_t>(std::countr_zero(full));
                for (std::size_t to = home_of(hash_of_slot(slots_[i])); to != base; to = (to + group_width) & mask_) {
                    const std::uint32_t e = Group::load(tags_.data() + to).empty();
                    if (e == 0) continue;
                    const std::size_t at = to + static_cast<std::size_t>(std::countr_zero(e));
                    slots_[at] = std::move(slots_[i]);
                    slots_[i].count = 0;
                    tags_[at] = tags_[i];
                    tags_[i] = detail::top_k_empty_tag;
                    break;
                }
            }
        }
        size_ = held;
        return held;
    }

    // The r-th largest held count (1 <= r <= size_). Purges of one stream
    // mostly pick the threshold of the previous purge: one counting pass
    // checks it. Else a histogram of counts capped at 255, and byte-wise radix
    // selection only when the answer is larger.
    std::uint64_t rth_largest(std::size_t r) const noexcept {
        const std::uint64_t guess = last_threshold_;  // >= 1: free slots (count 0) never count
        std::size_t at_least = 0, above = 0;
        for (const Slot& s : slots_) {
            at_least += s.count >= guess;
            above += s.count > guess;
        }
        if (at_least >= r && above < r) return guess;
        return select_rth_largest(r);
    }

    std::uint64_t select_rth_largest(std::size_t r) const noexcept {
        std::uint32_t hist[256] = {};
        std::uint64_t top = 0;
        for (const Slot& s : slots_) {  // free slots land in hist[0]
            ++hist[s.count < 255 ? s.count : 255];
            top = std::max(top, s.count);
        }
        std::size_t need = r;
        if (hist[255] < need) {
            need -= hist[255];
            for (std::size_t v = 254; v >= 1; --v) {
                if (hist[v] >= need) return v;
                need -= hist[v];
            }
            return 1;  // not reached: r <= size_
        }
        // At least r counts are >= 255: select by bytes, most significant first.
        std::uint64_t prefix = 0, prefix_mask = 0;
        need = r;
        for (int shift = 56; shift >= 0; shift -= 8) {
            if ((top >> shift) == 0 && prefix_mask == 0) continue;
            std::uint32_t h[256] = {};
            for (const Slot& s : slots_)
                if (s.count != 0 && (s.count & prefix_mask) == prefix) ++h[(s.count >> shift) & 0xff];
            for (std::size_t b = 256; b-- > 0;) {
                if (h[b] >= need) {
                    prefix |= static_cast<std::uint64_t>(b) << shift;
                    prefix_mask |= std::uint64_t{0xff} << shift;
                    break;
                }
                need -= h[b];
            }
        }
        return prefix;
    }
    std::vector<std::size_t> canonical_order() const {
        struct Key {
            std::uint64_t count;
            std::uint64_t hash;
            std::size_t slot;
        };
        std::vector<Key> keys;
        keys.reserve(size_);
        for (std::size_t i = 0; i < slots_.size(); ++i)
            if (slots_[i].count != 0) keys.push_back({slots_[i].count, stored_hash(i), i});
        std::sort(keys.begin(), keys.end(), [](const Key& x, const Key& y) {
            if (x.count != y.count) return x.count > y.count;
            return x.hash < y.hash;  // distinct items with equal 64-bit hashes: layout order
        });
        std::vector<std::size_t> order(keys.size());
        for (std::size_t i = 0; i < keys.size(); ++i) order[i] = keys[i].slot;
        return order;
    }

    // ---- reading the two wire versions ----
    // Versions 2 and 3 differ only in the most entries a table of L slots may
    // hold: 3L/4 (version 2) or 7L/8 (version 3).
    static TopK read_v2(ByteReader& in, std::size_t (*most_entries)(unsigned) noexcept) {
        const std::uint8_t lg = in.u8();
        format_check(lg >= min_lg_slots && lg <= max_lg_slots, "TopK: table size out of range [2^4, 2^30]");
        format_check(in.u8() == 0, "TopK: reserved byte is not zero");
        const std::uint64_t k = in.u64();
        format_check(k >= 1 && k <= guarantee_k(lg), "TopK: k out of range [1, 3/8 of the table]");
        TopK s(lg, Seed{in.u64()}, 0);
        s.k_ = static_cast<std::size_t>(k);
        s.total_ = in.u64();
        s.offset_ = in.u64();
        const std::uint64_t n = in.count(in.u64(), Codec::min_wire_bytes + 8, most_entries(lg), "TopK entry");
        s.reserve_for(static_cast<std::size_t>(n));
        detail::uint128 sum = 0;
        for (std::uint64_t e = 0; e < n; ++e) {
            T item = Codec::read(in);
            const std::uint64_t count = in.u64();
            format_check(count >= 1, "TopK: entry count is zero");
            sum += count;
            s.insert_checked(canonical_wire(std::move(item)), count);
        }
        in.expect_end();
        s.check_mass(sum);
        return s;
    }

    // Version 1 held Space-Saving counters (count c, error e <= floor F <= every
    // count, sum of counts <= N, k counters, F > 0 only when all k are held).
    // As in Agarwal et al., Section 2, it becomes the Misra-Gries state with
    // counts c - F and D = F, and k() = min(k, 3/8 of the table): then
    // N - sum(c - F) >= k F.
    static TopK read_v1(ByteReader& in) {
        format_check(in.u16() == 0, "TopK: reserved bytes are not zero");
        const std::uint64_t k1 = in.u64();
        format_check(k1 >= 1 && k1 <= max_k, "TopK: k out of range [1, 2^28]");
        const std::uint64_t total = in.u64();
        const std::uint64_t floor = in.u64();
        const std::uint64_t n = in.count(in.u64(), Codec::min_wire_bytes + 16, k1, "TopK entry");
        format_check(n == k1 || floor == 0, "TopK: nonzero floor in a summary that is not full");
        unsigned lg = min_lg_slots;  // the table that held k1 counters at 3L/4, as version 2 read it
        while (max_counters_v2(lg) < k1) ++lg;
        TopK s(lg, Seed{}, 0);
        s.k_ = std::min<std::size_t>(static_cast<std::size_t>(k1), guarantee_k(lg));
        s.total_ = total;
        struct V1 {
            T item;
            std::uint64_t count;
        };
        std::vector<V1> entries;
        entries.reserve(static_cast<std::size_t>(n));
        std::uint64_t sum = 0;
        for (std::uint64_t e = 0; e < n; ++e) {
            T item = Codec::read(in);
            const std::uint64_t count = in.u64();
            const std::uint64_t error = in.u64();
            format_check(error <= count, "TopK: entry error exceeds its count");
            format_check(error <= floor, "TopK: entry error exceeds the floor");
            format_check(count >= floor, "TopK: entry count below the floor");
            sum = detail::sat_add(sum, count);
            entries.push_back({canonical_wire(std::move(item)), count});
        }
        format_check(sum <= total, "TopK: counts sum to more than total");
        in.expect_end();
        const std::uint64_t sub = floor;
        s.offset_ = sub;
        std::size_t keep = 0;
        for (const V1& e : entries) keep += e.count > sub;
        s.reserve_for(keep);
        detail::uint128 held = 0;
        for (V1& e : entries) {
            if (e.count > sub) {
                held += e.count - sub;
                s.insert_checked(std::move(e.item), e.count - sub);
            } else if (s.contains(e.item)) {
                detail::throw_format_error("tally: TopK: duplicate item");
            }
        }
        s.check_mass(held);
        return s;
    }

    static T canonical_wire(T item) noexcept {
        if constexpr (std::is_floating_point_v<T>) {
            return canonical(item);
        } else {
            return item;
        }
    }

    void insert_checked(const T& item, std::uint64_t count) {
        if constexpr (is_string) {
            const StrKey key = detail::top_k_string_key(item);
            const std::uint64_t h = hash_key(key);
            format_check(find_hashed(key, h) == npos, "TopK: duplicate item");
            if (key.len > detail::top_k_inline_max) reserve_string(key.len);
            place_new(key, h, count);
        } else {
            const std::uint64_t h = slot_hash(item);
            format_check(find_hashed(item, h) == npos, "TopK: duplicate item");
            place_new(item, h, count);
        }
    }

    // The invariant behind the guarantee: N - sum(counts) >= k * D.
    void check_mass(detail::uint128 held) const {
        format_check(held <= total_, "TopK: counts sum to more than total");
        format_check(static_cast<detail::uint128>(total_) - held >= static_cast<detail::uint128>(k_) * offset_,
                     "TopK: error bound exceeds (total - counts) / k");
    }

    unsigned lg_max_;             // the table's final size: 2^lg_max_ slots
    std::size_t k_;               // the guarantee's k
    Seed seed_;
    unsigned lg_slots_ = 0;       // current size (grows to lg_max_); 0 before the first add
    std::size_t mask_ = 0;        // slots - 1
    std::size_t home_mask_ = 0;   // mask_ without the in-group bits
    unsigned home_shift_ = 0;     // 57 - lg: the home group is the hash's bits below the tag
    std::size_t limit_ = 0;       // counters of the current table (0 before the first add)
    std::uint64_t last_threshold_ = 1;  // the last purge's m: a hint for the next
    detail::TopKTag tag_sink_{};        // add_fast's tag store on a hit
    std::size_t size_ = 0;        // held items
    std::uint64_t total_ = 0;     // N
    std::uint64_t offset_ = 0;    // D: the sum of all purge thresholds
    std::vector<Slot> slots_;
    std::vector<detail::TopKTag> tags_;  // one per slot: detail::top_k_tag of the hash, or empty
    struct NoArena {
        std::size_t size() const noexcept { return 0; }
    };
    [[no_unique_address]] std::conditional_t<is_string, std::vector<char>, NoArena> arena_;
    [[no_unique_address]] std::conditional_t<is_string, std::size_t, NoArena> arena_live_{};  // long strings' bytes
    struct NoSeed {};
    [[no_unique_address]] std::conditional_t<is_string, std::uint64_t, NoSeed> wy_seed_{};  // hash64's seed step
};

TALLY_END_NAMESPACE

#include "detail/top_k_impl.hpp"
