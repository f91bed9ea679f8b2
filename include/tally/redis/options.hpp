// tally/redis/options.hpp: connection and limiter options of tally::redis.
#pragma once

#include "../detail/abi.hpp"

#include <chrono>
#include <string>

TALLY_BEGIN_NAMESPACE
namespace redis {

/// What a limiter answers when Redis cannot decide (down, slower than
/// command_timeout, an error reply, a foreign value under a key): `open`
/// admits, `closed` denies with retry_after_ns = command_timeout. Either way
/// the Decision has degraded = true and the limiter counts it.
enum class FailMode { open, closed };

/// Options of a Client (its timeouts) and of a limiter (key prefix, fail
/// mode, and command_timeout as the retry_after_ns of a closed-mode denial).
struct Options {
    /// Prepended to every key a limiter touches (binary-safe).
    std::string key_prefix = "tally:";
    /// First connection; a reconnect inside a call waits at most
    /// min(connect_timeout, command_timeout), so a call stays within
    /// command_timeout (plus scheduling) even while Redis is unreachable.
    std::chrono::milliseconds connect_timeout{200};
    /// Every read and write of a round trip.
    std::chrono::milliseconds command_timeout{50};
    FailMode on_error = FailMode::closed;
};

}  // namespace redis
TALLY_END_NAMESPACE
