// Tests for tally/limit/keyed.hpp: KeyedLimiter (single-threaded behaviour).
#include <tally/limit/fixed_window.hpp>
#include <tally/limit/gcra.hpp>
#include <tally/limit/keyed.hpp>
#include <tally/limit/sliding_window.hpp>
#include <tally/limit/token_bucket.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "catch.hpp"
#include "test_support.hpp"

namespace {

using U64Table = tally::KeyedLimiter<std::uint64_t, tally::Gcra>;

constexpr std::uint64_t ms = 1'000'000;

bool same(const tally::Decision& a, const tally::Decision& b) { return a == b; }

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
    U64Table t(tally::Quota::per_second(10), 1000);
    CHECK(reinterpret_cast<std::uintptr_t>(&t) % alignof(U64Table) == 0);
    CHECK(t.capacity() >= 1000);
    CHECK(t.capacity() < 1000 + U64Table::slots_per_group);
    CHECK(t.memory_bytes() == t.group_count() * tally::cache_line_size + sizeof(U64Table));
}

TEST_CASE("keyed: zero capacity throws with a message naming it", "[keyed]") {
    CHECK_THROWS_AS(U64Table(tally::Quota::per_second(10), 0), std::invalid_argument);
    try {
        U64Table t(tally::Quota::per_second(10), 0);
        FAIL("no throw");
    } catch (const std::invalid_argument& e) {
        const std::string msg = e.what();
        CHECK(msg.find("tally::KeyedLimiter: capacity 0 is out of range [1, ") == 0);
    }
    CHECK_THROWS_AS(U64Table(tally::Quota::per_second(10), ~std::size_t{0}), std::invalid_argument);
}

TEMPLATE_TEST_CASE("keyed: decisions equal an unordered_map oracle while the table has room", "[keyed]",
                   tally::Gcra, tally::TokenBucket, tally::FixedWindowLimiter, tally::SlidingWindowLimiter<>) {
    const std::size_t keys = 300;
    tally::KeyedLimiter<std::uint64_t, TestType> t(tally::Quota::per_second(50).with_burst(5), 4 * keys);
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
    Table t(tally::Quota::per_hour(2), S);
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
    U64Table t(q, S);
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
    U64Table t(tally::Quota::per_hour(1), 30'000);
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
    U64Table t(q, 3000);
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
    U64Table t(tally::Quota::per_hour(1), 1000);
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

TEMPLATE_TEST_CASE("keyed: batch and single calls give identical decisions", "[keyed]", tally::Gcra,
                   tally::TokenBucket, tally::FixedWindowLimiter, tally::SlidingWindowLimiter<>) {
    const std::size_t n_keys = GENERATE(std::size_t{50}, std::size_t{5000}, std::size_t{200'000});
    const std::size_t capacity = GENERATE(std::size_t{600}, std::size_t{100'000});
    INFO("keys " << n_keys << " capacity " << capacity);
    const tally::Quota q = tally::Quota::per_second(20).with_burst(4);
    tally::KeyedLimiter<std::uint64_t, TestType> single(q, capacity);
    tally::KeyedLimiter<std::uint64_t, TestType> batch(q, capacity);
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
    try {
        batch.try_acquire_batch(four, now, short_out);
        FAIL("no throw");
    } catch (const std::invalid_argument& e) {
        CHECK(std::string(e.what()) ==
              "tally::KeyedLimiter::try_acquire_batch: keys.size() 4 != out.size() 3; the spans must have equal sizes");
    }
    CHECK(batch.size() == before);
}

TEST_CASE("keyed: string keys never share a quota, even when their hashes collide", "[keyed]") {
    struct ConstantHash {
        std::uint64_t operator()(std::string_view) const noexcept { return 42; }
    };
    using Table = tally::KeyedLimiter<std::string, tally::Gcra, ConstantHash>;
    STATIC_REQUIRE_FALSE(Table::exact_keys);
    STATIC_REQUIRE(U64Table::exact_keys);
    Table t(tally::Quota::per_hour(3), 100);
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
    Table t(q, 4096);
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
    std::vector<std::uint32_t> words;
    words.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        const std::string key = "user:" + std::to_string(i);
        words.push_back(static_cast<std::uint32_t>(Traits::check(key)));
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
    U64Table t(tally::Quota::per_minute(2), 30);
    const std::uint64_t now = 100'000 * ms;
    REQUIRE(t.try_acquire(5, now).allowed);
    REQUIRE(t.try_acquire(5, now).allowed);
    CHECK_FALSE(t.try_acquire(5, now - 50'000 * ms).allowed);
    CHECK_FALSE(t.try_acquire(5, 0).allowed);
    CHECK(t.size() == 1);
}

TEST_CASE("keyed: with a jittery clock, decisions equal an oracle fed the table's latest time", "[keyed]") {
    // The table reads a stale now_ns as the latest it has seen, so dropping
    // a fresh key and recreating it can never mint capacity for an old
    // timestamp. The table is small so that fresh keys are reclaimed.
    const tally::Quota q = tally::Quota::per_second(50).with_burst(5);
    U64Table t(q, 48);
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
    U64Table t(tally::Quota::per_second(1), 10);
    REQUIRE(t.try_acquire(1, 1000 * ms).allowed);
    CHECK_FALSE(t.try_acquire(1, 1000 * ms).allowed);
    U64Table u = std::move(t);
    CHECK(u.size() == 1);
    CHECK_FALSE(u.try_acquire(1, 1000 * ms).allowed);
    u.clear();
    CHECK(u.size() == 0);
    CHECK(u.try_acquire(1, 1000 * ms).allowed);
}
