// Fleet-wide rate limits with the state in Redis: every process that runs
// this shares the same limits. Needs a redis-server on 127.0.0.1:6379 (or
// TALLY_REDIS_HOST / TALLY_REDIS_PORT, or a unix socket TALLY_REDIS_SOCKET;
// TALLY_REDIS_PASSWORD, TALLY_REDIS_USER and TALLY_REDIS_DB for a managed
// server; TALLY_REDIS_TIMEOUT_MS for a slow one: its connect and command
// timeout); without one it says why and exits 1.
//
//   redis-server --port 6379 &   ./example_fleet_limits
#include <tally/redis.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

void print(const char* what, const tally::Decision& d) {
    std::printf("%-34s %s remaining=%llu retry_after=%.3f s reset_after=%.3f s%s\n", what,
                d.allowed ? "ALLOW" : "DENY ", static_cast<unsigned long long>(d.remaining),
                d.retry_after_ns == tally::never ? -1.0 : static_cast<double>(d.retry_after_ns) / 1e9,
                static_cast<double>(d.reset_after_ns) / 1e9, d.degraded ? " (degraded: Redis failed)" : "");
}

}  // namespace

int main() {
    const char* host = std::getenv("TALLY_REDIS_HOST");
    const char* port = std::getenv("TALLY_REDIS_PORT");
    tally::redis::Options options;
    options.key_prefix = "tally-example:";
    options.on_error = tally::redis::FailMode::closed;  // Redis down: deny (FailMode::open would admit)
    // Credentials and the database belong to the Client: every pooled
    // connection is opened with them (command() refuses AUTH and SELECT).
    if (const char* password = std::getenv("TALLY_REDIS_PASSWORD")) options.password = password;
    if (const char* user = std::getenv("TALLY_REDIS_USER")) options.user = user;
    if (const char* db = std::getenv("TALLY_REDIS_DB")) options.database = std::atoi(db);
    if (const char* ms = std::getenv("TALLY_REDIS_TIMEOUT_MS"))
        options.connect_timeout = options.command_timeout = std::chrono::milliseconds(std::atoi(ms));
    const char* socket = std::getenv("TALLY_REDIS_SOCKET");
    auto client = socket != nullptr
                      ? tally::redis::Client::connect_unix(socket, options)
                      : tally::redis::Client::connect(host ? host : "127.0.0.1", port ? std::atoi(port) : 6379, options);
    const auto pong = client.command({"PING"});
    if (!pong || pong->str != "PONG") {
        std::printf("fleet_limits: no Redis reachable (%s); start redis-server to run this example\n",
                    client.last_error().c_str());
        return 1;
    }

    // 1. One limit per API key, decided by Redis's clock: GCRA, 5 per second, bursts of 3.
    tally::redis::GcraLimiter per_key(client, tally::Quota::per_second(5).with_burst(3));  // the Client's Options
    for (int i = 0; i < 4; ++i) print("api-key:42", per_key.try_acquire("api-key:42"));

    // 2. Tiers: the same limiter, a per-call quota for paying keys.
    print("api-key:paid (100/s)", per_key.try_acquire("api-key:paid", tally::Quota::per_second(100)));

    // 3. Per user AND per tenant AND global, all or nothing: a denied call charges none.
    const tally::redis::Limit limits[] = {
        {"user:7", tally::Quota::per_minute(2), 1},
        {"tenant:acme", tally::Quota::per_minute(1000), 1},
        {"global", tally::Quota::per_second(10'000), 1},
    };
    for (int i = 0; i < 3; ++i) print("user:7 + tenant:acme + global", per_key.try_acquire_all(limits));

    // 4. Many keys in one round trip.
    std::vector<std::string_view> keys{"batch:a", "batch:b", "batch:a", "batch:c"};
    std::vector<tally::Decision> out(keys.size(), tally::Decision{false, 0, 0, 0});
    per_key.try_acquire_batch(keys, out, 2);
    for (std::size_t i = 0; i < keys.size(); ++i) print(std::string(keys[i]).c_str(), out[i]);

    // 5. A sliding-window counter (10 buckets of 6 s): 3 per minute. Each key
    //    holds one limiter's state: a key shared with another limiter kind is
    //    reported as a foreign value (degraded), never misread.
    tally::redis::SlidingWindowLimiter<> per_minute(client, tally::Quota::per_minute(3));
    for (int i = 0; i < 4; ++i) print("page-views:user:7", per_minute.try_acquire("page-views:user:7"));

    std::printf("round trips: %llu, degraded answers: %llu\n", static_cast<unsigned long long>(client.round_trips()),
                static_cast<unsigned long long>(per_key.degraded_count() + per_minute.degraded_count()));
    return per_key.degraded_count() + per_minute.degraded_count() == 0 ? 0 : 1;  // every answer came from Redis
}
