// tally/limit/keyed.hpp: per-key rate limiting for millions of keys in a
// fixed block of memory, one cache line per lookup.
//
// KeyedLimiter keeps one limiter *state* per key (a Gcra state is 8 bytes)
// in an open-addressed table of cache-line slot groups; the limiter *policy*
// (the Quota turned into increments and limits) is stored once. A lookup
// hashes the key, picks its home group and reads that one line: fingerprint
// or key, state and last-seen stamp are all there. ConcurrentKeyedLimiter
// shards the table by hash, one spinlock per shard.
#pragma once

#include <atomic>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/hash.hpp"
#include "../core/platform.hpp"
#include "../detail/throw.hpp"
#include "decision.hpp"
#include "quota.hpp"

namespace tally {

namespace detail {

template <class K>
inline constexpr bool keyed_is_char_pointer =
    std::is_pointer_v<K> && std::is_same_v<std::remove_cv_t<std::remove_pointer_t<K>>, char>;

template <class K>
inline constexpr bool keyed_string_like =
    !keyed_is_char_pointer<K> && !std::is_arithmetic_v<K> && std::is_convertible_v<const K&, std::string_view>;

template <class K>
inline constexpr bool keyed_inline_key = !keyed_string_like<K> && !keyed_is_char_pointer<K> &&
                                         std::is_trivially_copyable_v<K> && sizeof(K) <= 16 &&
                                         std::equality_comparable<K> && std::is_default_constructible_v<K>;

/// 128 bits standing for a string key: the probe hash (Hash of the key) and an
/// independent wyhash of the same bytes under another seed.
struct KeyFingerprint128 {
    std::uint64_t probe;
    std::uint64_t check;
    friend bool operator==(const KeyFingerprint128&, const KeyFingerprint128&) = default;
};

// Second-word seed: any constant other than the probe seed (0) gives an
// independent wyhash; these are the first digits of pi.
inline constexpr std::uint64_t keyed_check_seed = 0x243f6a8885a308d3ull;

template <class Key, class Hash, class Enable = void>
struct KeyedKeyTraits {
    static_assert(keyed_inline_key<Key> || keyed_string_like<Key>,
                  "tally::KeyedLimiter: Key must be a trivially copyable, equality-comparable type of at most 16 "
                  "bytes (integers, enums, small structs) or a string type convertible to std::string_view; "
                  "char pointers are rejected (use std::string_view)");
};

// Small trivially copyable keys are stored as they are: exact, one compare.
template <class Key, class Hash>
struct KeyedKeyTraits<Key, Hash, std::enable_if_t<keyed_inline_key<Key>>> {
    using Lookup = const Key&;
    using Stored = Key;
    static constexpr bool exact = true;
    static std::uint64_t hash(const Hash& h, Lookup k) noexcept { return static_cast<std::uint64_t>(h(k)); }
    static Stored store(Lookup k, std::uint64_t) noexcept { return k; }
    static bool equal(const Stored& s, Lookup k, std::uint64_t) noexcept { return s == k; }
    static std::uint64_t rehash(const Hash& h, const Stored& s) noexcept { return static_cast<std::uint64_t>(h(s)); }
};

// Strings are stored as a 128-bit fingerprint (see the class comment for the
// collision bound); the check word is computed only when the probe word
// already matches, so a lookup hashes the key once in the common case.
template <class Key, class Hash>
struct KeyedKeyTraits<Key, Hash, std::enable_if_t<keyed_string_like<Key>>> {
    using Lookup = std::string_view;
    using Stored = KeyFingerprint128;
    static constexpr bool exact = false;
    static std::uint64_t hash(const Hash& h, Lookup k) noexcept {
        if constexpr (std::is_invocable_v<const Hash&, std::string_view>) {
            return static_cast<std::uint64_t>(h(k));
        } else {
            return static_cast<std::uint64_t>(h(Key(k)));
        }
    }
    static std::uint64_t check(Lookup k) noexcept { return hash64(k.data(), k.size(), keyed_check_seed); }
    static Stored store(Lookup k, std::uint64_t probe) noexcept { return {probe, check(k)}; }
    static bool equal(const Stored& s, Lookup k, std::uint64_t probe) noexcept {
        return s.probe == probe && s.check == check(k);
    }
    static std::uint64_t rehash(const Hash&, const Stored& s) noexcept { return s.probe; }
};

template <class Stored, class State, std::size_t S>
struct KeyedGroupRaw {
    Stored keys[S];
    State states[S];
    std::uint32_t stamps[S];  // last-seen time in 2^20 ns (~1.05 ms) units, wrapping
    std::uint16_t used;       // bit i: slot i holds a key
    std::uint8_t overflow;    // keys whose home is this group but live in a later group
};

inline constexpr std::size_t keyed_max_slots = 16;  // `used` is 16 bits

template <class Stored, class State, std::size_t S = keyed_max_slots>
constexpr std::size_t keyed_fit_slots() {
    if constexpr (S == 1) {
        return 1;
    } else if constexpr (sizeof(KeyedGroupRaw<Stored, State, S>) <= cache_line_size) {
        return S;
    } else {
        return keyed_fit_slots<Stored, State, S - 1>();
    }
}

template <class Stored, class State, std::size_t S>
struct alignas(cache_line_size) KeyedGroup : KeyedGroupRaw<Stored, State, S> {};

/// Test-and-test-and-set spinlock: critical sections here are ~20 ns, far
/// shorter than a futex round trip; it yields the CPU after a short spin so
/// oversubscribed machines still make progress.
class KeyedSpinLock {
  public:
    void lock() noexcept {
        for (;;) {
            if (!locked_.exchange(true, std::memory_order_acquire)) return;
            unsigned spins = 0;
            while (locked_.load(std::memory_order_relaxed)) {
                if (++spins < 64) {
                    relax();
                } else {
                    std::this_thread::yield();
                    spins = 0;
                }
            }
        }
    }
    void unlock() noexcept { locked_.store(false, std::memory_order_release); }

  private:
    static void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield");
#endif
    }
    std::atomic<bool> locked_{false};
};

}  // namespace detail

/// KeyedLimiter: one rate limiter per key for millions of keys, in a table
/// whose memory is fixed at construction, costing one cache miss per lookup.
///
/// Source: the table is bucketized open addressing with bounded linear probing
/// over cache-line buckets (slot groups), as in Ross, "Efficient Hash Probes on
/// Modern Processors" (ICDE 2007) and the cache-line bucket layouts of
/// Bender et al. / Swiss tables; the home group is Lemire's multiply-shift
/// range reduction of the 64-bit hash. The limiter arithmetic is the chosen
/// policy's (Gcra, TokenBucket, ...), applied unchanged to each key's state.
///
/// Layout. A slot group is `cache_line_size` bytes, aligned to a line, holding
/// `slots_per_group` slots: the key (or its fingerprint), the limiter state and
/// a 32-bit last-seen stamp, plus a 16-bit occupancy mask and an 8-bit overflow
/// count. For `std::uint64_t` keys and Gcra (8-byte state): 3 keys per 64-byte
/// line, 6 per 128-byte line. If one slot does not fit a line, a group is one
/// slot spanning the fewest whole lines. A key lives in its home group or one of
/// the next `probe_groups - 1` groups; the overflow count tells a lookup of a
/// key that is not at home whether it needs to look further, so a lookup of a
/// present key reads one line unless its home group had filled up.
///
/// Guarantee. While a key stays in the table its decisions are exactly those of
/// a dedicated `Limiter` fed the same requests. A key leaves the table only
/// (a) when its state `is_fresh` (it then behaves exactly as a new key would,
/// so dropping it changes no decision), or (b) by LRU eviction, below. Hence:
/// decisions equal a map<Key, Limiter> oracle as long as `evictions() == 0`.
///
/// When the probe window is full. If a new key finds every slot of its probe
/// window (`probe_groups` groups, `probe_groups * slots_per_group` slots)
/// holding a key that is not fresh, the table first tries hopscotch
/// relocation (Herlihy, Shavit, Tzafrir, DISC 2008): it looks for an empty or
/// fresh slot in the next `relocation_groups` groups and hops it back into the
/// window by moving keys that stay within their own windows (moves change no
/// state). Only if that fails is the least recently seen key in the window
/// evicted; the new key takes its slot (counted by `evictions()`). The
/// evicted key, if it returns, starts with a fresh quota: under memory pressure
/// the table fails open for the idlest client rather than locking out new ones.
/// This is nginx limit_req's policy ("the least recently used state is
/// removed"); the alternative, denying the new key, lets anyone who can fill a
/// window with live keys deny service to every later key hashing there.
/// "Seen" counts denied requests too, so a client hammering while denied stays
/// recent and is not reset. Stamps have ~1.05 ms resolution (ties: the first
/// slot in probe order) and wrap after ~52 days of a key's silence, after
/// which the LRU order of such a key is arbitrary (it is almost always fresh,
/// and fresh keys are reclaimed before any LRU eviction).
///
/// Capacity and memory. `capacity` is rounded up to whole groups (fewer than
/// `slots_per_group` extra); `memory_bytes() = groups * sizeof(group) +
/// sizeof(*this)`, about 21.3 bytes per key for Gcra with u64 keys on x86-64.
/// Nothing is allocated after construction. Active-key evictions start before
/// size() reaches capacity() (a window can fill while others have room).
/// Measured with 2^20 slots, u64 keys, Gcra, 64-byte lines, all keys active:
/// evicted / inserted = 0 up to 70% fill, 0.0015% at 80%, 0.017% at 85%,
/// 0.13% at 90%, 0.7% at 95%. Size the table about 1.2x the number of
/// concurrently active keys that must never be reset.
///
/// Keys. Integers, enums and trivially copyable keys of at most 16 bytes are
/// stored in the slot: exact. Strings (std::string, std::string_view, anything
/// convertible to std::string_view) are stored as a 128-bit fingerprint: the
/// 64-bit `Hash` of the key plus an independent 64-bit wyhash (another
/// seed). A lookup compares only against the w <= probe_groups *
/// slots_per_group (24 for Gcra) keys in its window, and a stranger matches
/// one only if both words collide, so two distinct strings share a quota with
/// probability at most w * 2^-128 (about 7e-38) per lookup of a new key with
/// the default hasher, and at most w * 2^-64 (about 1.3e-18) even if `Hash`
/// is weak (the check word alone). The test counts collisions
/// of truncated check words against the ideal-hash rate. Keeping whole strings
/// would cost a second miss per lookup (an out-of-line arena) or a line per
/// key; 16 bytes keep two string keys per 64-byte line.
///
/// evict_idle(now_ns, max_groups) frees the slots of fresh keys in the next
/// `max_groups` groups after a cursor and advances it: a full sweep takes
/// groups / max_groups calls, each O(max_groups * slots_per_group). It is never
/// required for correctness (fresh slots are reused on insert anyway); it keeps
/// size() meaningful and probe windows short.
///
/// Time. The table clamps now_ns to the latest value it has seen (the
/// table-wide max that the per-key contract in decision.hpp asks for): a key
/// dropped because it was fresh at time t would otherwise come back full for
/// a request stamped before t, minting capacity. So a stale now_ns is read as
/// the table's latest time; for a non-decreasing clock nothing changes.
///
/// Thread safety: none for KeyedLimiter. try_acquire, try_acquire_batch,
/// evict_idle and clear mutate and need exclusive access; size, capacity,
/// memory_bytes, contains, evictions, reclaims are const and safe to call
/// concurrently only with other const calls. Use ConcurrentKeyedLimiter
/// (below) for shared use.
///
/// Example:
///   tally::KeyedLimiter<std::uint64_t, tally::Gcra> per_client(
///       tally::Quota::per_second(100), 1'000'000);
///   if (!per_client.try_acquire(client_id, tally::SteadyClock::now_ns())) reject();
template <class Key, class Limiter, class Hash = Hasher<Key>>
class KeyedLimiter {
    static_assert(KeyedRateLimiter<Limiter>,
                  "tally::KeyedLimiter: Limiter must satisfy tally::KeyedRateLimiter (State, fresh_state(), "
                  "try_acquire(State&, now, cost), is_fresh(const State&, now); see limit/decision.hpp)");
    using Traits = detail::KeyedKeyTraits<Key, Hash>;

  public:
    using key_type = Key;
    using limiter_type = Limiter;
    using State = typename Limiter::State;
    using Lookup = typename Traits::Lookup;
    using StoredKey = typename Traits::Stored;

    static constexpr std::size_t slots_per_group = detail::keyed_fit_slots<StoredKey, State>();
    using Group = detail::KeyedGroup<StoredKey, State, slots_per_group>;
    static constexpr std::size_t group_bytes = sizeof(Group);
    /// Groups a key may live in: enough for a window of about 24 slots.
    static constexpr std::size_t probe_groups =
        slots_per_group >= 12 ? 2 : (24 / slots_per_group > 16 ? 16 : 24 / slots_per_group);
    /// Groups past the window searched for a free slot to hop back (insert only).
    static constexpr std::size_t relocation_groups = 8 * probe_groups;
    /// True when keys are stored exactly; false for fingerprinted strings.
    static constexpr bool exact_keys = Traits::exact;

    static_assert(group_bytes % cache_line_size == 0 && alignof(Group) == cache_line_size);
    static_assert(probe_groups * slots_per_group <= 255, "overflow count must fit 8 bits");

    /// At most `capacity` keys (rounded up to whole groups). Throws
    /// std::invalid_argument for capacity 0 or one whose table would not fit
    /// in memory, and whatever Limiter(quota) throws for a bad quota.
    KeyedLimiter(Quota quota, std::size_t capacity, Hash hash = Hash())
        : limiter_(quota), hash_(std::move(hash)), groups_count_(groups_for(capacity)) {
        groups_.reset(new Group[groups_count_]());
    }

    KeyedLimiter(KeyedLimiter&&) noexcept = default;
    KeyedLimiter& operator=(KeyedLimiter&&) noexcept = default;

    /// Applies the request to `key`'s state, inserting the key if absent.
    Decision try_acquire(Lookup key, std::uint64_t now_ns, std::uint64_t cost = 1) noexcept {
        return try_acquire_hashed(key, hash(key), now_ns, cost);
    }

    /// Same decisions as calling try_acquire on each key in order (duplicates
    /// included); hashes and prefetches `prefetch_distance` keys ahead so that
    /// many cache misses are in flight. Throws std::invalid_argument when the
    /// spans differ in size.
    static constexpr std::size_t prefetch_distance = 16;
    void try_acquire_batch(std::span<const Key> keys, std::uint64_t now_ns, std::span<Decision> out,
                           std::uint64_t cost = 1) {
        if (keys.size() != out.size()) {
            detail::throw_invalid_argument("tally::KeyedLimiter::try_acquire_batch: keys.size() " +
                                           std::to_string(keys.size()) + " != out.size() " +
                                           std::to_string(out.size()) + "; the spans must have equal sizes");
        }
        constexpr std::size_t D = prefetch_distance;
        std::uint64_t ring[D];
        const std::size_t n = keys.size();
        const std::size_t first = n < D ? n : D;
        for (std::size_t i = 0; i < first; ++i) {
            ring[i] = hash(keys[i]);
            prefetch_hashed(ring[i]);
        }
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint64_t h = ring[i % D];
            if (i + D < n) {
                ring[i % D] = hash(keys[i + D]);
                prefetch_hashed(ring[i % D]);
            }
            out[i] = try_acquire_hashed(keys[i], h, now_ns, cost);
        }
    }

    /// Frees fresh keys in the next `max_groups` groups (round robin); returns
    /// how many were freed.
    std::size_t evict_idle(std::uint64_t now_ns, std::size_t max_groups = 1024) noexcept {
        now_ns = advance_clock(now_ns);
        std::size_t groups_left = max_groups < groups_count_ ? max_groups : groups_count_;
        std::size_t freed = 0;
        while (groups_left-- > 0) {
            Group& g = groups_[cursor_];
            for (std::size_t s = 0; s < slots_per_group; ++s) {
                if ((g.used >> s & 1u) != 0 && limiter_.is_fresh(g.states[s], now_ns)) {
                    remove(cursor_, s);
                    ++freed;
                }
            }
            cursor_ = cursor_ + 1 == groups_count_ ? 0 : cursor_ + 1;
        }
        reclaims_ += freed;
        return freed;
    }

    /// Whether `key` currently holds a slot (fresh or not).
    [[nodiscard]] bool contains(Lookup key) const noexcept {
        const std::uint64_t h = hash(key);
        std::size_t g = 0;
        std::size_t s = 0;
        return find(key, h, home_of(h), g, s);
    }

    /// Drops every key.
    void clear() noexcept {
        for (std::size_t g = 0; g < groups_count_; ++g) {
            groups_[g].used = 0;
            groups_[g].overflow = 0;
        }
        size_ = 0;
        cursor_ = 0;
    }

    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] std::size_t capacity() const noexcept { return groups_count_ * slots_per_group; }
    [[nodiscard]] std::size_t group_count() const noexcept { return groups_count_; }
    [[nodiscard]] std::size_t memory_bytes() const noexcept { return groups_count_ * sizeof(Group) + sizeof(*this); }
    /// Keys that were not fresh and were evicted to make room (LRU).
    [[nodiscard]] std::uint64_t evictions() const noexcept { return evictions_; }
    /// Fresh keys whose slot was reused or freed by evict_idle.
    [[nodiscard]] std::uint64_t reclaims() const noexcept { return reclaims_; }
    [[nodiscard]] const Limiter& limiter() const noexcept { return limiter_; }

    /// O(capacity) self-check for tests: every key lies within its window,
    /// overflow counts and size() match the slots.
    [[nodiscard]] bool invariants_hold() const noexcept {
        std::vector<std::size_t> displaced(groups_count_, 0);
        std::size_t count = 0;
        for (std::size_t g = 0; g < groups_count_; ++g) {
            for (std::size_t s = 0; s < slots_per_group; ++s) {
                if ((groups_[g].used >> s & 1u) == 0) continue;
                ++count;
                const std::size_t its_home = home_of(Traits::rehash(hash_, groups_[g].keys[s]));
                if (distance(its_home, g) >= window()) return false;
                if (its_home != g) ++displaced[its_home];
            }
        }
        for (std::size_t g = 0; g < groups_count_; ++g) {
            if (displaced[g] != groups_[g].overflow) return false;
        }
        return count == size_;
    }

    // Building blocks for ConcurrentKeyedLimiter and batch callers that hash
    // once: `h` must be hash(key).
    [[nodiscard]] std::uint64_t hash(Lookup key) const noexcept { return Traits::hash(hash_, key); }

    void prefetch_hashed(std::uint64_t h) const noexcept {
        const auto* p = reinterpret_cast<const char*>(&groups_[home_of(h)]);
        for (std::size_t off = 0; off < sizeof(Group); off += cache_line_size) prefetch_write(p + off);
    }

    Decision try_acquire_hashed(Lookup key, std::uint64_t h, std::uint64_t now_ns, std::uint64_t cost) noexcept {
        now_ns = advance_clock(now_ns);
        const std::size_t home = home_of(h);
        std::size_t g = 0;
        std::size_t s = 0;
        if (TALLY_UNLIKELY(!find(key, h, home, g, s))) insert(key, h, home, now_ns, g, s);
        Group& grp = groups_[g];
        grp.stamps[s] = stamp_of(now_ns);
        return limiter_.try_acquire(grp.states[s], now_ns, cost);
    }

  private:
    static constexpr std::uint16_t full_mask = static_cast<std::uint16_t>((1u << slots_per_group) - 1u);

    static std::size_t groups_for(std::size_t capacity) {
        const std::size_t max_groups = std::numeric_limits<std::size_t>::max() / 2 / sizeof(Group);
        const std::size_t max_capacity = max_groups * slots_per_group;
        if (capacity == 0 || capacity > max_capacity) {
            detail::throw_invalid_argument("tally::KeyedLimiter: capacity " + std::to_string(capacity) +
                                           " is out of range [1, " + std::to_string(max_capacity) + "]");
        }
        return (capacity + slots_per_group - 1) / slots_per_group;
    }

    // The table's now: the latest now_ns seen (see "Time" in the class comment).
    std::uint64_t advance_clock(std::uint64_t now_ns) noexcept {
        if (TALLY_UNLIKELY(now_ns < clock_)) return clock_;
        clock_ = now_ns;
        return now_ns;
    }

    static std::uint32_t stamp_of(std::uint64_t now_ns) noexcept { return static_cast<std::uint32_t>(now_ns >> 20); }

    std::size_t home_of(std::uint64_t h) const noexcept {
        __extension__ typedef unsigned __int128 u128;
        return static_cast<std::size_t>((static_cast<u128>(h) * groups_count_) >> 64);
    }

    std::size_t window() const noexcept { return probe_groups < groups_count_ ? probe_groups : groups_count_; }

    std::size_t next(std::size_t g) const noexcept { return g + 1 == groups_count_ ? 0 : g + 1; }

    bool find_in(const Group& grp, Lookup key, std::uint64_t h, std::size_t& s) const noexcept {
        std::uint32_t used = grp.used;
        while (used != 0) {
            const auto i = static_cast<std::size_t>(std::countr_zero(used));
            if (Traits::equal(grp.keys[i], key, h)) {
                s = i;
                return true;
            }
            used &= used - 1;
        }
        return false;
    }

    bool find(Lookup key, std::uint64_t h, std::size_t home, std::size_t& g, std::size_t& s) const noexcept {
        if (TALLY_LIKELY(find_in(groups_[home], key, h, s))) {
            g = home;
            return true;
        }
        if (groups_[home].overflow == 0) return false;
        std::size_t cur = home;
        for (std::size_t d = 1; d < window(); ++d) {
            cur = next(cur);
            if (find_in(groups_[cur], key, h, s)) {
                g = cur;
                return true;
            }
        }
        return false;
    }

    void remove(std::size_t g, std::size_t s) noexcept {
        Group& grp = groups_[g];
        const std::size_t its_home = home_of(Traits::rehash(hash_, grp.keys[s]));
        if (its_home != g) --groups_[its_home].overflow;
        grp.used = static_cast<std::uint16_t>(grp.used & ~(1u << s));
        --size_;
    }

    std::size_t distance(std::size_t from, std::size_t to) const noexcept {
        return to >= from ? to - from : to + groups_count_ - from;
    }
    std::size_t back(std::size_t g, std::size_t d) const noexcept { return g >= d ? g - d : g + groups_count_ - d; }

    // Hopscotch relocation (Herlihy, Shavit, Tzafrir, "Hopscotch Hashing",
    // DISC 2008): find a free or fresh slot within `relocation_groups` after
    // the window, then hop it back by moving keys that stay inside their own
    // windows, until it lands in `home`'s window. Moves change no key's state
    // or decision; they only delay LRU evictions to a higher fill (measured
    // curve in the class comment).
    bool make_room(std::size_t home, std::uint64_t now_ns, std::size_t& out_g, std::size_t& out_s) noexcept {
        const std::size_t w = window();
        std::size_t reach = w + relocation_groups;
        if (reach > groups_count_) reach = groups_count_;
        std::size_t fd = 0;  // distance of the free slot from home
        std::size_t fg = 0;
        std::size_t fs = 0;
        bool found = false;
        for (std::size_t d = w; d < reach && !found; ++d) {
            const std::size_t cur = home + d < groups_count_ ? home + d : home + d - groups_count_;
            Group& grp = groups_[cur];
            if (grp.used != full_mask) {
                fs = static_cast<std::size_t>(std::countr_one(grp.used));
                found = true;
            } else {
                for (std::size_t s = 0; s < slots_per_group; ++s) {
                    if (limiter_.is_fresh(grp.states[s], now_ns)) {
                        remove(cur, s);
                        ++reclaims_;
                        fs = s;
                        found = true;
                        break;
                    }
                }
            }
            fd = d;
            fg = cur;
        }
        if (!found) return false;
        while (fd >= w) {
            bool moved = false;
            // Farthest candidates first: each hop covers the most distance.
            for (std::size_t b = w - 1; b >= 1 && !moved; --b) {
                const std::size_t cg = back(fg, b);
                Group& src = groups_[cg];
                for (std::size_t s = 0; s < slots_per_group; ++s) {
                    const std::size_t its_home = home_of(Traits::rehash(hash_, src.keys[s]));
                    if (distance(its_home, fg) >= w || distance(its_home, cg) > distance(its_home, fg)) continue;
                    Group& dst = groups_[fg];
                    dst.keys[fs] = src.keys[s];
                    dst.states[fs] = src.states[s];
                    dst.stamps[fs] = src.stamps[s];
                    dst.used = static_cast<std::uint16_t>(dst.used | (1u << fs));
                    src.used = static_cast<std::uint16_t>(src.used & ~(1u << s));
                    if (cg == its_home) ++groups_[its_home].overflow;  // it leaves home (fg != its_home)
                    fg = cg;
                    fs = s;
                    fd -= b;
                    moved = true;
                    break;
                }
            }
            if (!moved) return false;  // the free slot stays free; the caller evicts
        }
        out_g = fg;
        out_s = fs;
        return true;
    }

    // Picks a slot for a key that is not in the table: the first empty or
    // fresh slot in probe order, else the least recently seen slot.
    void insert(Lookup key, std::uint64_t h, std::size_t home, std::uint64_t now_ns, std::size_t& out_g,
                std::size_t& out_s) noexcept {
        const std::uint32_t now_stamp = stamp_of(now_ns);
        std::size_t lru_g = home;
        std::size_t lru_s = 0;
        std::uint32_t lru_age = 0;
        bool have_lru = false;
        std::size_t cur = home;
        bool placed = false;
        for (std::size_t d = 0; d < window() && !placed; ++d, cur = next(cur)) {
            Group& grp = groups_[cur];
            if (grp.used != full_mask) {
                out_g = cur;
                out_s = static_cast<std::size_t>(std::countr_one(grp.used));
                placed = true;
                break;
            }
            for (std::size_t s = 0; s < slots_per_group; ++s) {
                if (limiter_.is_fresh(grp.states[s], now_ns)) {
                    remove(cur, s);
                    ++reclaims_;
                    out_g = cur;
                    out_s = s;
                    placed = true;
                    break;
                }
                // Stamps never run ahead of the table clock; a wrapped one
                // (silent > 2^31 units) may read as recent (documented).
                const std::uint32_t age = now_stamp - grp.stamps[s];
                if (!have_lru || age > lru_age) {
                    have_lru = true;
                    lru_age = age;
                    lru_g = cur;
                    lru_s = s;
                }
            }
        }
        if (!placed) placed = make_room(home, now_ns, out_g, out_s);
        if (!placed) {
            remove(lru_g, lru_s);
            ++evictions_;
            out_g = lru_g;
            out_s = lru_s;
        }
        Group& grp = groups_[out_g];
        grp.keys[out_s] = Traits::store(key, h);
        grp.states[out_s] = limiter_.fresh_state();
        grp.stamps[out_s] = now_stamp;
        grp.used = static_cast<std::uint16_t>(grp.used | (1u << out_s));
        if (out_g != home) ++groups_[home].overflow;
        ++size_;
    }

    Limiter limiter_;
    [[no_unique_address]] Hash hash_;
    std::size_t groups_count_;
    std::unique_ptr<Group[]> groups_;
    std::size_t size_ = 0;
    std::size_t cursor_ = 0;
    std::uint64_t clock_ = 0;
    std::uint64_t evictions_ = 0;
    std::uint64_t reclaims_ = 0;
};

/// ConcurrentKeyedLimiter: KeyedLimiter shared by many threads, sharded by
/// hash into `shards` independent tables, each behind its own spinlock on its
/// own false-sharing-sized line.
///
/// Source and guarantees: those of KeyedLimiter, per shard. A key always maps
/// to the same shard (low bits of its hash; the table inside a shard uses the
/// high bits), and every operation on a key runs under its shard's lock, so a
/// key's requests are applied one at a time in lock order: no key is admitted
/// beyond what its Limiter admits for that sequence of requests, whatever the
/// thread interleaving. Distinct shards never contend.
///
/// Capacity and memory: `capacity` is split evenly, each shard holding
/// ceil(capacity / shards) keys rounded up to whole groups; the shard count is
/// lowered (to a power of two) when the capacity would give a shard less than
/// one group. LRU eviction and fresh-key reclaim act within a shard.
/// memory_bytes() sums the shards.
///
/// Thread safety: every method is thread-safe. try_acquire and
/// try_acquire_batch lock one shard per key; evict_idle locks one shard at a
/// time; size, memory_bytes, evictions and contains take each shard's lock
/// briefly, so under concurrent writes they are a moment's snapshot per shard.
///
/// Example:
///   tally::ConcurrentKeyedLimiter<std::string, tally::TokenBucket> api(
///       tally::Quota::per_second(10), 1 << 20);
///   // from any thread:
///   if (!api.try_acquire(api_key, tally::CoarseClock::now_ns())) reject();
template <class Key, class Limiter, class Hash = Hasher<Key>>
class ConcurrentKeyedLimiter {
  public:
    using Table = KeyedLimiter<Key, Limiter, Hash>;
    using Lookup = typename Table::Lookup;

    /// Throws std::invalid_argument for capacity 0, or shards not a power of
    /// two in [1, 65536].
    ConcurrentKeyedLimiter(Quota quota, std::size_t capacity, std::size_t shards = 64, Hash hash = Hash()) {
        if (shards == 0 || shards > 65536 || (shards & (shards - 1)) != 0) {
            detail::throw_invalid_argument("tally::ConcurrentKeyedLimiter: shards " + std::to_string(shards) +
                                           " is out of range: a power of two in [1, 65536]");
        }
        if (capacity == 0) {
            detail::throw_invalid_argument("tally::ConcurrentKeyedLimiter: capacity 0 is out of range [1, " +
                                           std::to_string(std::numeric_limits<std::size_t>::max() / 2) + "]");
        }
        const std::size_t groups = (capacity + Table::slots_per_group - 1) / Table::slots_per_group;
        const std::size_t max_shards = std::bit_floor(groups);
        if (shards > max_shards) shards = max_shards;
        const std::size_t per_shard = (capacity + shards - 1) / shards;
        shards_.reserve(shards);
        for (std::size_t i = 0; i < shards; ++i) shards_.push_back(std::make_unique<Shard>(quota, per_shard, hash));
        mask_ = shards - 1;
    }

    Decision try_acquire(Lookup key, std::uint64_t now_ns, std::uint64_t cost = 1) noexcept {
        const std::uint64_t h = hash_of_key(key);
        Shard& sh = *shards_[h & mask_];
        sh.table.prefetch_hashed(h);  // overlap the table miss with taking the lock
        sh.lock.lock();
        const Decision d = sh.table.try_acquire_hashed(key, h, now_ns, cost);
        sh.lock.unlock();
        return d;
    }

    /// Same decisions as try_acquire on each key in order; prefetches ahead.
    /// Throws std::invalid_argument when the spans differ in size.
    void try_acquire_batch(std::span<const Key> keys, std::uint64_t now_ns, std::span<Decision> out,
                           std::uint64_t cost = 1) {
        if (keys.size() != out.size()) {
            detail::throw_invalid_argument("tally::ConcurrentKeyedLimiter::try_acquire_batch: keys.size() " +
                                           std::to_string(keys.size()) + " != out.size() " +
                                           std::to_string(out.size()) + "; the spans must have equal sizes");
        }
        constexpr std::size_t D = Table::prefetch_distance;
        std::uint64_t ring[D];
        const std::size_t n = keys.size();
        for (std::size_t i = 0; i < n && i < D; ++i) {
            ring[i] = hash_of_key(keys[i]);
            shards_[ring[i] & mask_]->table.prefetch_hashed(ring[i]);
        }
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint64_t h = ring[i % D];
            if (i + D < n) {
                ring[i % D] = hash_of_key(keys[i + D]);
                shards_[ring[i % D] & mask_]->table.prefetch_hashed(ring[i % D]);
            }
            Shard& sh = *shards_[h & mask_];
            sh.lock.lock();
            out[i] = sh.table.try_acquire_hashed(keys[i], h, now_ns, cost);
            sh.lock.unlock();
        }
    }

    /// evict_idle on every shard, `max_groups_per_shard` groups each; returns
    /// the number of keys freed.
    std::size_t evict_idle(std::uint64_t now_ns, std::size_t max_groups_per_shard = 256) noexcept {
        std::size_t freed = 0;
        for (auto& sh : shards_) {
            sh->lock.lock();
            freed += sh->table.evict_idle(now_ns, max_groups_per_shard);
            sh->lock.unlock();
        }
        return freed;
    }

    [[nodiscard]] bool contains(Lookup key) const noexcept {
        const std::uint64_t h = hash_of_key(key);
        Shard& sh = *shards_[h & mask_];
        sh.lock.lock();
        const bool r = sh.table.contains(key);
        sh.lock.unlock();
        return r;
    }

    [[nodiscard]] std::size_t size() const noexcept {
        return sum([](const Table& t) { return t.size(); });
    }
    [[nodiscard]] std::size_t capacity() const noexcept {
        return sum([](const Table& t) { return t.capacity(); });
    }
    [[nodiscard]] std::size_t memory_bytes() const noexcept {
        return sum([](const Table& t) { return t.memory_bytes(); }) + sizeof(*this) +
               shards_.size() * (sizeof(Shard) - sizeof(Table) + sizeof(void*));
    }
    [[nodiscard]] std::uint64_t evictions() const noexcept {
        return sum([](const Table& t) { return static_cast<std::size_t>(t.evictions()); });
    }
    [[nodiscard]] std::size_t shard_count() const noexcept { return shards_.size(); }

  private:
    struct alignas(false_sharing_size) Shard {
        Shard(Quota q, std::size_t cap, const Hash& h) : table(q, cap, h) {}
        mutable detail::KeyedSpinLock lock;
        alignas(false_sharing_size) Table table;
    };

    std::uint64_t hash_of_key(Lookup key) const noexcept { return shards_[0]->table.hash(key); }

    template <class F>
    std::size_t sum(F f) const noexcept {
        std::size_t total = 0;
        for (const auto& sh : shards_) {
            sh->lock.lock();
            total += f(sh->table);
            sh->lock.unlock();
        }
        return total;
    }

    std::vector<std::unique_ptr<Shard>> shards_;
    std::uint64_t mask_ = 0;
};

}  // namespace tally
