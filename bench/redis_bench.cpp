// tally::redis over loopback against a redis-server started here: decisions
// per second and round trips per decision for one key per round trip and for
// pipelined batches of 16, 64 and 256 keys, against the common Redis form of
// a sliding-window limit as the baseline: one Lua call per request that reads
// id:floor(t/W) and id:floor(t/W)-1, weights the previous count, and INCRs
// the current key with a TTL of 2W (the Cloudflare-style two-key counter).
// Skips with one line when no redis-server exists. The cluster rows run the
// same batches on a 3-master Redis Cluster (redis-cli joins it).
//
// Counters: ns_per_decision (wall), round_trips_per_decision,
// server_us_per_decision (script time from INFO commandstats) and, on Linux,
// server_cpu_us_per_decision: the server process's CPU time (scheduler
// statistics), network and command parsing included, and cpu_us_per_decision:
// that plus this client thread's CPU time. They compare the forms by the work
// they cost, which a machine shared with other jobs disturbs far less than
// wall time.
#include <benchmark/benchmark.h>

#include <tally/redis.hpp>
#include <tally/limit/gcra.hpp>
#include <tally/limit/keyed.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "redis_server.hpp"

namespace {

std::unique_ptr<tally_test::RedisServer> g_server;

tally::redis::Client connect() {
    tally::redis::Options o;
    o.command_timeout = std::chrono::milliseconds{5000};
    o.connect_timeout = std::chrono::milliseconds{5000};
    return tally::redis::Client::connect("127.0.0.1", g_server->port(), o);
}

std::vector<std::string> key_names(std::size_t n) {
    std::vector<std::string> k;
    for (std::size_t i = 0; i < n; ++i) k.push_back("user:" + std::to_string(i));
    return k;
}

// Server CPU spent in scripts (EVAL + EVALSHA) since the last reset, from
// INFO commandstats: less sensitive to a loaded machine than wall time.
double script_usec(tally::redis::Client& c) {
    const auto info = c.command({"INFO", "commandstats"});
    if (!info) return 0;
    double total = 0;
    for (const char* cmd : {"cmdstat_eval:", "cmdstat_evalsha:"}) {
        const auto at = info->str.find(cmd);
        if (at == std::string::npos) continue;
        const auto u = info->str.find("usec=", at);
        if (u != std::string::npos) total += std::strtod(info->str.c_str() + u + 5, nullptr);
    }
    return total;
}

void reset_stats(tally::redis::Client& c) { (void)c.command({"CONFIG", "RESETSTAT"}); }

// CPU time of the server's main thread so far, in ns (0 where
// /proc/<pid>/schedstat does not exist).
double server_cpu_ns() {
    std::ifstream f("/proc/" + std::to_string(g_server->pid()) + "/schedstat");
    double ns = 0;
    f >> ns;
    return ns;
}

double thread_cpu_ns() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

// Measures the server's CPU time across a benchmark run, and with this
// thread's, the CPU a decision costs on both sides of the socket.
struct ServerCpu {
    double start = server_cpu_ns();
    double client_start = thread_cpu_ns();
    void report(benchmark::State& state, std::uint64_t decisions) const {
        const double n = static_cast<double>(decisions == 0 ? 1 : decisions);
        const double server = server_cpu_ns() - start;
        state.counters["server_cpu_us_per_decision"] = server / 1000.0 / n;
        state.counters["cpu_us_per_decision"] = (server + thread_cpu_ns() - client_start) / 1000.0 / n;
    }
};

void report(benchmark::State& state, std::uint64_t decisions, std::uint64_t trips, double server_usec) {
    state.counters["server_us_per_decision"] = server_usec / static_cast<double>(decisions == 0 ? 1 : decisions);
    state.SetItemsProcessed(static_cast<std::int64_t>(decisions));
    state.counters["ns_per_decision"] =
        benchmark::Counter(static_cast<double>(decisions) / 1e9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    state.counters["round_trips_per_decision"] =
        static_cast<double>(trips) / static_cast<double>(decisions == 0 ? 1 : decisions);
}

// Baseline: the common two-key INCR script, one EVALSHA per request.
constexpr const char* baseline_script = R"lua(
local w, t = tonumber(ARGV[2]), tonumber(ARGV[3])
local cur = math.floor(t / w)
local ck, pk = KEYS[1] .. ':' .. cur, KEYS[1] .. ':' .. (cur - 1)
local prev = tonumber(redis.call('GET', pk) or '0')
local c = tonumber(redis.call('GET', ck) or '0')
if prev * (1 - (t % w) / w) + c + 1 > tonumber(ARGV[1]) then return 0 end
redis.call('INCR', ck)
redis.call('PEXPIRE', ck, 2 * w)
return 1
)lua";

void BM_baseline_incr_expire(benchmark::State& state) {
    auto client = connect();
    const auto sha = client.command({"SCRIPT", "LOAD", baseline_script});
    if (!sha || sha->type != tally::redis::Reply::Type::string) {
        state.SkipWithError("SCRIPT LOAD failed");
        return;
    }
    const auto keys = key_names(1000);
    std::size_t i = 0;
    std::uint64_t decisions = 0, admitted = 0;
    reset_stats(client);
    const std::uint64_t trips0 = client.round_trips();
    const ServerCpu cpu;
    for (auto _ : state) {
        const auto now_ms = std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count());
        const auto r = client.command({"EVALSHA", sha->str, "1", "base:" + keys[i++ % keys.size()], "1000000", "60000", now_ms});
        admitted += r && r->integer == 1;
        ++decisions;
    }
    benchmark::DoNotOptimize(admitted);
    const std::uint64_t trips = client.round_trips() - trips0;
    report(state, decisions, trips, script_usec(client));
    cpu.report(state, decisions);
}
BENCHMARK(BM_baseline_incr_expire)->UseRealTime();

// One try_acquire per round trip over 1000 keys, Redis time.
template <class Limiter>
void one_call_per_request(benchmark::State& state, tally::redis::Client& client, Limiter& limiter) {
    const auto keys = key_names(1000);
    std::size_t i = 0;
    std::uint64_t decisions = 0, admitted = 0;
    (void)limiter.try_acquire("warm-up", 0);
    reset_stats(client);
    const std::uint64_t trips0 = client.round_trips();
    const ServerCpu cpu;
    for (auto _ : state) {
        admitted += limiter.try_acquire(keys[i++ % keys.size()]).allowed;
        ++decisions;
    }
    benchmark::DoNotOptimize(admitted);
    if (limiter.degraded_count() != 0) state.SkipWithError(limiter.last_error().c_str());
    const std::uint64_t trips = client.round_trips() - trips0;
    report(state, decisions, trips, script_usec(client));
    cpu.report(state, decisions);
}

void BM_gcra_one_call(benchmark::State& state) {
    auto client = connect();
    tally::redis::GcraLimiter limiter(client, tally::Quota::per_minute(1'000'000));
    one_call_per_request(state, client, limiter);
}
BENCHMARK(BM_gcra_one_call)->UseRealTime();

void BM_gcra_batch(benchmark::State& state) {
    auto client = connect();
    tally::redis::GcraLimiter limiter(client, tally::Quota::per_minute(1'000'000));
    const auto n = static_cast<std::size_t>(state.range(0));
    const auto names = key_names(1024);
    std::vector<std::string_view> all(names.begin(), names.end());
    std::vector<tally::Decision> out(n, tally::Decision{false, 0, 0, 0});
    std::size_t at = 0;
    std::uint64_t decisions = 0, admitted = 0;
    {  // loads the batch script outside the timed loop
        const std::string_view warm[1] = {"warm-up"};
        tally::Decision w[1] = {tally::Decision{false, 0, 0, 0}};
        limiter.try_acquire_batch(warm, w, 0);
    }
    reset_stats(client);
    const std::uint64_t trips0 = client.round_trips();
    const ServerCpu cpu;
    for (auto _ : state) {
        limiter.try_acquire_batch(std::span<const std::string_view>(all.data() + at, n), out);
        at = (at + n) % (all.size() - n + 1);
        for (const auto& d : out) admitted += d.allowed;
        decisions += n;
    }
    benchmark::DoNotOptimize(admitted);
    if (limiter.degraded_count() != 0) state.SkipWithError(limiter.last_error().c_str());
    const std::uint64_t trips = client.round_trips() - trips0;
    report(state, decisions, trips, script_usec(client));
    cpu.report(state, decisions);
}
BENCHMARK(BM_gcra_batch)->Arg(16)->Arg(64)->Arg(256)->UseRealTime();

void BM_sliding_window_one_call(benchmark::State& state) {
    auto client = connect();
    tally::redis::Options o;
    o.key_prefix = "sw:";  // its own keys: a ring under a GCRA key is a foreign value
    tally::redis::SlidingWindowLimiter<> limiter(client, tally::Quota::per_minute(1'000'000), o);
    one_call_per_request(state, client, limiter);
}
BENCHMARK(BM_sliding_window_one_call)->UseRealTime();

// LeasedLimiter on one key at a fraction of its quota (caller's time: each
// decision advances the clock by emission interval / load), against
// BM_gcra_one_call's one round trip per request. Quota 10^6/s, leases of up
// to 1024 tokens living 4 ms.
void BM_leased_load(benchmark::State& state) {
    auto client = connect();
    const double load = static_cast<double>(state.range(0)) / 100.0;
    tally::redis::LeaseOptions lo;
    lo.max_lease = 1024;
    tally::redis::LeasedLimiter limiter(client, tally::Quota::per_second(1'000'000), lo);
    const auto step = static_cast<std::uint64_t>(1000.0 / load);  // ns of caller time per decision
    std::uint64_t now = 1'000'000'000'000'000ULL;
    static int run = 0;  // a fresh key per run: each run's clock starts over
    const std::string key = "lease:hot:" + std::to_string(run++);
    std::uint64_t decisions = 0, admitted = 0;
    reset_stats(client);
    const std::uint64_t trips0 = limiter.round_trips();
    for (auto _ : state) {
        admitted += limiter.try_acquire_at(key, now).allowed;
        now += step;
        ++decisions;
    }
    benchmark::DoNotOptimize(admitted);
    if (limiter.degraded_count() != 0) state.SkipWithError(limiter.last_error().c_str());
    if (admitted != decisions) state.SkipWithError("a request below the quota was refused");
    report(state, decisions, limiter.round_trips() - trips0, script_usec(client));
}
BENCHMARK(BM_leased_load)->Arg(1)->Arg(10)->Arg(50)->UseRealTime();

// A decision served from a lease (leases of 2^24 tokens: round trips are
// negligible) against the local ConcurrentKeyedLimiter<std::string, Gcra>,
// the same thread safety without Redis, on the same caller's clock.
void BM_leased_served(benchmark::State& state) {
    auto client = connect();
    const tally::Quota q = tally::Quota::per_second(100'000'000).with_burst(std::uint64_t{1} << 28);
    tally::redis::LeaseOptions lo;
    lo.max_lease = std::uint64_t{1} << 24;
    lo.lease_ns = q.window_ns;
    tally::redis::LeasedLimiter limiter(client, q, lo);
    std::uint64_t now = 3'000'000'000'000'000ULL, decisions = 0, admitted = 0;
    static int run = 0;
    const std::string key = "lease:served:" + std::to_string(run++);
    for (int i = 0; i < 64; ++i) (void)limiter.try_acquire_at(key, now += 100);  // grow the lease
    const std::uint64_t trips0 = limiter.round_trips();
    for (auto _ : state) {
        admitted += limiter.try_acquire_at(key, now).allowed;
        now += 100;
        ++decisions;
    }
    benchmark::DoNotOptimize(admitted);
    if (limiter.degraded_count() != 0) state.SkipWithError(limiter.last_error().c_str());
    report(state, decisions, limiter.round_trips() - trips0, 0);
}
BENCHMARK(BM_leased_served);

void BM_local_concurrent_keyed(benchmark::State& state) {
    const tally::Quota q = tally::Quota::per_second(100'000'000).with_burst(std::uint64_t{1} << 28);
    tally::ConcurrentKeyedLimiter<std::string, tally::Gcra> limiter(q, 1 << 16);
    const std::string key = "lease:served";
    std::uint64_t now = 3'000'000'000'000'000ULL, decisions = 0, admitted = 0;
    for (auto _ : state) {
        admitted += limiter.try_acquire(key, now).allowed;
        now += 100;
        ++decisions;
    }
    benchmark::DoNotOptimize(admitted);
    report(state, decisions, 0, 0);
}
BENCHMARK(BM_local_concurrent_keyed);

// Redis Cluster: a pipelined batch on a 3-master cluster on this machine
// (started on first use), against BM_gcra_batch on the single node above.
// On a cluster each key is its own script call, the batch split per node,
// written to every node before any reply is read.
tally_test::RedisCluster* cluster_or_skip(benchmark::State& state) {
    static std::unique_ptr<tally_test::RedisCluster> cluster;
    static std::string why;
    if (!cluster && why.empty()) {
        const std::string cli = tally_test::redis_cli_binary();
        if (cli.empty()) {
            why = "redis-cli not found; cluster rows skipped";
        } else {
            try {
                cluster = std::make_unique<tally_test::RedisCluster>(tally_test::redis_server_binary(), cli);
            } catch (const std::exception& e) {
                why = e.what();
            }
        }
    }
    if (!cluster) state.SkipWithError(why.c_str());
    return cluster.get();
}

void BM_cluster_gcra_batch(benchmark::State& state) {
    auto* cluster = cluster_or_skip(state);
    if (cluster == nullptr) return;
    tally::redis::Options o;
    o.command_timeout = std::chrono::milliseconds{5000};
    o.connect_timeout = std::chrono::milliseconds{5000};
    auto client = tally::redis::Client::connect_cluster(cluster->seeds(), o);
    tally::redis::GcraLimiter limiter(client, tally::Quota::per_minute(1'000'000));
    const auto n = static_cast<std::size_t>(state.range(0));
    const auto names = key_names(1024);
    std::vector<std::string_view> all(names.begin(), names.end());
    std::vector<tally::Decision> out(n, tally::Decision{false, 0, 0, 0});
    std::size_t at = 0;
    std::uint64_t decisions = 0, admitted = 0;
    limiter.try_acquire_batch(std::span<const std::string_view>(all.data(), n), out);  // scripts loaded everywhere
    std::vector<tally::redis::Client> nodes;  // INFO commandstats per node
    for (std::size_t i = 0; i < cluster->size(); ++i) {
        nodes.push_back(tally::redis::Client::connect("127.0.0.1", cluster->port(i), o));
        reset_stats(nodes.back());
    }
    const std::uint64_t trips0 = client.round_trips();
    for (auto _ : state) {
        limiter.try_acquire_batch(std::span<const std::string_view>(all.data() + at, n), out);
        at = (at + n) % (all.size() - n + 1);
        for (const auto& d : out) admitted += d.allowed;
        decisions += n;
    }
    benchmark::DoNotOptimize(admitted);
    if (limiter.degraded_count() != 0) state.SkipWithError(limiter.last_error().c_str());
    const std::uint64_t trips = client.round_trips() - trips0;
    double usec = 0;
    for (auto& node : nodes) usec += script_usec(node);
    report(state, decisions, trips, usec);
}
BENCHMARK(BM_cluster_gcra_batch)->Arg(16)->Arg(64)->Arg(256)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
    const std::string binary = tally_test::redis_server_binary();
    if (binary.empty()) {
        std::printf("bench_redis: redis-server not found (PATH, /usr/bin, /usr/sbin); skipped\n");
        return 0;
    }
    g_server = std::make_unique<tally_test::RedisServer>(binary);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    g_server.reset();
    return 0;
}
