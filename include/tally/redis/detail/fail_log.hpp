// tally/redis/detail/fail_log.hpp: what every Redis limiter does when a call
// fails: count it, keep the reason, answer with the fail mode's Decision.
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "../../detail/throw.hpp"
#include "../../limit/decision.hpp"
#include "../options.hpp"

TALLY_BEGIN_NAMESPACE
namespace redis::detail {

/// Degraded calls of one limiter. Thread-safe.
class FailLog {
  public:
    /// Records `why` and returns Options::on_error's answer, marked degraded:
    /// open admits; closed denies with retry_after_ns = command_timeout.
    Decision degraded(const Options& options, std::string why) {
        count_.fetch_add(1, std::memory_order_relaxed);
        {
            std::lock_guard<std::mutex> lock(mu_);
            error_ = std::move(why);
        }
        if (options.on_error == FailMode::open) return Decision{true, 0, 0, 0, true};
        const std::uint64_t timeout = static_cast<std::uint64_t>(options.command_timeout.count()) * 1'000'000;
        return Decision{false, 0, timeout, 0, true};
    }
    [[nodiscard]] std::uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }
    [[nodiscard]] std::string last_error() const {
        std::lock_guard<std::mutex> lock(mu_);
        return error_;
    }

  private:
    std::atomic<std::uint64_t> count_{0};
    mutable std::mutex mu_;
    std::string error_;
};

/// Limiter construction against a server that can evict limiter keys:
/// `refusal` is Client::eviction_refusal() ("" when the server is safe).
inline void refuse_evicting(const std::string& refusal, const Options& options, const char* who) {
    if (!refusal.empty() && !options.allow_evicting_server)
        tally::detail::throw_invalid_argument(std::string(who) + ": " + refusal);
}

/// Options::max_clock_skew in whole milliseconds (negative counts as 0).
inline std::uint64_t skew_ms(const Options& options) noexcept {
    const auto ms = options.max_clock_skew.count();
    return ms <= 0 ? 0 : static_cast<std::uint64_t>(std::min<long long>(ms, 1LL << 40));
}

}  // namespace redis::detail
TALLY_END_NAMESPACE
