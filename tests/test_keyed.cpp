// Tests for tally/limit/keyed.hpp: KeyedLimiter (single-threaded behaviour).
#include <tally/limit/fixed_window.hpp>
#include <tally/limit/gcra.hpp>
#include <tally/limit/keyed.hpp>
#include <tally/limit/sliding_window.hpp>
#include <tally/limit/token_bucket.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "catch.hpp"
#include "test_support.hpp"

namespace {

using U64Table = tally::KeyedLimiter<std::uint64_t, tally::Gcra>;

constexpr std::uint64_t ms = 1'000'000;
// A fixed table seed: the tests are reproducible (the default is Seed::random()).
const tally::Seed seed{0x5eed};

bool same(const tally::Decision& a, const tally::Decision& b) {
    return a == b;
}

}  // namespace

TEST_CASE("keyed: slot group layout fits one cache line", "[keyed]") {
    using St = tally::Gcra::State;
    using TbTable = tally::KeyedLimiter<std::uint64_t, tally::TokenBucket>;
    STATIC_REQUIRE(sizeof(St) == 8);
    // u64 key + 8-byte state + 4-byte stamp = 20 bytes a slot, 3 bytes of header.
    STATIC_REQUIRE(sizeof(tally::detail::KeyedGroupRaw<std::uint64_t, St, 3>) <= 64);
    STATIC_REQUIRE(sizeof(tally::detail::KeyedGroupRaw<std::uint64_t, St, 4>) > 64);
    STATIC_REQUIRE(sizeof(tally::detail::KeyedGroupRaw<std::uint64_t, St, 6>) <= 128);
    STATIC_REQUIRE(sizeof(tally::detail::KeyedGroupRaw<std::uint64_t, St, 7>) > 128);
    STATIC_REQUIRE(U64Table::slots_per_group == (tally::cache_line_size == 64 ? 3 : 6));
    STATIC_REQUIRE(U64Table::group_bytes == tally::cache_line_size);
    STATIC_REQUIRE(alignof(U64Table::Group) == tally::cache_line_size);
    STATIC_REQUIRE(U64Table::probe_groups * U64Table::slots_per_group >= 16);
    // TokenBucket: 16-byte state, 28-byte slots: 2 keys per 64-byte line, 4 per 128.
    STATIC_REQUIRE(sizeof(tally::TokenBucket::State) == 16);
    STATIC_REQUIRE(sizeof(tally::detail::KeyedGroupRaw<std::uint64_t, tally::TokenBucket::State, 2>) <= 64);
    STATIC_REQUIRE(sizeof(tally::detail::KeyedGroupRaw<std::uint64_t, tally::TokenBucket::State, 3>) > 64);
    STATIC_REQUIRE(sizeof(tally::detail::KeyedGroupRaw<std::uint64_t, tally::TokenBucket::State, 4>) <= 128);
    STATIC_REQUIRE(sizeof(tally::detail::KeyedGroupRaw<std::uint64_t, tally::TokenBucket::State, 5>) > 128);
    STATIC_REQUIRE(TbTable::slots_per_group == (tally::cache_line_size == 64 ? 2 : 4));
    STATIC_REQUIRE(TbTable::group_bytes == tally::cache_line_size);
    // String keys: 16-byte fingerprint + Gcra state + stamp = 28 bytes, as TokenBucket.
    using StrTable = tally::KeyedLimiter<std::string, tally::Gcra>;
    STATIC_REQUIRE(StrTable::slots_per_group == (tally::cache_line_size == 64 ? 2 : 4));
    // SlidingWindowLimiter<> (56-byte ring): one key per group; the group is
    // the fewest whole lines that hold it (2 x 64 or 1 x 128 bytes).
    using SwTable = tally::KeyedLimiter<std::uint64_t, tally::SlidingWindowLimiter<>>;
    STATIC_REQUIRE(SwTable::slots_per_group == 1);
    STATIC_REQUIRE(SwTable::group_bytes == 128);
    STATIC_REQUIRE(SwTable::probe_groups == 16);
    U64Table t(tally::Quota::per_second(10), 1000, seed);
    CHECK(reinterpret_cast<std::uintptr_t>(&t) % alignof(U64Table) == 0);
    CHECK(t.capacity() >= 1000);
    CHECK(t.capacity() < 1000 + U64Table::slots_per_group);
    CHECK(t.memory_bytes() == t.group_count() * tally::cache_line_size + sizeof(U64Table));
}

TEST_CASE("keyed: capacity outside 1 to SIZE_MAX/2 throws naming the value", "[keyed]") {
    const tally::Quota q = tally::Quota::per_second(10);
    const std::size_t max = ~std::size_t{0};
    const std::string range = " is out of range [1, " + std::to_string(max / 2) + "]";
    const std::string who = "tally::KeyedLimiter::KeyedLimiter: capacity ";
    CHECK_THROWS_WITH(U64Table(q, 0, seed), who + "0" + range);
    // Huge values used to wrap in the group arithmetic; the range check
    // comes first and names the value as given.
    for (const std::size_t cap : {max, max - 1, max - 2, max / 2 + 1}) {
        INFO(cap);
        CHECK_THROWS_WITH(U64Table(q, cap, seed), who + std::to_string(cap) + range);
        using StrTable = tally::KeyedLimiter<std::string, tally::Gcra>;
        CHECK_THROWS_WITH(StrTable(q, cap, seed), who + std::to_string(cap) + range);
    }
}

TEMPLATE_TEST_CASE("keyed: decisions equal an unordered_map oracle while the table has room", "[keyed]", tally::Gcra,
                   tally::TokenBucket, tally::FixedWindowLimiter, tally::SlidingWindowLimiter<>) {
    const std::size_t keys = 300;
    tally::KeyedLimiter<std::uint64_t, TestType> t(tally::Quota::per_second(50).with_burst(5), 4 * keys, seed);
    std::unordered_map<std::uint64_t, TestType> oracle;
    tally::test::Rng rng(7);
    std::uint64_t now = 1'000'000'000;
    const std::size_t steps = tally::test::big(400'000, 60'000);
    std::size_t allowed = 0, denied = 0;
    for (std::size_t i = 0; i < steps; ++i) {
        now += rng.below(200'000);
        const std::uint64_t key = rng.below(keys) * 0x1000193ull;
        const std::uint64_t cost = 1 + rng.below(3);
        const auto d = t.try_acquire(key, now, cost);
        auto it = oracle.try_emplace(key, tally::Quota::per_second(50).with_burst(5)).first;
        const auto e = it->second.try_acquire(now, cost);
        REQUIRE(same(d, e));
        (d.allowed ? allowed : denied)++;
    }
    CHECK(t.evictions() == 0);
    CHECK(t.invariants_hold());
    CHECK(allowed > steps / 10);
    CHECK(denied > steps / 10);
    CHECK(t.size() <= keys);
}

TEMPLATE_TEST_CASE("keyed: full probe window evicts the least recently seen key", "[keyed]", tally::Gcra,
                   tally::TokenBucket, tally::FixedWindowLimiter, tally::SlidingWindowLimiter<>) {
    // One group: the probe window is the whole table.
    using Table = tally::KeyedLimiter<std::uint64_t, TestType>;
    constexpr std::size_t S = Table::slots_per_group;
    Table t(tally::Quota::per_hour(2), S, seed);
    REQUIRE(t.group_count() == 1);
    std::uint64_t now = 1000 * ms;
    for (std::uint64_t k = 0; k < S; ++k) {
        REQUIRE(t.try_acquire(k, now).allowed);  // not fresh for half an hour
        now += 5 * ms;
    }
    REQUIRE(t.size() == S);
    // Key 0 (oldest) is seen again, also when denied: key 1 becomes the LRU.
    REQUIRE(t.try_acquire(0, now).allowed);
    REQUIRE_FALSE(t.try_acquire(0, now + 1).allowed);
    now += 5 * ms;
    const auto d = t.try_acquire(1000, now);
    CHECK(d.allowed);
    CHECK(t.evictions() == 1);
    CHECK(t.reclaims() == 0);
    CHECK(t.size() == S);
    CHECK(t.contains(1000));
    CHECK(t.contains(0) == (S > 1));  // with one slot, key 0 was the only (so least recent) key
    if (S > 1) {
        CHECK_FALSE(t.contains(1));
        for (std::uint64_t k = 2; k < S; ++k) CHECK(t.contains(k));
        // The evicted key comes back with a fresh quota (fail open, documented).
        now += 5 * ms;
        CHECK(t.try_acquire(1, now).allowed);
        CHECK(t.try_acquire(1, now).allowed);
        CHECK(t.evictions() == 2);
    }
}

TEST_CASE("keyed: a fresh key is reclaimed before any active key is evicted", "[keyed]") {
    constexpr std::size_t S = U64Table::slots_per_group;
    const tally::Quota q = tally::Quota::per_second(10);  // 100 ms per unit
    U64Table t(q, S, seed);
    std::uint64_t now = 1000 * ms;
    // Key 0 is touched first (the LRU) but key S-1 becomes fresh first: it
    // takes one unit at a later time and the others take many.
    for (std::uint64_t k = 0; k + 1 < S; ++k) REQUIRE(t.try_acquire(k, now, 10).allowed);
    REQUIRE(t.try_acquire(S - 1, now + 10 * ms, 1).allowed);
    now += 10 * ms + 100 * ms;  // key S-1 is fresh again, the others are not
    CHECK(t.try_acquire(777, now).allowed);
    CHECK(t.evictions() == 0);
    CHECK(t.reclaims() == 1);
    CHECK_FALSE(t.contains(S - 1));
    for (std::uint64_t k = 0; k + 1 < S; ++k) CHECK(t.contains(k));
    CHECK(t.contains(777));
}

TEST_CASE("keyed: hopscotch relocation fills the table without losing state", "[keyed]") {
    // All keys stay active (one unit an hour, spent at once): a key that
    // moved but lost its state would be admitted again.
    U64Table t(tally::Quota::per_hour(1), 30'000, seed);
    const std::size_t n = t.capacity() * 3 / 4;
    tally::test::Rng rng(5);
    std::vector<std::uint64_t> keys(n);
    for (auto& k : keys) k = rng.next();
    std::uint64_t now = 1000 * ms;
    for (const auto k : keys) {
        now += 2 * ms;
        REQUIRE(t.try_acquire(k, now).allowed);
    }
    CHECK(t.evictions() == 0);
    CHECK(t.size() == n);
    CHECK(t.invariants_hold());
    for (const auto k : keys) REQUIRE_FALSE(t.try_acquire(k, now).allowed);
    // Past the window capacity the table evicts, and stays consistent.
    for (std::size_t i = 0; i < t.capacity(); ++i) t.try_acquire(rng.next(), now += 2 * ms);
    CHECK(t.evictions() > 0);
    CHECK(t.size() <= t.capacity());
    CHECK(t.size() >= t.capacity() * 9 / 10);
    CHECK(t.invariants_hold());
}

TEST_CASE("keyed: evict_idle is incremental and frees only fresh keys", "[keyed]") {
    const tally::Quota q = tally::Quota::per_second(10);
    U64Table t(q, 3000, seed);
    const std::size_t groups = t.group_count();
    std::uint64_t now = 1000 * ms;
    for (std::uint64_t k = 0; k < 1500; ++k) REQUIRE(t.try_acquire(k, now, k % 2 == 0 ? 1 : 10).allowed);
    REQUIRE(t.size() == 1500);
    // At +200 ms keys with cost 1 are fresh (100 ms), cost 10 keys are not (1 s).
    now += 200 * ms;
    std::size_t freed = 0;
    for (std::size_t call = 0; call < groups; ++call) {
        const std::size_t f = t.evict_idle(now, 1);
        CHECK(f <= U64Table::slots_per_group);
        freed += f;
    }
    CHECK(freed == 750);
    CHECK(t.size() == 750);
    CHECK(t.evict_idle(now, groups) == 0);  // a second sweep finds nothing
    for (std::uint64_t k = 0; k < 1500; ++k) CHECK(t.contains(k) == (k % 2 == 1));
    // A sweep in one call after everything is fresh empties the table.
    CHECK(t.evict_idle(now + 2000 * ms, groups) == 750);
    CHECK(t.size() == 0);
    CHECK(t.reclaims() == 1500);
    CHECK(t.invariants_hold());
}

TEST_CASE("keyed: churn of a million distinct keys through a small table", "[keyed][big]") {
    const std::size_t n = tally::test::big(1'000'000, 100'000);
    // One unit an hour: a key stays active (not fresh) for an hour.
    U64Table t(tally::Quota::per_hour(1), 1000, seed);
    const std::size_t mem = t.memory_bytes();
    const std::size_t cap = t.capacity();
    std::uint64_t now = 1000 * ms;
    std::size_t max_size = 0;
    // Phase 1: keys 2 ms apart (distinct LRU stamps), all active: the table
    // must evict, never grow.
    for (std::uint64_t k = 0; k < n; ++k) {
        now += 2 * ms;
        const auto d = t.try_acquire(k, now);
        REQUIRE(d.allowed);  // a new or evicted key always starts fresh
        max_size = std::max(max_size, t.size());
    }
    CHECK(max_size <= cap);
    CHECK(t.size() <= cap);
    CHECK(t.memory_bytes() == mem);
    CHECK(t.evictions() > 0);
    CHECK(t.reclaims() == 0);
    CHECK(t.evictions() + t.size() == n);
    // LRU keeps the most recent keys: the last 100 are all present, and an
    // early key is gone.
    for (std::uint64_t k = n - 100; k < n; ++k) CHECK(t.contains(k));
    CHECK_FALSE(t.contains(0));
    // The table is well used: at least 80% full when eviction is forced.
    CHECK(t.size() >= cap * 8 / 10);
    // Phase 2: keys an hour apart find the previous ones fresh, so slots are
    // reclaimed and no active key is evicted.
    const std::uint64_t ev = t.evictions();
    for (std::uint64_t k = 0; k < n / 10; ++k) {
        now += 3601'000 * ms;
        REQUIRE(t.try_acquire(n + k, now).allowed);
    }
    CHECK(t.evictions() == ev);
    CHECK(t.reclaims() > 0);
    CHECK(t.size() <= cap);
    CHECK(t.invariants_hold());
}

TEMPLATE_TEST_CASE("keyed: batch and single calls give identical decisions", "[keyed]", tally::Gcra, tally::TokenBucket,
                   tally::FixedWindowLimiter, tally::SlidingWindowLimiter<>) {
    const std::size_t n_keys = GENERATE(std::size_t{50}, std::size_t{5000}, std::size_t{200'000});
    const std::size_t capacity = GENERATE(std::size_t{600}, std::size_t{100'000});
    INFO("keys " << n_keys << " capacity " << capacity);
    const tally::Quota q = tally::Quota::per_second(20).with_burst(4);
    tally::KeyedLimiter<std::uint64_t, TestType> single(q, capacity, seed);
    tally::KeyedLimiter<std::uint64_t, TestType> batch(q, capacity, seed);
    tally::test::Rng rng(42 + n_keys + capacity);
    std::uint64_t now = 5000 * ms;
    std::vector<std::uint64_t> keys;
    std::vector<tally::Decision> out;
    const std::size_t rounds = tally::test::big(200, 40);
    for (std::size_t r = 0; r < rounds; ++r) {
        const std::size_t len = rng.below(300);  // includes empty batches and lengths < the prefetch distance
        keys.clear();
        for (std::size_t i = 0; i < len; ++i) {
            // Skewed: a quarter of the picks hit 8 hot keys, so batches hold duplicates.
            keys.push_back(rng.below(4) == 0 ? rng.below(8) : rng.below(n_keys));
        }
        out.assign(len, tally::Decision{});
        batch.try_acquire_batch(keys, now, out);
        for (std::size_t i = 0; i < len; ++i) {
            const auto d = single.try_acquire(keys[i], now);
            REQUIRE(same(d, out[i]));
        }
        now += rng.below(30 * ms);
    }
    CHECK(single.size() == batch.size());
    CHECK(batch.invariants_hold());
    CHECK(single.evictions() == batch.evictions());
    // Mismatched spans are rejected before anything changes.
    std::vector<tally::Decision> short_out(3);
    const std::vector<std::uint64_t> four{1, 2, 3, 4};
    const std::size_t before = batch.size();
    CHECK_THROWS_WITH(
        batch.try_acquire_batch(four, now, short_out),
        "tally::KeyedLimiter::try_acquire_batch: keys.size() 4 != out.size() 3; the spans must have equal sizes");
    CHECK(batch.size() == before);
}

TEST_CASE("keyed: string keys never share a quota even when their hashes collide", "[keyed]") {
    struct ConstantHash {
        std::uint64_t operator()(std::string_view) const noexcept { return 42; }
    };
    using Table = tally::KeyedLimiter<std::string, tally::Gcra, ConstantHash>;
    STATIC_REQUIRE_FALSE(Table::exact_keys);
    STATIC_REQUIRE(U64Table::exact_keys);
    Table t(tally::Quota::per_hour(3), 100, seed);
    const std::vector<std::string> names{"alice", "bob", "carol", "dave", "", "a much longer key than sixteen bytes"};
    const std::uint64_t now = 1000 * ms;
    for (int i = 0; i < 3; ++i) REQUIRE(t.try_acquire("alice", now).allowed);
    CHECK_FALSE(t.try_acquire("alice", now).allowed);
    for (const auto& n : names) {
        if (n == "alice") continue;
        INFO(n);
        CHECK(t.try_acquire(n, now).allowed);  // every probe word equal, check words differ
        CHECK(t.try_acquire(n, now).allowed);
        CHECK(t.try_acquire(n, now).allowed);
        CHECK_FALSE(t.try_acquire(n, now).allowed);
    }
    CHECK(t.size() == names.size());
    CHECK(t.evictions() == 0);
    CHECK_FALSE(t.contains("mallory"));
}

TEST_CASE("keyed: string keys match an oracle with the default hasher", "[keyed]") {
    using Table = tally::KeyedLimiter<std::string, tally::Gcra>;
    const tally::Quota q = tally::Quota::per_second(30).with_burst(3);
    Table t(q, 4096, seed);
    std::unordered_map<std::string, tally::Gcra> oracle;
    tally::test::Rng rng(11);
    std::uint64_t now = 1000 * ms;
    std::vector<std::string> batch_keys;
    for (std::size_t i = 0; i < tally::test::big(100'000, 20'000); ++i) {
        now += rng.below(5 * ms);
        const std::string key = "client-" + std::to_string(rng.below(1500));
        const auto d = t.try_acquire(key, now);
        const auto e = oracle.try_emplace(key, q).first->second.try_acquire(now);
        REQUIRE(same(d, e));
    }
    CHECK(t.evictions() == 0);
    // std::string_view lookups reach the same key.
    const std::string_view sv = "client-7";
    CHECK(t.contains(sv) == (oracle.count("client-7") == 1));
}

TEST_CASE("keyed: fingerprint check words collide at the ideal-hash rate", "[keyed][big]") {
    // The string bound rests on the check word behaving like a random 64-bit
    // value. Truncate it to 32 bits and count colliding pairs among n keys:
    // the expectation is n(n-1)/2 / 2^32 (8 for n = 2^18, 0.5 for 2^16).
    const std::size_t n = tally::test::big(std::size_t{1} << 18, std::size_t{1} << 16);
    using Traits = tally::detail::KeyedKeyTraits<std::string, tally::Hasher<std::string>>;
    const auto seeds = tally::detail::KeyedSeeds::from(seed);
    std::vector<std::uint32_t> words;
    words.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        const std::string key = "user:" + std::to_string(i);
        words.push_back(static_cast<std::uint32_t>(Traits::check(seeds, key)));
    }
    std::sort(words.begin(), words.end());
    std::size_t pairs = 0;
    for (std::size_t i = 1; i < n; ++i) pairs += words[i] == words[i - 1];
    const double expected = static_cast<double>(n) * static_cast<double>(n - 1) / 2.0 / 4294967296.0;
    INFO("pairs " << pairs << " expected " << expected);
    CHECK(static_cast<double>(pairs) <= 4 * expected + 6);  // Poisson tail: < 1e-4 at both sizes
    if (n == (std::size_t{1} << 18)) CHECK(pairs >= 1);
}

TEST_CASE("keyed: time going backwards never mints capacity or evicts wrongly", "[keyed]") {
    U64Table t(tally::Quota::per_minute(2), 30, seed);
    const std::uint64_t now = 100'000 * ms;
    REQUIRE(t.try_acquire(5, now).allowed);
    REQUIRE(t.try_acquire(5, now).allowed);
    CHECK_FALSE(t.try_acquire(5, now - 50'000 * ms).allowed);
    CHECK_FALSE(t.try_acquire(5, 0).allowed);
    CHECK(t.size() == 1);
}

TEST_CASE("keyed: with a jittery clock decisions equal an oracle fed the table's latest time", "[keyed]") {
    // The table reads a stale now_ns as the latest it has seen, so dropping
    // a fresh key and recreating it can never mint capacity for an old
    // timestamp. The table is small so that fresh keys are reclaimed.
    const tally::Quota q = tally::Quota::per_second(50).with_burst(5);
    U64Table t(q, 48, seed);
    std::unordered_map<std::uint64_t, tally::Gcra> oracle;
    tally::test::Rng rng(17);
    std::uint64_t now = 1000 * ms, latest = 0;
    for (std::size_t i = 0; i < tally::test::big(200'000, 40'000); ++i) {
        now += rng.below(3 * ms);
        const std::uint64_t stamp = now - rng.below(20 * ms);  // up to 20 ms late
        latest = std::max(latest, stamp);
        const std::uint64_t key = rng.below(40);
        const auto d = t.try_acquire(key, stamp);
        const auto e = oracle.try_emplace(key, q).first->second.try_acquire(latest);
        REQUIRE(same(d, e));
    }
    CHECK(t.evictions() == 0);
    CHECK(t.reclaims() > 0);
    CHECK(t.invariants_hold());
}

TEST_CASE("keyed: clear and move", "[keyed]") {
    U64Table t(tally::Quota::per_second(1), 10, seed);
    REQUIRE(t.try_acquire(1, 1000 * ms).allowed);
    CHECK_FALSE(t.try_acquire(1, 1000 * ms).allowed);
    U64Table u = std::move(t);
    CHECK(u.size() == 1);
    CHECK_FALSE(u.try_acquire(1, 1000 * ms).allowed);
    u.clear();
    CHECK(u.size() == 0);
    CHECK(u.try_acquire(1, 1000 * ms).allowed);
}

// ---------------------------------------------------------------------------
// Hostile keys. An attacker who can compute the probe hash crafts keys whose
// home group is the victim's and interleaves them with requests on the
// victim. With LRU eviction at any fill, each crafted burst pushed the victim
// out and it came back with a fresh quota (a login throttle at 5 per 15
// minutes admitted every attempt). The table now evicts live keys only from
// 3/4 of its capacity, so the crafted keys are refused instead.

namespace {

// What the attacker needs, for both table types: the hash under the known
// seed and the placement it implies (shard, then home group by Lemire's
// reduction of the hash over the shard's groups, the public layout).
template <class T>
struct Placement;

template <class K, class L>
struct Placement<tally::KeyedLimiter<K, L>> {
    static std::uint64_t of(const tally::KeyedLimiter<K, L>& t, std::uint64_t h) {
        return static_cast<std::uint64_t>((static_cast<tally::detail::uint128>(h) * t.group_count()) >> 64);
    }
    static constexpr std::size_t window =
        tally::KeyedLimiter<K, L>::probe_groups * tally::KeyedLimiter<K, L>::slots_per_group;
};

template <class K, class L>
struct Placement<tally::ConcurrentKeyedLimiter<K, L>> {
    static std::uint64_t of(const tally::ConcurrentKeyedLimiter<K, L>& t, std::uint64_t h) {
        const std::uint64_t shard = h & (t.shard_count() - 1);
        const auto groups = t.shard_group_count();
        return shard * groups + static_cast<std::uint64_t>((static_cast<tally::detail::uint128>(h) * groups) >> 64);
    }
    static constexpr std::size_t window = Placement<tally::KeyedLimiter<K, L>>::window;
};

template <class K>
K attack_key(std::uint64_t n) {
    if constexpr (std::is_same_v<K, std::string>) {
        return "u" + std::to_string(n);
    } else {
        return n * 0x9e3779b97f4a7c15ull + 1;
    }
}

// Brute force, offline: `count` keys whose placement equals the victim's,
// hashed with `hash` (the attacker's model of the table's hash).
template <class K, class Hash, class Place>
std::vector<K> craft(const K& victim, std::size_t count, Hash hash, Place place) {
    const std::uint64_t target = place(hash(victim));
    std::vector<K> out;
    for (std::uint64_t n = 0; out.size() < count; ++n) {
        K k = attack_key<K>(n);
        if (k != victim && place(hash(k)) == target) out.push_back(std::move(k));
    }
    return out;
}

// Each round: one attempt on the victim, then a full window of crafted keys,
// 2 ms apart (so the LRU order is strict). Returns the victim's admissions.
template <class T, class K>
std::uint64_t run_attack(T& table, const K& victim, const std::vector<K>& crafted, std::size_t per_round,
                         std::size_t rounds) {
    std::uint64_t now = 1000 * ms, admitted = 0;
    std::size_t next = 0;
    for (std::size_t r = 0; r < rounds; ++r) {
        admitted += table.try_acquire(victim, now).allowed;
        now += 2 * ms;
        for (std::size_t i = 0; i < per_round; ++i) {
            (void)table.try_acquire(crafted[next], now);
            next = (next + 1) % crafted.size();
            now += 2 * ms;
        }
    }
    return admitted;
}

const tally::Quota login_quota = tally::Quota::per(5, std::chrono::minutes(15));  // burst 5, one per 3 min

template <class T>
T make_table(std::size_t capacity, tally::Seed s) {
    if constexpr (requires { T(login_quota, capacity, std::size_t{8}, s); }) {
        return T(login_quota, capacity, 8, s);
    } else {
        return T(login_quota, capacity, s);
    }
}

}  // namespace

// Aliases keep the test names free of commas (CTest runs each case by name).
using StrKeyed = tally::KeyedLimiter<std::string, tally::Gcra>;
using U64Keyed = tally::KeyedLimiter<std::uint64_t, tally::Gcra>;
using StrSharded = tally::ConcurrentKeyedLimiter<std::string, tally::Gcra>;
using U64Sharded = tally::ConcurrentKeyedLimiter<std::uint64_t, tally::Gcra>;

TEMPLATE_TEST_CASE("keyed: crafted keys against a known seed never reset a victim's quota", "[keyed][security]",
                   StrKeyed, U64Keyed, StrSharded, U64Sharded) {
    using T = TestType;
    using K = std::conditional_t<std::is_same_v<typename T::Lookup, std::string_view>, std::string, std::uint64_t>;
    const std::size_t capacity = tally::test::big(std::size_t{1} << 16, std::size_t{1} << 12);
    const tally::Seed known{0};  // the attacker knows it: Seed{0} is the public default hash
    T table = make_table<T>(capacity, known);
    const std::size_t w = Placement<T>::window;
    const K victim = std::is_same_v<K, std::string> ? attack_key<K>(~0ull) : K{};
    const std::vector<K> crafted = craft<K>(
        victim, 2 * w, [&](const K& k) { return table.hash(k); },
        [&](std::uint64_t h) { return Placement<T>::of(table, h); });
    if constexpr (std::is_same_v<K, std::string>) {
        // With Seed{0} the string probe hash is the public tally::hash64.
        CHECK(table.hash(crafted[0]) == tally::hash64(crafted[0]));
    }
    const std::size_t rounds = 100;
    const std::uint64_t admitted = run_attack(table, victim, crafted, w, rounds);
    INFO("victim admitted " << admitted << ", evictions " << table.evictions() << ", collisions " << table.collisions()
                            << ", size " << table.size());
    CHECK(admitted == login_quota.limit);  // exactly its quota, never more
    CHECK(table.evictions() == 0);
    // w - 1 crafted keys fit beside the victim; the other w + 1 of the pool
    // of 2w are refused at every request (rounds / 2 passes over the pool).
    CHECK(table.collisions() == rounds / 2 * (w + 1));
    CHECK(table.size() == w);                      // victim + the crafted keys that fit
    CHECK(table.size() * 100 < table.capacity());  // under 1% full
    CHECK(table.contains(victim));

    // The same crafted keys against a table with another (secret) seed land
    // all over it: nothing is refused, nothing evicted, every one admitted.
    T other = make_table<T>(capacity, tally::Seed{0x9b1d7c3e5a4f2817ull});
    std::uint64_t crafted_admitted = 0;
    for (const auto& k : crafted) crafted_admitted += other.try_acquire(k, 1000 * ms).allowed;
    CHECK(crafted_admitted == crafted.size());
    CHECK(other.collisions() == 0);
    CHECK(other.evictions() == 0);
}

TEST_CASE("keyed: a refused newcomer is denied without state and gets in once a slot frees", "[keyed][security]") {
    using Table = tally::KeyedLimiter<std::uint64_t, tally::Gcra>;
    const tally::Quota q = tally::Quota::per_second(10);  // fresh again 100 ms after one unit
    Table t(q, 1 << 12, tally::Seed{0});
    const std::size_t w = Table::probe_groups * Table::slots_per_group;
    const std::vector<std::uint64_t> crafted = craft<std::uint64_t>(
        7, w + 1, [&](std::uint64_t k) { return t.hash(k); },
        [&](std::uint64_t h) { return Placement<Table>::of(t, h); });
    const std::uint64_t now = 1000 * ms;
    for (std::size_t i = 0; i < w; ++i) REQUIRE(t.try_acquire(crafted[i], now).allowed);
    const std::uint64_t newcomer = crafted[w];
    const tally::Decision d = t.try_acquire(newcomer, now);
    CHECK(d == tally::Decision{false, 0, q.window_ns, q.window_ns});
    CHECK_FALSE(t.contains(newcomer));
    CHECK(t.collisions() == 1);
    // A peek (cost 0) is answered as for a fresh key and changes nothing.
    CHECK(t.try_acquire(newcomer, now, 0) == tally::Gcra(q).try_acquire(now, 0));
    CHECK(t.collisions() == 2);
    // A cost no fresh key could pay keeps its "never" answer.
    CHECK(t.try_acquire(newcomer, now, 11) == tally::Gcra(q).try_acquire(now, 11));
    CHECK(t.try_acquire(newcomer, now, 11).retry_after_ns == tally::never);
    CHECK(t.collisions() == 4);
    CHECK(t.evictions() == 0);
    // 100 ms later the crafted keys are fresh: the newcomer reclaims a slot.
    CHECK(t.try_acquire(newcomer, now + 100 * ms).allowed);
    CHECK(t.contains(newcomer));
    CHECK(t.reclaims() == 1);
    CHECK(t.invariants_hold());
}

TEMPLATE_TEST_CASE("keyed: live keys are evicted only under memory pressure", "[keyed][security]", std::uint64_t,
                   std::string) {
    // Random keys, all live (one unit an hour). Every eviction must happen at
    // size() >= eviction_floor() (3/4 capacity); below it no key is refused
    // either (a full window by chance is that rare); past capacity evictions
    // must happen, and the table never grows.
    using Table = tally::KeyedLimiter<TestType, tally::Gcra>;
    Table t(tally::Quota::per_hour(1), tally::test::big(60'000, 12'000), tally::Seed{3});
    tally::test::Rng rng(99);
    std::uint64_t now = 1000 * ms;
    const std::size_t n = 2 * t.capacity();
    std::uint64_t evictions_before_floor = 0;
    std::uint64_t first_eviction_size = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t size_before = t.size();
        const std::uint64_t ev = t.evictions();
        const TestType key = attack_key<TestType>(rng.next());
        now += 2 * ms;
        const auto d = t.try_acquire(key, now);
        if (t.evictions() != ev) {
            if (size_before < t.eviction_floor()) ++evictions_before_floor;
            if (first_eviction_size == 0) first_eviction_size = size_before;
        }
        if (size_before < t.capacity() * 7 / 10) REQUIRE(d.allowed);
    }
    INFO("first eviction at size " << first_eviction_size << " of " << t.capacity() << "; collisions "
                                   << t.collisions());
    CHECK(evictions_before_floor == 0);
    CHECK(first_eviction_size >= t.eviction_floor());
    CHECK(t.eviction_floor() == t.capacity() * 3 / 4);
    CHECK(t.evictions() > 0);
    CHECK(t.size() <= t.capacity());
    CHECK(t.size() >= t.eviction_floor());
    CHECK(t.evictions() + t.size() + t.collisions() == n);
    CHECK(t.invariants_hold());
}

TEST_CASE("keyed: the default seed is random per table", "[keyed][security]") {
    using Table = tally::KeyedLimiter<std::string, tally::Gcra>;
    Table a(tally::Quota::per_second(1), 100);
    Table b(tally::Quota::per_second(1), 100);
    Table c(tally::Quota::per_second(1), 100, tally::Seed{0});
    // Equal only with probability 2^-64 per pair.
    CHECK(a.hash("admin") != b.hash("admin"));
    CHECK(a.hash("admin") != c.hash("admin"));
    CHECK(c.hash("admin") == tally::hash64("admin"));
}

TEMPLATE_TEST_CASE("keyed: set_quota rebases every key as its own limiter's set_quota does", "[keyed][quota]",
                   tally::Gcra, tally::TokenBucket, tally::FixedWindowLimiter, tally::SlidingWindowLimiter<>) {
    // Oracle: one limiter per key, each told set_quota at the same instant.
    // Quotas go down, up and sideways; decisions must stay identical.
    const std::vector<tally::Quota> quotas{tally::Quota::per_second(50).with_burst(5), tally::Quota::per_second(5),
                                           tally::Quota::per_second(200).with_burst(20),
                                           tally::Quota::per_minute(90).with_burst(3)};
    tally::KeyedLimiter<std::uint64_t, TestType> t(quotas[0], 2000, seed);
    tally::ConcurrentKeyedLimiter<std::uint64_t, TestType> c(quotas[0], 2000, 4, seed);
    std::unordered_map<std::uint64_t, TestType> oracle;
    tally::test::Rng rng(23);
    std::uint64_t now = 1000 * ms;
    std::size_t allowed = 0;
    const std::size_t steps = tally::test::big(40'000, 8'000);
    for (std::size_t i = 0; i < steps; ++i) {
        now += rng.below(2 * ms);
        if (i % (steps / 8) == steps / 8 - 1) {
            const tally::Quota q = quotas[(i / (steps / 8) + 1) % quotas.size()];
            t.set_quota(q, now);
            c.set_quota(q, now);
            for (auto& [k, l] : oracle) l.set_quota(q, now);
            CHECK(t.quota() == q);
            CHECK(c.quota() == q);
        }
        const std::uint64_t key = rng.below(300);
        const std::uint64_t cost = 1 + rng.below(2);
        const auto e = oracle.try_emplace(key, t.quota()).first->second.try_acquire(now, cost);
        REQUIRE(t.try_acquire(key, now, cost) == e);
        REQUIRE(c.try_acquire(key, now, cost) == e);
        allowed += e.allowed;
    }
    CHECK(t.evictions() == 0);
    CHECK(allowed > steps / 10);
    CHECK(allowed < steps);
    CHECK(t.invariants_hold());
    // A bad quota throws and changes nothing.
    CHECK_THROWS_AS(t.set_quota(tally::Quota{0, 1000, 0}, now), std::invalid_argument);
    CHECK(t.quota() == quotas[(7 + 1) % quotas.size()]);
}

TEST_CASE("keyed: lowering the quota never lets a key admit more than the new quota", "[keyed][quota]") {
    // Every key spends its whole burst of 100, then the quota drops to 10:
    // nothing more passes at that instant, and afterwards the new rate rules.
    using Table = tally::KeyedLimiter<std::uint64_t, tally::Gcra>;
    Table t(tally::Quota::per_second(100), 1000, seed);
    std::uint64_t now = 1000 * ms;
    for (std::uint64_t k = 0; k < 500; ++k) {
        for (int i = 0; i < 100; ++i) REQUIRE(t.try_acquire(k, now).allowed);
    }
    t.set_quota(tally::Quota::per_second(10), now);
    for (std::uint64_t k = 0; k < 500; ++k) CHECK_FALSE(t.try_acquire(k, now).allowed);
    // A key that had spent nothing gets at most the new burst.
    std::uint64_t passed = 0;
    for (int i = 0; i < 50; ++i) passed += t.try_acquire(9999, now).allowed;
    CHECK(passed == 10);
    // One second later each old key has earned at most the new quota.
    now += 1000 * ms;
    for (std::uint64_t k = 0; k < 500; ++k) {
        std::uint64_t got = 0;
        for (int i = 0; i < 50; ++i) got += t.try_acquire(k, now).allowed;
        REQUIRE(got <= 10);
    }
}

// ---------------------------------------------------------------------------
// Per-key tiers: a request names a tier; its key's state follows that tier's
// quota, and a key that changes tier is rebased as set_quota would.

namespace {
using TieredU64 = tally::KeyedLimiter<std::uint64_t, tally::Gcra, tally::Hasher<std::uint64_t>, 8>;
using TieredStr = tally::KeyedLimiter<std::string, tally::Gcra, tally::Hasher<std::string>, 8>;
using TieredSharded = tally::ConcurrentKeyedLimiter<std::uint64_t, tally::Gcra, tally::Hasher<std::uint64_t>, 8>;
}  // namespace

TEST_CASE("keyed tiers: the slot does not grow", "[keyed][tiers]") {
    STATIC_REQUIRE(TieredU64::slots_per_group == U64Table::slots_per_group);
    STATIC_REQUIRE(TieredU64::group_bytes == U64Table::group_bytes);
    using StrTable = tally::KeyedLimiter<std::string, tally::Gcra>;
    STATIC_REQUIRE(TieredStr::slots_per_group == StrTable::slots_per_group);
    STATIC_REQUIRE(TieredStr::group_bytes == StrTable::group_bytes);
    const std::vector<tally::Quota> tiers{tally::Quota::per_second(1), tally::Quota::per_second(100)};
    TieredU64 t(tiers, 1000, seed);
    U64Table u(tiers[0], 1000, seed);
    // Bytes per key: the same groups; only the policies (one per tier) are extra.
    CHECK(t.group_count() == u.group_count());
    CHECK(t.memory_bytes() - sizeof(TieredU64) == u.memory_bytes() - sizeof(U64Table));
    CHECK(t.tier_count() == 2);
}

TEST_CASE("keyed tiers: bad tiers throw or are denied", "[keyed][tiers]") {
    const tally::Quota q = tally::Quota::per_second(10);
    const std::vector<tally::Quota> none, nine(9, q), three(3, q);
    CHECK_THROWS_WITH(TieredU64(none, 100, seed),
                      "tally::KeyedLimiter::KeyedLimiter: tiers.size() 0 is out of range [1, 8]");
    CHECK_THROWS_WITH(TieredU64(nine, 100, seed),
                      "tally::KeyedLimiter::KeyedLimiter: tiers.size() 9 is out of range [1, 8]");
    TieredU64 t(three, 100, seed);
    CHECK_THROWS_WITH(t.set_quota(3, q, 0), "tally::KeyedLimiter::set_quota: tier 3 is out of range [0, 2]");
    CHECK(t.try_acquire(1, 1000 * ms, 1, 3) == tally::Decision{false, 0, tally::never, tally::never});
    CHECK_FALSE(t.contains(1));
    using C = tally::ConcurrentKeyedLimiter<std::uint64_t, tally::Gcra, tally::Hasher<std::uint64_t>, 8>;
    CHECK_THROWS_WITH(C(nine, 100, 4, seed),
                      "tally::ConcurrentKeyedLimiter::ConcurrentKeyedLimiter: tiers.size() 9 is out of range [1, 8]");
    C c(three, 100, 4, seed);
    CHECK(c.try_acquire(1, 1000 * ms, 1, 200) == tally::Decision{false, 0, tally::never, tally::never});
    CHECK_THROWS_WITH(c.set_quota(7, q, 0), "tally::ConcurrentKeyedLimiter::set_quota: tier 7 is out of range [0, 2]");
}

TEMPLATE_TEST_CASE("keyed tiers: decisions equal per-key limiters that change plan", "[keyed][tiers]", TieredU64,
                   TieredSharded) {
    std::vector<tally::Quota> quotas{tally::Quota::per_second(5), tally::Quota::per_second(50).with_burst(10),
                                     tally::Quota::per_second(400).with_burst(40)};
    TestType t = [&] {
        if constexpr (std::is_same_v<TestType, TieredU64>) {
            return TestType(quotas, 1500, seed);
        } else {
            return TestType(quotas, 1500, 4, seed);
        }
    }();
    struct Plan {
        std::size_t tier;
        tally::Gcra limiter;
    };
    std::unordered_map<std::uint64_t, Plan> oracle;
    std::vector<std::size_t> plan_of(60);  // ~130 requests/s per key: tier 0 denies most, tier 2 none
    tally::test::Rng rng(31);
    for (auto& p : plan_of) p = rng.below(3);
    std::uint64_t now = 1000 * ms;
    std::size_t switches = 0, allowed = 0;
    const std::size_t steps = tally::test::big(60'000, 12'000);
    for (std::size_t i = 0; i < steps; ++i) {
        now += rng.below(ms / 4);
        const std::uint64_t key = rng.below(plan_of.size());
        if (rng.below(50) == 0) plan_of[key] = rng.below(3);  // upgrade or downgrade
        if (i == steps / 2) {                                 // the middle tier's quota changes for its keys
            quotas[1] = tally::Quota::per_second(20).with_burst(2);
            t.set_quota(1, quotas[1], now);
            for (auto& [k, p] : oracle) {
                if (p.tier == 1) p.limiter.set_quota(quotas[1], now);
            }
        }
        const std::size_t tier = plan_of[key];
        auto it = oracle.try_emplace(key, Plan{tier, tally::Gcra(quotas[tier])}).first;
        if (it->second.tier != tier) {
            it->second.limiter.set_quota(quotas[tier], now);
            it->second.tier = tier;
            ++switches;
        }
        const auto e = it->second.limiter.try_acquire(now);
        REQUIRE(t.try_acquire(key, now, 1, tier) == e);
        allowed += e.allowed;
    }
    CHECK(switches > 100);
    CHECK(allowed > steps / 10);
    CHECK(allowed < steps * 9 / 10);
    CHECK(t.evictions() == 0);
    CHECK(t.quota(1) == quotas[1]);
}

TEST_CASE("keyed tiers: LRU eviction still picks the least recently seen key", "[keyed][tiers]") {
    constexpr std::size_t S = TieredU64::slots_per_group;
    const std::vector<tally::Quota> tiers{tally::Quota::per_hour(2), tally::Quota::per_hour(3)};
    TieredU64 t(tiers, S, seed);
    REQUIRE(t.group_count() == 1);
    std::uint64_t now = 1000 * ms;
    for (std::uint64_t k = 0; k < S; ++k) {
        REQUIRE(t.try_acquire(k, now, 1, k % 2).allowed);
        now += 10 * ms;  // > the 4.2 ms stamp unit of tiered tables
    }
    REQUIRE(t.try_acquire(0, now, 1, 0).allowed);  // key 0 is recent again: key 1 is the LRU
    now += 10 * ms;
    CHECK(t.try_acquire(1000, now, 1, 1).allowed);
    CHECK(t.evictions() == 1);
    CHECK(t.contains(1000));
    CHECK(t.contains(0) == (S > 1));
    if (S > 1) CHECK_FALSE(t.contains(1));
    CHECK(t.invariants_hold());
}

TEST_CASE("keyed: the sharded table also evicts only past its fill floor", "[keyed][security]") {
    // Per shard the floor is 3/4 of the shard; random keys fill shards evenly,
    // so nothing is evicted or refused up to 70% of the whole, and evictions
    // do happen once live keys exceed the capacity.
    tally::ConcurrentKeyedLimiter<std::uint64_t, tally::Gcra> c(tally::Quota::per_hour(1),
                                                                tally::test::big(60'000, 12'000), 4, tally::Seed{5});
    tally::test::Rng rng(77);
    std::uint64_t now = 1000 * ms;
    std::size_t inserted = 0;
    while (c.size() < c.capacity() * 7 / 10) {
        REQUIRE(c.try_acquire(rng.next(), now += ms).allowed);
        ++inserted;
    }
    CHECK(c.evictions() == 0);
    CHECK(c.collisions() == 0);
    CHECK(c.size() == inserted);
    for (std::size_t i = 0; i < c.capacity(); ++i) (void)c.try_acquire(rng.next(), now += ms);
    CHECK(c.evictions() > 0);
    CHECK(c.size() <= c.capacity());
    CHECK(c.size() >= c.capacity() * 3 / 4 - 4);  // every shard at least at its floor (rounding per shard)
}
