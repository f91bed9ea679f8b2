// tally/limit/sliding_window.hpp: the sliding-window counter limiter, a
// SlidingCounter ring and a limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "../window/sliding_counter.hpp"
#include "decision.hpp"
#include "quota.hpp"

namespace tally {

/// SlidingWindowLimiter: admits a request of cost c at t iff the
/// SlidingCounter estimate of the admitted cost in (t - W, t] plus c is at
/// most `limit` (exact rational comparison, no floating point). The ring has
/// `Slots` buckets of b = ceil(window_ns / (Slots - 1)) ns, so W =
/// (Slots - 1) * b: exactly window_ns when it is a multiple of Slots - 1
/// (every per_second/minute/hour/day quota is, for the default Slots = 11),
/// otherwise rounded up by less than Slots - 1 ns (stricter). Slots = 2 is
/// Cloudflare's "previous + current" counter (Desgats 2017); more slots
/// shrink the error. Source: seed 000 (the ring of sub-buckets) and seed 004
/// ("Sliding window counter"). burst is ignored.
///
/// Error guarantee (the SlidingCounter bound, oldest(t) = count of the ring's
/// oldest bucket at t, the only bucket whose placement is guessed):
///   |estimate(t) - exact count in (t - W, t]| <= oldest(t), and so
///   exact admitted cost in (t - W, t] <= limit + oldest(t) for every t
///   (lenient side: oldest-bucket events that were really inside the window
///   are partly weighted out), while a request is denied only if its exact
///   window count + c > limit - oldest(t) (strict side: events that were
///   really outside are partly weighted in).
/// It errs in BOTH directions, bounded by oldest(t) <= limit; with smooth
/// traffic oldest(t) is about limit / (Slots - 1), so the default 11 slots
/// err by at most ~10% of the limit, and a burst packed at the end of one
/// bucket is the worst case (tested against SlidingLogLimiter).
///
/// Decision: remaining = limit - ceil(estimate) (what passes right now);
/// retry_after_ns = the smallest wait after which the same request passes
/// (exact to the nanosecond: SlidingCounter::retry_after_ns), tally::never
/// for cost > limit; reset_after_ns = time until the estimate reaches 0.
///
/// Time going backwards: a now_ns before the start of the ring's newest
/// bucket is evaluated AND charged at that start (the largest estimate the
/// state can give), so it never sees more capacity nor hides its cost in an
/// older, down-weighted bucket; waits are still measured from the caller's
/// now_ns.
///
/// Range: limit <= max(Slot) / 2 (the ring can hold up to 2 * limit), else
/// std::invalid_argument; use std::uint64_t slots for limits up to 2^40.
/// Memory: State = SlidingCounter<Slot, Slots>::State, round_up(Slots *
/// sizeof(Slot), 8) + 8 bytes: 56 for the default <std::uint32_t, 11>, one
/// cache line (static_assert in the test). The limiter object adds the policy.
/// Thread safety: object-level try_acquire / allow are not thread-safe; the
/// const State overloads, fresh_state, is_fresh and quota are thread-safe on
/// distinct States.
///
///   tally::SlidingWindowLimiter<> per_minute(tally::Quota::per_minute(600));  // 10 buckets of 6 s
///   if (!per_minute.allow(now_ns)) reject();
template <class Slot = std::uint32_t, std::size_t Slots = 11, SlidingOptions Options = SlidingOptions{}>
class SlidingWindowLimiter {
  public:
    using Counter = SlidingCounter<Slot, Slots, Options>;
    /// The ring; State{} is an empty ring (fresh).
    using State = typename Counter::State;

    static constexpr std::uint64_t max_limit = Counter::max_count / 2;

    explicit SlidingWindowLimiter(const Quota& quota)
        : quota_(checked(quota)), counter_(bucket_for(quota.window_ns)) {}

    [[nodiscard]] Quota quota() const noexcept { return quota_; }
    /// The ring's window (Slots - 1) * bucket_ns, >= quota().window_ns.
    [[nodiscard]] std::uint64_t window_ns() const noexcept { return counter_.window_ns(); }
    [[nodiscard]] std::uint64_t bucket_ns() const noexcept { return counter_.bucket_ns(); }
    [[nodiscard]] const Counter& counter() const noexcept { return counter_; }

    Decision try_acquire(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept {
        return try_acquire(state_, now_ns, cost);
    }
    /// try_acquire's decision without computing the waits (O(1) within a
    /// bucket, where try_acquire's waits are O(Slots)).
    bool allow(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept {
        if (cost == 0) return true;  // a peek, even when a stale charge left the estimate above limit
        State& s = state_;
        std::uint64_t t = now_ns;
        if (counter_.bucket_of(now_ns) < s.newest) t = s.newest * counter_.bucket_ns();
        return counter_.allow(s, t, quota_.limit, cost);
    }

    // Per-key policy interface (KeyedRateLimiter).
    [[nodiscard]] State fresh_state() const noexcept { return State{}; }
    Decision try_acquire(State& s, std::uint64_t now_ns, std::uint64_t cost = 1) const noexcept {
        const std::uint64_t limit = quota_.limit;
        // Stale: evaluate and charge at the start of the newest bucket.
        std::uint64_t t = now_ns;
        if (counter_.bucket_of(now_ns) < s.newest) t = s.newest * counter_.bucket_ns();
        const std::uint64_t lead = t - now_ns;
        const SlidingEstimate est = counter_.read(s, t);
        const std::uint64_t c = est.ceil();
        const std::uint64_t have = c >= limit ? 0 : limit - c;
        if (cost <= have) {
            if (cost != 0) counter_.charge(s, t, cost);
            return Decision{true, have - cost, 0, from_now(t, lead, counter_.drain_ns(s, t))};
        }
        const std::uint64_t retry = cost > limit ? never : from_now(t, lead, counter_.retry_after_ns(s, t, limit, cost));
        return Decision{false, have, retry, from_now(t, lead, counter_.drain_ns(s, t))};
    }
    [[nodiscard]] bool is_fresh(const State& s, std::uint64_t now_ns) const noexcept {
        return counter_.is_empty(s, now_ns);
    }

    [[nodiscard]] const State& state() const noexcept { return state_; }

  private:
    static Quota checked(const Quota& q) {
        q.validate("tally::SlidingWindowLimiter");
        if (q.limit > max_limit) {
            detail::throw_invalid_argument("tally::SlidingWindowLimiter: limit " + std::to_string(q.limit) +
                                           " is out of range [1, " + std::to_string(max_limit) + "] for " +
                                           std::to_string(8 * sizeof(Slot)) +
                                           "-bit slots (the ring holds up to 2 * limit; use std::uint64_t slots)");
        }
        return q;
    }
    static std::uint64_t bucket_for(std::uint64_t window_ns) noexcept {
        constexpr std::uint64_t n = Slots - 1;
        return window_ns / n + (window_ns % n != 0 ? 1 : 0);
    }
    // A wait w from t = now + lead, as a wait from the caller's now; never
    // when t + w lies past the end of the 64-bit clock.
    static std::uint64_t from_now(std::uint64_t t, std::uint64_t lead, std::uint64_t w) noexcept {
        if (w == 0) return 0;
        if (w > never - t) return never;
        return w + lead;
    }

    Quota quota_;
    Counter counter_;
    State state_{};
};

}  // namespace tally
