// tally::redis on Redis Cluster: CRC16 slots and hash tags (no server), then
// against a real 3-master cluster started on free loopback ports: routing
// with keys on every master, decision identity with tally::Gcra and
// tally::SlidingWindowLimiter, pipelined batches split per node, MOVED and
// ASK while a slot migrates, the cross-slot refusal, and a killed node that
// degrades its own slots only.
#include <tally/redis.hpp>
#include <tally/limit/gcra.hpp>
#include <tally/limit/sliding_window.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "catch.hpp"
#include "redis_test_support.hpp"
#include "test_support.hpp"
#include "wake_latency.hpp"

using tally::Decision;
using tally::Quota;
using tally::redis::cluster_slot;
using tally::redis::crc16;
using tally::redis::hash_tag;
using tally::redis::Reply;

TEST_CASE("cluster routing: CRC16 and slots as Redis Cluster computes them", "[redis][cluster]") {
    // The specification's check value, and CLUSTER KEYSLOT examples from the
    // Redis documentation.
    static_assert(crc16("123456789") == 0x31C3);
    CHECK(crc16("") == 0);
    CHECK(cluster_slot("123456789") == 0x31C3);
    CHECK(cluster_slot("somekey") == 11058);
    CHECK(cluster_slot("foo{hash_tag}") == 2515);
    CHECK(cluster_slot("bar{hash_tag}") == 2515);
    // Binary keys are bytes.
    const std::string binary("a\0b", 3);
    CHECK(cluster_slot(binary) == (crc16(binary) & 16383));
    CHECK(crc16(binary) != crc16("a"));
}

TEST_CASE("cluster routing: hash tags", "[redis][cluster]") {
    CHECK(hash_tag("{tenant:7}:user:42") == "tenant:7");
    CHECK(hash_tag("tally:{tenant:7}:user:42") == "tenant:7");
    CHECK(cluster_slot("tally:{tenant:7}:user:42") == cluster_slot("{tenant:7}:global"));
    CHECK(hash_tag("{}x") == "{}x");          // empty tag: the whole key
    CHECK(hash_tag("{x") == "{x");            // no closing brace
    CHECK(hash_tag("a}{b}c") == "b");         // the first '{', then the first '}' after it
    CHECK(hash_tag("{a}{b}") == "a");
    CHECK(hash_tag("{{a}}") == "{a");
    CHECK(hash_tag("plain") == "plain");
}

TEST_CASE("cluster client: seeds are host:port", "[redis][cluster]") {
    using tally::redis::Client;
    CHECK_THROWS_WITH(Client::connect_cluster({}),
                      "tally::redis::Client::connect_cluster: number of seeds 0 is out of range [1, 1024]");
    CHECK_THROWS_WITH(Client::connect_cluster({"127.0.0.1"}),
                      "tally::redis::Client::connect_cluster: seed \"127.0.0.1\" is not host:port");
    CHECK_THROWS_WITH(Client::connect_cluster({"127.0.0.1:x"}),
                      "tally::redis::Client::connect_cluster: seed \"127.0.0.1:x\" is not host:port");
    CHECK_THROWS_WITH(Client::connect_cluster({":7000"}),
                      "tally::redis::Client::connect_cluster: seed \":7000\" is not host:port");
    CHECK_THROWS_WITH(Client::connect_cluster({"127.0.0.1:70000"}),
                      "tally::redis::Client::connect_cluster: seed port 70000 is out of range [1, 65535]");
    // Nothing listens: a usable client whose calls are degraded, never a throw.
    tally::redis::Options o;
    o.connect_timeout = std::chrono::milliseconds(100);
    auto client = Client::connect_cluster({"127.0.0.1:1"}, o);
    CHECK(client.is_cluster());
    CHECK_FALSE(client.connected());
    CHECK(client.last_error().find("cluster slot map:") == 0);
    tally::redis::GcraLimiter limiter(client, Quota::per_second(10), o);
    const Decision d = limiter.try_acquire_at("k", 0);
    CHECK(d.degraded);
    CHECK_FALSE(d.allowed);
}

namespace {

constexpr std::uint64_t kSecond = 1'000'000'000;

using tally::test::show;

// Skips (one line) without redis-server or redis-cli; fails under CI.
#define TALLY_REQUIRE_REDIS_CLUSTER()                                                                        \
    TALLY_REQUIRE_REDIS_SERVER(binary);                                                                      \
    const std::string cli = tally_test::redis_cli_binary();                                                  \
    if (cli.empty()) {                                                                                       \
        if (tally_test::in_ci()) FAIL("redis-cli not found, and CI=true: the cluster tests must run in CI"); \
        std::printf("%s: redis-cli not found; skipped\n", __FILE__);                                         \
        return;                                                                                              \
    }

// The binary-wide cluster, started on first use.
tally_test::RedisCluster& shared_cluster(const std::string& server, const std::string& cli) {
    static std::unique_ptr<tally_test::RedisCluster> c;
    if (!c) c = std::make_unique<tally_test::RedisCluster>(server, cli);
    return *c;
}

tally::redis::Options generous() {
    tally::redis::Options o;
    o.command_timeout = std::chrono::milliseconds(2000);
    o.connect_timeout = std::chrono::milliseconds(2000);
    return o;
}

// A plain (single-node) client per node, for administration.
std::vector<tally::redis::Client> admins(tally_test::RedisCluster& c) {
    std::vector<tally::redis::Client> out;
    for (std::size_t i = 0; i < c.size(); ++i) out.push_back(tally::redis::Client::connect("127.0.0.1", c.port(i), generous()));
    return out;
}

// The nodes on which `key` exists (EXISTS answers MOVED on the others).
std::vector<std::size_t> holders(std::vector<tally::redis::Client>& nodes, const std::string& key) {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        const Reply r = tally_test::must(nodes[i].command({"EXISTS", key}));
        if (r.type == Reply::Type::integer && r.integer == 1) out.push_back(i);
    }
    return out;
}

std::string node_id(tally::redis::Client& node) {
    const Reply r = tally_test::must(node.command({"CLUSTER", "MYID"}));
    REQUIRE(r.type == Reply::Type::string);
    return r.str;
}

// The node serving `slot`, by CLUSTER SLOTS as node 0 sees it.
std::size_t owner_of(tally_test::RedisCluster& c, tally::redis::Client& any, std::uint32_t slot) {
    const Reply r = tally_test::must(any.command({"CLUSTER", "SLOTS"}));
    for (const Reply& range : r.elements)
        if (range.elements[0].integer <= slot && slot <= static_cast<std::uint32_t>(range.elements[1].integer))
            for (std::size_t i = 0; i < c.size(); ++i)
                if (range.elements[2].elements[1].integer == c.port(i)) return i;
    FAIL("slot " << slot << " has no owner");
    return 0;
}

// Quotas with an emission interval of at least a minute: a key's TTL
// outlives the test while caller-supplied times run faster than real time.
const std::vector<Quota>& slow_quotas() {
    static const std::vector<Quota> q = {Quota::per_minute(1), Quota::per_hour(6), Quota::per_hour(7).with_burst(3),
                                         Quota::per_day(360), Quota{3, 370 * kSecond + 11, 5}};
    return q;
}

}  // namespace

TEST_CASE("cluster: keys route to their slot's master, decisions equal tally::Gcra", "[redis][cluster]") {
    TALLY_REQUIRE_REDIS_CLUSTER();
    auto& cluster = shared_cluster(binary, cli);
    auto nodes = admins(cluster);
    auto client = tally::redis::Client::connect_cluster({cluster.seeds()[1]}, generous());  // one seed suffices
    REQUIRE(client.is_cluster());
    REQUIRE(client.connected());
    tally::redis::Options o = generous();
    o.key_prefix = "route:";
    tally::redis::GcraLimiter limiter(client, slow_quotas()[0], o);

    // Our CRC16 agrees with the servers.
    for (const char* k : {"a", "route:user:1", "route:{tenant:7}:user:42", "{x}y"}) {
        const Reply r = tally_test::must(nodes[0].command({"CLUSTER", "KEYSLOT", k}));
        CHECK(r.integer == static_cast<long long>(cluster_slot(k)));
    }

    // Differential: random (key, time, cost, quota) through the cluster and a
    // local tally::Gcra per key, one call at a time and in batches.
    tally::test::Rng rng(20261130);
    constexpr std::size_t kKeys = 48;
    std::vector<std::string> names;
    std::vector<tally::Gcra> local;
    std::vector<std::uint64_t> now(kKeys, 1'764'000'000 * kSecond);
    for (std::size_t k = 0; k < kKeys; ++k) {
        names.push_back(k % 4 == 3 ? "{tenant:" + std::to_string(k % 5) + "}:user:" + std::to_string(k)
                                   : "user:" + std::to_string(k));
        local.emplace_back(slow_quotas()[k % slow_quotas().size()]);
    }
    const std::size_t ops = tally::test::big(3000, 600);
    for (std::size_t op = 0; op < ops; ++op) {
        const std::size_t k = rng.below(kKeys);
        now[k] += rng.below(40 * kSecond);
        const std::uint64_t cost = rng.below(10) == 0 ? 0 : 1 + rng.below(3);
        const Quota& q = slow_quotas()[k % slow_quotas().size()];
        const Decision want = local[k].try_acquire(now[k], cost);
        const Decision got = limiter.try_acquire_at(names[k], q, now[k], cost);
        if (got != want) {
            INFO("op " << op << " key " << names[k] << " want " << show(want) << " got " << show(got) << " error "
                       << limiter.last_error());
            REQUIRE(got == want);
        }
    }
    // Every key lives on exactly the master of its slot, and all three
    // masters hold some.
    std::set<std::size_t> used;
    for (std::size_t k = 0; k < kKeys; ++k) {
        const auto h = holders(nodes, "route:" + names[k]);
        REQUIRE(h.size() == 1);
        CHECK(h[0] == owner_of(cluster, nodes[0], cluster_slot("route:" + names[k])));
        used.insert(h[0]);
    }
    CHECK(used.size() == 3);

    // Batches: one quota, keys on every node, repeats; split per node and
    // reassembled in order.
    tally::redis::GcraLimiter batcher(client, Quota::per_hour(20).with_burst(5), o);
    std::vector<tally::Gcra> blocal(16, tally::Gcra(Quota::per_hour(20).with_burst(5)));
    std::vector<std::string> bnames;
    for (int i = 0; i < 16; ++i) bnames.push_back("batch:" + std::to_string(i));
    std::uint64_t t = 1'764'000'000 * kSecond;
    for (int round = 0; round < 12; ++round) {
        std::vector<std::size_t> pick;
        for (int j = 0; j < 40; ++j) pick.push_back(rng.below(16));
        std::vector<std::string_view> keys;
        for (const auto p : pick) keys.emplace_back(bnames[p]);
        std::vector<Decision> got(keys.size());
        t += rng.below(200 * kSecond);
        batcher.try_acquire_batch_at(keys, got, t);
        for (std::size_t j = 0; j < pick.size(); ++j) {
            const Decision want = blocal[pick[j]].try_acquire(t, 1);
            INFO("round " << round << " position " << j << " want " << show(want) << " got " << show(got[j]));
            REQUIRE(got[j] == want);
        }
    }
    CHECK(limiter.degraded_count() == 0);
    CHECK(batcher.degraded_count() == 0);

    // The sliding window runs on the same Client type unchanged.
    const Quota sq{5, 600 * kSecond};
    tally::redis::SlidingWindowLimiter<4> remote(client, sq, o);
    std::vector<tally::SlidingWindowLimiter<std::uint32_t, 4>> slocal(6, tally::SlidingWindowLimiter<std::uint32_t, 4>(sq));
    std::vector<std::uint64_t> snow(6, 1'764'000'000 * kSecond);
    for (std::size_t op = 0; op < tally::test::big(600, 150); ++op) {
        const std::size_t k = rng.below(6);
        snow[k] += rng.below(remote.bucket_ns() / 2 + 1);
        const Decision want = slocal[k].try_acquire(snow[k], 1);
        const Decision got = remote.try_acquire_at("sw:" + std::to_string(k), snow[k], 1);
        INFO("sliding op " << op << " want " << show(want) << " got " << show(got));
        REQUIRE(got == want);
    }
}

TEST_CASE("cluster: multi-limit calls need one slot; refused before anything is charged", "[redis][cluster]") {
    TALLY_REQUIRE_REDIS_CLUSTER();
    auto& cluster = shared_cluster(binary, cli);
    auto client = tally::redis::Client::connect_cluster(cluster.seeds(), generous());
    tally::redis::Options o = generous();
    o.key_prefix = "multi:";
    tally::redis::GcraLimiter limiter(client, Quota::per_hour(10), o);
    REQUIRE(cluster_slot("multi:user:1") != cluster_slot("multi:tenant:9"));
    const tally::redis::Limit spans[] = {{"user:1", Quota::per_hour(10), 1}, {"tenant:9", Quota::per_hour(100), 1}};
    CHECK_THROWS_WITH(
        limiter.try_acquire_all_at(spans, 0),
        "tally::redis::GcraLimiter::try_acquire_all: keys \"user:1\" (hash slot " +
            std::to_string(cluster_slot("multi:user:1")) + ") and \"tenant:9\" (hash slot " +
            std::to_string(cluster_slot("multi:tenant:9")) +
            ") differ; on a Redis Cluster the keys of one call must share a slot: give them one hash tag, e.g. "
            "{tenant:7}:user:42 and {tenant:7}:global");
    CHECK_THROWS_AS(limiter.try_acquire_all(spans), std::invalid_argument);
    // Nothing was charged, nothing was sent.
    CHECK(tally_test::must(client.command({"EXISTS", "multi:user:1"})).integer == 0);
    CHECK(tally_test::must(client.command({"EXISTS", "multi:tenant:9"})).integer == 0);
    CHECK(limiter.degraded_count() == 0);

    // One hash tag: all or nothing on the tag's master.
    const tally::redis::Limit tagged[] = {{"{tenant:7}:user:42", Quota::per_hour(2), 1},
                                          {"{tenant:7}:global", Quota::per_hour(3), 1}};
    tally::Gcra user(Quota::per_hour(2)), global(Quota::per_hour(3));
    for (int i = 0; i < 5; ++i) {
        const std::uint64_t t = 1'764'000'000 * kSecond + static_cast<std::uint64_t>(i);
        const Decision d = limiter.try_acquire_all_at(tagged, t);
        tally::Gcra u = user, g = global;
        const Decision du = u.try_acquire(t, 1), dg = g.try_acquire(t, 1);
        CHECK_FALSE(d.degraded);
        CHECK(d.allowed == (du.allowed && dg.allowed));
        if (d.allowed) {
            user = u;
            global = g;
        }
    }
    CHECK(tally_test::must(client.command({"EXISTS", "multi:{tenant:7}:global"})).integer == 1);
}

TEST_CASE("cluster: MOVED and ASK while a slot migrates; decisions stay exact", "[redis][cluster]") {
    TALLY_REQUIRE_REDIS_CLUSTER();
    auto& cluster = shared_cluster(binary, cli);
    auto nodes = admins(cluster);
    auto client = tally::redis::Client::connect_cluster(cluster.seeds(), generous());
    tally::redis::Options o = generous();
    o.key_prefix = "mig:";
    const Quota q = Quota::per_hour(30).with_burst(4);
    tally::redis::GcraLimiter limiter(client, q, o);

    // Ten keys in one slot (one hash tag), and a tagged key set per round.
    const std::string tag = "{moving}";
    const std::uint32_t slot = cluster_slot(tag);
    const std::size_t from = owner_of(cluster, nodes[0], slot);
    const std::size_t to = (from + 1) % cluster.size();
    const std::string from_id = node_id(nodes[from]), to_id = node_id(nodes[to]);
    constexpr std::size_t kKeys = 10;
    std::vector<std::string> names;
    for (std::size_t k = 0; k < kKeys; ++k) names.push_back(tag + ":k" + std::to_string(k));
    std::vector<tally::Gcra> local(kKeys, tally::Gcra(q));
    tally::test::Rng rng(4242);
    std::uint64_t t = 1'764'000'000 * kSecond;
    auto run = [&](std::size_t ops, std::size_t only_below) {  // keys [0, only_below)
        for (std::size_t op = 0; op < ops; ++op) {
            t += rng.below(30 * kSecond);
            const std::size_t k = rng.below(only_below);
            const Decision want = local[k].try_acquire(t, 1);
            const Decision got = limiter.try_acquire_at(names[k], t, 1);
            INFO("op " << op << " key " << names[k] << " want " << show(want) << " got " << show(got) << " error "
                       << limiter.last_error());
            REQUIRE(got == want);
        }
        // And a batch over them.
        std::vector<std::string_view> keys;
        for (std::size_t k = 0; k < only_below; ++k) keys.emplace_back(names[k]);
        std::vector<Decision> got(keys.size());
        t += kSecond;
        limiter.try_acquire_batch_at(keys, got, t);
        for (std::size_t k = 0; k < only_below; ++k) {
            const Decision want = local[k].try_acquire(t, 1);
            INFO("batch key " << names[k] << " want " << show(want) << " got " << show(got[k]) << " error "
                               << limiter.last_error());
            REQUIRE(got[k] == want);
        }
    };
    run(60, kKeys / 2);  // keys 0..4 exist on `from`; 5..9 do not yet

    auto ok = [](const std::optional<Reply>& r) {
        REQUIRE(r.has_value());
        INFO(r->str);
        REQUIRE(r->type == Reply::Type::status);
    };
    const std::string s = std::to_string(slot);
    ok(nodes[to].command({"CLUSTER", "SETSLOT", s, "IMPORTING", from_id}));
    ok(nodes[from].command({"CLUSTER", "SETSLOT", s, "MIGRATING", to_id}));
    // Half-way: keys 0, 1 moved; 2..4 still on `from`; 5..9 new, so created on
    // `to` through ASK.
    const std::string to_port = std::to_string(cluster.port(to));
    ok(nodes[from].command({"MIGRATE", "127.0.0.1", to_port, "", "0", "5000", "KEYS", "mig:" + names[0],
                            "mig:" + names[1]}));
    run(80, kKeys);
    // Moved keys answer ASK on `from` and exist on `to` (after ASKING).
    const Reply asked = tally_test::must(nodes[from].command({"EXISTS", "mig:" + names[0]}));
    CHECK(asked.type == Reply::Type::error);
    CHECK(asked.str.rfind("ASK " + s + " 127.0.0.1:" + to_port, 0) == 0);
    // ASKING holds for the next command of one connection only: the pooled
    // Client refuses it; the moved keys are counted on `to` below.
    CHECK_THROWS_AS(nodes[to].command({"ASKING"}), std::invalid_argument);
    CHECK(tally_test::must(nodes[from].command({"EXISTS", "mig:" + names[3]})).integer == 1);
    CHECK(tally_test::must(nodes[to].command({"CLUSTER", "COUNTKEYSINSLOT", s})).integer == 7);  // via ASK
    // Finish: move the rest, then give the slot to `to` everywhere.
    ok(nodes[from].command({"MIGRATE", "127.0.0.1", to_port, "", "0", "5000", "KEYS", "mig:" + names[2],
                            "mig:" + names[3], "mig:" + names[4]}));
    for (const std::size_t i : {to, from}) ok(nodes[i].command({"CLUSTER", "SETSLOT", s, "NODE", to_id}));
    for (std::size_t i = 0; i < cluster.size(); ++i)
        if (i != to && i != from) ok(nodes[i].command({"CLUSTER", "SETSLOT", s, "NODE", to_id}));
    const std::uint64_t trips = client.round_trips();
    run(80, kKeys);  // the client still maps the slot to `from`: MOVED, then a new map
    CHECK(client.round_trips() - trips <= 81 + 3);  // one MOVED detour and one refresh, not one per call
    CHECK(tally_test::must(nodes[to].command({"CLUSTER", "COUNTKEYSINSLOT", s})).integer == 10);
    CHECK(tally_test::must(nodes[from].command({"CLUSTER", "COUNTKEYSINSLOT", s})).integer == 0);
    CHECK(limiter.degraded_count() == 0);
}

TEST_CASE("cluster: TRYAGAIN is retried with backoff until the call's deadline", "[redis][cluster]") {
    TALLY_REQUIRE_REDIS_CLUSTER();
    auto& cluster = shared_cluster(binary, cli);
    auto nodes = admins(cluster);
    tally::redis::Options o;
    o.key_prefix = "try:";
    o.command_timeout = std::chrono::milliseconds(150);
    o.connect_timeout = std::chrono::milliseconds(500);
    auto client = tally::redis::Client::connect_cluster(cluster.seeds(), o);
    const Quota q = Quota::per_hour(30);
    tally::redis::GcraLimiter limiter(client, q);
    // Two keys of one slot; move one of them: a two-key call finds one key on
    // each node and is answered TRYAGAIN until the other moves too.
    const std::string tag = "{again}";
    const std::string s = std::to_string(cluster_slot(tag));
    const std::size_t from = owner_of(cluster, nodes[0], cluster_slot(tag));
    const std::size_t to = (from + 1) % cluster.size();
    const std::string from_id = node_id(nodes[from]), to_id = node_id(nodes[to]);
    const std::string ka = tag + "a", kb = tag + "b";
    const tally::redis::Limit both[2] = {{ka, q, 1}, {kb, q, 1}};
    REQUIRE_FALSE(limiter.try_acquire_all(both).degraded);
    auto ok = [](const std::optional<Reply>& r) {
        REQUIRE(r.has_value());
        INFO(r->str);
        REQUIRE(r->type == Reply::Type::status);
    };
    ok(nodes[to].command({"CLUSTER", "SETSLOT", s, "IMPORTING", from_id}));
    ok(nodes[from].command({"CLUSTER", "SETSLOT", s, "MIGRATING", to_id}));
    const std::string to_port = std::to_string(cluster.port(to));
    ok(nodes[from].command({"MIGRATE", "127.0.0.1", to_port, "", "0", "5000", "KEYS", "try:" + tag + "a"}));
    // Split for good: retried until the deadline (not a fixed count), then
    // degraded with the server's reason.
    tally_test::WakeLatency wake;
    const auto t0 = std::chrono::steady_clock::now();
    const Decision split = limiter.try_acquire_all(both);
    const auto took = std::chrono::steady_clock::now() - t0;
    const auto late = wake.worst_between(t0, t0 + took);  // what the scheduler added, measured
    INFO("took " << std::chrono::duration_cast<std::chrono::microseconds>(took).count() << " us: "
                 << limiter.last_error());
    CHECK(split.degraded);
    // The last retry either got TRYAGAIN again or was cut by the deadline.
    CHECK((limiter.last_error().find("TRYAGAIN") != std::string::npos ||
           limiter.last_error().find("timed out") != std::string::npos));
    CHECK(took >= o.command_timeout);  // it ends only at its deadline
    CHECK(took <= o.command_timeout + std::chrono::milliseconds(25) + late);
    // The migration finishes about 40 ms into a call: the retries then
    // succeed. This call's deadline is generous, so a loaded machine that
    // delays the mover cannot fail it (the deadline was checked above).
    tally::redis::Options patient = o;
    patient.command_timeout = std::chrono::seconds(20);
    auto patient_client = tally::redis::Client::connect_cluster(cluster.seeds(), patient);
    tally::redis::GcraLimiter patient_limiter(patient_client, q);
    std::thread mover([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(40));
        auto admin = tally::redis::Client::connect("127.0.0.1", cluster.port(from), generous());
        (void)admin.command({"MIGRATE", "127.0.0.1", to_port, "", "0", "5000", "KEYS", "try:" + tag + "b"});
    });
    const Decision later = patient_limiter.try_acquire_all(both);
    mover.join();
    CHECK_FALSE(later.degraded);
    CHECK((later.allowed && later.remaining == 28));
    for (const std::size_t i : {to, from}) ok(nodes[i].command({"CLUSTER", "SETSLOT", s, "NODE", to_id}));
    for (std::size_t i = 0; i < cluster.size(); ++i)
        if (i != to && i != from) ok(nodes[i].command({"CLUSTER", "SETSLOT", s, "NODE", to_id}));
}

// Last: it kills a node (and restarts it empty).
TEST_CASE("cluster: a killed node degrades its own slots only", "[redis][cluster]") {
    TALLY_REQUIRE_REDIS_CLUSTER();
    auto& cluster = shared_cluster(binary, cli);
    auto nodes = admins(cluster);
    tally::redis::Options o;
    o.key_prefix = "kill:";
    o.command_timeout = std::chrono::milliseconds(500);
    o.connect_timeout = std::chrono::milliseconds(500);
    o.on_error = tally::redis::FailMode::closed;
    auto client = tally::redis::Client::connect_cluster(cluster.seeds(), o);
    const Quota q = Quota::per_hour(100).with_burst(10);
    tally::redis::GcraLimiter limiter(client, q, o);
    constexpr std::size_t kKeys = 30;
    std::vector<std::string> names;
    std::vector<std::size_t> owner;
    std::vector<tally::Gcra> local(kKeys, tally::Gcra(q));
    for (std::size_t k = 0; k < kKeys; ++k) {
        names.push_back("user:" + std::to_string(k));
        owner.push_back(owner_of(cluster, nodes[0], cluster_slot("kill:" + names[k])));
    }
    const std::size_t victim = 2;
    REQUIRE(std::count(owner.begin(), owner.end(), victim) > 0);
    REQUIRE(std::count(owner.begin(), owner.end(), victim) < static_cast<long>(kKeys));
    tally::test::Rng rng(99);
    std::uint64_t t = 1'764'000'000 * kSecond;
    tally_test::WakeLatency wake;
    auto round = [&](bool victim_down) {
        for (std::size_t op = 0; op < 3 * kKeys; ++op) {
            const std::size_t k = rng.below(kKeys);
            t += rng.below(20 * kSecond);
            const auto start = std::chrono::steady_clock::now();
            const Decision got = limiter.try_acquire_at(names[k], t, 1);
            const auto took = std::chrono::steady_clock::now() - start;
            // Its deadline, plus 25 ms of work, plus what the scheduler was
            // measured to add meanwhile.
            CHECK(took <= o.command_timeout + std::chrono::milliseconds(25) + wake.worst_between(start, start + took));
            INFO("op " << op << " key " << names[k] << " on node " << owner[k] << " got " << show(got));
            if (victim_down && owner[k] == victim) {
                REQUIRE(got.degraded);
                REQUIRE_FALSE(got.allowed);
                REQUIRE(got.retry_after_ns == 500'000'000);
            } else {
                const Decision want = local[k].try_acquire(t, 1);
                REQUIRE(got == want);
            }
        }
    };
    round(false);
    cluster.node(victim).kill();
    round(true);
    // Batches too: the victim's keys degraded, the rest exact.
    std::vector<std::string_view> keys(names.begin(), names.end());
    std::vector<Decision> got(kKeys);
    t += kSecond;
    limiter.try_acquire_batch_at(keys, got, t);
    for (std::size_t k = 0; k < kKeys; ++k) {
        INFO("batch key " << names[k] << " on node " << owner[k] << " got " << show(got[k]));
        if (owner[k] == victim) {
            CHECK(got[k].degraded);
        } else {
            CHECK(got[k] == local[k].try_acquire(t, 1));
        }
    }
    // Back on its port (empty, same slots): it serves again.
    cluster.node(victim).restart();
    cluster.wait_ok();
    for (std::size_t k = 0; k < kKeys; ++k)
        if (owner[k] == victim) local[k] = tally::Gcra(q);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    bool recovered = false;
    for (int i = 0; i < 100 && !recovered && std::chrono::steady_clock::now() < deadline; ++i) {
        std::size_t k = 0;
        while (owner[k] != victim) ++k;
        t += kSecond;
        const Decision d = limiter.try_acquire_at(names[k], t, 1);
        recovered = !d.degraded;
        if (recovered) CHECK(d == local[k].try_acquire(t, 1));
        else std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    CHECK(recovered);
}
