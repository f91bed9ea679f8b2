// Shared by the tally::redis tests: one redis-server per test binary (or a
// skip), a Client on it, and a raw command helper.
#pragma once

#include <tally/redis.hpp>

#include <cstdio>
#include <memory>
#include <string>

#include "catch.hpp"
#include "redis_server.hpp"

namespace tally_test {

// Skips the current test case (one line) where no redis-server exists, fails
// it under CI=true.
#define TALLY_REQUIRE_REDIS_SERVER(binary)                                                                   \
    const std::string binary = tally_test::redis_server_binary();                                          \
    if (binary.empty()) {                                                                                   \
        if (tally_test::in_ci()) FAIL("redis-server not found, and CI=true: the Redis tests must run in CI"); \
        std::printf("%s: redis-server not found (PATH, /usr/bin, /usr/sbin); skipped\n", __FILE__);         \
        return;                                                                                             \
    }

/// The binary-wide server, started on first use.
inline RedisServer& shared_server(const std::string& binary) {
    static std::unique_ptr<RedisServer> server;
    if (!server) server = std::make_unique<RedisServer>(binary);
    return *server;
}

inline tally::redis::Client connect(const RedisServer& s, tally::redis::Options o = {}) {
    // Generous timeouts for the tests that are not about timeouts: the
    // machine running them may be loaded.
    if (o.command_timeout == std::chrono::milliseconds{50}) o.command_timeout = std::chrono::milliseconds{2000};
    if (o.connect_timeout == std::chrono::milliseconds{200}) o.connect_timeout = std::chrono::milliseconds{2000};
    return tally::redis::Client::connect("127.0.0.1", s.port(), o);
}

inline tally::redis::Reply must(std::optional<tally::redis::Reply> r) {
    REQUIRE(r.has_value());
    return *r;
}

}  // namespace tally_test
