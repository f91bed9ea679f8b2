// One limit for a whole fleet at local speed: each process leases tokens
// from the shared GCRA state in Redis and decides locally until the lease is
// spent or expires. Needs a redis-server on 127.0.0.1:6379 (or
// TALLY_REDIS_HOST / TALLY_REDIS_PORT, or a unix socket TALLY_REDIS_SOCKET;
// TALLY_REDIS_TIMEOUT_MS for a slow server: its connect and command timeout);
// without one it says why and exits 1.
// On Redis Cluster, connect with Client::connect_cluster({"host:port", ...})
// instead: the limiter code is the same.
//
//   redis-server --port 6379 &   ./example_fleet_leases
#include <tally/redis.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>

int main() {
    const char* host = std::getenv("TALLY_REDIS_HOST");
    const char* port = std::getenv("TALLY_REDIS_PORT");
    tally::redis::Options options;
    options.key_prefix = "tally-example:";
    if (const char* ms = std::getenv("TALLY_REDIS_TIMEOUT_MS"))
        options.connect_timeout = options.command_timeout = std::chrono::milliseconds(std::atoi(ms));
    const char* socket = std::getenv("TALLY_REDIS_SOCKET");
    auto client = socket != nullptr
                      ? tally::redis::Client::connect_unix(socket, options)
                      : tally::redis::Client::connect(host ? host : "127.0.0.1", port ? std::atoi(port) : 6379, options);
    const auto pong = client.command({"PING"});
    if (!pong || pong->str != "PONG") {
        std::printf("fleet_leases: no Redis reachable (%s); start redis-server to run this example\n",
                    client.last_error().c_str());
        return 1;
    }

    // 10,000 requests per second per API key across the fleet. Leases of up
    // to 256 tokens live d = 4 x 256 emission intervals (102.4 ms); they are
    // charged against the burst less the tokens d emits, so the fleet never
    // admits more than one tally::Gcra would, over any window.
    tally::redis::LeaseOptions lease;
    lease.max_lease = 256;
    tally::redis::LeasedLimiter api(client, tally::Quota::per_second(10'000), lease);  // the Client's Options
    std::printf("lease lifetime %.1f ms, fleet burst %llu of %llu\n", static_cast<double>(api.lease_ns()) / 1e6,
                static_cast<unsigned long long>(api.lease_burst()),
                static_cast<unsigned long long>(api.quota().capacity()));

    // 20,000 requests over about 2 s (half the quota) on one key.
    const auto start = std::chrono::steady_clock::now();
    unsigned long long admitted = 0, requests = 0;
    while (requests < 20'000 && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
        const auto due = start + std::chrono::microseconds(100 * requests);
        while (std::chrono::steady_clock::now() < due) {
        }
        admitted += api.try_acquire("api-key:42").allowed;
        ++requests;
    }
    std::printf("admitted %llu of %llu requests with %llu round trips\n", admitted, requests,
                static_cast<unsigned long long>(api.round_trips()));

    // A key going idle: hand its unused tokens back to the fleet.
    api.release("api-key:42");
    std::printf("tokens leased %llu, handed back %llu; degraded answers %llu\n",
                static_cast<unsigned long long>(api.tokens_leased()),
                static_cast<unsigned long long>(api.tokens_returned()),
                static_cast<unsigned long long>(api.degraded_count()));
    return api.degraded_count() == 0 ? 0 : 1;  // every answer came from Redis
}
