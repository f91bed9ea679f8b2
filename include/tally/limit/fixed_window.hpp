// tally/limit/fixed_window.hpp: one counter per window, reset on the boundary.
#pragma once

#include "../detail/abi.hpp"

#include <cstdint>
#include <limits>

#include "../core/platform.hpp"
#include "../detail/primitives.hpp"
#include "decision.hpp"
#include "detail/limiter_base.hpp"
#include "quota.hpp"

TALLY_BEGIN_NAMESPACE

/// FixedWindowLimiter: at most `limit` units per aligned window
/// [k*window_ns, (k+1)*window_ns) of the monotonic clock (windows counted from
/// time 0, so every limiter on one clock shares boundaries). The simplest
/// limiter: one counter reset on the boundary, as Redis INCR + EXPIRE.
///
/// Guarantee: within one aligned window the count is exact; across a boundary
/// up to 2 * limit units can pass in an interval as short as 2 ns, and in any
/// interval of length window_ns at most 2 * limit pass. burst is ignored.
///
/// Decision: remaining = limit - count; retry_after_ns = time to the next
/// boundary (exact), tally::never for cost > limit; reset_after_ns = time to
/// the next boundary when the window has a count, else 0. A now_ns in an
/// earlier window than the stored one is counted in the stored window.
///
/// set_quota(q, now_ns): the count of the window holding now_ns stays (even
/// above the new limit) until the end of the new window that holds now_ns;
/// an ended window's count is gone.
///
/// Memory: 16-byte State (count, window index). 128-bit boundary products; a
/// boundary past the 64-bit clock reads as tally::never. Thread safety:
/// object-level calls are not thread-safe; the const State overloads are, on
/// distinct States.
///
///   tally::FixedWindowLimiter per_minute(tally::Quota::per_minute(60));
///   bool ok = per_minute.allow(now_ns);
class FixedWindowLimiter : public detail::SingleStateLimiter<FixedWindowLimiter> {
  public:
    /// Zero is fresh (count 0 in window 0; a zero count is fresh in any window).
    struct State {
        std::uint64_t count = 0;
        std::uint64_t window = 0;  // now_ns / window_ns of the counted window
    };

    explicit FixedWindowLimiter(const Quota& quota) : quota_(check(quota, "tally::FixedWindowLimiter::FixedWindowLimiter")) {}

    // Inherited: quota(); try_acquire(now_ns, cost = 1) and allow(now_ns,
    // cost = 1) on the object's state; set_quota(quota, now_ns), which keeps
    // the state through rebase_state and throws std::invalid_argument
    // (nothing changed) for a bad quota.
    using SingleStateLimiter::try_acquire;

    // Per-key policy interface (PerKeyPolicy); fresh_state() is State{}.
    Decision try_acquire(State& s, std::uint64_t now_ns, std::uint64_t cost = 1) const noexcept {
        const std::uint64_t limit = quota_.limit;
        std::uint64_t w = now_ns / quota_.window_ns;
        if (w < s.window) w = s.window;  // stale: count in the latest window
        const std::uint64_t count = w == s.window ? s.count : 0;
        const std::uint64_t have = count < limit ? limit - count : 0;
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

    /// `s` made under `old`'s quota, moved to this quota at now_ns: the count
    /// of old's window holding now_ns (or of the stored later window, for a
    /// stale now_ns) stays, whole, in this quota's window that holds that
    /// instant. A count whose window has ended is dropped.
    [[nodiscard]] State rebase_state(const State& s, const FixedWindowLimiter& old,
                                     std::uint64_t now_ns) const noexcept {
        if (s.count == 0 || now_ns / old.quota_.window_ns > s.window) return State{};
        // The stored window is current, or later than now_ns (stale time):
        // keep the count at the later of now_ns and that window's start.
        const detail::uint128 start = static_cast<detail::uint128>(s.window) * old.quota_.window_ns;
        constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
        const std::uint64_t t = start <= now_ns ? now_ns : start > max ? max : static_cast<std::uint64_t>(start);
        return State{s.count, t / quota_.window_ns};
    }

    [[nodiscard]] State state() const noexcept { return state_; }

  private:
    friend SingleStateLimiter;
    static constexpr const char* set_quota_site = "tally::FixedWindowLimiter::set_quota";

    // Wait from now until window index k starts; never if past the clock's end.
    [[nodiscard]] std::uint64_t until_window(std::uint64_t k, std::uint64_t now_ns) const noexcept {
        if (k == 0) return never;  // w + 1 wrapped: there is no next window
        const detail::uint128 start = static_cast<detail::uint128>(k) * quota_.window_ns;
        if (start > std::numeric_limits<std::uint64_t>::max()) return never;
        return static_cast<std::uint64_t>(start) - now_ns;
    }

    Quota quota_;
    State state_{};
};

static_assert(sizeof(FixedWindowLimiter::State) == 16);

TALLY_END_NAMESPACE
