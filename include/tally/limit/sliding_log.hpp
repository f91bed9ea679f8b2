// tally/limit/sliding_log.hpp: the exact sliding-window limiter (a log of
// admitted requests); the oracle the approximate limiters are tested against.
#pragma once

#include "../detail/abi.hpp"

#include <cstdint>
#include <deque>
#include <limits>

#include "decision.hpp"
#include "detail/limiter_base.hpp"
#include "quota.hpp"

TALLY_BEGIN_NAMESPACE

/// SlidingLogLimiter: keeps the time and cost of every admitted request in
/// the last window_ns and admits a request of cost c at t iff the admitted
/// cost in (t - window_ns, t] plus c is at most limit. Exact, no estimate (the
/// "sliding window log", as the Redis sorted-set limiter); the oracle the
/// other limiters are tested against. burst is ignored.
///
/// Guarantee: for every t, admitted cost in (t - window_ns, t] <= limit, and
/// a request is denied only if admitting it would break that.
///
/// Decision: remaining = limit - cost in the window; retry_after_ns = time
/// until enough old entries leave (exact), tally::never for cost > limit;
/// reset_after_ns = time until the newest entry leaves. The limiter evaluates
/// at max(now_ns, latest now_ns seen), so a stale request is logged at the
/// latest time.
///
/// set_quota(q, now_ns): the log stays; entries older than the new window
/// leave it, and a log above the new limit admits nothing until it drains.
///
/// Memory: 16 bytes per distinct admitted timestamp in the window, so up to
/// 16 * limit bytes: exact but O(limit), which is why it is the oracle and not
/// a PerKeyPolicy. try_acquire is amortised O(1), O(entries) for the wait of a
/// denial. Thread safety: none for try_acquire / allow / set_quota.
///
///   tally::SlidingLogLimiter exact(tally::Quota::per_minute(100));
///   bool ok = exact.allow(now_ns);
class SlidingLogLimiter : public detail::AllowFromDecision<SlidingLogLimiter> {
  public:
    explicit SlidingLogLimiter(const Quota& quota) : quota_((quota.validate("tally::SlidingLogLimiter::SlidingLogLimiter"), quota)) {}

    [[nodiscard]] Quota quota() const noexcept { return quota_; }

    Decision try_acquire(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept {
        if (now_ns > latest_) latest_ = now_ns;
        const std::uint64_t t = latest_;
        const std::uint64_t window = quota_.window_ns;
        while (!log_.empty() && t - log_.front().time >= window) {
            total_ -= log_.front().cost;
            log_.pop_front();
        }
        const std::uint64_t limit = quota_.limit;
        const std::uint64_t have = total_ < limit ? limit - total_ : 0;
        if (cost <= have) {
            if (cost != 0) {
                // A push_back may allocate; on failure the request is denied
                // (nothing consumed) rather than escaping a noexcept function.
                if (!log_.empty() && log_.back().time == t) {
                    log_.back().cost += cost;
                } else if (!push(t, cost)) {
                    return Decision{false, have, 0, reset_after(now_ns)};
                }
                total_ += cost;
            }
            return Decision{true, have - cost, 0, reset_after(now_ns)};
        }
        if (cost > limit) return Decision{false, have, never, reset_after(now_ns)};
        // Oldest entries must leave until total - left <= limit - cost.
        std::uint64_t left = 0;
        for (const Entry& e : log_) {
            left += e.cost;
            if (total_ - left <= limit - cost) return Decision{false, have, leaves_at(e.time, now_ns), reset_after(now_ns)};
        }
        return Decision{false, have, never, reset_after(now_ns)};  // unreachable: cost <= limit
    }
    // Inherited: allow(now_ns, cost = 1), try_acquire(now_ns, cost).allowed.

    /// Replaces the quota; the log stays (see the class comment). now_ns
    /// only advances the latest time seen. Throws std::invalid_argument
    /// (nothing changed) for a bad quota.
    void set_quota(const Quota& quota, std::uint64_t now_ns) {
        quota.validate("tally::SlidingLogLimiter::set_quota");
        quota_ = quota;
        if (now_ns > latest_) latest_ = now_ns;
    }

    /// Admitted cost in the window ending at max(now_ns, latest seen); const.
    [[nodiscard]] std::uint64_t count(std::uint64_t now_ns) const noexcept {
        const std::uint64_t t = now_ns > latest_ ? now_ns : latest_;
        std::uint64_t sum = 0;
        for (const Entry& e : log_)
            if (t - e.time < quota_.window_ns) sum += e.cost;
        return sum;
    }
    /// Log entries held (memory is about 16 bytes each).
    [[nodiscard]] std::size_t entries() const noexcept { return log_.size(); }

  private:
    struct Entry {
        std::uint64_t time;
        std::uint64_t cost;
    };

    bool push(std::uint64_t t, std::uint64_t cost) noexcept {
#if TALLY_HAS_EXCEPTIONS
        try {
            log_.push_back(Entry{t, cost});
        } catch (...) {
            return false;
        }
#else
        log_.push_back(Entry{t, cost});
#endif
        return true;
    }

    // Wait from now until an entry logged at `time` has left the window.
    [[nodiscard]] std::uint64_t leaves_at(std::uint64_t time, std::uint64_t now_ns) const noexcept {
        const std::uint64_t window = quota_.window_ns;
        if (time > std::numeric_limits<std::uint64_t>::max() - window) return never;
        const std::uint64_t at = time + window;
        return at > now_ns ? at - now_ns : 0;
    }
    [[nodiscard]] std::uint64_t reset_after(std::uint64_t now_ns) const noexcept {
        return log_.empty() ? 0 : leaves_at(log_.back().time, now_ns);
    }

    Quota quota_;
    std::deque<Entry> log_;
    std::uint64_t total_ = 0;
    std::uint64_t latest_ = 0;
};

TALLY_END_NAMESPACE
