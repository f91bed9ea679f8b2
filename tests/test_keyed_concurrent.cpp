// Tests for ConcurrentKeyedLimiter (tally/limit/keyed.hpp); CI runs this
// binary under ThreadSanitizer.
#include <tally/limit/gcra.hpp>
#include <tally/limit/keyed.hpp>
#include <tally/limit/token_bucket.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "catch.hpp"
#include "test_support.hpp"

namespace {
constexpr std::uint64_t ms = 1'000'000;
constexpr unsigned threads = 4;
const tally::Seed seed{0x5eed};  // reproducible; the default is Seed::random()
}  // namespace

TEST_CASE("concurrent keyed: bad parameters throw with exact messages", "[keyed]") {
    using C = tally::ConcurrentKeyedLimiter<std::uint64_t, tally::Gcra>;
    const tally::Quota q = tally::Quota::per_second(1);
    const std::string who = "tally::ConcurrentKeyedLimiter::ConcurrentKeyedLimiter: ";
    CHECK_THROWS_WITH(C(q, 100, 3, seed), who + "shards 3 is not a power of two");
    CHECK_THROWS_WITH(C(q, 100, 0, seed), who + "shards 0 is out of range [1, 65536]");
    CHECK_THROWS_WITH(C(q, 100, 131072, seed), who + "shards 131072 is out of range [1, 65536]");
    // Capacity is checked before any arithmetic: SIZE_MAX and SIZE_MAX - 1
    // used to wrap to zero groups and divide by zero shards, SIZE_MAX - 2 to
    // report "capacity 0".
    const std::size_t max = ~std::size_t{0};
    const std::string range = " is out of range [1, " + std::to_string(max / 2) + "]";
    CHECK_THROWS_WITH(C(q, 0, 64, seed), who + "capacity 0" + range);
    for (const std::size_t cap : {max, max - 1, max - 2, max / 2 + 1}) {
        INFO(cap);
        CHECK_THROWS_WITH(C(q, cap, 64, seed), who + "capacity " + std::to_string(cap) + range);
        CHECK_THROWS_WITH(C(q, cap), who + "capacity " + std::to_string(cap) + range);
    }
    // A tiny capacity lowers the shard count so every shard holds a group.
    C small(q, 5, 64, seed);
    CHECK(small.shard_count() <= 2);
    CHECK(small.capacity() >= 5);
    CHECK(small.capacity() < 5 + 2 * C::Table::slots_per_group);
}

TEST_CASE("concurrent keyed: single-threaded decisions equal the oracle", "[keyed]") {
    const tally::Quota q = tally::Quota::per_second(40).with_burst(4);
    tally::ConcurrentKeyedLimiter<std::uint64_t, tally::Gcra> c(q, 8192, 16, seed);
    std::unordered_map<std::uint64_t, tally::Gcra> oracle;
    tally::test::Rng rng(3);
    std::uint64_t now = 1000 * ms;
    std::vector<std::uint64_t> keys;
    std::vector<tally::Decision> out;
    for (std::size_t r = 0; r < tally::test::big(2000, 300); ++r) {
        keys.resize(rng.below(40));
        for (auto& k : keys) k = rng.below(500);
        out.assign(keys.size(), tally::Decision{});
        c.try_acquire_batch(keys, now, out);
        for (std::size_t i = 0; i < keys.size(); ++i) {
            REQUIRE(out[i] == oracle.try_emplace(keys[i], q).first->second.try_acquire(now));
        }
        const std::uint64_t k = rng.below(500);
        REQUIRE(c.try_acquire(k, now, 2) == oracle.try_emplace(k, q).first->second.try_acquire(now, 2));
        now += rng.below(20 * ms);
    }
    CHECK(c.evictions() == 0);
    CHECK(c.size() <= 500);
}

TEST_CASE("concurrent keyed: no key is admitted beyond its quota under contention", "[keyed][big]") {
    // Time is frozen, so each key may admit exactly its burst, however the
    // threads interleave. Every thread hammers the same keys, in different
    // orders, through both the single and the batch path.
    const std::uint64_t burst = 50;
    const std::size_t n_keys = 256;
    const tally::Quota q = tally::Quota::per_hour(1000).with_burst(burst);
    tally::ConcurrentKeyedLimiter<std::uint64_t, tally::Gcra> c(q, 4 * n_keys, 8, seed);
    const std::uint64_t now = 5000 * ms;
    const std::size_t per_thread = tally::test::big(400'000, 60'000);
    std::vector<std::vector<std::uint64_t>> admitted(threads, std::vector<std::uint64_t>(n_keys, 0));
    std::atomic<bool> go{false};
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
            tally::test::Rng rng(100 + t);
            std::vector<std::uint64_t> keys(32);
            std::vector<tally::Decision> out(32);
            for (std::size_t i = 0; i < per_thread;) {
                if (t % 2 == 0) {
                    const std::uint64_t k = rng.below(n_keys);
                    admitted[t][k] += c.try_acquire(k, now).allowed;
                    ++i;
                } else {
                    for (auto& k : keys) k = rng.below(n_keys);
                    c.try_acquire_batch(keys, now, out);
                    for (std::size_t j = 0; j < keys.size(); ++j) admitted[t][keys[j]] += out[j].allowed;
                    i += keys.size();
                }
            }
        });
    }
    go.store(true, std::memory_order_release);
    for (auto& th : pool) th.join();
    CHECK(c.evictions() == 0);
    for (std::size_t k = 0; k < n_keys; ++k) {
        std::uint64_t total = 0;
        for (unsigned t = 0; t < threads; ++t) total += admitted[t][k];
        INFO("key " << k);
        REQUIRE(total == burst);  // demand far exceeds burst: exactly burst, never more
    }
}

TEST_CASE("concurrent keyed: admissions stay within burst + rate with moving clocks", "[keyed][big]") {
    // Each thread reads its own clock (they drift apart by up to 2 ms, so the
    // table sees time go back and forth); string keys, TokenBucket.
    const std::uint64_t burst = 5;
    const tally::Quota q = tally::Quota::per_second(100).with_burst(burst);  // one unit per 10 ms
    const std::size_t n_keys = 64;
    tally::ConcurrentKeyedLimiter<std::string, tally::TokenBucket> c(q, 1024, 4, seed);
    const std::uint64_t start = 10'000 * ms;
    const std::size_t steps = tally::test::big(200'000, 30'000);
    const std::uint64_t step_ns = 2'000;  // each thread's clock advances 2 us a request
    std::vector<std::vector<std::uint64_t>> admitted(threads, std::vector<std::uint64_t>(n_keys, 0));
    std::vector<std::string> names;
    for (std::size_t k = 0; k < n_keys; ++k) names.push_back("api-key-" + std::to_string(k * 7919));
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            tally::test::Rng rng(7 + t);
            std::uint64_t now = start + t * 500'000;
            for (std::size_t i = 0; i < steps; ++i) {
                now += step_ns;
                const std::size_t k = rng.below(n_keys);
                admitted[t][k] += c.try_acquire(names[k], now).allowed;
            }
        });
    }
    for (auto& th : pool) th.join();
    // Latest time any thread used: bounds what the rate can have refilled.
    const std::uint64_t end = start + (threads - 1) * 500'000 + steps * step_ns;
    const std::uint64_t refill = (end - start) / (10 * ms) + 1;
    for (std::size_t k = 0; k < n_keys; ++k) {
        std::uint64_t total = 0;
        for (unsigned t = 0; t < threads; ++t) total += admitted[t][k];
        INFO("key " << k << " admitted " << total << " bound " << burst + refill);
        REQUIRE(total <= burst + refill);
        REQUIRE(total >= burst);  // demand is high: at least the burst passes
    }
    CHECK(c.evictions() == 0);
}

TEST_CASE("concurrent keyed: set_quota while threads acquire", "[keyed]") {
    // Time is frozen. A quota change rebases each key under its shard's lock
    // (TSan checks the locking); no key can pass more than the largest burst
    // once plus the smaller burst per change (a lowered quota clamps the
    // spent units to its burst; raising it again re-opens the difference).
    const tally::Quota big_q = tally::Quota::per_hour(1000).with_burst(40);
    const tally::Quota small_q = tally::Quota::per_hour(1000).with_burst(10);
    const std::size_t n_keys = 64;
    tally::ConcurrentKeyedLimiter<std::uint64_t, tally::Gcra> c(big_q, 4 * n_keys, 8, seed);
    const std::uint64_t now = 5000 * ms;
    const std::size_t per_thread = tally::test::big(100'000, 20'000);
    const int changes = 20;
    std::vector<std::vector<std::uint64_t>> admitted(threads, std::vector<std::uint64_t>(n_keys, 0));
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            tally::test::Rng rng(300 + t);
            for (std::size_t i = 0; i < per_thread; ++i) {
                const std::uint64_t k = rng.below(n_keys);
                admitted[t][k] += c.try_acquire(k, now).allowed;
            }
        });
    }
    pool.emplace_back([&] {
        for (int i = 0; i < changes; ++i) {
            c.set_quota(i % 2 == 0 ? small_q : big_q, now);
            std::this_thread::yield();
        }
    });
    for (auto& th : pool) th.join();
    CHECK(c.quota() == big_q);  // the last change (i = 19) restored the big quota
    for (std::size_t k = 0; k < n_keys; ++k) {
        std::uint64_t total = 0;
        for (unsigned t = 0; t < threads; ++t) total += admitted[t][k];
        INFO("key " << k << " admitted " << total);
        REQUIRE(total <= 40 + (40 - 10) * static_cast<std::uint64_t>(changes / 2));
        REQUIRE(total >= 10);
    }
}
