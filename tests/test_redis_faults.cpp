// tally::redis when Redis fails: a stopped server (SIGSTOP) gives degraded
// decisions within command_timeout + 50 ms, SIGCONT recovers, a killed and
// restarted server is reconnected to, SCRIPT FLUSH is survived, and a
// foreign value under a key is a clear error. Each case owns its server.
#include <tally/redis.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "catch.hpp"
#include "redis_test_support.hpp"
#include "wake_latency.hpp"

using tally::Decision;
using tally::Quota;
using tally::redis::FailMode;
using Clock = std::chrono::steady_clock;

namespace {

tally::redis::Options fast(FailMode mode) {
    tally::redis::Options o;
    o.command_timeout = std::chrono::milliseconds{50};
    o.connect_timeout = std::chrono::milliseconds{50};
    o.on_error = mode;
    return o;
}

// A call's bound: its deadline plus 50 ms, plus how late this machine was
// measured to wake a sleeping thread while the call ran.
tally_test::WakeLatency& wake() {
    static tally_test::WakeLatency probe;
    return probe;
}
bool within_deadline(Clock::time_point t) {
    const auto took = Clock::now() - t;
    return took <= std::chrono::milliseconds(100) + wake().worst_between(t, t + took);
}

// Calls until one is not degraded (bounded in calls and time).
template <class F>
bool recovers(F&& call) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    for (int i = 0; i < 500 && Clock::now() < deadline; ++i) {
        if (!call().degraded) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

}  // namespace

TEST_CASE("redis faults: SIGSTOP gives degraded decisions within the timeout, SIGCONT recovers", "[redis][faults]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    tally_test::RedisServer server(binary);
    auto closed_client = tally::redis::Client::connect("127.0.0.1", server.port(), fast(FailMode::closed));
    auto open_client = tally::redis::Client::connect("127.0.0.1", server.port(), fast(FailMode::open));
    tally::redis::GcraLimiter closed(closed_client, Quota::per_second(100), fast(FailMode::closed));
    tally::redis::GcraLimiter open(open_client, Quota::per_second(100), fast(FailMode::open));
    tally::redis::SlidingWindowLimiter<> window(closed_client, Quota::per_second(100), fast(FailMode::closed));
    const Decision first = closed.try_acquire("k");
    REQUIRE((first.allowed && first.remaining == 99 && !first.degraded));
    REQUIRE(open.try_acquire("k").allowed);
    REQUIRE_FALSE(window.try_acquire("w").degraded);

    server.pause();
    for (int i = 0; i < 3; ++i) {  // the open connection, then fresh ones (the kernel still accepts)
        auto t = Clock::now();
        const Decision c = closed.try_acquire("k");
        CHECK(within_deadline(t));
        CHECK(c == Decision{false, 0, 50'000'000, 0, true});
        t = Clock::now();
        const Decision o = open.try_acquire("k");
        CHECK(within_deadline(t));
        CHECK(o == Decision{true, 0, 0, 0, true});
        t = Clock::now();
        std::vector<std::string_view> keys{"a", "b", "c"};
        std::vector<Decision> out(3, Decision{false, 0, 0, 0});
        closed.try_acquire_batch(keys, out);
        CHECK(within_deadline(t));
        for (const auto& d : out) CHECK(d.degraded);
        t = Clock::now();
        CHECK(window.try_acquire("w").degraded);
        CHECK(within_deadline(t));
    }
    CHECK(closed.degraded_count() == 3 * 4);
    CHECK(open.degraded_count() == 3);
    CHECK(window.degraded_count() == 3);
    CHECK_FALSE(closed.last_error().empty());

    server.resume();
    CHECK(recovers([&] { return closed.try_acquire("k"); }));
    CHECK(recovers([&] { return open.try_acquire("k"); }));
    CHECK(recovers([&] { return window.try_acquire("w"); }));
}

TEST_CASE("redis faults: a killed server restarted on the same port is reconnected to", "[redis][faults]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    tally_test::RedisServer server(binary);
    auto client = tally::redis::Client::connect("127.0.0.1", server.port(), fast(FailMode::closed));
    tally::redis::GcraLimiter limiter(client, Quota::per_hour(10), fast(FailMode::closed));
    REQUIRE(limiter.try_acquire("k", 4).remaining == 6);
    server.kill();
    for (int i = 0; i < 3; ++i) {
        const auto t = Clock::now();
        CHECK(limiter.try_acquire("k").degraded);
        CHECK(within_deadline(t));
    }
    server.restart();
    // The new server has neither the script (NOSCRIPT -> reload) nor the key,
    // nor the sentinel this Client saw: the loss is detected, and the key,
    // missing within its time to full replenishment (1 h) of the loss, starts
    // spent instead of fresh.
    CHECK(client.lost_state_events() == 0);
    CHECK(recovers([&] { return limiter.try_acquire("k", 0); }));
    CHECK(client.lost_state_events() == 1);
    CHECK(client.last_error().find("state lost on 127.0.0.1:") == 0);
    const Decision d = limiter.try_acquire("k", 4);
    CHECK((!d.allowed && d.remaining == 0 && !d.degraded));
    CHECK(d.retry_after_ns > 0);
    // A key this limiter never used starts spent too (conservative: for one
    // period after a loss, missing and lost look alike).
    CHECK_FALSE(limiter.try_acquire("never-used").allowed);
    CHECK(client.lost_state_events() == 1);
}

TEST_CASE("redis faults: SCRIPT FLUSH is survived; unix sockets work", "[redis][faults]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    tally_test::RedisServer server(binary);
    auto client = tally::redis::Client::connect_unix(server.unix_socket());
    REQUIRE(client.connected());
    tally::redis::GcraLimiter limiter(client, Quota::per_hour(10));
    tally::redis::SlidingWindowLimiter<> window(client, Quota::per_hour(10));
    for (int i = 0; i < 3; ++i) {
        REQUIRE(tally_test::must(client.command({"SCRIPT", "FLUSH"})).str == "OK");
        const Decision d = limiter.try_acquire("k");
        CHECK((d.allowed && !d.degraded && d.remaining == 9 - static_cast<std::uint64_t>(i)));
        const Decision w = window.try_acquire("w");
        CHECK((w.allowed && !w.degraded && w.remaining == 9 - static_cast<std::uint64_t>(i)));
    }
    std::vector<std::string_view> keys{"b1", "b2"};
    std::vector<Decision> out(2, Decision{false, 0, 0, 0});
    REQUIRE(tally_test::must(client.command({"SCRIPT", "FLUSH"})).str == "OK");
    limiter.try_acquire_batch(keys, out);
    for (const auto& d : out) CHECK((d.allowed && !d.degraded));
    CHECK(limiter.degraded_count() == 0);
}

TEST_CASE("redis faults: a foreign value under a key is a clear error, never a decision from garbage", "[redis][faults]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    tally_test::RedisServer server(binary);
    auto client = tally_test::connect(server);
    tally::redis::Options o;
    o.on_error = FailMode::closed;
    tally::redis::GcraLimiter limiter(client, Quota::per_hour(10), o);
    tally::redis::SlidingWindowLimiter<> window(client, Quota::per_hour(10), o);
    REQUIRE(tally_test::must(client.command({"SET", "tally:garbage", "hello"})).str == "OK");
    REQUIRE(tally_test::must(client.command({"SET", "tally:almost", "g1:99999999999:1"})).str == "OK");
    REQUIRE(tally_test::must(client.command({"HSET", "tally:hash", "f", "v"})).integer == 1);
    for (const char* key : {"garbage", "almost", "hash"}) {
        const Decision d = limiter.try_acquire(key);
        CHECK(d == Decision{false, 0, 50'000'000, 0, true});
        INFO(limiter.last_error());
        CHECK(limiter.last_error().rfind(std::string("foreign value: key \"") + key + "\"", 0) == 0);
        CHECK(window.try_acquire(key).degraded);
        CHECK(window.last_error().rfind(std::string("foreign value: key \"") + key + "\"", 0) == 0);
    }
    CHECK(limiter.last_error() ==
          "foreign value: key \"hash\" holds a non-string value (not a tally state; delete it or change "
          "Options::key_prefix)");
    // A GCRA state under a sliding-window key and the other way round.
    REQUIRE(limiter.try_acquire("gcra-key").allowed);
    CHECK(window.try_acquire("gcra-key").degraded);
    REQUIRE(window.try_acquire("ring-key").allowed);
    CHECK(limiter.try_acquire("ring-key").degraded);
    // The multi-limit call charges nothing when one of its keys is foreign.
    const tally::redis::Limit limits[2] = {{"fine", Quota::per_hour(10), 1}, {"garbage", Quota::per_hour(10), 1}};
    CHECK(limiter.try_acquire_all(limits).degraded);
    CHECK(limiter.try_acquire("fine", 0).remaining == 10);
    // A batch decides the other keys and marks only the foreign one.
    std::vector<std::string_view> keys{"fine2", "garbage", "fine3", "hash", "fine2", "never-seen"};
    std::vector<Decision> out(keys.size(), Decision{false, 0, 0, 0});
    limiter.try_acquire_batch(keys, out);
    CHECK((out[0].allowed && !out[0].degraded && out[0].remaining == 9));
    CHECK(out[1] == Decision{false, 0, 50'000'000, 0, true});
    CHECK((out[2].allowed && !out[2].degraded && out[2].remaining == 9));
    CHECK(out[3] == Decision{false, 0, 50'000'000, 0, true});
    CHECK((out[4].allowed && !out[4].degraded && out[4].remaining == 8));  // a repeat sees the first charge
    CHECK((out[5].allowed && !out[5].degraded && out[5].remaining == 9));
    CHECK(limiter.last_error().rfind("foreign value: key \"hash\"", 0) == 0);
    CHECK(tally_test::must(client.command({"TYPE", "tally:hash"})).str == "hash");
    // The values were left alone.
    CHECK(tally_test::must(client.command({"GET", "tally:garbage"})).str == "hello");
}
