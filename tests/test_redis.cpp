// tally::redis against a real redis-server started on a free loopback port:
// decision identity with tally::Gcra and tally::SlidingWindowLimiter over
// random operations, Redis server time, pipelined batches, all-or-nothing
// multi-limit calls under concurrency, TTLs, keys, refused quotas and
// hostile replies. Faults (SIGSTOP, kill, SCRIPT FLUSH) are in
// test_redis_faults.cpp.
#include <tally/redis.hpp>
#include <tally/limit/gcra.hpp>
#include <tally/limit/sliding_window.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "catch.hpp"
#include "redis_test_support.hpp"
#include "test_support.hpp"

using tally::Decision;
using tally::Quota;
using tally::redis::Reply;

namespace {

constexpr std::uint64_t kSecond = 1'000'000'000;
constexpr std::uint64_t kMax = ~std::uint64_t{0};

using tally::test::show;

// Redis TIME in microseconds.
std::uint64_t server_us(tally::redis::Client& c) {
    const Reply r = tally_test::must(c.command({"TIME"}));
    REQUIRE(r.type == Reply::Type::array);
    REQUIRE(r.elements.size() == 2);
    return std::stoull(r.elements[0].str) * 1'000'000 + std::stoull(r.elements[1].str);
}

// Quotas whose emission interval is at least 60 s: a key's TTL (its time to
// full replenishment, counted by Redis in real time) then outlives the test,
// so replaying caller-supplied times faster than real time stays comparable.
std::vector<Quota> slow_quotas() {
    return {Quota::per_minute(1),  Quota::per_hour(6),                 Quota::per_hour(7).with_burst(3),
            Quota::per_day(360),   Quota::per_day(1000).with_burst(40), Quota{3, 370 * kSecond + 11, 5},
            Quota{1, 100 * kSecond, 1}, Quota{13, 800 * kSecond + 5000, 0}, Quota::per_day(7).with_burst(100)};
}

// The TAT grid index stored under a GCRA key.
// The stored TAT, or nullopt when the key already expired (its TTL is the
// time to full replenishment: about 2 ms for Quota{1, 1}).
std::optional<std::uint64_t> stored_tat_if_present(tally::redis::Client& c, const std::string& key) {
    const Reply r = tally_test::must(c.command({"GET", key}));
    if (r.type == Reply::Type::nil) return std::nullopt;
    REQUIRE(r.type == Reply::Type::string);
    const auto a = r.str.find(':'), b = r.str.rfind(':');
    REQUIRE(r.str.substr(0, a) == "g1");
    return (std::stoull(r.str.substr(a + 1, b - a - 1)) << 32) | std::stoull(r.str.substr(b + 1));
}

}  // namespace

TEST_CASE("redis GcraLimiter: refused quotas, keys and sizes, without a server", "[redis]") {
    // No connection needed to validate: a Client on a port nobody listens on.
    tally::redis::Options o;
    o.connect_timeout = std::chrono::milliseconds{20};
    auto client = tally::redis::Client::connect("127.0.0.1", tally_test::free_loopback_port(), o);
    CHECK_FALSE(client.connected());
    CHECK(client.last_error().find("connect to 127.0.0.1:") == 0);
    CHECK_THROWS_WITH(tally::redis::GcraLimiter(client, Quota{1, std::uint64_t{1} << 62}),
                      "tally::redis::GcraLimiter: quota limit 1 per window_ns 4611686018427387904 is out of range: "
                      "limit / window per microsecond in lowest terms is 125/576460752303423488, and numerator x "
                      "denominator must be below 2^53 for the Redis script to stay exact (Lua numbers are doubles); "
                      "a window of whole microseconds with a round limit fits");
    CHECK_THROWS_WITH(tally::redis::GcraLimiter(client, Quota{0, kSecond}),
                      "tally::redis::GcraLimiter: limit 0 is out of range [1, 1000000000]");
    // The extremes Quota allows and the script handles.
    CHECK_NOTHROW(tally::redis::GcraLimiter(client, Quota{1, 1}));
    CHECK_NOTHROW(tally::redis::GcraLimiter(client, Quota{std::uint64_t{1} << 40, std::uint64_t{1} << 40}));
    CHECK_NOTHROW(tally::redis::GcraLimiter(
        client, Quota{std::uint64_t{1} << 40, std::uint64_t{1} << 62, std::uint64_t{1} << 40}));
    CHECK_THROWS_WITH(tally::redis::SlidingWindowLimiter<11>(client, Quota{1, 10'000}),
                      "tally::redis::SlidingWindowLimiter: bucket_ns (window_ns / (Slots - 1), rounded up) 1000 is "
                      "out of range [2048, 9007199254740992)");

    tally::redis::GcraLimiter g(client, Quota::per_second(10));
    const std::string long_key(tally::redis::max_key_bytes + 1, 'k');
    CHECK_THROWS_WITH(g.try_acquire(long_key),
                      "tally::redis::GcraLimiter: key length 1025 is out of range [0, 1024]");
    std::vector<std::string_view> keys{"a", "b"};
    std::vector<Decision> out(1, Decision{false, 0, 0, 0});
    CHECK_THROWS_WITH(g.try_acquire_batch(keys, out),
                      "tally::redis::GcraLimiter::try_acquire_batch: keys.size() 2 != out.size() 1");
    const tally::redis::Limit same[2] = {{"k", Quota::per_second(1), 1}, {"k", Quota::per_second(2), 1}};
    CHECK_THROWS_WITH(g.try_acquire_all(same),
                      "tally::redis::GcraLimiter::try_acquire_all: limits 0 and 1 name the same key (each key may "
                      "appear once)");
    CHECK_THROWS_WITH(g.try_acquire_all({}),
                      "tally::redis::GcraLimiter::try_acquire_all: number of limits 0 is out of range [1, 64]");

    // Unreachable server: a degraded decision from the fail mode, counted.
    const Decision d = g.try_acquire("k");
    CHECK(d == Decision{false, 0, 50'000'000, 0, true});
    CHECK(g.degraded_count() == 1);
    CHECK(g.last_error().find("connect to 127.0.0.1:") == 0);
}

TEST_CASE("redis protocol: hostile and inconsistent replies are refused", "[redis]") {
    const tally::redis::protocol::GcraParams p(Quota::per_second(10), "test");
    const tally::redis::protocol::GcraParams* ps[1] = {&p};
    const std::uint64_t costs[1] = {1};
    const std::string_view keys[1] = {"user\n1"};
    auto integer = [](long long v) {
        Reply r;
        r.type = Reply::Type::integer;
        r.integer = v;
        return r;
    };
    auto array = [](std::vector<Reply> e) {
        Reply r;
        r.type = Reply::Type::array;
        r.elements = std::move(e);
        return r;
    };
    using tally::redis::protocol::gcra_decode;
    const std::uint64_t now = 5 * kSecond;
    // A good reply: fresh key, admitted.
    const auto good = gcra_decode(array({integer(1), integer(0), integer(0), integer(0), integer(1)}), ps, costs, now, keys);
    REQUIRE(good.ok);
    tally::Gcra local(Quota::per_second(10));
    CHECK(good.decision == local.try_acquire(now));
    // Truncated, wrong types, out-of-range halves, inconsistent admission bits.
    for (const Reply& bad :
         {array({integer(1), integer(0), integer(0), integer(0)}), array({}), integer(1), Reply{},
          array({integer(1), integer(0), integer(0), integer(1LL << 32), integer(1)}),
          array({integer(2), integer(0), integer(0), integer(0), integer(1)}),
          array({integer(1), integer(0), integer(0), integer(-1), integer(1)}),
          array({integer(1), integer(7), integer(0), integer(0), integer(1)}),           // time in caller mode
          array({integer(0), integer(0), integer(0), integer(0), integer(1)}),           // all 0 but ok 1
          array({integer(1), integer(0), integer(0xffffffff), integer(0), integer(1)})}) {  // debt says deny
        const auto o = gcra_decode(bad, ps, costs, now, keys);
        CHECK_FALSE(o.ok);
        CHECK_FALSE(o.error.empty());
    }
    Reply err;
    err.type = Reply::Type::error;
    err.str = "ERR user_script:1: TALLYFOREIGN 1 holds a string tally did not write";
    const auto foreign = gcra_decode(err, ps, costs, now, keys);
    CHECK_FALSE(foreign.ok);
    CHECK(foreign.error == "foreign value: key \"user?1\" holds a string tally did not write (not a tally state; "
                           "delete it or change Options::key_prefix)");

    // Batch replies: {ext, u, r_1..r_m, ext triples}, r = ok + 4 * debt.
    using tally::redis::protocol::gcra_batch_decode;
    using tally::redis::protocol::Outcome;
    const tally::Gcra ten(Quota::per_second(10));
    const std::uint64_t ahead = tally::EmissionGrid(Quota::per_second(10)).index(now) + 4;
    auto decide = [&](std::uint64_t tat) {
        tally::Gcra::State st{tat};
        return ten.try_acquire(st, now, 1);
    };
    const std::string_view two[2] = {"a", "b"};
    std::vector<Outcome> outs(2);
    std::string error;
    // Fresh and admitted; in debt by 4 and admitted; the same as one full TAT.
    REQUIRE(gcra_batch_decode(array({integer(0), integer(0), integer(1), integer(4 * 4 + 1)}), p, 1, now, two, outs,
                              error));
    CHECK((outs[0].ok && outs[0].decision == decide(0)));
    CHECK((outs[1].ok && outs[1].decision == decide(ahead)));
    CHECK(decide(ahead).remaining == 5);
    REQUIRE(gcra_batch_decode(array({integer(1), integer(0), integer(3), integer(2), integer(0),
                                     integer(static_cast<long long>(ahead)), integer(1)}),
                              p, 1, now, two, outs, error));
    CHECK((outs[0].ok && outs[0].decision == decide(ahead)));
    CHECK((!outs[1].ok && outs[1].error.rfind("foreign value: key \"b\"", 0) == 0));
    // Unusable as a whole: truncated, surplus, a missing or dangling triple, a time in caller mode.
    for (const Reply& bad : {array({integer(0), integer(0), integer(1)}), array({}), integer(1), Reply{},
                             array({integer(0), integer(0), integer(1), integer(1), integer(1)}),
                             array({integer(1), integer(0), integer(1), integer(1)}),
                             array({integer(0), integer(0), integer(3), integer(1)}),
                             array({integer(0), integer(9), integer(1), integer(1)})}) {
        CHECK_FALSE(gcra_batch_decode(bad, p, 1, now, two, outs, error));
        CHECK(error.rfind("malformed reply to the GCRA script", 0) == 0);
    }
    // One bad entry fails its key only: out of range, a foreign code with a
    // debt, a debt past the end of the clock, a claim the debt refutes.
    for (const long long r : {-1LL, (1LL << 52) + 4, 4LL + 2, (1LL << 52) + 1, 4LL * 20 + 1}) {
        const Reply reply = array({integer(0), integer(0), integer(1), integer(r)});
        REQUIRE(gcra_batch_decode(reply, p, 1, now, two, outs, error));
        CHECK(outs[0].ok);
        CHECK_FALSE(outs[1].ok);
        CHECK(outs[1].error.find("reply to the GCRA script") != std::string::npos);
    }
    // On Quota{1, 1} index(now) = now: a debt of 2^50 from kMax - 5 passes the end of the clock.
    const tally::redis::protocol::GcraParams unit(Quota{1, 1}, "test");
    REQUIRE(gcra_batch_decode(array({integer(0), integer(0), integer(1), integer(1LL << 52)}), unit, 1, kMax - 5,
                              two, outs, error));
    CHECK(outs[0].ok);
    CHECK(outs[1].error == "malformed reply to the GCRA script (state)");
}

TEST_CASE("redis GcraLimiter: 10^5 random operations decide exactly as tally::Gcra", "[redis][big]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto& server = tally_test::shared_server(binary);
    auto client = tally_test::connect(server);
    tally::redis::Options o;
    o.key_prefix = "diff:gcra:";
    const auto quotas = slow_quotas();
    tally::redis::GcraLimiter limiter(client, quotas[0], o);
    tally::test::Rng rng(20261130);
    constexpr std::size_t kKeys = 40;
    struct Key {
        std::string name;
        Quota quota;
        tally::Gcra local;
        std::uint64_t now;
        std::uint64_t high;  // the latest caller time used on this key
        std::chrono::steady_clock::time_point written{};  // when the last call that charged it started
        std::uint64_t ttl_floor_ns = 0;  // that call's TTL before the skew: time_of(TAT) - now, saturated at the clock's end
    };
    std::vector<Key> keys;
    for (std::size_t i = 0; i < kKeys; ++i) {
        const Quota q = quotas[i % quotas.size()];
        // Start times: today's clock, and near both ends of the 64-bit clock.
        const std::uint64_t start = i % 8 == 0 ? rng.below(1000 * kSecond)
                                    : i % 8 == 1 ? kMax - rng.below(q.window_ns * (q.capacity() + 2))
                                                 : 1'764'000'000 * kSecond + rng.below(kSecond);
        std::string name = "k" + std::to_string(i);
        name.push_back('\0');
        name += "\xff\r\n";
        keys.push_back(Key{name, q, tally::Gcra(q), start, start});
    }
    const std::size_t ops = tally::test::big(100'000, 10'000);
    std::size_t allowed = 0, denied = 0;
    for (std::size_t op = 0; op < ops; ++op) {
        Key& k = keys[rng.below(kKeys)];
        const std::uint64_t T = k.quota.window_ns / k.quota.limit;
        // Mostly forward in steps around the emission interval, sometimes backwards.
        const std::uint64_t step = rng.below(3 * T + 1);
        // A key's TTL runs on the Redis clock (docs/redis.md, TTL bound): a
        // replayed time may go back only while the key's TTL, set at a caller
        // time <= high, still has at least 10 s of real time left; otherwise
        // Redis may rightly have forgotten the key.
        tally::Gcra probe = k.local;
        // A state that can never replenish (reset "never": its TAT is past the
        // clock's end) was written with a TTL of only the time left to the end.
        const std::uint64_t reset_at_high = probe.try_acquire(k.high, 0).reset_after_ns;
        const bool key_surely_alive =
            reset_at_high >= 10 * kSecond && (reset_at_high != tally::never || kMax - k.high >= 10 * kSecond);
        if (rng.below(10) == 0 && key_surely_alive)
            k.now = k.now > step ? k.now - step : 0;
        else
            k.now = k.now > kMax - step ? kMax : k.now + step;
        k.high = std::max(k.high, k.now);
        const std::uint64_t cap = k.quota.capacity();
        const std::uint64_t cost = rng.below(20) == 0 ? cap + 1 : rng.below(8) == 0 ? 0 : 1 + rng.below(cap < 3 ? cap : 3);
        Decision want = k.local.try_acquire(k.now, cost);
        const auto call_start = std::chrono::steady_clock::now();
        const Decision got = limiter.try_acquire_at(k.name, k.quota, k.now, cost);
        // Near the end of the clock the caller's time stops while Redis's runs
        // on: a state that can never replenish is kept for its TTL, the time
        // left to the clock's end plus max_clock_skew (1 s of real time). Only
        // a key whose TTL has run out, measured from the start of the call
        // that charged it to the end of this one, may rightly be gone: then
        // both sides start fresh. Any younger key must decide exactly.
        if (got != want &&
            std::chrono::steady_clock::now() - k.written >=
                std::chrono::nanoseconds(std::min<std::uint64_t>(k.ttl_floor_ns, 1'000'000 * kSecond)) +
                    std::chrono::seconds(1)) {
            k.local = tally::Gcra(k.quota);
            want = k.local.try_acquire(k.now, cost);
        }
        if (want.allowed && cost > 0) {
            k.written = call_start;
            k.ttl_floor_ns = want.reset_after_ns == tally::never ? kMax - k.now : want.reset_after_ns;
        }
        if (got != want) {
            INFO("op " << op << " key " << k.name.substr(0, 3) << " quota " << k.quota.limit << "/" << k.quota.window_ns
                       << " burst " << k.quota.burst << " now " << k.now << " cost " << cost << " want " << show(want)
                       << " got " << show(got) << " error " << limiter.last_error());
            REQUIRE(got == want);
        }
        (want.allowed ? allowed : denied)++;
    }
    CHECK(allowed > ops / 4);
    CHECK(denied > ops / 20);
    CHECK(limiter.degraded_count() == 0);
}

TEST_CASE("redis GcraLimiter: exact at the extremes of Quota and of the clock", "[redis]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto& server = tally_test::shared_server(binary);
    auto client = tally_test::connect(server);
    tally::redis::Options o;
    o.key_prefix = "extreme:";
    const std::uint64_t big = std::uint64_t{1} << 40;
    for (const Quota q : {Quota{1, 1}, Quota{big, big}, Quota{big, std::uint64_t{1} << 62, big}, Quota{1, 1, big},
                          Quota{1'000'000'000'000, 4'000'000'000'000'000'000, 3}}) {
        tally::redis::GcraLimiter limiter(client, q, o);
        // Every field of the quota names the key: two quotas never share state.
        const std::string key =
            std::to_string(q.limit) + "/" + std::to_string(q.window_ns) + "+" + std::to_string(q.burst);
        for (const std::uint64_t start : {std::uint64_t{0}, kMax - (std::uint64_t{1} << 42), kMax - 5, kMax}) {
            tally::Gcra local(q);
            const std::string k = key + "@" + std::to_string(start);
            // Big costs keep the debt (and the key's TTL) long.
            const std::uint64_t cap = q.capacity();
            const std::uint64_t costs[] = {cap, 1, cap / 2 + 1, 0, cap + 1, cap / 3, 2, cap};
            std::uint64_t now = start;
            for (std::size_t i = 0; i < 8; ++i) {
                const Decision want = local.try_acquire(now, costs[i]);
                const Decision got = limiter.try_acquire_at(k, now, costs[i]);
                INFO("quota " << q.limit << "/" << q.window_ns << " burst " << q.burst << " now " << now << " cost "
                              << costs[i] << " want " << show(want) << " got " << show(got));
                REQUIRE(got == want);
                now = now > kMax - 3 ? kMax : now + 3;
            }
        }
    }
}

TEST_CASE("redis GcraLimiter: Redis TIME is read exactly on tally's grid", "[redis]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto& server = tally_test::shared_server(binary);
    auto client = tally_test::connect(server);
    tally::redis::Options o;
    o.key_prefix = "servertime:";
    int k = 0;
    for (const Quota q : {Quota::per_second(7), Quota::per_minute(1000).with_burst(999), Quota{3, 1'000'001'000, 2},
                          Quota{1, 1}, Quota{std::uint64_t{1} << 40, std::uint64_t{1} << 40}, Quota::per_day(977)}) {
        tally::redis::GcraLimiter limiter(client, q, o);
        const std::string key = "q" + std::to_string(k++);
        const std::uint64_t cost = std::max<std::uint64_t>(1, q.capacity() / 2);
        // Two calls; each must equal tally::Gcra's decision at some microsecond
        // between the TIME read before and after it (Quota{1, 1} and
        // Quota{2^40, 2^40} take the scripts' 128-bit path for index(TIME)).
        tally::Gcra local(q);
        for (int call = 0; call < 2; ++call) {
            const std::uint64_t before = server_us(client);
            // The first call alone, the second as a batch of one (the batch script).
            Decision got{false, 0, 0, 0};
            if (call == 0) {
                got = limiter.try_acquire(key, cost);
            } else {
                const std::string_view one[1] = {key};
                limiter.try_acquire_batch(one, std::span<Decision>(&got, 1), cost);
            }
            const std::uint64_t after = server_us(client);
            REQUIRE(after >= before);
            REQUIRE(after - before < 2'000'000);
            const std::optional<std::uint64_t> tat = stored_tat_if_present(client, o.key_prefix + key);
            // An expired key proves only that its TTL passed; the decision must still match.
            bool found = false;
            for (std::uint64_t u = before; u <= after && !found; ++u) {
                tally::Gcra trial = local;
                if (trial.try_acquire(u * 1000, cost) == got && (!tat || trial.state().tat == *tat)) {
                    found = true;
                    local = trial;
                }
            }
            INFO("quota " << q.limit << "/" << q.window_ns << " got " << show(got));
            CHECK(found);
            CHECK(got.allowed);
        }
    }
}

TEST_CASE("redis GcraLimiter: pipelined batches decide as one call per key, in one round trip", "[redis]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto& server = tally_test::shared_server(binary);
    auto client = tally_test::connect(server);
    tally::redis::Options o;
    o.key_prefix = "batch:";
    const Quota q = Quota::per_hour(20).with_burst(5);
    tally::redis::GcraLimiter limiter(client, q, o);
    std::vector<std::string> names;
    for (int i = 0; i < 64; ++i) names.push_back("user:" + std::to_string(i % 16));  // repeats within a batch
    std::vector<std::string_view> keys(names.begin(), names.end());
    std::unordered_map<std::string, tally::Gcra> local;
    std::vector<Decision> out(keys.size(), Decision{false, 0, 0, 0});
    std::uint64_t now = 1'000 * kSecond;
    {  // loads the batch script: one more round trip
        const std::string_view warm[1] = {"warm-up"};
        Decision w[1] = {Decision{false, 0, 0, 0}};
        limiter.try_acquire_batch_at(warm, w, now, 0);
        REQUIRE(w[0].allowed);
    }
    for (int round = 0; round < 4; ++round) {
        const std::uint64_t trips = client.round_trips();
        limiter.try_acquire_batch_at(keys, out, now, 2);
        CHECK(client.round_trips() - trips == 1);
        for (std::size_t i = 0; i < keys.size(); ++i) {
            auto it = local.try_emplace(names[i], q).first;
            CHECK(out[i] == it->second.try_acquire(now, 2));
        }
        now += 200 * kSecond;
    }
    // Server time: every key admitted exactly once at full burst, then denied.
    std::vector<std::string_view> fresh{"fresh:a", "fresh:b", "fresh:c"};
    std::vector<Decision> d(3, Decision{false, 0, 0, 0});
    limiter.try_acquire_batch(fresh, d, 5);
    for (const auto& x : d) CHECK((x.allowed && x.remaining == 0 && !x.degraded));
    limiter.try_acquire_batch(fresh, d, 5);
    for (const auto& x : d) CHECK((!x.allowed && x.retry_after_ns > 0));
}

TEST_CASE("redis GcraLimiter: random batches decide exactly as tally::Gcra per key", "[redis][big]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto& server = tally_test::shared_server(binary);
    auto client = tally_test::connect(server);
    tally::test::Rng rng(20261201);
    const std::size_t rounds = tally::test::big(400, 60);
    std::size_t allowed = 0, denied = 0, in_debt = 0;
    int qi = 0;
    for (const Quota q : slow_quotas()) {
        tally::redis::Options o;
        o.key_prefix = "diff:batch:" + std::to_string(qi++) + ":";
        tally::redis::GcraLimiter limiter(client, q, o);
        const std::uint64_t T = q.window_ns / q.limit;
        const std::uint64_t cap = q.capacity();
        std::vector<std::string> names;
        for (int i = 0; i < 12; ++i) {  // (built in steps: GCC 12 warns falsely on the one-line form)
            std::string name = "b";
            name += std::to_string(i);
            name.append("\0\r\n", 3);
            names.push_back(std::move(name));
        }
        std::unordered_map<std::string, tally::Gcra> local;
        // Today's clock or near the end of the 64-bit clock.
        std::uint64_t now = qi % 3 == 0 ? kMax - rng.below(q.window_ns * (cap + 2)) : 1'764'000'000 * kSecond;
        std::uint64_t high = now;
        for (std::size_t round = 0; round < rounds; ++round) {
            std::vector<std::string_view> keys;
            const std::size_t m = 1 + rng.below(24);
            for (std::size_t i = 0; i < m; ++i) keys.push_back(names[rng.below(names.size())]);  // repeats
            // Backwards only while every key's TTL surely outlives the test
            // (see the 10^5-operation test above).
            bool alive = true;
            for (const auto k : keys) {
                auto it = local.find(std::string(k));
                tally::Gcra probe = it == local.end() ? tally::Gcra(q) : it->second;
                alive = alive && it != local.end() && probe.try_acquire(high, 0).reset_after_ns >= 10 * kSecond;
            }
            const std::uint64_t step = rng.below(3 * T + 1);
            if (rng.below(8) == 0 && alive)
                now = now > step ? now - step : 0;
            else
                now = now > kMax - step ? kMax : now + step;
            high = std::max(high, now);
            const std::uint64_t cost = rng.below(16) == 0 ? cap + 1 : rng.below(8) == 0 ? 0 : 1 + rng.below(cap < 3 ? cap : 3);
            std::vector<Decision> out(m, Decision{false, 0, 0, 0});
            limiter.try_acquire_batch_at(keys, out, now, cost);
            for (std::size_t i = 0; i < m; ++i) {
                tally::Gcra& g = local.try_emplace(std::string(keys[i]), q).first->second;
                in_debt += !g.is_fresh(g.state(), now);
                const Decision want = g.try_acquire(now, cost);
                if (out[i] != want) {
                    INFO("quota " << q.limit << "/" << q.window_ns << " burst " << q.burst << " round " << round
                                  << " key " << i << " now " << now << " cost " << cost << " want " << show(want)
                                  << " got " << show(out[i]) << " error " << limiter.last_error());
                    REQUIRE(out[i] == want);
                }
                (want.allowed ? allowed : denied)++;
            }
        }
        CHECK(limiter.degraded_count() == 0);
    }
    CHECK(allowed > 1000);
    CHECK(denied > 500);
    CHECK(in_debt > 1000);
}

TEST_CASE("redis GcraLimiter: one batch holds every reply form: fresh, in debt, far behind, foreign", "[redis]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto& server = tally_test::shared_server(binary);
    auto client = tally_test::connect(server);
    tally::redis::Options o;
    o.key_prefix = "forms:";
    // T = 1 ns and a bucket of 2^40: a charge of 2^40 keeps a key ~18 minutes.
    const std::uint64_t big = std::uint64_t{1} << 40;
    const Quota q{1, 1, big};
    tally::redis::GcraLimiter limiter(client, q, o);
    std::unordered_map<std::string, tally::Gcra> local;
    auto charge = [&](const std::string& key, std::uint64_t at, std::uint64_t cost) {
        const Decision want = local.try_emplace(key, q).first->second.try_acquire(at, cost);
        REQUIRE(limiter.try_acquire_at(key, at, cost) == want);
    };
    const std::uint64_t now = 5 * kSecond;
    charge("far", kMax - (std::uint64_t{1} << 42), big);     // debt at `now` ~2^64: the full TAT in the reply
    charge("ahead", now + (std::uint64_t{1} << 45), big);    // debt 2^45 + 2^40: more than the bucket
    charge("near", now + 1000, big / 2);                     // debt below the bucket
    charge("old", now - 10 * kSecond, big);                  // replenished by `now`
    REQUIRE(tally_test::must(client.command({"SET", "forms:junk", "g1:99999999999:1"})).str == "OK");
    REQUIRE(tally_test::must(client.command({"HSET", "forms:hash", "f", "v"})).integer == 1);
    const std::vector<std::string_view> keys{"far", "fresh", "ahead", "junk", "near", "old", "hash", "far",
                                             "near", "fresh"};
    // The first charge of "fresh" is big: its TTL (time to full replenishment) then
    // outlives the test, as the 1 ns of a charge of 1 would not.
    for (const std::uint64_t cost : {std::uint64_t{0}, big / 4, std::uint64_t{1}, big}) {
        std::vector<Decision> out(keys.size(), Decision{false, 0, 0, 0});
        limiter.try_acquire_batch_at(keys, out, now, cost);
        for (std::size_t i = 0; i < keys.size(); ++i) {
            INFO("cost " << cost << " key " << keys[i] << " got " << show(out[i]));
            if (keys[i] == "junk" || keys[i] == "hash") {
                CHECK(out[i] == Decision{false, 0, 50'000'000, 0, true});
                continue;
            }
            const Decision want = local.try_emplace(std::string(keys[i]), q).first->second.try_acquire(now, cost);
            CHECK(out[i] == want);
        }
    }
    // Each form was reached: "far" far behind, "ahead" beyond the bucket, "near" within it.
    tally::Gcra::State far_state = local.at("far").state(), ahead_state = local.at("ahead").state();
    CHECK(far_state.tat - now > (std::uint64_t{1} << 50));
    CHECK(ahead_state.tat - now > big);
    CHECK(local.at("near").state().tat - now < (std::uint64_t{1} << 50));
    CHECK(tally_test::must(client.command({"GET", "forms:junk"})).str == "g1:99999999999:1");
}

TEST_CASE("redis GcraLimiter: per-call quotas (tiers) share one limiter", "[redis]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto& server = tally_test::shared_server(binary);
    auto client = tally_test::connect(server);
    tally::redis::Options o;
    o.key_prefix = "tiers:";
    const Quota free_tier = Quota::per_hour(3), paid = Quota::per_hour(100);
    tally::redis::GcraLimiter limiter(client, free_tier, o);
    int free_ok = 0, paid_ok = 0;
    for (int i = 0; i < 10; ++i) {
        free_ok += limiter.try_acquire("free-user").allowed;
        paid_ok += limiter.try_acquire("paid-user", paid).allowed;
    }
    CHECK(free_ok == 3);
    CHECK(paid_ok == 10);
}

TEST_CASE("redis GcraLimiter: N clients on one key never admit more than one Gcra", "[redis]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto& server = tally_test::shared_server(binary);
    auto admin = tally_test::connect(server);
    tally::redis::Options o;
    o.key_prefix = "threads:";
    const Quota q = Quota::per_second(200).with_burst(20);
    constexpr int kThreads = 4;
    std::atomic<std::uint64_t> admitted{0}, degraded{0};
    const std::uint64_t start_us = server_us(admin);
    std::vector<std::thread> threads;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(tally::test::small_tests ? 300 : 700);
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&] {
            auto client = tally_test::connect(server);
            tally::redis::GcraLimiter limiter(client, q, o);
            for (int i = 0; i < 100'000 && std::chrono::steady_clock::now() < until; ++i) {
                const Decision d = limiter.try_acquire("hot");
                admitted += d.allowed && !d.degraded;
                degraded += d.degraded;
            }
        });
    }
    for (auto& t : threads) t.join();
    const std::uint64_t end_us = server_us(admin);
    // One Gcra over [start, end]: at most burst + index(end) - index(start).
    const tally::EmissionGrid grid(q);
    const std::uint64_t bound = q.capacity() + grid.index(end_us * 1000) - grid.index(start_us * 1000);
    INFO("admitted " << admitted << " bound " << bound);
    CHECK(degraded == 0);
    CHECK(admitted <= bound);
    CHECK(admitted >= bound / 2);  // and the limit is actually used
}

TEST_CASE("redis GcraLimiter: several limits, all or nothing", "[redis]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto& server = tally_test::shared_server(binary);
    auto client = tally_test::connect(server);
    tally::redis::Options o;
    o.key_prefix = "multi:";
    const Quota user_q = Quota::per_hour(5), tenant_q = Quota::per_hour(12), global_q = Quota::per_hour(1000);
    tally::redis::GcraLimiter limiter(client, global_q, o);

    SECTION("a denied limit charges none; the Decision is the tightest") {
        const std::uint64_t now = 500 * kSecond;
        tally::Gcra u(user_q), t(Quota::per_hour(2)), g(global_q);
        const tally::redis::Limit limits[3] = {{"u:1", user_q, 1}, {"t:1", Quota::per_hour(2), 1}, {"g", global_q, 1}};
        for (int i = 0; i < 4; ++i) {
            const Decision d = limiter.try_acquire_all_at(limits, now);
            // Local oracle: admit iff all admit; charge all or none.
            auto cu = u, ct = t, cg = g;
            const Decision du = cu.try_acquire(now), dt = ct.try_acquire(now), dg = cg.try_acquire(now);
            const bool all = du.allowed && dt.allowed && dg.allowed;
            if (all) {
                u = cu;
                t = ct;
                g = cg;
                CHECK(d == Decision{true, std::min({du.remaining, dt.remaining, dg.remaining}), 0,
                                    std::max({du.reset_after_ns, dt.reset_after_ns, dg.reset_after_ns})});
            } else {
                const Decision pu = u.try_acquire(now, 0), pt = t.try_acquire(now, 0), pg = g.try_acquire(now, 0);
                std::uint64_t retry = 0;
                for (const Decision& x : {du, dt, dg})
                    if (!x.allowed) retry = std::max(retry, x.retry_after_ns);
                CHECK(d == Decision{false, std::min({pu.remaining, pt.remaining, pg.remaining}), retry,
                                    std::max({pu.reset_after_ns, pt.reset_after_ns, pg.reset_after_ns})});
            }
            CHECK(d.allowed == (i < 2));
        }
        // The user and global keys were charged twice, not four times.
        CHECK(limiter.try_acquire_at("u:1", user_q, now, 0).remaining == 3);
        CHECK(limiter.try_acquire_at("g", global_q, now, 0).remaining == 998);
    }

    SECTION("under concurrency no limit is charged by a denied call") {
        // Redis time runs on: a key gets one unit back at each tick of its
        // emission grid (every 3.6 s for the global quota), so the checks
        // allow for the ticks between the first call and the last read.
        const std::uint64_t start_us = server_us(client);
        constexpr int kThreads = 4;
        std::atomic<int> per_user[kThreads] = {};
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&, t] {
                auto c = tally_test::connect(server);
                tally::redis::GcraLimiter l(c, global_q, o);
                const std::string user = "cu:" + std::to_string(t);
                const tally::redis::Limit limits[3] = {{user, user_q, 1}, {"ct", tenant_q, 1}, {"cg", global_q, 1}};
                for (int i = 0; i < 40; ++i) {
                    const Decision d = l.try_acquire_all(limits);
                    REQUIRE_FALSE(d.degraded);
                    per_user[t] += d.allowed;
                }
            });
        }
        for (auto& th : threads) th.join();
        std::uint64_t user_left[kThreads];
        for (int t = 0; t < kThreads; ++t)
            user_left[t] = limiter.try_acquire("cu:" + std::to_string(t), user_q, 0).remaining;
        const std::uint64_t tenant_left = limiter.try_acquire("ct", tenant_q, 0).remaining;
        const std::uint64_t global_left = limiter.try_acquire("cg", global_q, 0).remaining;
        const std::uint64_t end_us = server_us(client);
        const auto ticks = [&](const Quota& q) {
            const tally::EmissionGrid grid(q);
            return static_cast<int>(grid.index(end_us * 1000) - grid.index(start_us * 1000));
        };
        const int user_ticks = ticks(user_q), tenant_ticks = ticks(tenant_q), global_ticks = ticks(global_q);
        INFO("grid ticks during the test: user " << user_ticks << ", tenant " << tenant_ticks << ", global "
                                                  << global_ticks);
        int total = 0;
        for (int t = 0; t < kThreads; ++t) {
            CHECK(per_user[t] <= 5 + user_ticks);
            total += per_user[t];
            // Remaining of the user key = 5 - its admitted calls (plus what
            // ticks gave back): nothing charged by denials.
            const auto admitted = static_cast<std::uint64_t>(per_user[t]);
            CHECK(user_left[t] + admitted >= 5);
            CHECK(user_left[t] + admitted <= 5 + static_cast<std::uint64_t>(user_ticks));
        }
        // The tenant limit binds: 4 users x 5 > 12.
        CHECK(total >= 12);
        CHECK(total <= 12 + tenant_ticks);
        CHECK(tenant_left <= static_cast<std::uint64_t>(tenant_ticks));
        // The global key was charged once per admitted call, never by a denial.
        CHECK(global_left + static_cast<std::uint64_t>(total) >= 1000);
        CHECK(global_left + static_cast<std::uint64_t>(total) <= 1000 + static_cast<std::uint64_t>(global_ticks));
    }
}

TEST_CASE("redis SlidingWindowLimiter: random operations decide exactly as tally::SlidingWindowLimiter", "[redis][big]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto& server = tally_test::shared_server(binary);
    auto client = tally_test::connect(server);
    tally::redis::Options o;
    o.key_prefix = "diff:sw:";
    tally::test::Rng rng(77);
    const std::size_t ops = tally::test::big(34'000, 4'000);  // per ring size: 10^5 in all
    auto run = [&](auto slots_tag, const Quota q, const char* name) {
        constexpr std::size_t S = decltype(slots_tag)::value;
        tally::redis::SlidingWindowLimiter<S> remote(client, q, o);
        std::vector<tally::SlidingWindowLimiter<std::uint32_t, S>> local(8, tally::SlidingWindowLimiter<std::uint32_t, S>(q));
        std::vector<std::uint64_t> now(8);
        for (std::size_t i = 0; i < 8; ++i) now[i] = i == 0 ? 0 : 1'764'000'000 * kSecond + rng.below(q.window_ns);
        REQUIRE(remote.bucket_ns() == local[0].bucket_ns());
        for (std::size_t op = 0; op < ops; ++op) {
            const std::size_t k = rng.below(8);
            const std::uint64_t step = rng.below(remote.bucket_ns() / 2 + 1);
            if (rng.below(12) == 0)
                now[k] = now[k] > 3 * step ? now[k] - 3 * step : 0;
            else
                now[k] += step;
            const std::uint64_t cost = rng.below(25) == 0 ? q.limit + 1 : rng.below(10) == 0 ? 0 : 1 + rng.below(3);
            const std::string key = std::string(name) + ":" + std::to_string(k);
            const Decision want = local[k].try_acquire(now[k], cost);
            const Decision got = remote.try_acquire_at(key, now[k], cost);
            if (got != want) {
                INFO(name << " op " << op << " now " << now[k] << " cost " << cost << " want " << show(want) << " got "
                          << show(got) << " error " << remote.last_error());
                REQUIRE(got == want);
            }
        }
        CHECK(remote.degraded_count() == 0);
    };
    run(std::integral_constant<std::size_t, 11>{}, Quota::per_minute(50), "s11");
    run(std::integral_constant<std::size_t, 2>{}, Quota{20, 30 * kSecond + 7}, "s2");
    run(std::integral_constant<std::size_t, 7>{}, Quota{1000, 3600 * kSecond}, "s7");
}

TEST_CASE("redis SlidingWindowLimiter: Redis TIME, and the classic two-bucket case", "[redis]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto& server = tally_test::shared_server(binary);
    auto client = tally_test::connect(server);
    tally::redis::Options o;
    o.key_prefix = "sw:";
    tally::redis::SlidingWindowLimiter<2> l(client, Quota{10, 1000 * kSecond}, o);
    int ok = 0;
    for (int i = 0; i < 15; ++i) ok += l.try_acquire("k").allowed;
    CHECK(ok == 10);
    const Decision d = l.try_acquire("k");
    CHECK_FALSE(d.allowed);
    CHECK(d.retry_after_ns > 0);
    CHECK(d.remaining == 0);
    CHECK(l.degraded_count() == 0);
}

TEST_CASE("redis keys: binary-safe, prefixed, with a TTL of their time to full replenishment", "[redis]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto& server = tally_test::shared_server(binary);
    auto client = tally_test::connect(server);
    tally::redis::Options o;
    o.key_prefix = std::string("ttl\0:", 5);
    const Quota q = Quota::per_second(20);  // 50 ms per unit
    tally::redis::GcraLimiter g(client, q, o);
    const std::string key("a\0b\r\n", 5);
    // The TTL is set during the call and read by PTTL after it: it may have
    // run down by at most the interval measured from before the call to
    // after the PTTL reply (plus PTTL's 1 ms rounding), never more.
    using SteadyClock = std::chrono::steady_clock;
    auto ms_since = [](SteadyClock::time_point t) {
        return static_cast<std::uint64_t>(
            std::chrono::ceil<std::chrono::milliseconds>(SteadyClock::now() - t).count());
    };
    const auto before = SteadyClock::now();
    const Decision d = g.try_acquire(key, 4);  // 200 ms to full replenishment
    REQUIRE(d.allowed);
    const std::string full = o.key_prefix + key;
    const Reply ttl = tally_test::must(client.command({"PTTL", full}));
    const std::uint64_t elapsed = ms_since(before);
    INFO("pttl " << ttl.integer << " reset_after " << d.reset_after_ns << " ns, measured " << elapsed << " ms");
    CHECK((ttl.integer > 0 || elapsed >= d.reset_after_ns / 1'000'000));
    CHECK(ttl.integer <= static_cast<long long>(d.reset_after_ns / 1'000'000 + 2));
    CHECK(ttl.integer + static_cast<long long>(elapsed) + 1 >= static_cast<long long>(d.reset_after_ns / 1'000'000));
    CHECK(tally_test::must(client.command({"EXISTS", "a"})).integer == 0);
    std::this_thread::sleep_for(std::chrono::nanoseconds(d.reset_after_ns) + std::chrono::milliseconds(5));
    CHECK(tally_test::must(client.command({"EXISTS", full})).integer == 0);
    // Still full after the key is gone.
    CHECK(g.try_acquire(key, 0).remaining == 20);
    // Batches: several keys charged (one MSET, a PEXPIRE each, a repeat taking
    // the later TTL) and a single key charged (one SET ... PX).
    const std::vector<std::string_view> many{"b1", "b2", "b1"}, one{"b3"};
    std::vector<Decision> got(3, Decision{false, 0, 0, 0}), got1(1, Decision{false, 0, 0, 0});
    const auto batch_before = SteadyClock::now();
    g.try_acquire_batch(many, got, 3);
    g.try_acquire_batch(one, got1, 5);
    REQUIRE((got[0].allowed && got[1].allowed && got[2].allowed && got1[0].allowed));
    CHECK(got[2].remaining == 14);
    std::uint64_t longest = 0;
    for (const auto& [k, dk] : {std::pair{std::string("b1"), got[2]}, std::pair{std::string("b2"), got[1]},
                                std::pair{std::string("b3"), got1[0]}}) {
        const Reply t = tally_test::must(client.command({"PTTL", o.key_prefix + k}));
        const std::uint64_t waited = ms_since(batch_before);
        const auto reset_ms = static_cast<long long>(dk.reset_after_ns / 1'000'000);
        INFO("key " << k << " pttl " << t.integer << " reset " << dk.reset_after_ns << " measured " << waited << " ms");
        CHECK((t.integer > 0 || static_cast<long long>(waited) >= reset_ms));
        CHECK(t.integer <= reset_ms + 2);
        CHECK(t.integer + static_cast<long long>(waited) + 1 >= reset_ms);
        longest = std::max(longest, dk.reset_after_ns);
    }
    std::this_thread::sleep_for(std::chrono::nanoseconds(longest) + std::chrono::milliseconds(5));
    for (const char* k : {"b1", "b2", "b3"}) CHECK(tally_test::must(client.command({"EXISTS", o.key_prefix + k})).integer == 0);

    tally::redis::SlidingWindowLimiter<11> sw(client, Quota{5, 100'000'000}, o);  // buckets of 10 ms
    const auto ring_before = SteadyClock::now();
    REQUIRE(sw.try_acquire("ring", 2).allowed);
    const std::string ring = o.key_prefix + "ring";
    const Reply t2 = tally_test::must(client.command({"PTTL", ring}));
    CHECK((t2.integer > 0 || ms_since(ring_before) >= 100));
    CHECK(t2.integer <= 112);
    std::this_thread::sleep_for(std::chrono::milliseconds(125));
    CHECK(tally_test::must(client.command({"EXISTS", ring})).integer == 0);
}
