// tally/limit/keyed.hpp: per-key rate limiting for millions of keys in a
// fixed block of memory, one cache line per lookup. The table itself lives in
// detail/keyed_table.hpp; docs/keyed.md has the layout, bounds and numbers.
#pragma once

#include "../detail/abi.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/hash.hpp"
#include "../core/platform.hpp"
#include "../core/seed.hpp"
#include "detail/keyed_table.hpp"
#include "../detail/primitives.hpp"
#include "decision.hpp"
#include "quota.hpp"

TALLY_BEGIN_NAMESPACE

/// KeyedLimiter: one rate limiter per key for millions of keys, in memory
/// fixed at construction, one cache miss per lookup. Bucketized open
/// addressing over cache-line slot groups (Ross, ICDE 2007) with hopscotch
/// relocation (Herlihy, Shavit, Tzafrir, DISC 2008); each key holds only its
/// `Limiter::State` (8 bytes for Gcra), the policy is stored once.
///
/// Guarantee: while a key is in the table its decisions are exactly those of
/// its own `Limiter`. A key leaves only when its state is fresh (no decision
/// changes) or by LRU eviction of its probe window, which happens only while
/// size() >= 3/4 capacity() (evictions()); below that a newcomer whose window
/// holds only live keys is denied without state (collisions()), so crafted
/// keys reset no one's quota. Probe positions use a hash keyed with a secret
/// Seed (default Seed::random(); Seed{n} for reproducible tests).
/// set_quota rebases every key (Limiter::rebase_state). With Tiers > 1 each
/// request names a tier (a quota in a table of up to Tiers); slots keep size.
///
/// Cost: O(1), one line read for a present key. Memory: capacity rounded up
/// to whole groups, ~21.3 bytes per key for u64 keys and Gcra, tiered or not
/// (memory_bytes()); nothing allocated after construction. Strings are kept as
/// 128-bit fingerprints (a shared quota with probability <= 24 * 2^-128 per
/// new key). A stale now_ns is read as the latest seen. Details: docs/keyed.md.
///
/// Thread safety: none; mutators need exclusive access, const calls may run
/// together. Use ConcurrentKeyedLimiter for shared use.
///
///   tally::KeyedLimiter<std::uint64_t, tally::Gcra> per_client(
///       tally::Quota::per_second(100), 1'000'000);
///   if (!per_client.try_acquire(client_id, tally::SteadyClock::now_ns())) reject();
template <class Key, class Limiter, class Hash = Hasher<Key>, std::size_t Tiers = 1>
class KeyedLimiter {
    using Table = detail::KeyedTable<Key, Limiter, Hash, Tiers>;

  public:
    using key_type = Key;
    using limiter_type = Limiter;
    using State = typename Limiter::State;
    using Lookup = typename Table::Lookup;
    using StoredKey = typename Table::StoredKey;
    using Group = typename Table::Group;

    static constexpr std::size_t slots_per_group = Table::slots_per_group;
    static constexpr std::size_t group_bytes = Table::group_bytes;
    static constexpr std::size_t probe_groups = Table::probe_groups;
    static constexpr std::size_t relocation_groups = Table::relocation_groups;
    static constexpr bool exact_keys = Table::exact_keys;
    static constexpr std::size_t prefetch_distance = 16;
    static constexpr std::size_t max_capacity = Table::max_capacity;
    static constexpr std::size_t max_tiers = Tiers;

    /// One quota for every key. Throws std::invalid_argument unless capacity
    /// is in [1, SIZE_MAX/2], whatever Limiter(quota) throws for a bad quota,
    /// and std::bad_alloc when the table does not fit in memory.
    KeyedLimiter(Quota quota, std::size_t capacity, Seed seed = Seed::random(), Hash hash = Hash())
        : table_((check_capacity(capacity), std::vector<Limiter>{Limiter(quota)}), capacity, seed, std::move(hash)) {}
    KeyedLimiter(Quota quota, std::size_t capacity, Hash hash)
        : KeyedLimiter(quota, capacity, Seed::random(), std::move(hash)) {}
    /// Per-key tiers: request `tier` is limited by `tiers[tier]`; tiers.size()
    /// must be in [1, Tiers]. Slots are no larger than with one tier.
    KeyedLimiter(std::span<const Quota> tiers, std::size_t capacity, Seed seed = Seed::random(),
                 Hash hash = Hash()) requires(Tiers > 1)
        : table_((check_capacity(capacity),
                  detail::keyed_policies<Limiter>("tally::KeyedLimiter::KeyedLimiter", tiers, Tiers)),
                 capacity, seed, std::move(hash)) {}

    /// Applies the request to `key`'s state under tier `tier`'s quota,
    /// inserting the key if absent. A key last seen under another tier is
    /// first rebased onto this one (Limiter::rebase_state); a tier >=
    /// tier_count() is denied with retry_after_ns == tally::never.
    Decision try_acquire(Lookup key, std::uint64_t now_ns, std::uint64_t cost = 1, std::size_t tier = 0) noexcept {
        return table_.acquire(key, table_.hash(key), now_ns, cost, tier);
    }

    /// Same decisions as try_acquire on each key in order; hashes and
    /// prefetches `prefetch_distance` keys ahead. Throws std::invalid_argument
    /// when the spans differ in size.
    void try_acquire_batch(std::span<const Key> keys, std::uint64_t now_ns, std::span<Decision> out,
                           std::uint64_t cost = 1, std::size_t tier = 0) {
        detail::keyed_check_batch("tally::KeyedLimiter::try_acquire_batch", keys.size(), out.size());
        detail::keyed_batch<prefetch_distance>(
            keys.size(), [&](std::size_t i) { return table_.hash(keys[i]); },
            [&](std::uint64_t h) { table_.prefetch(h); },
            [&](std::size_t i, std::uint64_t h) { out[i] = table_.acquire(keys[i], h, now_ns, cost, tier); });
    }

    /// Frees fresh keys in the next `max_groups` groups (round robin); returns
    /// how many were freed.
    std::size_t evict_idle(std::uint64_t now_ns, std::size_t max_groups = 1024) noexcept {
        return table_.evict_idle(now_ns, max_groups);
    }

    /// Replaces the quota at now_ns for every key: each state is rebased
    /// (Limiter::rebase_state: units spent stay spent, no key can admit more
    /// at now_ns than the new quota allows). O(capacity). Throws what
    /// Limiter(quota) throws for a bad quota, changing nothing.
    void set_quota(Quota quota, std::uint64_t now_ns) { table_.set_policy(0, Limiter(quota), now_ns); }
    /// set_quota for the keys of one tier; throws std::invalid_argument unless
    /// tier < tier_count().
    void set_quota(std::size_t tier, Quota quota, std::uint64_t now_ns) {
        detail::check_range("tally::KeyedLimiter::set_quota", "tier", tier, std::size_t{0}, table_.tier_count() - 1);
        table_.set_policy(tier, Limiter(quota), now_ns);
    }
    /// The quota of `tier` (of tier 0 when tier >= tier_count()).
    [[nodiscard]] Quota quota(std::size_t tier = 0) const noexcept {
        return table_.limiter(tier < table_.tier_count() ? tier : 0).quota();
    }
    [[nodiscard]] std::size_t tier_count() const noexcept { return table_.tier_count(); }

    /// Whether `key` currently holds a slot (fresh or not).
    [[nodiscard]] bool contains(Lookup key) const noexcept { return table_.contains(key); }
    /// Drops every key (counters are kept).
    void clear() noexcept { table_.clear(); }

    [[nodiscard]] std::size_t size() const noexcept { return table_.size(); }
    [[nodiscard]] bool empty() const noexcept { return table_.size() == 0; }
    [[nodiscard]] std::size_t capacity() const noexcept { return table_.capacity(); }
    [[nodiscard]] std::size_t group_count() const noexcept { return table_.group_count(); }
    [[nodiscard]] std::size_t memory_bytes() const noexcept { return table_.table_bytes() + sizeof(*this); }
    /// Live keys evicted (LRU of a full window) while size() >= eviction_floor().
    [[nodiscard]] std::uint64_t evictions() const noexcept { return table_.evictions(); }
    /// Fresh keys whose slot was reused or freed by evict_idle.
    [[nodiscard]] std::uint64_t reclaims() const noexcept { return table_.reclaims(); }
    /// New keys denied without state: full window, size() < eviction_floor().
    [[nodiscard]] std::uint64_t collisions() const noexcept { return table_.collisions(); }
    /// 3/4 of capacity(): the size from which live keys may be evicted.
    [[nodiscard]] std::size_t eviction_floor() const noexcept { return table_.eviction_floor(); }
    [[nodiscard]] const Limiter& limiter() const noexcept { return table_.limiter(0); }

    /// O(capacity) self-check for tests.
    [[nodiscard]] bool invariants_hold() const noexcept { return table_.invariants_hold(); }

    // Building blocks for callers that hash once: `h` must be hash(key) of
    // this table (the hash is keyed with its seed); home_group(h) is the
    // group a key with hash h lives in or after.
    [[nodiscard]] std::uint64_t hash(Lookup key) const noexcept { return table_.hash(key); }
    [[nodiscard]] std::size_t home_group(std::uint64_t h) const noexcept { return table_.home_of(h); }
    void prefetch_hashed(std::uint64_t h) const noexcept { table_.prefetch(h); }
    Decision try_acquire_hashed(Lookup key, std::uint64_t h, std::uint64_t now_ns, std::uint64_t cost,
                                std::size_t tier = 0) noexcept {
        return table_.acquire(key, h, now_ns, cost, tier);
    }

  private:
    static void check_capacity(std::size_t capacity) {
        detail::check_range("tally::KeyedLimiter::KeyedLimiter", "capacity", capacity, std::size_t{1}, max_capacity);
    }

    Table table_;
};

/// ConcurrentKeyedLimiter: KeyedLimiter shared by many threads, sharded by
/// hash into `shards` tables, each behind its own spinlock on its own line.
///
/// Guarantees: those of KeyedLimiter, per shard (eviction floor, collisions,
/// seeded hash with one Seed for all shards, tiers, set_quota). A key always
/// maps to the same shard (low hash bits; the table inside uses the high
/// bits) and every operation on it runs under that shard's lock, so no key is
/// admitted beyond what its Limiter admits for that sequence of requests,
/// whatever the interleaving.
///
/// Memory: capacity split evenly, each shard ceil(capacity / shards) keys
/// rounded up to whole groups; the shard count is lowered (to a power of two)
/// when a shard would hold less than one group.
///
/// Thread safety: every method. try_acquire and try_acquire_batch lock one
/// shard per key; evict_idle one shard at a time; the observers lock each
/// shard briefly (a moment's snapshot per shard under concurrent writes).
///
///   tally::ConcurrentKeyedLimiter<std::string, tally::TokenBucket> api(
///       tally::Quota::per_second(10), 1 << 20);
///   if (!api.try_acquire(api_key, tally::CoarseClock::now_ns())) reject();  // any thread
template <class Key, class Limiter, class Hash = Hasher<Key>, std::size_t Tiers = 1>
class ConcurrentKeyedLimiter {
    using Inner = detail::KeyedTable<Key, Limiter, Hash, Tiers>;

  public:
    using Table = KeyedLimiter<Key, Limiter, Hash, Tiers>;  // the single-threaded form, for its constants
    using Lookup = typename Inner::Lookup;
    static constexpr std::size_t max_shards = 65536;

    /// Throws std::invalid_argument unless capacity is in [1, SIZE_MAX/2] and
    /// shards is a power of two in [1, 65536].
    ConcurrentKeyedLimiter(Quota quota, std::size_t capacity, std::size_t shards = 64, Seed seed = Seed::random(),
                           Hash hash = Hash())
        : ConcurrentKeyedLimiter(std::vector<Limiter>{Limiter(quota)}, capacity, shards, seed, std::move(hash)) {}
    ConcurrentKeyedLimiter(Quota quota, std::size_t capacity, std::size_t shards, Hash hash)
        : ConcurrentKeyedLimiter(quota, capacity, shards, Seed::random(), std::move(hash)) {}
    /// Per-key tiers, as KeyedLimiter's tiered constructor.
    ConcurrentKeyedLimiter(std::span<const Quota> tiers, std::size_t capacity, std::size_t shards = 64,
                           Seed seed = Seed::random(), Hash hash = Hash()) requires(Tiers > 1)
        : ConcurrentKeyedLimiter(detail::keyed_policies<Limiter>(who, tiers, Tiers), capacity, shards, seed,
                                 std::move(hash)) {}

    Decision try_acquire(Lookup key, std::uint64_t now_ns, std::uint64_t cost = 1, std::size_t tier = 0) noexcept {
        const std::uint64_t h = hash(key);
        Shard& sh = shard(h);
        sh.table.prefetch(h);  // overlap the table miss with taking the lock
        const std::lock_guard<detail::SpinLock> guard(sh.lock);
        return sh.table.acquire(key, h, now_ns, cost, tier);
    }

    /// Same decisions as try_acquire on each key in order; prefetches ahead.
    /// Throws std::invalid_argument when the spans differ in size.
    void try_acquire_batch(std::span<const Key> keys, std::uint64_t now_ns, std::span<Decision> out,
                           std::uint64_t cost = 1, std::size_t tier = 0) {
        detail::keyed_check_batch("tally::ConcurrentKeyedLimiter::try_acquire_batch", keys.size(), out.size());
        detail::keyed_batch<Table::prefetch_distance>(
            keys.size(), [&](std::size_t i) { return hash(keys[i]); },
            [&](std::uint64_t h) { shard(h).table.prefetch(h); },
            [&](std::size_t i, std::uint64_t h) {
                Shard& sh = shard(h);
                const std::lock_guard<detail::SpinLock> guard(sh.lock);
                out[i] = sh.table.acquire(keys[i], h, now_ns, cost, tier);
            });
    }

  private:
    static constexpr const char* who = "tally::ConcurrentKeyedLimiter::ConcurrentKeyedLimiter";

    ConcurrentKeyedLimiter(std::vector<Limiter> policies, std::size_t capacity, std::size_t shards, Seed seed,
                           Hash hash) {
        detail::check_range(who, "capacity", capacity, std::size_t{1}, Inner::max_capacity);
        detail::check_range(who, "shards", shards, std::size_t{1}, max_shards);
        if ((shards & (shards - 1)) != 0) {
            detail::throw_invalid_argument(std::string(who) + ": shards " + std::to_string(shards) +
                                           " is not a power of two");
        }
        const std::size_t groups = capacity / Inner::slots_per_group + (capacity % Inner::slots_per_group != 0);
        const std::size_t most = std::bit_floor(groups);
        if (shards > most) shards = most;
        const std::size_t per_shard = capacity / shards + (capacity % shards != 0);
        shards_.reserve(shards);
        for (std::size_t i = 0; i < shards; ++i) {
            shards_.push_back(std::make_unique<Shard>(policies, per_shard, seed, hash));
        }
        mask_ = shards - 1;
    }

  public:
    /// evict_idle on every shard, `max_groups_per_shard` groups each; returns
    /// the number of keys freed.
    std::size_t evict_idle(std::uint64_t now_ns, std::size_t max_groups_per_shard = 256) noexcept {
        std::size_t freed = 0;
        for (auto& sh : shards_) {
            const std::lock_guard<detail::SpinLock> guard(sh->lock);
            freed += sh->table.evict_idle(now_ns, max_groups_per_shard);
        }
        return freed;
    }

    /// set_quota of KeyedLimiter, shard by shard, each under its lock: a key
    /// sees the old quota before its shard switches and the new one after.
    void set_quota(Quota quota, std::uint64_t now_ns) { set_tier(0, Limiter(quota), now_ns); }
    /// set_quota for one tier; throws std::invalid_argument unless tier < tier_count().
    void set_quota(std::size_t tier, Quota quota, std::uint64_t now_ns) {
        detail::check_range("tally::ConcurrentKeyedLimiter::set_quota", "tier", tier, std::size_t{0}, tier_count() - 1);
        set_tier(tier, Limiter(quota), now_ns);
    }
    [[nodiscard]] Quota quota(std::size_t tier = 0) const noexcept {
        const std::lock_guard<detail::SpinLock> guard(shards_.back()->lock);
        return shards_.back()->table.limiter(tier < tier_count() ? tier : 0).quota();
    }
    [[nodiscard]] std::size_t tier_count() const noexcept { return shards_[0]->table.tier_count(); }

    [[nodiscard]] bool contains(Lookup key) const noexcept {
        Shard& sh = shard(hash(key));
        const std::lock_guard<detail::SpinLock> guard(sh.lock);
        return sh.table.contains(key);
    }

    [[nodiscard]] std::size_t size() const noexcept {
        return sum([](const Inner& t) { return t.size(); });
    }
    [[nodiscard]] std::size_t capacity() const noexcept {
        return sum([](const Inner& t) { return t.capacity(); });
    }
    [[nodiscard]] std::size_t memory_bytes() const noexcept {
        return sum([](const Inner& t) { return t.table_bytes(); }) + sizeof(*this) +
               shards_.size() * (sizeof(Shard) + sizeof(void*));
    }
    [[nodiscard]] std::uint64_t evictions() const noexcept {
        return sum([](const Inner& t) { return t.evictions(); });
    }
    [[nodiscard]] std::uint64_t collisions() const noexcept {
        return sum([](const Inner& t) { return t.collisions(); });
    }
    [[nodiscard]] std::size_t shard_count() const noexcept { return shards_.size(); }
    /// Groups in each shard's table.
    [[nodiscard]] std::size_t shard_group_count() const noexcept { return shards_[0]->table.group_count(); }

    // Building blocks: the seeded hash; shard index = hash & (shard_count() - 1),
    // home group in that shard = home_group(hash).
    [[nodiscard]] std::uint64_t hash(Lookup key) const noexcept { return shards_[0]->table.hash(key); }
    [[nodiscard]] std::size_t home_group(std::uint64_t h) const noexcept { return shards_[0]->table.home_of(h); }

  private:
    struct alignas(false_sharing_size) Shard {
        Shard(const std::vector<Limiter>& p, std::size_t cap, Seed seed, const Hash& h) : table(p, cap, seed, h) {}
        mutable detail::SpinLock lock;
        alignas(false_sharing_size) Inner table;
    };

    Shard& shard(std::uint64_t h) const noexcept { return *shards_[h & mask_]; }

    void set_tier(std::size_t tier, const Limiter& next, std::uint64_t now_ns) {
        for (auto& sh : shards_) {
            const std::lock_guard<detail::SpinLock> guard(sh->lock);
            sh->table.set_policy(tier, next, now_ns);
        }
    }

    template <class F>
    auto sum(F f) const noexcept {
        decltype(f(shards_[0]->table)) total = 0;
        for (const auto& sh : shards_) {
            const std::lock_guard<detail::SpinLock> guard(sh->lock);
            total += f(sh->table);
        }
        return total;
    }

    std::vector<std::unique_ptr<Shard>> shards_;
    std::uint64_t mask_ = 0;
};

TALLY_END_NAMESPACE
