// tally/redis/detail/fail_log.hpp: what every Redis limiter does when a call
// fails: count it, keep the reason, answer with the fail mode's Decision.
#pragma once

#include "../../detail/abi.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

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

}  // namespace redis::detail
TALLY_END_NAMESPACE
