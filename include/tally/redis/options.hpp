// tally/redis/options.hpp: connection and limiter options of tally::redis.
#pragma once

#include "../detail/abi.hpp"

#include <chrono>
#include <cstddef>
#include <string>

TALLY_BEGIN_NAMESPACE
namespace redis {

/// What a limiter answers when Redis cannot decide (down, slower than
/// command_timeout, an error reply, a foreign value under a key, a server
/// that may evict limiter keys): `open` admits, `closed` denies with
/// retry_after_ns = command_timeout. Either way the Decision has degraded =
/// true and the limiter counts it.
enum class FailMode { open, closed };

/// Options of a Client and of the limiters built from it. A limiter given
/// no Options of its own takes its Client's (key prefix, fail mode); the
/// Client's own decide every timeout, the pool and the server checks.
struct Options {
    /// Prepended to every key a limiter touches (binary-safe). The Client's
    /// prefix also names its lost-state sentinel, <key_prefix>!sentinel.
    std::string key_prefix = "tally:";
    /// Opening a connection: resolving the name (at Client::connect, then
    /// in the background), connecting, authenticating, selecting the
    /// database, reading the eviction policy and loading the scripts, all
    /// within one connect_timeout and never inside a call: connections are
    /// opened in the background and handed to calls ready.
    std::chrono::milliseconds connect_timeout{200};
    /// One deadline per call, from its entry: every connect, write, read,
    /// script reload, redirect and wait for a free connection of the call
    /// shares it; at the deadline the call answers with the fail mode.
    std::chrono::milliseconds command_timeout{50};
    FailMode on_error = FailMode::closed;
    /// Connections per server that threads sharing the Client use at once;
    /// 0 means min(hardware threads, 8). A thread that finds all busy waits
    /// for one only until its own deadline.
    std::size_t pool_size = 0;
    /// Allow a server whose maxmemory-policy can evict keys with a TTL
    /// (volatile-*, allkeys-*): evicted limiter state is silent
    /// over-admission, so by default a limiter refuses to start on one (and
    /// a Client answers degraded while connected to one).
    bool allow_evicting_server = false;
    /// Caller-time calls (try_acquire_at): how far the caller's clock may lag
    /// Redis's; each key's TTL covers it beyond the key's debt.
    std::chrono::milliseconds max_clock_skew{1000};
    /// Credentials sent with AUTH on every connection before anything else:
    /// `password` alone for requirepass, `user` and `password` for an ACL
    /// user (Redis 6+). Empty password: no AUTH.
    std::string user;
    std::string password;
    /// The database every connection SELECTs (0..2^31-1; a cluster has
    /// only database 0).
    int database = 0;
};

}  // namespace redis
TALLY_END_NAMESPACE
