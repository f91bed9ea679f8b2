// tally::redis::LeasedLimiter against a real redis-server on a loopback port:
// a fleet of P limiters (each with its own Client) on one key never admits
// more than one tally::Gcra, in every window; round trips per admitted
// request at low load; fleet-wide admissions under saturation; exact hand-back; faults.
#include <tally/redis.hpp>
#include <tally/limit/gcra.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "catch.hpp"
#include "redis_test_support.hpp"
#include "test_support.hpp"
#include "wake_latency.hpp"

using tally::Decision;
using tally::Quota;
using tally::redis::LeasedLimiter;
using tally::redis::LeaseOptions;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::uint64_t kSecond = 1'000'000'000;

// Largest excess over the bound "admissions with times in [s, e] <= b +
// index(e) - index(s - slack - 1)" over all windows [s, e] spanned by two
// admissions (times sorted); <= 0 means the bound holds. O(n): for each j,
// the best i <= j maximises index(a_i - slack - 1) - i.
long long window_excess(std::vector<std::uint64_t> a, const Quota& q, std::uint64_t slack) {
    std::sort(a.begin(), a.end());
    const tally::EmissionGrid g(q);
    const auto b = static_cast<long long>(q.capacity());
    auto before = [&](std::uint64_t t) {
        return t > slack + 1 ? static_cast<long long>(g.index(t - slack - 1)) : 0LL;
    };
    long long worst = -b, best = 0;
    for (std::size_t j = 0; j < a.size(); ++j) {
        best = j == 0 ? before(a[0]) : std::max(best, before(a[j]) - static_cast<long long>(j));
        // count (j - i + 1) - b - index(a_j) + index(a_i - slack - 1)
        const long long excess = static_cast<long long>(j) + 1 + best - b - static_cast<long long>(g.index(a[j]));
        worst = std::max(worst, excess);
    }
    return worst;
}

// Cumulative: admissions up to every admission time e, from the first
// request at t0, against b + index(e) - index(t0 - 1).
long long cumulative_excess(std::vector<std::uint64_t> a, const Quota& q, std::uint64_t t0) {
    std::sort(a.begin(), a.end());
    const tally::EmissionGrid g(q);
    long long worst = -static_cast<long long>(q.capacity());
    for (std::size_t j = 0; j < a.size(); ++j)
        worst = std::max(worst, static_cast<long long>(j) + 1 - static_cast<long long>(q.capacity()) -
                                    static_cast<long long>(g.index(a[j])) + static_cast<long long>(g.index(t0 - 1)));
    return worst;
}

// Requests a single tally::Gcra with quota q refuses when fed the admission
// times in order: 0 means the fleet admitted nothing one Gcra would not.
std::size_t gcra_refusals(std::vector<std::uint64_t> a, const Quota& q) {
    std::sort(a.begin(), a.end());
    tally::Gcra one(q);
    std::size_t refused = 0;
    for (const std::uint64_t t : a) refused += !one.try_acquire(t).allowed;
    return refused;
}

struct Fleet {
    std::vector<std::uint64_t> admitted;  // times
    std::uint64_t requests = 0, trips = 0, t0 = 0, t1 = 0;
};

// P limiters, each on its own Client, one key, caller's time: Poisson
// arrivals at `demand` x the quota's rate, each to a random process (one
// driver thread, so Redis sees the calls in time order).
Fleet drive_fleet(const tally_test::RedisServer& server, const Quota& q, const LeaseOptions& lo, int processes,
                  double demand, int events, std::uint64_t seed, const std::string& key, bool local_only = false,
                  std::uint64_t bursty_ns = 0) {
    std::vector<tally::redis::Client> clients;
    std::vector<std::unique_ptr<LeasedLimiter>> fleet;
    std::vector<tally::Gcra> replicas;  // negative control: a local Gcra per replica
    for (int p = 0; p < processes; ++p) clients.push_back(tally_test::connect(server));
    for (int p = 0; p < processes; ++p) {
        fleet.push_back(std::make_unique<LeasedLimiter>(clients[static_cast<std::size_t>(p)], q, lo));
        replicas.emplace_back(q);
    }
    std::mt19937_64 rng(seed);
    const double interval = static_cast<double>(q.window_ns) / static_cast<double>(q.limit);
    std::exponential_distribution<double> gap(demand / interval);
    std::uniform_int_distribution<int> who(0, processes - 1);
    Fleet f;
    f.t0 = 1'000'000 * kSecond;
    std::uint64_t t = f.t0;
    for (int i = 0; i < events; ++i) {
        const auto p = static_cast<std::size_t>(who(rng));
        const Decision d = local_only ? replicas[p].try_acquire(t) : fleet[p]->try_acquire_at(key, t);
        REQUIRE_FALSE(d.degraded);
        if (d.allowed) f.admitted.push_back(t);
        ++f.requests;
        // Bursty: back-to-back requests, and now and then an idle spell of
        // up to bursty_ns (the bucket refills while leases are held).
        if (bursty_ns == 0) t += 1 + static_cast<std::uint64_t>(gap(rng));
        else t += rng() % 128 == 0 ? 1 + rng() % bursty_ns : 1;
    }
    f.t1 = t;
    for (auto& l : fleet) f.trips += l->round_trips();
    return f;
}

struct Resume {
    tally_test::RedisServer& s;
    ~Resume() { s.resume(); }
};

}  // namespace

TEST_CASE("LeasedLimiter: options out of range are refused", "[redis][leased]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto client = tally_test::connect(tally_test::shared_server(binary));
    const Quota q = Quota::per_second(100).with_burst(50);
    LeaseOptions lo;
    lo.max_lease = 51;
    CHECK_THROWS_WITH(LeasedLimiter(client, q, lo), "tally::redis::LeasedLimiter: max_lease 51 is out of range [0, 50]");
    lo = {};
    lo.max_lease = 8;
    lo.share = 0;
    CHECK_THROWS_WITH(LeasedLimiter(client, q, lo), "tally::redis::LeasedLimiter: share 0 is out of range [1, 1048576]");
    lo.share = 8;
    // d may hold at most capacity - max_lease = 42 emission intervals of 10 ms.
    lo.lease_ns = 420'000'001;
    CHECK_THROWS_WITH(LeasedLimiter(client, q, lo),
                      "tally::redis::LeasedLimiter: lease_ns 420000001 is out of range [0, 420000000]");
    lo.lease_ns = 420'000'000;
    CHECK(LeasedLimiter(client, q, lo).lease_burst() == 8);
    lo.max_lease = 50;
    lo.lease_ns = 1;
    CHECK_THROWS_WITH(LeasedLimiter(client, q, lo), "tally::redis::LeasedLimiter: lease_ns 1 is out of range [0, 0]");
    lo.max_lease = 8;
    lo.lease_ns = 0;
    LeasedLimiter ok(client, q, lo);
    CHECK(ok.lease_ns() == 4 * 8 * 10'000'000);  // 4 x max_lease x emission interval
    CHECK(ok.lease_burst() == 50 - 32);           // the 32 tokens emitted in d
    lo.lease_ns = 10'000'001;                     // 1.0000001 intervals: 2 tokens
    CHECK(LeasedLimiter(client, q, lo).lease_burst() == 48);
    // Defaults: max_lease = min(64, capacity / 2), d = min(4 x max_lease intervals, the bound).
    LeasedLimiter small(client, Quota::per_second(100).with_burst(40));
    CHECK(small.lease_options().max_lease == 20);
    CHECK(small.lease_ns() == 200'000'000);
    CHECK(small.lease_burst() == 20);
    LeasedLimiter large(client, Quota::per_second(100));
    CHECK(large.lease_options().max_lease == 50);
    CHECK(large.lease_ns() == 500'000'000);
    // Leases of one token are spent when charged: the whole burst is kept.
    lo.max_lease = 1;
    lo.lease_ns = 0;
    CHECK(LeasedLimiter(client, q, lo).lease_burst() == 50);
}

TEST_CASE("LeasedLimiter: leases of one token decide as tally::Gcra", "[redis][leased]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto client = tally_test::connect(tally_test::shared_server(binary));
    const Quota q{7, 60 * kSecond + 13, 3};
    LeaseOptions lo;
    lo.max_lease = 1;
    LeasedLimiter leased(client, q, lo);
    tally::Gcra oracle(q);
    std::mt19937_64 rng(7);
    std::uint64_t t = 5'000'000 * kSecond;
    for (int i = 0; i < 2000; ++i) {
        t += rng() % (20 * kSecond);
        const Decision want = oracle.try_acquire(t);
        const Decision got = leased.try_acquire_at("exact", t);
        REQUIRE(got.allowed == want.allowed);
        REQUIRE(got.retry_after_ns == want.retry_after_ns);
        if (got.allowed) REQUIRE(got.remaining == want.remaining);
    }
    CHECK(leased.round_trips() < 2000);  // denials were answered locally
}

TEST_CASE("LeasedLimiter: unused tokens go back only while no later charge depends on them", "[redis][leased]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto& server = tally_test::shared_server(binary);
    auto client = tally_test::connect(server);
    auto other_client = tally_test::connect(server);
    const Quota q = Quota::per_hour(3600).with_burst(1000);
    tally::redis::GcraLimiter peek(other_client, q);
    LeaseOptions lo;
    lo.max_lease = 64;
    lo.share = 1;
    for (const bool interfere : {false, true}) {
        const std::string key = interfere ? "back:b" : "back:a";
        LeasedLimiter leased(client, q, lo);
        std::uint64_t spent = 0;
        // Leases double while spent: 1, 2, 4, ... (bounded loop).
        for (int i = 0; i < 40 && leased.leased_tokens(key) < 16; ++i) {
            REQUIRE(leased.try_acquire(key).allowed);
            ++spent;
        }
        const std::uint64_t held = leased.leased_tokens(key);
        REQUIRE(held >= 16);
        REQUIRE(leased.tokens_leased() == spent + held);
        if (interfere) REQUIRE(peek.try_acquire(key).allowed);
        leased.release(key);
        CHECK(leased.leased_tokens(key) == 0);
        const Decision now = peek.try_acquire(key, 0);
        if (!interfere) {
            CHECK(leased.tokens_returned() == held);
            CHECK(now.remaining >= 1000 - spent);  // (time passed re-emits a little)
            CHECK(now.remaining <= 1000 - spent + 1);
        } else {
            CHECK(leased.tokens_returned() == 0);  // a later charge: never minted back
            CHECK(now.remaining <= 1000 - spent - held - 1 + 1);
        }
    }
}

TEST_CASE("LeasedLimiter: the local table stays within max_keys", "[redis][leased]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto client = tally_test::connect(tally_test::shared_server(binary));
    LeaseOptions lo;
    lo.max_keys = 32;  // 2 per shard
    LeasedLimiter leased(client, Quota::per_minute(600), lo);
    for (int i = 0; i < 300; ++i) {
        const std::string key = "table:" + std::to_string(i % 150);
        REQUIRE(leased.try_acquire(key).allowed);
        REQUIRE(leased.size() <= 32);
    }
    CHECK(leased.size() >= 16);
    CHECK_THROWS_WITH(leased.try_acquire(std::string(1025, 'k')),
                      "tally::redis::LeasedLimiter: key length 1025 is out of range [0, 1024]");
}

TEST_CASE("LeasedLimiter: a token held in a lease cannot push a window past one Gcra", "[redis][leased]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto& server = tally_test::shared_server(binary);
    auto c1 = tally_test::connect(server);
    auto c2 = tally_test::connect(server);
    const Quota q{100, 100 * kSecond, 10};  // T = 1 s, burst 10
    LeaseOptions lo;
    lo.max_lease = 2;
    lo.share = 1;
    lo.lease_ns = 8 * kSecond;  // the most max_lease 2 allows: lease_burst 10 - 8
    // p1 takes a lease of 1 at t0 and one of 2 at t1 (spends one, holds
    // one); the bucket is full again at u, within d of t1; p2 then asks 10
    // times and p1 spends its held token.
    const std::uint64_t t0 = 7'000'000 * kSecond, t1 = t0 + kSecond + 1, u = t1 + 2 * kSecond + 1;
    // Negative control: the same leases charged against the full burst (a
    // local Gcra as the shared state) admit 11 in 10 ns, one over one Gcra.
    {
        tally::Gcra shared(q);
        std::vector<std::uint64_t> naive;
        REQUIRE(shared.try_acquire(t0).allowed);
        naive.push_back(t0);
        REQUIRE(shared.try_acquire(t1, 2).allowed);
        naive.push_back(t1);
        for (std::uint64_t i = 0; i < 10; ++i)
            if (shared.try_acquire(u + i).allowed) naive.push_back(u + i);
        naive.push_back(u + 10);  // the held token
        REQUIRE(naive.size() == 13);
        CHECK(window_excess(naive, q, 0) == 1);
        CHECK(gcra_refusals(naive, q) == 1);
    }
    LeasedLimiter p1(c1, q, lo), p2(c2, q, lo);
    REQUIRE(p1.lease_burst() == 2);
    std::vector<std::uint64_t> admitted;
    auto take = [&](LeasedLimiter& p, std::uint64_t at) {
        const bool ok = p.try_acquire_at("strict", at).allowed;
        if (ok) admitted.push_back(at);
        return ok;
    };
    REQUIRE(take(p1, t0));
    REQUIRE(take(p1, t1));
    REQUIRE(p1.leased_tokens("strict") == 1);
    int p2_admitted = 0;
    for (std::uint64_t i = 0; i < 10; ++i) p2_admitted += take(p2, u + i);
    CHECK(take(p1, u + 10));   // the held token is spent
    CHECK(p2_admitted == 2);   // lease_burst: the held token's share of the burst stays free
    CHECK(window_excess(admitted, q, 0) <= 0);
    CHECK(gcra_refusals(admitted, q) == 0);
    // A cost above lease_burst() can never be admitted.
    const Decision big = p2.try_acquire_at("strict:big", u, 3);
    CHECK((!big.allowed && big.retry_after_ns == tally::never));
    CHECK(p2.try_acquire_at("strict:big", u + 1, 2).allowed);
}

TEST_CASE("LeasedLimiter fleet, caller's time: never more than one Gcra, over every window", "[redis][leased]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto& server = tally_test::shared_server(binary);
    // Emission interval 1 s: a key's TTL (counted by Redis in real time)
    // outlives the simulated span, which runs far faster than real time.
    const Quota q{1000, 1000 * kSecond, 0};
    LeaseOptions lo;
    lo.max_lease = 64;
    const int events = tally::test::small_tests ? 1500 : 5000;
    int run = 0;
    for (const double demand : {0.3, 0.45, 1.0, 3.0}) {
        const std::string key = "fleet:" + std::to_string(run++);
        const Fleet f = drive_fleet(server, q, lo, 4, demand, events, 42 + static_cast<std::uint64_t>(run), key);
        INFO("demand " << demand << " admitted " << f.admitted.size() << " of " << f.requests << ", round trips "
                       << f.trips);
        CHECK(cumulative_excess(f.admitted, q, f.t0) <= 0);
        CHECK(window_excess(f.admitted, q, 0) <= 0);
        CHECK(gcra_refusals(f.admitted, q) == 0);
        if (demand < 0.5) {
            CHECK(f.trips * 8 <= f.admitted.size());
            CHECK(f.admitted.size() == f.requests);  // far below the limit nobody is refused
        }
        if (demand > 1.5) {
            // Saturated: the fleet admits >= 90% of the quota (beyond the
            // burst leases are charged against: 1000 - 4 x 64 = 744).
            const tally::EmissionGrid g(q);
            const double quota = static_cast<double>(g.index(f.t1) - g.index(f.t0));
            CHECK(static_cast<double>(f.admitted.size()) - 744.0 >= 0.9 * quota);
        }
    }
    // Negative control: the same arrivals on a local Gcra per replica (no
    // shared state) overshoot the cumulative bound.
    const Fleet naive = drive_fleet(server, q, lo, 4, 3.0, events, 45, "unused", true);
    CHECK(cumulative_excess(naive.admitted, q, naive.t0) > 0);
}

TEST_CASE("LeasedLimiter fleet, bursty arrivals: never more than one Gcra, over every window", "[redis][leased]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto& server = tally_test::shared_server(binary);
    const Quota q{1000, 1000 * kSecond, 100};  // T = 1 s, burst 100
    LeaseOptions lo;
    lo.max_lease = 16;
    lo.share = 1;  // leases as large as the bucket allows
    // Clusters of ~128 back-to-back requests after idle spells of up to 2d:
    // leases charged against the full burst (b instead of b') exceed one
    // Gcra here by up to 25 admissions (seed 2).
    const int events = tally::test::small_tests ? 1500 : 4000;
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        const std::string key = "bursty:" + std::to_string(seed);
        const Fleet f = drive_fleet(server, q, lo, 4, 1.0, events, seed, key, false, 2 * 64 * kSecond);
        INFO("seed " << seed << " admitted " << f.admitted.size() << " of " << f.requests);
        CHECK(window_excess(f.admitted, q, 0) <= 0);
        CHECK(gcra_refusals(f.admitted, q) == 0);
    }
}

TEST_CASE("LeasedLimiter fleet, Redis time: threads each with a Client", "[redis][leased]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    auto& server = tally_test::shared_server(binary);
    constexpr int P = 4;
    const auto span = std::chrono::milliseconds(tally::test::small_tests ? 400 : 900);
    struct Result {
        std::vector<std::uint64_t> admitted;
        std::uint64_t trips = 0, requests = 0;
        std::uint64_t longest_admitting_call_ns = 0;  // measured around the call
    };
    // mean_gap_us: each thread's mean gap between requests (0: saturate).
    auto run = [&](const Quota& q, const LeaseOptions& lo, const std::string& key, double mean_gap_us, std::uint64_t& t0,
                   std::uint64_t& t1) {
        std::vector<Result> out(P);
        std::vector<std::thread> threads;
        const auto start = Clock::now();
        t0 = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count());
        for (int p = 0; p < P; ++p)
            threads.emplace_back([&, p] {
                auto client = tally_test::connect(server);
                LeasedLimiter leased(client, q, lo);
                std::mt19937_64 rng(100 + static_cast<std::uint64_t>(p));
                std::exponential_distribution<double> gap(mean_gap_us > 0 ? 1.0 / mean_gap_us : 1.0);
                Result& r = out[static_cast<std::size_t>(p)];
                for (int i = 0; i < 2'000'000 && Clock::now() - start < span; ++i) {
                    const auto before = Clock::now();
                    const Decision d = leased.try_acquire(key);
                    const auto after = Clock::now();
                    ++r.requests;
                    if (d.allowed) {
                        r.admitted.push_back(static_cast<std::uint64_t>(
                            std::chrono::duration_cast<std::chrono::nanoseconds>(after.time_since_epoch()).count()));
                        r.longest_admitting_call_ns =
                            std::max(r.longest_admitting_call_ns,
                                     static_cast<std::uint64_t>(
                                         std::chrono::duration_cast<std::chrono::nanoseconds>(after - before).count()));
                    }
                    if (mean_gap_us > 0)
                        std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long long>(gap(rng))));
                }
                r.trips = leased.round_trips();
            });
        for (auto& t : threads) t.join();
        t1 = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
        Result all;
        for (auto& r : out) {
            all.admitted.insert(all.admitted.end(), r.admitted.begin(), r.admitted.end());
            all.trips += r.trips;
            all.requests += r.requests;
            all.longest_admitting_call_ns = std::max(all.longest_admitting_call_ns, r.longest_admitting_call_ns);
        }
        return all;
    };
    // Steady-clock admission times against Redis-time charges: a margin of
    // 2 ms for the two clocks' offsets within a run.
    const std::uint64_t margin = 2'000'000;
    SECTION("low load: <= 1/8 round trip per admitted request") {
        const Quota q = Quota::per_second(2000);
        std::uint64_t t0 = 0, t1 = 0;
        LeaseOptions lo;
        lo.max_lease = 128;  // lease_ns = 4 x 128 x 0.5 ms = 256 ms
        const Result r = run(q, lo, "redis-time:low", 5'000.0, t0, t1);  // 4 x ~200/s = 40% of the quota
        INFO("admitted " << r.admitted.size() << " of " << r.requests << ", round trips " << r.trips
                          << ", longest admitting call " << r.longest_admitting_call_ns << " ns");
        CHECK(r.trips * 8 <= r.admitted.size());
        CHECK(cumulative_excess(r.admitted, q, t0 - margin) <= 0);
        // Admission times are read after each call returns: each admission
        // was decided at most the longest admitting call (measured) earlier.
        CHECK(window_excess(r.admitted, q, r.longest_admitting_call_ns + margin) <= 0);
    }
    SECTION("saturated: >= 90% of the quota, within one Gcra over every window") {
        // 500/s: an emission interval (2 ms) longer than a round trip on a
        // loaded 2-core machine, so the fleet's utilisation, not the
        // machine's load, is what the >= 90% bound measures (at 2000/s a
        // load average of 10 left 4 threads at 78% to 92%).
        const std::uint64_t rate = 500;
        const Quota q = Quota::per_second(rate).with_burst(40);
        std::uint64_t t0 = 0, t1 = 0;
        const Result r = run(q, LeaseOptions{}, "redis-time:sat", 0.0, t0, t1);
        INFO("admitted " << r.admitted.size() << " of " << r.requests << ", round trips " << r.trips
                          << ", longest admitting call " << r.longest_admitting_call_ns << " ns");
        const double quota = static_cast<double>(rate) * static_cast<double>(t1 - t0) / 1e9;
        CHECK(static_cast<double>(r.admitted.size()) >= 0.9 * quota);
        CHECK(static_cast<double>(r.admitted.size()) <= 40.0 + quota + 2.0);
        // Admission times are read after each call returns: each admission
        // was decided at most the longest admitting call (measured) earlier.
        CHECK(window_excess(r.admitted, q, r.longest_admitting_call_ns + margin) <= 0);
        CHECK(cumulative_excess(r.admitted, q, t0 - margin) <= 0);
    }
}

TEST_CASE("LeasedLimiter faults: a lease in hand is spent, then degraded within the timeout", "[redis][leased][faults]") {
    TALLY_REQUIRE_REDIS_SERVER(binary);
    tally_test::RedisServer server(binary);
    tally::redis::Options o;
    o.command_timeout = std::chrono::milliseconds{50};
    o.connect_timeout = std::chrono::milliseconds{50};
    auto client = tally::redis::Client::connect("127.0.0.1", server.port(), o);
    LeaseOptions lo;
    lo.max_lease = 64;
    lo.lease_ns = 30 * kSecond;
    LeasedLimiter leased(client, Quota::per_minute(6000), lo, o);
    for (int i = 0; i < 40 && leased.leased_tokens("f") < 8; ++i) REQUIRE(leased.try_acquire("f").allowed);
    const std::uint64_t held = leased.leased_tokens("f");
    REQUIRE(held >= 8);
    const std::uint64_t trips = leased.round_trips();
    server.pause();
    Resume guard{server};
    for (std::uint64_t i = 0; i < held; ++i) {
        const Decision d = leased.try_acquire("f");
        CHECK((d.allowed && !d.degraded));
    }
    CHECK(leased.round_trips() == trips);
    tally_test::WakeLatency wake;  // the bound: the deadline + 50 ms + what the scheduler added, measured
    const auto t = Clock::now();
    const Decision d = leased.try_acquire("f");
    const auto took = Clock::now() - t;
    CHECK(took <= std::chrono::milliseconds(100) + wake.worst_between(t, t + took));
    CHECK(d == Decision{false, 0, 50'000'000, 0, true});
    CHECK(leased.degraded_count() == 1);
    server.resume();
    bool back = false;
    for (int i = 0; i < 100 && !back; ++i) {
        back = !leased.try_acquire("f").degraded;
        if (!back) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(back);
}
