// tally::redis connections against a real redis-server on loopback: a slow
// name resolver (an LD_PRELOAD shim of getaddrinfo in a child process), a
// slow server behind a proxy, an eviction policy switched on at runtime, a
// duplicated reply, and connection state (password, ACL user, database) that
// belongs to the Client's Options, never to command().
#include <tally/redis.hpp>

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "catch.hpp"
#include "redis_proxy.hpp"
#include "redis_test_support.hpp"
#include "wake_latency.hpp"

using tally::Decision;
using tally::Quota;
using tally::redis::FailMode;
using tally::redis::Reply;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

milliseconds since(Clock::time_point t) { return std::chrono::duration_cast<milliseconds>(Clock::now() - t); }

tally::redis::Options timeouts(milliseconds connect, milliseconds command) {
    tally::redis::Options o;
    o.connect_timeout = connect;
    o.command_timeout = command;
    o.on_error = FailMode::closed;
    return o;
}

// The shim's control, when this process runs with it preloaded.
using SetMsFn = void (*)(int);
using CallsFn = int (*)();
SetMsFn shim_set_ms() {
    auto f = reinterpret_cast<SetMsFn>(dlsym(RTLD_DEFAULT, "tally_slow_resolver_set_ms"));
    // Loaded already: the redis-server this process starts must not inherit
    // the shim (built with this test's flags, sanitizers included).
    if (f != nullptr) ::unsetenv("LD_PRELOAD");
    return f;
}
CallsFn shim_calls() { return reinterpret_cast<CallsFn>(dlsym(RTLD_DEFAULT, "tally_slow_resolver_calls")); }

// Runs the named test case again in a child of this process with the shim
// preloaded; true when it passed. Bounded: the child is killed after 60 s.
bool passes_with_shim(const char* test_name) {
    const pid_t pid = ::fork();
    if (pid < 0) return false;
    if (pid == 0) {
        ::setenv("LD_PRELOAD", TALLY_SLOW_RESOLVER_SHIM, 1);
        std::string asan = "verify_asan_link_order=0";
        if (const char* old = std::getenv("ASAN_OPTIONS")) asan = std::string(old) + ":" + asan;
        ::setenv("ASAN_OPTIONS", asan.c_str(), 1);
        char self[] = "/proc/self/exe";
        std::string name = test_name;
        char warn[] = "--warn";
        char no_tests[] = "NoTests";  // a name that matches nothing fails, never passes
        char* argv[] = {self, warn, no_tests, name.data(), nullptr};
        ::execv(self, argv);
        std::_Exit(127);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    int status = 0;
    for (int i = 0; i < 60'000; ++i) {
        if (::waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (Clock::now() >= deadline) break;
        std::this_thread::sleep_for(milliseconds(1));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return false;
}

// Calls until one decides (bounded in calls and time); the number of calls.
template <class F>
int calls_until_decided(F&& call, std::chrono::seconds budget = std::chrono::seconds(10)) {
    const auto deadline = Clock::now() + budget;
    for (int i = 1; i <= 2000 && Clock::now() < deadline; ++i) {
        if (!call().degraded) return i;
        std::this_thread::sleep_for(milliseconds(5));
    }
    return -1;
}

// A call's or connect's bound: its timeout + 25 ms, plus how late this
// machine was measured to wake a sleeping thread meanwhile.
constexpr auto kSlack = milliseconds(25);
tally_test::WakeLatency& wake() {
    static tally_test::WakeLatency probe;
    return probe;
}
Clock::duration late_between(Clock::time_point a, Clock::duration took) { return wake().worst_between(a, a + took); }

}  // namespace

// ---------------------------------------------------------------------------
// Name resolution

namespace {

// Client::connect, checked to return within connect_timeout + kSlack (plus
// the measured wake-up lateness).
tally::redis::Client connect_within_bound(const char* host, int port, const tally::redis::Options& o) {
    (void)wake();
    const auto t = Clock::now();
    auto client = tally::redis::Client::connect(host, port, o);
    const auto took = since(t);
    INFO("connect took " << took.count() << " ms: " << client.last_error());
    CHECK(took <= o.connect_timeout + kSlack + late_between(t, took));
    return client;
}

}  // namespace

TEST_CASE("redis names: a resolver answering in 2 s costs connect at most connect_timeout and calls their deadline",
          "[redis][connections][resolver]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    if (shim_set_ms() == nullptr) {
        CHECK(passes_with_shim(
            "redis names: a resolver answering in 2 s costs connect at most connect_timeout and calls their deadline"));
        return;
    }
    tally_test::RedisServer server(binary);
    shim_set_ms()(2000);
    const auto o = timeouts(milliseconds(200), milliseconds(50));
    auto client = connect_within_bound("slow.tally-test", server.port(), o);
    auto t = Clock::now();
    CHECK_FALSE(client.connected());
    CHECK(client.last_error().find("resolving slow.tally-test took longer than connect_timeout") == 0);
    tally::redis::GcraLimiter limiter(client, Quota::per_second(1000));
    Clock::duration worst_over{};  // the worst call beyond its bound
    milliseconds worst{0};
    int decided_after = -1;
    const auto start = Clock::now();
    for (int i = 0; i < 1000 && since(start) < std::chrono::seconds(8); ++i) {
        t = Clock::now();
        const Decision d = limiter.try_acquire("k");
        const auto took = since(t);
        worst = std::max(worst, took);
        worst_over = std::max(worst_over, took - (o.command_timeout + kSlack + late_between(t, took)));
        if (!d.degraded) {
            decided_after = static_cast<int>(since(start).count());
            break;
        }
        std::this_thread::sleep_for(milliseconds(10));
    }
    INFO("worst call " << worst.count() << " ms; first decision after " << decided_after << " ms");
    CHECK(worst_over <= Clock::duration::zero());
    // The resolution finishes on its own thread and the Client connects.
    CHECK(decided_after >= 0);
    CHECK(client.connected());
}

TEST_CASE("redis names: with a 100 ms resolver calls decide again after their connections drop",
          "[redis][connections][resolver]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    if (shim_set_ms() == nullptr) {
        CHECK(passes_with_shim("redis names: with a 100 ms resolver calls decide again after their connections drop"));
        return;
    }
    tally_test::RedisServer server(binary);
    shim_set_ms()(100);
    const auto o = timeouts(milliseconds(200), milliseconds(50));
    auto client = connect_within_bound("slow.tally-test", server.port(), o);
    auto t = Clock::now();
    REQUIRE(client.connected());
    tally::redis::GcraLimiter limiter(client, Quota::per_second(100'000));
    REQUIRE_FALSE(limiter.try_acquire("k").degraded);
    const int resolutions = shim_calls()();
    for (int round = 0; round < 3; ++round) {
        // Drop every connection of the Client from the server's side.
        const std::string killed = tally_test::redis_raw(server.port(), "CLIENT KILL TYPE normal SKIPME yes");
        INFO("CLIENT KILL answered " << killed);
        REQUIRE(killed.rfind(":", 0) == 0);
        Clock::duration worst_over{};
        milliseconds worst{0};
        int decided = 0, degraded = 0;
        const auto start = Clock::now();
        for (int i = 0; i < 200 && since(start) < std::chrono::seconds(2); ++i) {
            t = Clock::now();
            const Decision d = limiter.try_acquire("k");
            const auto took = since(t);
            worst = std::max(worst, took);
            worst_over = std::max(worst_over, took - (o.command_timeout + kSlack + late_between(t, took)));
            (d.degraded ? degraded : decided) += 1;
            std::this_thread::sleep_for(milliseconds(5));
        }
        INFO("round " << round << ": worst " << worst.count() << " ms, decided " << decided << ", degraded "
                      << degraded);
        CHECK(worst_over <= Clock::duration::zero());
        // Reconnected on the addresses already resolved: all but the calls
        // that met a killed connection decide.
        CHECK(decided >= 20);
        CHECK(degraded <= 5);
    }
    // No call waited on the resolver: reconnects used the resolved address.
    CHECK(shim_calls()() - resolutions <= 1);
}

TEST_CASE("redis names: numeric hosts and unix sockets never touch the resolver", "[redis][connections][resolver]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    if (shim_set_ms() == nullptr) {
        CHECK(passes_with_shim("redis names: numeric hosts and unix sockets never touch the resolver"));
        return;
    }
    tally_test::RedisServer server(binary);
    shim_set_ms()(5000);
    const int before = shim_calls()();
    auto tcp = tally::redis::Client::connect("127.0.0.1", server.port(), timeouts(milliseconds(200), milliseconds(50)));
    auto unix_socket =
        tally::redis::Client::connect_unix(server.unix_socket(), timeouts(milliseconds(200), milliseconds(50)));
    CHECK(tcp.connected());
    CHECK(unix_socket.connected());
    CHECK(tally::redis::GcraLimiter(tcp, Quota::per_second(10)).try_acquire("n").allowed);
    CHECK(tally::redis::GcraLimiter(unix_socket, Quota::per_second(10)).try_acquire("u").allowed);
    CHECK(shim_calls()() == before);
}

// ---------------------------------------------------------------------------
// Setup outside the call's budget

TEST_CASE("redis setup: a server answering at 30 ms keeps deciding under a 50 ms timeout after one late reply",
          "[redis][connections][slow]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    tally_test::RedisServer server(binary);
    tally_test::FaultProxy proxy(server.port());
    using Mode = tally_test::FaultProxy::Mode;
    proxy.set(Mode::delay, milliseconds(30));
    const auto o = timeouts(milliseconds(200), milliseconds(50));
    // A new process against the slow server: connect sets the connection up
    // (policy, scripts) on its own budget, so the first call decides.
    auto client = tally::redis::Client::connect("127.0.0.1", proxy.port(), o);
    REQUIRE(client.connected());
    tally::redis::GcraLimiter limiter(client, Quota::per_second(100'000));
    const Decision first = limiter.try_acquire("k");
    INFO(limiter.last_error());
    CHECK_FALSE(first.degraded);

    // One reply at 80 ms: that call is degraded, its reply drained later.
    proxy.set(Mode::delay, milliseconds(80));
    CHECK(limiter.try_acquire("k").degraded);
    proxy.set(Mode::delay, milliseconds(30));
    const int accepted_before = proxy.accepted();
    int decided = 0, total = 0;
    const auto start = Clock::now();
    while (since(start) < std::chrono::seconds(2) && total < 1000) {
        ++total;
        if (!limiter.try_acquire("k").degraded) ++decided;
    }
    const auto took = since(start);
    const int opened = proxy.accepted() - accepted_before;
    INFO("decided " << decided << " of " << total << " in " << took.count() << " ms; new connections " << opened
                    << "; " << limiter.last_error());
    CHECK(decided * 10 >= total * 9);
    CHECK(opened <= 4);
}

TEST_CASE("redis setup: a dead server is retried with backoff, not once per call", "[redis][connections]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    tally_test::RedisServer server(binary);
    tally_test::FaultProxy proxy(server.port());
    auto client = tally::redis::Client::connect("127.0.0.1", proxy.port(), timeouts(milliseconds(50), milliseconds(50)));
    tally::redis::GcraLimiter limiter(client, Quota::per_hour(1000));
    const Decision first = limiter.try_acquire("k");
    REQUIRE((first.allowed && !first.degraded && first.remaining == 999));
    // Replies swallowed: every connection attempt times out in its setup.
    proxy.set(tally_test::FaultProxy::Mode::swallow);
    const int accepted_before = proxy.accepted();
    // Attempts follow one another, each after a wait of 25 ms doubling to
    // 1 s from the end of the last: in a span of T ms at most 1 + the number
    // of waits that fit in T (25 + 50 + ... + 800 = 1575 ms, then 1000 each),
    // so 7 in the first 2 s and one a second after that, whatever the number
    // of calls (and fewer where the machine is slow: waits never shrink).
    auto most_attempts = [](long long span_ms) {
        int n = 1;
        for (long long wait = 25, sum = 25; sum <= span_ms; wait = std::min(2 * wait, 1000LL), sum += wait) ++n;
        return n;
    };
    REQUIRE(most_attempts(2000) == 7);
    REQUIRE(most_attempts(3500) == 8);
    const auto start = Clock::now();
    int calls = 0, decided = 0, opened_in_2s = -1;
    while (since(start) < milliseconds(3500) && calls < 50'000'000) {
        decided += limiter.try_acquire("k").degraded ? 0 : 1;
        ++calls;
        if (opened_in_2s < 0 && since(start) >= milliseconds(2000)) {
            opened_in_2s = proxy.accepted() - accepted_before;
            CHECK(opened_in_2s <= most_attempts(since(start).count()));
        }
    }
    const auto took = since(start);
    const int opened = proxy.accepted() - accepted_before;
    INFO(calls << " calls in " << took.count() << " ms opened " << opened << " connections (" << opened_in_2s
               << " in the first 2 s)");
    CHECK(calls > 20);
    CHECK(decided == 0);
    CHECK(opened <= most_attempts(took.count()));
    proxy.set(tally_test::FaultProxy::Mode::pass);
    CHECK(calls_until_decided([&] { return limiter.try_acquire("k", 0); }) > 0);
    // Only calls that had a connection reached the server (the one in flight
    // when the replies stopped): the degraded ones charged nothing.
    const Decision peek = limiter.try_acquire("k", 0);
    INFO("remaining after " << calls << " degraded calls: " << peek.remaining);
    CHECK(peek.remaining >= 997);
}

// ---------------------------------------------------------------------------
// Runtime configuration

TEST_CASE("redis config: an eviction policy switched on at runtime is refused within a second",
          "[redis][connections][eviction]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    tally_test::RedisServer server(binary);
    auto admin = tally_test::connect(server);
    for (const char* policy : {"volatile-lru", "volatile-ttl", "allkeys-lru"}) {
        INFO("policy " << policy);
        REQUIRE(tally_test::must(admin.command({"CONFIG", "SET", "maxmemory-policy", "noeviction"})).str == "OK");
        auto client = tally::redis::Client::connect("127.0.0.1", server.port(),
                                                    timeouts(milliseconds(2000), milliseconds(2000)));
        tally::redis::GcraLimiter limiter(client, Quota::per_minute(600));
        REQUIRE_FALSE(limiter.try_acquire(policy).degraded);
        REQUIRE_FALSE(client.evicting());
        // The switch takes effect on the server somewhere in [sent, done].
        const auto sent = Clock::now();
        REQUIRE(tally_test::must(admin.command({"CONFIG", "SET", "maxmemory-policy", policy})).str == "OK");
        const auto done = Clock::now();
        // Every check was sent before `done` or reads the new policy, and
        // one rides with the first call sent 900 ms after the last: so every
        // call started 900 ms after `done` is refused, and every call after
        // the first refusal too. Calls run until 2.5 s after the switch, past
        // a recheck of the refused server.
        int calls = 0, refused = 0, late_calls = 0, late_decided = 0, decided_after_refusal = 0;
        long long first_refused_ms = -1;  // from `sent` to the start of the first refused call
        while (since(done) < milliseconds(2500) && calls < 100'000) {
            const auto t = Clock::now();
            const Decision d = limiter.try_acquire(policy);
            ++calls;
            const bool late = t - done >= milliseconds(900);
            late_calls += late ? 1 : 0;
            if (d.degraded) {
                if (refused++ == 0) {
                    first_refused_ms = std::chrono::duration_cast<milliseconds>(t - sent).count();
                    CHECK(limiter.last_error().find(std::string("maxmemory-policy is ") + policy) !=
                          std::string::npos);
                }
            } else {
                late_decided += late ? 1 : 0;
                decided_after_refusal += refused > 0 ? 1 : 0;
            }
            std::this_thread::sleep_for(milliseconds(2));
        }
        INFO("CONFIG SET took " << std::chrono::duration_cast<milliseconds>(done - sent).count()
                                << " ms; first refused call started " << first_refused_ms << " ms after it was sent; "
                                << calls << " calls, " << refused << " refused, " << late_calls
                                << " started 900 ms or more after the switch");
        CHECK(late_calls > 0);
        CHECK(late_decided == 0);            // refused within 900 ms of the switch's reply
        CHECK(decided_after_refusal == 0);   // and for good while the policy stays
        CHECK(first_refused_ms >= 0);
        CHECK(client.evicting());
        CHECK(client.maxmemory_policy() == policy);
    }
    REQUIRE(tally_test::must(admin.command({"CONFIG", "SET", "maxmemory-policy", "noeviction"})).str == "OK");
}

TEST_CASE("redis config: an error reply to the policy check never clears a refusal", "[redis][connections][eviction]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    tally_test::RedisServer server(binary);
    auto admin = tally_test::connect(server);
    REQUIRE(tally_test::must(admin.command({"ACL", "SETUSER", "limiter", "on", ">pw", "~*", "&*", "+@all"})).str ==
            "OK");
    REQUIRE(tally_test::must(admin.command({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"})).str == "OK");
    auto o = timeouts(milliseconds(2000), milliseconds(2000));
    o.user = "limiter";
    o.password = "pw";
    o.allow_evicting_server = false;
    auto client = tally::redis::Client::connect("127.0.0.1", server.port(), o);
    REQUIRE(client.evicting());
    // The check now answers -NOPERM: the server stays refused.
    REQUIRE(tally_test::must(admin.command({"ACL", "SETUSER", "limiter", "-config"})).str == "OK");
    REQUIRE(tally_test::must(admin.command({"CONFIG", "SET", "maxmemory-policy", "noeviction"})).str == "OK");
    std::this_thread::sleep_for(milliseconds(1100));
    client.recheck_eviction();
    CHECK(client.evicting());
    CHECK(client.last_error().find("stays refused") != std::string::npos);
    // Readable again: the policy now cannot evict, and the refusal ends.
    REQUIRE(tally_test::must(admin.command({"ACL", "SETUSER", "limiter", "+config"})).str == "OK");
    std::this_thread::sleep_for(milliseconds(1100));
    client.recheck_eviction();
    CHECK_FALSE(client.evicting());
}

// ---------------------------------------------------------------------------
// Replies in step

TEST_CASE("redis replies: a duplicated reply never moves a decision to another call", "[redis][connections][stray]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    tally_test::RedisServer server(binary);
    tally_test::FaultProxy proxy(server.port());
    using Mode = tally_test::FaultProxy::Mode;
    auto o = timeouts(milliseconds(2000), milliseconds(2000));
    o.pool_size = 1;  // every call on the one connection the duplicate lands on
    auto client = tally::redis::Client::connect("127.0.0.1", proxy.port(), o);
    tally::redis::GcraLimiter limiter(client, Quota::per_hour(10));
    for (const int copy_after_ms : {0, 5, 30}) {
        INFO("the copy arrives " << copy_after_ms << " ms after the reply");
        const std::string spent = "spent-" + std::to_string(copy_after_ms);
        const std::string fresh = "fresh-" + std::to_string(copy_after_ms);
        for (int i = 0; i < 10; ++i) REQUIRE(limiter.try_acquire(spent).allowed);
        REQUIRE_FALSE(limiter.try_acquire(spent).allowed);
        const auto opened_before = client.connections_opened();
        const int duplicated_before = proxy.duplicated();
        proxy.set(Mode::duplicate, milliseconds(copy_after_ms));
        REQUIRE(limiter.try_acquire(fresh).allowed);  // its reply comes twice
        // The copy is in the Client's socket before the next call: that call
        // finds the connection out of step and takes a new one.
        REQUIRE(proxy.wait_duplicated(duplicated_before + 1, milliseconds(10'000)));
        int admitted = 0, degraded = 0;
        for (int i = 0; i < 50; ++i) {
            const Decision d = limiter.try_acquire(spent);
            admitted += d.allowed && !d.degraded ? 1 : 0;
            degraded += d.degraded ? 1 : 0;
        }
        INFO("admitted " << admitted << ", degraded " << degraded << "; " << limiter.last_error());
        CHECK(admitted == 0);
        CHECK(degraded <= 1);  // the call that read the copy, at most
        CHECK(client.connections_opened() == opened_before + 1);  // the connection was dropped
        CHECK(client.lost_state_events() == 0);
    }
}

TEST_CASE("redis replies: a duplicated error reply never reaches another call", "[redis][connections][stray]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    tally_test::RedisServer server(binary);
    tally_test::FaultProxy proxy(server.port());
    using Mode = tally_test::FaultProxy::Mode;
    auto admin = tally_test::connect(server);
    auto o = timeouts(milliseconds(2000), milliseconds(2000));
    o.pool_size = 1;  // every call on the one connection the duplicate lands on
    auto client = tally::redis::Client::connect("127.0.0.1", proxy.port(), o);
    tally::redis::GcraLimiter limiter(client, Quota::per_hour(10));
    for (int i = 0; i < 10; ++i) REQUIRE(limiter.try_acquire("spent").allowed);
    REQUIRE_FALSE(limiter.try_acquire("spent").allowed);
    // -OOM is Redis's own error, raised before the script runs: it cannot
    // carry the call's token. Its copy must not be read as a later reply:
    // already there when the next call starts (0 ms), or arriving after that
    // call's request (30 ms: the fence the next call sends first reads it).
    for (const int copy_after_ms : {0, 30}) {
        INFO("the copy arrives " << copy_after_ms << " ms after the reply");
        const auto opened_before = client.connections_opened();
        const int duplicated_before = proxy.duplicated();
        REQUIRE(tally_test::must(admin.command({"CONFIG", "SET", "maxmemory", "1"})).str == "OK");
        proxy.set(Mode::duplicate, milliseconds(copy_after_ms));
        const Decision oom = limiter.try_acquire("spent");
        REQUIRE(oom.degraded);
        REQUIRE(limiter.last_error().find("OOM") != std::string::npos);
        REQUIRE(tally_test::must(admin.command({"CONFIG", "SET", "maxmemory", "0"})).str == "OK");
        int admitted = 0, degraded = 0, oom_again = 0;
        for (int i = 0; i < 20; ++i) {
            const Decision d = limiter.try_acquire("spent");
            admitted += d.allowed && !d.degraded ? 1 : 0;
            if (d.degraded) {
                ++degraded;
                oom_again += limiter.last_error().find("OOM") != std::string::npos ? 1 : 0;
            }
        }
        INFO("admitted " << admitted << ", degraded " << degraded << "; " << limiter.last_error());
        CHECK(proxy.wait_duplicated(duplicated_before + 1, milliseconds(10'000)));
        CHECK(admitted == 0);
        CHECK(oom_again == 0);  // no later call answered with the copy
        CHECK(degraded <= 1);   // the call whose fence read the copy, at most
        CHECK(client.connections_opened() == opened_before + 1);  // the connection was dropped
    }
}

// ---------------------------------------------------------------------------
// Connection state

TEST_CASE("redis state: command() refuses commands that change one pooled connection", "[redis][connections]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto& server = tally_test::shared_server(binary);
    auto client = tally_test::connect(server);
    for (const auto& args : std::vector<std::vector<std::string>>{{"SELECT", "1"},
                                                                   {"select", "1"},
                                                                   {"AUTH", "x"},
                                                                   {"HELLO", "3"},
                                                                   {"MULTI"},
                                                                   {"EXEC"},
                                                                   {"WATCH", "k"},
                                                                   {"SUBSCRIBE", "c"},
                                                                   {"MONITOR"},
                                                                   {"CLIENT", "REPLY", "OFF"},
                                                                   {"client", "tracking", "on"},
                                                                   {"RESET"},
                                                                   {"QUIT"}}) {
        INFO(args[0]);
        try {
            if (args.size() == 1) (void)client.command({args[0]});
            if (args.size() == 2) (void)client.command({args[0], args[1]});
            if (args.size() == 3) (void)client.command({args[0], args[1], args[2]});
            FAIL("not refused");
        } catch (const std::invalid_argument& e) {
            CHECK(std::string(e.what()).find("Options::database") != std::string::npos);
        }
    }
    CHECK_THROWS_AS(client.command({}), std::invalid_argument);
    // Nothing reached the server: the pool is as it was and decisions exact.
    tally::redis::GcraLimiter limiter(client, Quota::per_hour(10));
    for (int i = 0; i < 10; ++i) CHECK(limiter.try_acquire("state-k").allowed);
    CHECK_FALSE(limiter.try_acquire("state-k").allowed);
    CHECK(client.lost_state_events() == 0);
    CHECK(tally_test::must(client.command({"CLIENT", "ID"})).type == Reply::Type::integer);
}

TEST_CASE("redis state: password, ACL user and database apply to every connection", "[redis][connections]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    tally_test::RedisServer server(binary);
    {
        auto admin = tally_test::connect(server);
        REQUIRE(tally_test::must(admin.command({"ACL", "SETUSER", "svc", "on", ">svc-pw", "~*", "&*", "+@all"})).str ==
                "OK");
        REQUIRE(tally_test::must(admin.command({"CONFIG", "SET", "requirepass", "secret"})).str == "OK");
    }
    auto o = timeouts(milliseconds(2000), milliseconds(2000));
    o.pool_size = 4;

    auto anonymous = tally::redis::Client::connect("127.0.0.1", server.port(), o);
    CHECK_FALSE(anonymous.connected());
    CHECK(anonymous.last_error().find("NOAUTH") != std::string::npos);
    CHECK(tally::redis::GcraLimiter(anonymous, Quota::per_hour(10)).try_acquire("a").degraded);

    auto wrong = o;
    wrong.password = "not-it";
    auto refused = tally::redis::Client::connect("127.0.0.1", server.port(), wrong);
    CHECK_FALSE(refused.connected());
    CHECK(refused.last_error().find("AUTH on 127.0.0.1:") == 0);

    auto in_db3 = o;
    in_db3.password = "secret";
    in_db3.database = 3;
    auto client = tally::redis::Client::connect("127.0.0.1", server.port(), in_db3);
    REQUIRE(client.connected());
    tally::redis::GcraLimiter limiter(client, Quota::per_hour(10));
    // Several threads, so several pooled connections: each SELECTed 3.
    std::vector<std::thread> threads;
    std::atomic<int> admitted{0};
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 10; ++i) admitted += limiter.try_acquire("db-k").allowed ? 1 : 0;
        });
    for (auto& th : threads) th.join();
    CHECK(admitted.load() == 10);
    CHECK(client.lost_state_events() == 0);
    CHECK(tally_test::must(client.command({"EXISTS", "tally:db-k"})).integer == 1);
    auto db0 = o;
    db0.password = "secret";
    auto other = tally::redis::Client::connect("127.0.0.1", server.port(), db0);
    CHECK(tally_test::must(other.command({"EXISTS", "tally:db-k"})).integer == 0);

    auto acl = o;
    acl.user = "svc";
    acl.password = "svc-pw";
    acl.database = 3;
    auto as_user = tally::redis::Client::connect("127.0.0.1", server.port(), acl);
    REQUIRE(as_user.connected());
    CHECK_FALSE(tally::redis::GcraLimiter(as_user, Quota::per_hour(10)).try_acquire("db-k").allowed);  // spent

    auto bad_db = o;
    bad_db.database = -1;
    CHECK_THROWS_AS(tally::redis::Client::connect("127.0.0.1", server.port(), bad_db), std::invalid_argument);
    CHECK_THROWS_AS(tally::redis::Client::connect_cluster({"127.0.0.1:1"}, in_db3), std::invalid_argument);
}

// ---------------------------------------------------------------------------
// Split brain: the bound holds per writable master; fencing restores it.

TEST_CASE("redis failover: two writable masters each admit up to a full bound; a fenced one answers degraded",
          "[redis][connections][failover]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    tally_test::RedisServer old_master(binary);
    tally_test::RedisServer replica(binary, {"--replicaof", "127.0.0.1", std::to_string(old_master.port())});
    auto on_old = tally_test::connect(old_master);
    auto on_replica = tally_test::connect(replica);
    bool linked = false;
    for (int i = 0; i < 500 && !linked; ++i) {
        const Reply info = tally_test::must(on_replica.command({"INFO", "replication"}));
        linked = info.str.find("master_link_status:up") != std::string::npos;
        if (!linked) std::this_thread::sleep_for(milliseconds(20));
    }
    REQUIRE(linked);
    const Quota q = Quota::per_hour(100);  // nothing replenishes during the test: the bound is the burst, 100
    tally::redis::GcraLimiter old_limiter(on_old, q);
    int admitted = 0;
    for (int i = 0; i < 60; ++i) admitted += old_limiter.try_acquire("k").allowed ? 1 : 0;
    REQUIRE(admitted == 60);
    // Every write reached the replica before it is promoted.
    REQUIRE(tally_test::must(on_old.command({"WAIT", "1", "2000"})).integer == 1);
    REQUIRE(tally_test::must(on_replica.command({"REPLICAOF", "NO", "ONE"})).type == Reply::Type::status);
    auto promoted = tally_test::connect(replica);
    tally::redis::GcraLimiter new_limiter(promoted, q);
    int on_each[2] = {0, 0};
    for (int i = 0; i < 100; ++i) {
        on_each[0] += old_limiter.try_acquire("k").allowed ? 1 : 0;
        on_each[1] += new_limiter.try_acquire("k").allowed ? 1 : 0;
    }
    INFO("after the split: old master admitted " << on_each[0] << ", promoted replica " << on_each[1]);
    // Each master spends the rest of the burst from its own copy: 60 + 40 +
    // 40, more than one master's bound (100), never more than one per master.
    CHECK(on_each[0] == 40);
    CHECK(on_each[1] == 40);
    CHECK(admitted + on_each[0] + on_each[1] > 100);
    CHECK(admitted + on_each[0] + on_each[1] <= 2 * 100);
    // Fenced: a master without a replica refuses writes, so its answers are
    // degraded (FailMode::closed denies) instead of a second bound.
    REQUIRE(tally_test::must(on_old.command({"CONFIG", "SET", "min-replicas-to-write", "1"})).str == "OK");
    const Decision fenced = old_limiter.try_acquire("fresh-key");
    CHECK(fenced.degraded);
    CHECK_FALSE(fenced.allowed);
    CHECK(old_limiter.last_error().find("NOREPLICAS") != std::string::npos);
    CHECK(new_limiter.try_acquire("fresh-key").allowed);
}
