// tally/limit/fixed_window.hpp: one counter per window, reset on the boundary.
#pragma once

#include <cstdint>
#include <limits>

#include "../core/platform.hpp"
#include "decision.hpp"
#include "quota.hpp"

namespace tally {

/// FixedWindowLimiter: at most `limit` units per aligned window
/// [k*window_ns, (k+1)*window_ns) of the monotonic clock (windows are
/// counted from time 0, so every limiter on one clock shares boundaries).
/// The simplest limiter (seed 004, "Fixed window"; Redis INCR + EXPIRE).
///
/// Error guarantee, stated honestly: within one aligned window the count is
/// exact; across a boundary up to 2 * limit units can pass in an interval
/// as short as 2 ns (limit at the last nanosecond of a window, limit more at
/// the first of the next). In any interval of length window_ns at most
/// 2 * limit pass (tested). Use SlidingWindowLimiter or a bucket if that
/// matters. burst is ignored.
///
/// Decision: remaining = limit - count; retry_after_ns = time to the next
/// boundary (exact: retrying then passes, one nanosecond earlier does not),
/// or tally::never for cost > limit; reset_after_ns = time to the next
/// boundary when the window has a count, else 0.
///
/// Time going backwards: a now_ns in a window before the stored one is
/// counted in the stored (latest) window; the window never moves back, so
/// a stale time can only see less capacity.
///
/// Memory: State is 16 bytes (count and window index; static_assert).
/// Integer only; (k+1)*window_ns is formed in 128 bits, and a boundary past
/// the end of the 64-bit clock reads as tally::never.
/// Thread safety: object-level try_acquire / allow are not thread-safe; the
/// const State overloads, fresh_state, is_fresh and quota are thread-safe on
/// distinct States.
///
///   tally::FixedWindowLimiter per_minute(tally::Quota::per_minute(60));
///   bool ok = per_minute.allow(now_ns);
class FixedWindowLimiter {
  public:
    /// Zero is fresh (count 0 in window 0; a zero count is fresh in any window).
    struct State {
        std::uint64_t count = 0;
        std::uint64_t window = 0;  // now_ns / window_ns of the counted window
    };

    explicit FixedWindowLimiter(const Quota& quota) : quota_((quota.validate("tally::FixedWindowLimiter"), quota)) {}

    [[nodiscard]] Quota quota() const noexcept { return quota_; }

    Decision try_acquire(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept {
        return try_acquire(state_, now_ns, cost);
    }
    bool allow(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept { return try_acquire(now_ns, cost).allowed; }

    [[nodiscard]] State fresh_state() const noexcept { return State{}; }
    Decision try_acquire(State& s, std::uint64_t now_ns, std::uint64_t cost = 1) const noexcept {
        const std::uint64_t limit = quota_.limit;
        std::uint64_t w = now_ns / quota_.window_ns;
        if (w < s.window) w = s.window;  // stale: count in the latest window
        const std::uint64_t count = w == s.window ? s.count : 0;
        const std::uint64_t have = limit - count;
        const std::uint64_t to_boundary = until_window(w + 1, now_ns);
        if (cost <= have) {
            if (cost == 0) return Decision{true, have, 0, count != 0 ? to_boundary : 0};
            s.count = count + cost;
            s.window = w;
            return Decision{true, have - cost, 0, to_boundary};
        }
        return Decision{false, have, cost > limit ? never : to_boundary, count != 0 ? to_boundary : 0};
    }
    [[nodiscard]] bool is_fresh(const State& s, std::uint64_t now_ns) const noexcept {
        return s.count == 0 || now_ns / quota_.window_ns > s.window;
    }

    [[nodiscard]] State state() const noexcept { return state_; }

  private:
    // Wait from now until window index k starts; never if past the clock's end.
    [[nodiscard]] std::uint64_t until_window(std::uint64_t k, std::uint64_t now_ns) const noexcept {
        __extension__ typedef unsigned __int128 u128;
        if (k == 0) return never;  // w + 1 wrapped: there is no next window
        const u128 start = static_cast<u128>(k) * quota_.window_ns;
        if (start > std::numeric_limits<std::uint64_t>::max()) return never;
        return static_cast<std::uint64_t>(start) - now_ns;
    }

    Quota quota_;
    State state_{};
};

static_assert(sizeof(FixedWindowLimiter::State) == 16);

}  // namespace tally
