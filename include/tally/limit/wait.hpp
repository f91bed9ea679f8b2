// tally/limit/wait.hpp: wait until a limiter admits a request, with optional
// jitter and a deadline (for clients that throttle their own outbound calls).
#pragma once

#include "../detail/abi.hpp"

#include <chrono>
#include <cstdint>
#include <limits>
#include <thread>

#include "../core/seed.hpp"
#include "../detail/primitives.hpp"
#include "decision.hpp"

TALLY_BEGIN_NAMESPACE

/// Random extra sleep, uniform in [0, max_ns], so that many waiters denied
/// together do not all wake at the same nanosecond (the "thundering herd").
/// Each waiter keeps its own Jitter (it holds a splitmix64 state), seeded
/// with Seed::random() in production and a fixed Seed in tests. Jitter{} adds
/// nothing. Not thread-safe: one per thread.
class Jitter {
  public:
    constexpr Jitter() noexcept = default;
    constexpr Jitter(std::uint64_t max_ns, Seed seed) noexcept : max_ns_(max_ns), state_(seed.value) {}

    [[nodiscard]] constexpr std::uint64_t max_ns() const noexcept { return max_ns_; }

    /// The next extra sleep, uniform in [0, max_ns] (exact up to a bias below
    /// (max_ns + 1) / 2^64).
    std::uint64_t next() noexcept {
        if (max_ns_ == 0) return 0;
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        if (max_ns_ == std::numeric_limits<std::uint64_t>::max()) return z;
        return static_cast<std::uint64_t>((static_cast<detail::uint128>(z) * (max_ns_ + 1)) >> 64);
    }

  private:
    std::uint64_t max_ns_ = 0;
    std::uint64_t state_ = 0;
};

/// How a wait ended.
enum class WaitStatus {
    acquired,   ///< admitted; the limiter consumed the cost
    timed_out,  ///< it cannot be admitted by the deadline (nothing consumed)
    never,      ///< it can never be admitted (cost above the limit or burst)
};

/// The outcome of wait_until_allowed: the last Decision (allowed when
/// acquired), how it ended, the total sleep requested and the attempts made.
struct WaitResult {
    Decision decision;
    WaitStatus status;
    std::uint64_t slept_ns = 0;
    std::uint32_t attempts = 0;

    explicit constexpr operator bool() const noexcept { return status == WaitStatus::acquired; }
};

/// The default sleep hook: std::this_thread::sleep_for.
struct ThreadSleep {
    void operator()(std::uint64_t ns) const { std::this_thread::sleep_for(std::chrono::nanoseconds(ns)); }
};

/// wait_until_allowed: try_acquire(clock.now_ns(), cost); while denied, sleep
/// for exactly retry_after_ns plus jitter.next() (through `sleep`, so tests
/// pass a hook that advances a ManualClock and never sleep in real time),
/// then try again. Another caller may take the unit in between: the retry is
/// then denied too and the loop waits again, for the new retry_after_ns.
///
/// It returns as soon as the request is admitted; at once with `never` when
/// retry_after_ns is tally::never; and at once with `timed_out`, without
/// sleeping, when the earliest admission (now + retry_after_ns) lies past
/// `deadline_ns` (an absolute time on `clock`; tally::never for none). The
/// jitter is cut so that no sleep ends past the deadline. Works with anything
/// that has try_acquire(now_ns, cost) returning a Decision: every tally
/// limiter, DryRun, a keyed table through a lambda wrapper.
///
/// Thread safety: that of the limiter; `jitter` belongs to the caller.
///
///   tally::Jitter jitter(5'000'000, tally::Seed::random());      // up to 5 ms
///   auto r = tally::wait_until_allowed(limiter, tally::SteadyClock{}, 1, jitter, deadline);
///   if (!r) give_up(r.status);
template <class L, class C, class Sleep = ThreadSleep>
WaitResult wait_until_allowed(L& limiter, const C& clock, std::uint64_t cost, Jitter& jitter,
                              std::uint64_t deadline_ns, Sleep&& sleep = Sleep{}) {
    WaitResult r{Decision{false, 0, 0, 0}, WaitStatus::timed_out};
    for (;;) {
        const std::uint64_t now = clock.now_ns();
        r.decision = limiter.try_acquire(now, cost);
        ++r.attempts;
        if (r.decision.allowed) {
            r.status = WaitStatus::acquired;
            return r;
        }
        if (r.decision.retry_after_ns == never) {
            r.status = WaitStatus::never;
            return r;
        }
        const std::uint64_t left = deadline_ns > now ? deadline_ns - now : 0;
        if (r.decision.retry_after_ns > left) {
            r.status = WaitStatus::timed_out;
            return r;
        }
        std::uint64_t wait = detail::sat_add(r.decision.retry_after_ns, jitter.next());
        if (wait > left) wait = left;
        if (wait == 0) wait = 1;  // a denial always waits, so a clock that never moves cannot spin us
        sleep(wait);
        r.slept_ns = detail::sat_add(r.slept_ns, wait);
    }
}

/// wait_until_allowed without jitter.
template <class L, class C, class Sleep = ThreadSleep>
WaitResult wait_until_allowed(L& limiter, const C& clock, std::uint64_t cost, std::uint64_t deadline_ns,
                              Sleep&& sleep = Sleep{}) {
    Jitter none;
    return wait_until_allowed(limiter, clock, cost, none, deadline_ns, static_cast<Sleep&&>(sleep));
}

TALLY_END_NAMESPACE
