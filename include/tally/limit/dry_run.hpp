// tally/limit/dry_run.hpp: a limiter that decides but never enforces, for
// rolling out a new quota and watching what it would deny.
#pragma once

#include "../detail/abi.hpp"

#include <atomic>
#include <cstdint>
#include <utility>

#include "decision.hpp"
#include "quota.hpp"

TALLY_BEGIN_NAMESPACE

/// DryRun<L>: wraps any limiter L and computes every Decision L would make,
/// but always admits, counting the requests (and the cost) L would have
/// denied; the equivalent of nginx's limit_req_dry_run or Envoy's shadow
/// mode. The wrapped limiter sees exactly the traffic it would have admitted
/// if enforcing (a would-be denial consumes nothing), so its counts and
/// Decisions are those of the real rollout.
///
/// check() returns L's Decision unchanged, for logging or headers;
/// try_acquire() returns it with allowed = true and retry_after_ns = 0; allow()
/// returns true. Counters: checks(), would_deny(), would_deny_cost().
///
/// Thread safety: the counters are relaxed atomics; the calls are as
/// thread-safe as L's (DryRun<AtomicGcra> may be shared by threads).
///
///   tally::DryRun<tally::Gcra> shadow(tally::Quota::per_second(50));
///   if (auto d = shadow.check(now_ns); !d) log_would_deny(d.retry_after_ns);
///   serve();                                          // never enforced
template <class L>
class DryRun {
  public:
    explicit DryRun(const Quota& quota) : inner_(quota) {}
    /// Builds L from any arguments (e.g. a keyed limiter's quota and capacity).
    template <class... Args>
    explicit DryRun(std::in_place_t, Args&&... args) : inner_(std::forward<Args>(args)...) {}

    [[nodiscard]] Quota quota() const noexcept { return inner_.quota(); }

    /// L's Decision, counted; nothing is enforced by the caller's choice.
    Decision check(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept {
        const Decision d = inner_.try_acquire(now_ns, cost);
        checks_.fetch_add(1, std::memory_order_relaxed);
        if (!d.allowed) {
            would_deny_.fetch_add(1, std::memory_order_relaxed);
            would_deny_cost_.fetch_add(cost, std::memory_order_relaxed);
        }
        return d;
    }
    /// check(), then admitted: allowed = true, retry_after_ns = 0, the other
    /// fields L's.
    Decision try_acquire(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept {
        Decision d = check(now_ns, cost);
        d.allowed = true;
        d.retry_after_ns = 0;
        return d;
    }
    bool allow(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept {
        (void)check(now_ns, cost);
        return true;
    }

    /// L's set_quota (for limiters that have one).
    void set_quota(const Quota& quota, std::uint64_t now_ns)
        requires requires(L& l) { l.set_quota(quota, now_ns); }
    {
        inner_.set_quota(quota, now_ns);
    }

    [[nodiscard]] std::uint64_t checks() const noexcept { return checks_.load(std::memory_order_relaxed); }
    [[nodiscard]] std::uint64_t would_deny() const noexcept { return would_deny_.load(std::memory_order_relaxed); }
    [[nodiscard]] std::uint64_t would_deny_cost() const noexcept {
        return would_deny_cost_.load(std::memory_order_relaxed);
    }
    void reset_counts() noexcept {
        checks_.store(0, std::memory_order_relaxed);
        would_deny_.store(0, std::memory_order_relaxed);
        would_deny_cost_.store(0, std::memory_order_relaxed);
    }

    [[nodiscard]] L& inner() noexcept { return inner_; }
    [[nodiscard]] const L& inner() const noexcept { return inner_; }

  private:
    L inner_;
    std::atomic<std::uint64_t> checks_{0};
    std::atomic<std::uint64_t> would_deny_{0};
    std::atomic<std::uint64_t> would_deny_cost_{0};
};

TALLY_END_NAMESPACE
