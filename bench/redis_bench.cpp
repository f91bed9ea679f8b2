// tally::redis over loopback against a redis-server started here: decisions
// per second and round trips per decision for one key per round trip and for
// pipelined batches of 16, 64 and 256 keys, against the common Redis form of
// a sliding-window limit as the baseline: one Lua call per request that reads
// id:floor(t/W) and id:floor(t/W)-1, weights the previous count, and INCRs
// the current key with a TTL of 2W (the Cloudflare-style two-key counter).
// Skips with one line when no redis-server exists. The cluster rows run the
// same batches on a 3-master Redis Cluster (redis-cli joins it).
#include <benchmark/benchmark.h>

#include <tally/redis.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
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
}
BENCHMARK(BM_baseline_incr_expire)->UseRealTime();

void BM_gcra_one_call(benchmark::State& state) {
    auto client = connect();
    tally::redis::GcraLimiter limiter(client, tally::Quota::per_minute(1'000'000));
    const auto keys = key_names(1000);
    std::size_t i = 0;
    std::uint64_t decisions = 0, admitted = 0;
    (void)limiter.try_acquire("warm-up", 0);
    reset_stats(client);
    const std::uint64_t trips0 = client.round_trips();
    for (auto _ : state) {
        admitted += limiter.try_acquire(keys[i++ % keys.size()]).allowed;
        ++decisions;
    }
    benchmark::DoNotOptimize(admitted);
    if (limiter.degraded_count() != 0) state.SkipWithError(limiter.last_error().c_str());
    const std::uint64_t trips = client.round_trips() - trips0;
    report(state, decisions, trips, script_usec(client));
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
    (void)limiter.try_acquire("warm-up", 0);
    reset_stats(client);
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
    report(state, decisions, trips, script_usec(client));
}
BENCHMARK(BM_gcra_batch)->Arg(16)->Arg(64)->Arg(256)->UseRealTime();

void BM_sliding_window_one_call(benchmark::State& state) {
    auto client = connect();
    tally::redis::SlidingWindowLimiter<> limiter(client, tally::Quota::per_minute(1'000'000));
    const auto keys = key_names(1000);
    std::size_t i = 0;
    std::uint64_t decisions = 0, admitted = 0;
    (void)limiter.try_acquire("warm-up", 0);
    reset_stats(client);
    const std::uint64_t trips0 = client.round_trips();
    for (auto _ : state) {
        admitted += limiter.try_acquire(keys[i++ % keys.size()]).allowed;
        ++decisions;
    }
    benchmark::DoNotOptimize(admitted);
    if (limiter.degraded_count() != 0) state.SkipWithError(limiter.last_error().c_str());
    const std::uint64_t trips = client.round_trips() - trips0;
    report(state, decisions, trips, script_usec(client));
}
BENCHMARK(BM_sliding_window_one_call)->UseRealTime();

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
