// tally/limit/detail/keyed_table.hpp: the fixed-memory hash table behind
// KeyedLimiter and ConcurrentKeyedLimiter (limit/keyed.hpp). docs/keyed.md
// explains the guarantees; this header is the mechanism.
//
// Layout: an array of slot groups, each `cache_line_size` bytes and aligned to
// a line (S slots; S = 3 for u64 keys + Gcra states on 64-byte lines):
//
//   group g  [ key 0 | key 1 | key 2 | state 0 | state 1 | state 2 | stamp 0..2 | used | ovf ]
//              <- 8 B keys (16 B fingerprints for strings) -> <- 4 B -> <- 2 B -> <- 1 B ->
//
//   H(key)        64-bit hash keyed with the table's secret seed
//   home(key)     (H * groups) >> 64                      Lemire's range reduction
//   window(key)   groups home, home+1, ..., home+W-1 (mod groups), W = probe_groups
//   used          bit i set: slot i holds a key
//   ovf(g)        keys whose home is g that live in a later group of g's window
//   stamp         last-seen time in 2^20 ns units (wrapping), for LRU choice;
//                 with tiers: 8-bit tier | 24-bit time in 2^22 ns units
//
// find(key):   read home; only if ovf(home) > 0, read the rest of the window.
// insert(key): the first empty or fresh slot in the window; else hopscotch
//   relocation (a free or fresh slot in the next R groups, hopped back into the
//   window by moving keys inside their own windows); else, if the table holds
//   at least 3/4 of its capacity, evict the window's least recently seen key;
//   else refuse the newcomer and count a collision (no key is evicted).
#pragma once

#include "../../detail/abi.hpp"

#include <atomic>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../core/detail/simd.hpp"
#include "../../core/hash.hpp"
#include "../../core/detail/spin_lock.hpp"
#include "../../core/platform.hpp"
#include "../../core/seed.hpp"
#include "../decision.hpp"
#include "../quota.hpp"
#include "../../detail/primitives.hpp"
#include "../../detail/throw.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

template <class K>
inline constexpr bool keyed_is_char_pointer =
    std::is_pointer_v<K>&& std::is_same_v<std::remove_cv_t<std::remove_pointer_t<K>>, char>;

template <class K>
inline constexpr bool keyed_string_like =
    !keyed_is_char_pointer<K> && !std::is_arithmetic_v<K> && std::is_convertible_v<const K&, std::string_view>;

template <class K>
inline constexpr bool keyed_inline_key =
    !keyed_string_like<K> && !keyed_is_char_pointer<K> && std::is_trivially_copyable_v<K> && sizeof(K) <= 16 &&
    std::equality_comparable<K> && std::is_default_constructible_v<K>;

/// 128 bits standing for a string key: the probe hash and an independent
/// wyhash of the same bytes under a second secret seed.
struct KeyFingerprint128 {
    std::uint64_t probe;
    std::uint64_t check;
    friend bool operator==(const KeyFingerprint128&, const KeyFingerprint128&) = default;
};

// Derives the check-word seed from the table seed: any fixed odd constant
// gives an independent wyhash; these are the first digits of pi.
inline constexpr std::uint64_t keyed_check_seed = 0x243f6a8885a308d3ull;

/// The two secret words a table hashes with, both derived from its Seed.
struct KeyedSeeds {
    std::uint64_t probe;
    std::uint64_t check;
    static KeyedSeeds from(Seed s) noexcept { return {s.value, mix64(s.value ^ keyed_check_seed)}; }
};

template <class Key, class Hash, class Enable = void>
struct KeyedKeyTraits {
    static_assert(keyed_inline_key<Key> || keyed_string_like<Key>,
                  "tally::KeyedLimiter: Key must be a trivially copyable, equality-comparable type of at most 16 "
                  "bytes (integers, enums, small structs) or a string type convertible to std::string_view; "
                  "char pointers are rejected (use std::string_view)");
};

// Small trivially copyable keys are stored as they are: exact, one compare.
// The probe hash is the SplitMix64 finaliser of (Hash(key) xor seed), a keyed
// bijection. With the default hasher of an integer or enum, Hash(key) is
// itself that public bijection of the key, so it is skipped: mix64(key xor
// seed) is exactly as hard to predict and costs what the unseeded hash did.
template <class Key, class Hash>
struct KeyedKeyTraits<Key, Hash, std::enable_if_t<keyed_inline_key<Key>>> {
    using Lookup = const Key&;
    using Stored = Key;
    static constexpr bool exact = true;
    static constexpr bool default_integer_hash =
        std::is_same_v<Hash, Hasher<Key>> && (std::is_integral_v<Key> || std::is_enum_v<Key>);
    static std::uint64_t hash(const Hash& h, const KeyedSeeds& s, Lookup k) noexcept {
        if constexpr (default_integer_hash && std::is_enum_v<Key>) {
            return mix64(static_cast<std::uint64_t>(static_cast<std::underlying_type_t<Key>>(k)) ^ s.probe);
        } else if constexpr (default_integer_hash) {
            return mix64(static_cast<std::uint64_t>(k) ^ s.probe);  // sign-extends, as Hasher does
        } else {
            return mix64(static_cast<std::uint64_t>(h(k)) ^ s.probe);
        }
    }
    static Stored store(const KeyedSeeds&, Lookup k, std::uint64_t) noexcept { return k; }
    static bool equal(const KeyedSeeds&, const Stored& st, Lookup k, std::uint64_t) noexcept { return st == k; }
    static std::uint64_t rehash(const Hash& h, const KeyedSeeds& s, const Stored& st) noexcept {
        return hash(h, s, st);
    }
};

// Strings are stored as a 128-bit fingerprint; the check word is computed only
// when the probe word already matches, so a lookup hashes the key once in the
// common case. With the default hasher the seed goes into wyhash itself.
template <class Key, class Hash>
struct KeyedKeyTraits<Key, Hash, std::enable_if_t<keyed_string_like<Key>>> {
    using Lookup = std::string_view;
    using Stored = KeyFingerprint128;
    static constexpr bool exact = false;
    static constexpr bool default_hash =
        std::is_same_v<Hash, Hasher<std::string>> || std::is_same_v<Hash, Hasher<std::string_view>>;
    static std::uint64_t hash(const Hash& h, const KeyedSeeds& s, Lookup k) noexcept {
        if constexpr (default_hash) {
            return hash64(k.data(), k.size(), s.probe);
        } else if constexpr (std::is_invocable_v<const Hash&, std::string_view>) {
            return mix64(static_cast<std::uint64_t>(h(k)) ^ s.probe);
        } else {
            return mix64(static_cast<std::uint64_t>(h(Key(k))) ^ s.probe);
        }
    }
    static std::uint64_t check(const KeyedSeeds& s, Lookup k) noexcept { return hash64(k.data(), k.size(), s.check); }
    static Stored store(const KeyedSeeds& s, Lookup k, std::uint64_t probe) noexcept { return {probe, check(s, k)}; }
    static bool equal(const KeyedSeeds& s, const Stored& st, Lookup k, std::uint64_t probe) noexcept {
        return st.probe == probe && st.check == check(s, k);
    }
    static std::uint64_t rehash(const Hash&, const KeyedSeeds&, const Stored& st) noexcept { return st.probe; }
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

/// Throws the one batch-size message both keyed limiters use.
inline void keyed_check_batch(const char* who, std::size_t keys, std::size_t out) {
    if (keys != out) {
        throw_invalid_argument(std::string(who) + ": keys.size() " + std::to_string(keys) + " != out.size() " +
                               std::to_string(out) + "; the spans must have equal sizes");
    }
}

/// The batch loop of both keyed limiters: hashes and prefetches D requests
/// ahead (a ring of hashes), so that many cache misses are in flight, then
/// applies request i with `acquire(i, hash_i)` in order.
template <std::size_t D, class HashAt, class Prefetch, class Acquire>
void keyed_batch(std::size_t n, HashAt&& hash_at, Prefetch&& prefetch, Acquire&& acquire) noexcept {
    static_assert(D > 0 && (D & (D - 1)) == 0);
    std::uint64_t ring[D];
    const std::size_t first = n < D ? n : D;
    for (std::size_t i = 0; i < first; ++i) {
        ring[i] = hash_at(i);
        prefetch(ring[i]);
    }
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t h = ring[i % D];
        if (i + D < n) {
            ring[i % D] = hash_at(i + D);
            prefetch(ring[i % D]);
        }
        acquire(i, h);
    }
}

/// One policy per tier quota, after checking 1 <= tiers.size() <= max_tiers.
template <class Limiter>
std::vector<Limiter> keyed_policies(const char* who, std::span<const Quota> tiers, std::size_t max_tiers) {
    check_range(who, "tiers.size()", tiers.size(), std::size_t{1}, max_tiers);
    std::vector<Limiter> out;
    out.reserve(tiers.size());
    for (const Quota& q : tiers) out.emplace_back(q);
    return out;
}

/// Where a key lives: group index and slot index.
struct KeyedSlot {
    std::size_t group;
    std::uint32_t slot;
};

/// A lookup's or an insert's answer: `ok` false means not found / not placed.
/// 16 bytes, so it comes back in registers.
struct KeyedProbe {
    std::size_t group;
    std::uint32_t slot;
    bool ok;
    KeyedSlot at() const noexcept { return {group, slot}; }
};
static_assert(sizeof(KeyedProbe) <= 16);

/// The policies of a table: one Limiter per tier. One tier holds the Limiter
/// itself; more tiers hold up to `Tiers` of them (set at construction).
template <class Limiter, std::size_t Tiers>
class KeyedPolicies {
  public:
    explicit KeyedPolicies(std::vector<Limiter> all) : all_(std::move(all)) {}
    const Limiter& operator[](std::size_t t) const noexcept { return all_[t]; }
    Limiter& operator[](std::size_t t) noexcept { return all_[t]; }
    std::size_t size() const noexcept { return all_.size(); }

  private:
    std::vector<Limiter> all_;
};

template <class Limiter>
class KeyedPolicies<Limiter, 1> {
  public:
    explicit KeyedPolicies(std::vector<Limiter> all) : one_(all.front()) {}
    const Limiter& operator[](std::size_t) const noexcept { return one_; }
    Limiter& operator[](std::size_t) noexcept { return one_; }
    static constexpr std::size_t size() noexcept { return 1; }

  private:
    Limiter one_;
};

/// The table: per-key Limiter states in slot groups, the shared policy, the
/// secret seeds and the counters. Not thread-safe (the concurrent limiter
/// locks a shard around every call).
template <class Key, class Limiter, class Hash, std::size_t Tiers = 1>
class KeyedTable {
    using Traits = KeyedKeyTraits<Key, Hash>;
    static_assert(Tiers >= 1 && Tiers <= 256, "tally::KeyedLimiter: Tiers must be in [1, 256]");
    static_assert(PerKeyPolicy<Limiter>,
                  "tally::KeyedLimiter: Limiter must satisfy tally::PerKeyPolicy (State, fresh_state(), "
                  "try_acquire(State&, now, cost), is_fresh(const State&, now); see limit/decision.hpp)");

  public:
    using State = typename Limiter::State;
    using Lookup = typename Traits::Lookup;
    using StoredKey = typename Traits::Stored;

    static constexpr std::size_t slots_per_group = keyed_fit_slots<StoredKey, State>();
    using Group = KeyedGroup<StoredKey, State, slots_per_group>;
    static constexpr std::size_t group_bytes = sizeof(Group);
    /// Groups a key may live in: enough for a window of about 24 slots.
    static constexpr std::size_t probe_groups =
        slots_per_group >= 12 ? 2 : (24 / slots_per_group > 16 ? 16 : 24 / slots_per_group);
    /// Groups past the window searched for a free slot to hop back (insert only).
    static constexpr std::size_t relocation_groups = 8 * probe_groups;
    static constexpr bool exact_keys = Traits::exact;
    /// LRU eviction of a live key is allowed only once size() >= capacity() *
    /// evict_num / evict_den; below it a full window refuses the newcomer.
    static constexpr std::size_t evict_num = 3;
    static constexpr std::size_t evict_den = 4;
    static constexpr std::size_t max_capacity = std::numeric_limits<std::size_t>::max() / 2;

    /// With more than one tier, the top 8 bits of a slot's stamp hold its
    /// tier and the low 24 bits its last-seen time in 2^22 ns (~4.2 ms)
    /// units (wrapping after ~19.5 hours); the slot does not grow.
    static constexpr bool tiered = Tiers > 1;
    static constexpr unsigned stamp_shift = tiered ? 22 : 20;
    static constexpr std::uint32_t stamp_mask = tiered ? 0xffffffu : 0xffffffffu;

    static_assert(group_bytes % cache_line_size == 0 && alignof(Group) == cache_line_size);
    static_assert(probe_groups * slots_per_group <= 255, "overflow count must fit 8 bits");

    /// `capacity` must already be checked to lie in [1, max_capacity] and
    /// `policies` to hold 1 to Tiers limiters.
    KeyedTable(std::vector<Limiter> policies, std::size_t capacity, Seed seed, Hash hash)
        : policies_(std::move(policies)),
          hash_(std::move(hash)),
          seeds_(KeyedSeeds::from(seed)),
          groups_count_(capacity / slots_per_group + (capacity % slots_per_group != 0)) {
        if (groups_count_ > std::numeric_limits<std::size_t>::max() / 2 / sizeof(Group)) {
#if TALLY_HAS_EXCEPTIONS
            throw std::bad_array_new_length();
#else
            abort_with("fatal error (exceptions disabled)", "tally::KeyedLimiter: table too large for memory");
#endif
        }
        groups_.reset(new Group[groups_count_]());
        const std::size_t cap = groups_count_ * slots_per_group;
        evict_floor_ = cap / evict_den * evict_num + cap % evict_den * evict_num / evict_den;
    }

    [[nodiscard]] std::uint64_t hash(Lookup key) const noexcept {
        return Traits::hash(hash_, seeds_, key);
    }

    void prefetch(std::uint64_t h) const noexcept {
        const auto* p = reinterpret_cast<const char*>(&groups_[home_of(h)]);
        for (std::size_t off = 0; off < sizeof(Group); off += cache_line_size) prefetch_write(p + off);
    }

    /// The request applied to `key`'s state (`h` == hash(key)) under tier
    /// `tier`'s policy, inserting the key if absent; a refused newcomer gets
    /// refused_decision(). A key last seen under another tier is first
    /// rebased onto this one. A tier >= tier_count() is denied, never passes.
    TALLY_ALWAYS_INLINE Decision acquire(Lookup key, std::uint64_t h, std::uint64_t now_ns, std::uint64_t cost,
                                         std::size_t tier = 0) noexcept {
        if (TALLY_UNLIKELY(tier >= policies_.size())) return Decision{false, 0, never, never};
        now_ns = advance_clock(now_ns);
        const std::size_t home = home_of(h);
        KeyedProbe p = find(key, h, home);
        if (TALLY_UNLIKELY(!p.ok)) {
            p = insert(key, h, home, now_ns, tier);
            if (TALLY_UNLIKELY(!p.ok)) return refused_decision(now_ns, cost, tier);
        }
        Group& grp = groups_[p.group];
        if constexpr (tiered) {
            const std::size_t was = grp.stamps[p.slot] >> 24;
            if (TALLY_UNLIKELY(was != tier)) {
                grp.states[p.slot] = policies_[tier].rebase_state(grp.states[p.slot], policies_[was], now_ns);
            }
        }
        grp.stamps[p.slot] = stamp_of(now_ns, tier);
        return policies_[tier].try_acquire(grp.states[p.slot], now_ns, cost);
    }

    [[nodiscard]] bool contains(Lookup key) const noexcept {
        const std::uint64_t h = hash(key);
        return find(key, h, home_of(h)).ok;
    }

    std::size_t evict_idle(std::uint64_t now_ns, std::size_t max_groups) noexcept {
        now_ns = advance_clock(now_ns);
        std::size_t groups_left = max_groups < groups_count_ ? max_groups : groups_count_;
        std::size_t freed = 0;
        while (groups_left-- > 0) {
            Group& g = groups_[cursor_];
            for (std::size_t s = 0; s < slots_per_group; ++s) {
                if ((g.used >> s & 1u) != 0 && policy_of(g, s).is_fresh(g.states[s], now_ns)) {
                    remove({cursor_, static_cast<std::uint32_t>(s)});
                    ++freed;
                }
            }
            cursor_ = cursor_ + 1 == groups_count_ ? 0 : cursor_ + 1;
        }
        reclaims_ += freed;
        return freed;
    }

    /// Moves the state of every key of tier `tier` (< tier_count()) to
    /// `next`'s quota at now_ns (Limiter::rebase_state: spent stays spent, no
    /// key gains capacity beyond the new quota), then makes `next` that
    /// tier's policy. O(capacity), allocates nothing.
    void set_policy(std::size_t tier, const Limiter& next, std::uint64_t now_ns) noexcept {
        now_ns = advance_clock(now_ns);
        for (std::size_t g = 0; g < groups_count_; ++g) {
            Group& grp = groups_[g];
            for (std::uint32_t used = grp.used; used != 0; used &= used - 1) {
                const auto s = static_cast<std::size_t>(std::countr_zero(used));
                if (tier_of(grp, s) != tier) continue;
                grp.states[s] = next.rebase_state(grp.states[s], policies_[tier], now_ns);
            }
        }
        policies_[tier] = next;
    }

    void clear() noexcept {
        for (std::size_t g = 0; g < groups_count_; ++g) {
            groups_[g].used = 0;
            groups_[g].overflow = 0;
        }
        size_ = 0;
        cursor_ = 0;
    }

    [[nodiscard]] std::size_t size() const noexcept {
        return size_;
    }
    [[nodiscard]] std::size_t capacity() const noexcept {
        return groups_count_ * slots_per_group;
    }
    [[nodiscard]] std::size_t group_count() const noexcept {
        return groups_count_;
    }
    [[nodiscard]] std::size_t eviction_floor() const noexcept {
        return evict_floor_;
    }
    [[nodiscard]] std::size_t table_bytes() const noexcept {
        return groups_count_ * sizeof(Group);
    }
    [[nodiscard]] std::uint64_t evictions() const noexcept {
        return evictions_;
    }
    [[nodiscard]] std::uint64_t reclaims() const noexcept {
        return reclaims_;
    }
    [[nodiscard]] std::uint64_t collisions() const noexcept {
        return collisions_;
    }
    [[nodiscard]] const Limiter& limiter(std::size_t tier = 0) const noexcept {
        return policies_[tier];
    }
    [[nodiscard]] std::size_t tier_count() const noexcept {
        return policies_.size();
    }
    [[nodiscard]] std::size_t home_of(std::uint64_t h) const noexcept {
        return static_cast<std::size_t>((static_cast<uint128>(h) * groups_count_) >> 64);
    }

    /// O(capacity): every key lies within its window, overflow counts and
    /// size() match the slots.
    [[nodiscard]] bool invariants_hold() const noexcept {
        std::vector<std::size_t> displaced(groups_count_, 0);
        std::size_t count = 0;
        for (std::size_t g = 0; g < groups_count_; ++g) {
            for (std::size_t s = 0; s < slots_per_group; ++s) {
                if ((groups_[g].used >> s & 1u) == 0) continue;
                ++count;
                const std::size_t its_home = home_of(Traits::rehash(hash_, seeds_, groups_[g].keys[s]));
                if (distance(its_home, g) >= window()) return false;
                if (its_home != g) ++displaced[its_home];
            }
        }
        for (std::size_t g = 0; g < groups_count_; ++g) {
            if (displaced[g] != groups_[g].overflow) return false;
        }
        return count == size_;
    }

  private:
    static constexpr std::uint16_t full_mask = static_cast<std::uint16_t>((1u << slots_per_group) - 1u);

    // The table's now: the latest now_ns seen, so a reclaimed key recreated
    // for a stale timestamp can never mint capacity.
    std::uint64_t advance_clock(std::uint64_t now_ns) noexcept {
        if (TALLY_UNLIKELY(now_ns < clock_)) return clock_;
        clock_ = now_ns;
        return now_ns;
    }

    static std::uint32_t stamp_of(std::uint64_t now_ns, std::size_t tier) noexcept {
        const auto t = static_cast<std::uint32_t>(now_ns >> stamp_shift) & stamp_mask;
        if constexpr (tiered) return t | static_cast<std::uint32_t>(tier) << 24;
        return t;
    }
    static std::size_t tier_of(const Group& grp, std::size_t s) noexcept {
        if constexpr (tiered) return grp.stamps[s] >> 24;
        return 0;
    }
    const Limiter& policy_of(const Group& grp, std::size_t s) const noexcept {
        return policies_[tier_of(grp, s)];
    }

    // A newcomer with no slot: denied, consuming nothing. What a fresh key
    // would answer is kept where it is not an admission (a peek, or a cost
    // that can never pass); otherwise the retry hint is one quota window.
    Decision refused_decision(std::uint64_t now_ns, std::uint64_t cost, std::size_t tier) noexcept {
        ++collisions_;
        const Limiter& policy = policies_[tier];
        State s = policy.fresh_state();
        const Decision fresh = policy.try_acquire(s, now_ns, cost);
        if (cost == 0 || !fresh.allowed) return fresh;
        const std::uint64_t w = policy.quota().window_ns;
        return Decision{false, 0, w, w};
    }

    std::size_t window() const noexcept {
        return probe_groups < groups_count_ ? probe_groups : groups_count_;
    }
    std::size_t next(std::size_t g) const noexcept {
        return g + 1 == groups_count_ ? 0 : g + 1;
    }
    std::size_t distance(std::size_t from, std::size_t to) const noexcept {
        return to >= from ? to - from : to + groups_count_ - from;
    }
    std::size_t back(std::size_t g, std::size_t d) const noexcept {
        return g >= d ? g - d : g + groups_count_ - d;
    }

    TALLY_ALWAYS_INLINE KeyedProbe find_in(std::size_t g, Lookup key, std::uint64_t h) const noexcept {
        const Group& grp = groups_[g];
        std::uint32_t used = grp.used;
        while (used != 0) {
            const auto i = static_cast<std::uint32_t>(std::countr_zero(used));
            if (Traits::equal(seeds_, grp.keys[i], key, h)) return {g, i, true};
            used &= used - 1;
        }
        return {g, 0, false};
    }

    TALLY_ALWAYS_INLINE KeyedProbe find(Lookup key, std::uint64_t h, std::size_t home) const noexcept {
        const KeyedProbe at_home = find_in(home, key, h);
        if (TALLY_LIKELY(at_home.ok) || groups_[home].overflow == 0) return at_home;
        std::size_t cur = home;
        for (std::size_t d = 1; d < window(); ++d) {
            cur = next(cur);
            const KeyedProbe p = find_in(cur, key, h);
            if (p.ok) return p;
        }
        return {home, 0, false};
    }

    void remove(KeyedSlot at) noexcept {
        Group& grp = groups_[at.group];
        const std::size_t its_home = home_of(Traits::rehash(hash_, seeds_, grp.keys[at.slot]));
        if (its_home != at.group) --groups_[its_home].overflow;
        grp.used = static_cast<std::uint16_t>(grp.used & ~(1u << at.slot));
        --size_;
    }

    // Hopscotch relocation (Herlihy, Shavit, Tzafrir, "Hopscotch Hashing",
    // DISC 2008): find a free or fresh slot within `relocation_groups` after
    // the window, then hop it back by moving keys that stay inside their own
    // windows, until it lands in `home`'s window. Moves change no key's state
    // or decision; they only delay full windows to a higher fill.
    KeyedProbe make_room(std::size_t home, std::uint64_t now_ns) noexcept {
        const std::size_t w = window();
        std::size_t reach = w + relocation_groups;
        if (reach > groups_count_) reach = groups_count_;
        std::size_t fd = 0;  // distance of the free slot from home
        KeyedSlot free{0, 0};
        bool found = false;
        for (std::size_t d = w; d < reach && !found; ++d) {
            const std::size_t cur = home + d < groups_count_ ? home + d : home + d - groups_count_;
            Group& grp = groups_[cur];
            if (grp.used != full_mask) {
                free = {cur, static_cast<std::uint32_t>(std::countr_one(grp.used))};
                found = true;
            } else {
                for (std::size_t s = 0; s < slots_per_group; ++s) {
                    if (policy_of(grp, s).is_fresh(grp.states[s], now_ns)) {
                        free = {cur, static_cast<std::uint32_t>(s)};
                        remove(free);
                        ++reclaims_;
                        found = true;
                        break;
                    }
                }
            }
            fd = d;
        }
        if (!found) return {free.group, free.slot, false};
        while (fd >= w) {
            bool moved = false;
            // Farthest candidates first: each hop covers the most distance.
            for (std::size_t b = w - 1; b >= 1 && !moved; --b) {
                const std::size_t cg = back(free.group, b);
                Group& src = groups_[cg];
                for (std::size_t s = 0; s < slots_per_group; ++s) {
                    const std::size_t its_home = home_of(Traits::rehash(hash_, seeds_, src.keys[s]));
                    if (distance(its_home, free.group) >= w || distance(its_home, cg) > distance(its_home, free.group))
                        continue;
                    Group& dst = groups_[free.group];
                    dst.keys[free.slot] = src.keys[s];
                    dst.states[free.slot] = src.states[s];
                    dst.stamps[free.slot] = src.stamps[s];
                    dst.used = static_cast<std::uint16_t>(dst.used | (1u << free.slot));
                    src.used = static_cast<std::uint16_t>(src.used & ~(1u << s));
                    if (cg == its_home) ++groups_[its_home].overflow;  // it leaves home (free.group != its_home)
                    free = {cg, static_cast<std::uint32_t>(s)};
                    fd -= b;
                    moved = true;
                    break;
                }
            }
            if (!moved) return {free.group, free.slot, false};  // the free slot stays free
        }
        return {free.group, free.slot, true};
    }

    // Picks a slot for a key that is not in the table: the first empty or
    // fresh slot in probe order, else a hopscotch hop, else (only under
    // memory pressure) the least recently seen slot of the window.
    KeyedProbe insert(Lookup key, std::uint64_t h, std::size_t home, std::uint64_t now_ns, std::size_t tier) noexcept {
        const std::uint32_t now_time = stamp_of(now_ns, 0);
        KeyedSlot lru{home, 0};
        std::uint32_t lru_age = 0;
        bool have_lru = false;
        KeyedProbe p{home, 0, false};
        std::size_t cur = home;
        for (std::size_t d = 0; d < window() && !p.ok; ++d, cur = next(cur)) {
            Group& grp = groups_[cur];
            if (grp.used != full_mask) {
                p = {cur, static_cast<std::uint32_t>(std::countr_one(grp.used)), true};
                break;
            }
            for (std::size_t s = 0; s < slots_per_group; ++s) {
                if (policy_of(grp, s).is_fresh(grp.states[s], now_ns)) {
                    p = {cur, static_cast<std::uint32_t>(s), true};
                    remove(p.at());
                    ++reclaims_;
                    break;
                }
                // Stamps never run ahead of the table clock; a wrapped one
                // (silent > 2^31 units) may read as recent (documented).
                const std::uint32_t age = (now_time - grp.stamps[s]) & stamp_mask;
                if (!have_lru || age > lru_age) {
                    have_lru = true;
                    lru_age = age;
                    lru = {cur, static_cast<std::uint32_t>(s)};
                }
            }
        }
        if (!p.ok) p = make_room(home, now_ns);
        if (!p.ok) {
            // A full window below the eviction floor is evidence of crafted
            // keys or a weak Hash, not of memory pressure: evict no one.
            if (size_ < evict_floor_) return p;
            remove(lru);
            ++evictions_;
            p = {lru.group, lru.slot, true};
        }
        Group& grp = groups_[p.group];
        grp.keys[p.slot] = Traits::store(seeds_, key, h);
        grp.states[p.slot] = policies_[tier].fresh_state();
        grp.stamps[p.slot] = stamp_of(now_ns, tier);
        grp.used = static_cast<std::uint16_t>(grp.used | (1u << p.slot));
        if (p.group != home) ++groups_[home].overflow;
        ++size_;
        return p;
    }

    KeyedPolicies<Limiter, Tiers> policies_;
    [[no_unique_address]] Hash hash_;
    KeyedSeeds seeds_;
    std::size_t groups_count_;
    std::unique_ptr<Group[]> groups_;
    std::size_t evict_floor_ = 0;
    std::size_t size_ = 0;
    std::size_t cursor_ = 0;
    std::uint64_t clock_ = 0;
    std::uint64_t evictions_ = 0;
    std::uint64_t reclaims_ = 0;
    std::uint64_t collisions_ = 0;
};

}  // namespace detail
TALLY_END_NAMESPACE
