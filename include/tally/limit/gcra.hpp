// tally/limit/gcra.hpp: the Generic Cell Rate Algorithm, 8 bytes per key,
// and AtomicGcra, its lock-free single-word form.
#pragma once

#include "../detail/abi.hpp"

#include <atomic>
#include <cstdint>

#include "../core/platform.hpp"
#include "decision.hpp"
#include "detail/emission_grid.hpp"
#include "detail/limiter_base.hpp"
#include "quota.hpp"

TALLY_BEGIN_NAMESPACE
/// Gcra: the Generic Cell Rate Algorithm (ITU-T I.371 / ATM Forum TM 4.0,
/// "virtual scheduling" form), the single-timestamp equivalent of a token
/// bucket. State: the theoretical arrival time (TAT), 8 bytes.
///
/// tally decides on the emission grid: with T = window_ns / limit (an exact
/// rational), burst b = quota.capacity(), n = index(t) = floor(t / T) and the
/// state J (the TAT as a grid index), a request of cost c at t is admitted iff
///     max(J, n) + c - n <= b;   admitted, J becomes max(J, n) + c.
/// This is the continuous rule max(TAT, t) + c*T - t <= b*T with t rounded
/// down to its grid instant: integer only, no rounding drift, and in any
/// interval (s, e] at most b + index(e) - index(s) units pass. TokenBucket on
/// the same Quota decides identically on every stream.
///
/// Decision: remaining = b - debt (debt = max(0, J - index(t))); retry_after_ns
/// exact to the nanosecond; reset_after_ns = time until debt is 0; cost > b is
/// denied with tally::never. Denials and peeks write nothing. A stale t sees
/// more debt, never less. Within 2^40 grid instants of t = 2^64 ns requests
/// are denied rather than wrapped.
///
/// set_quota(q, now_ns): the debt at now_ns stays (units spent stay spent,
/// even above the new b) and is re-emitted at the new rate from now_ns.
///
/// Memory: 8-byte State. Thread safety: the object-level calls are not
/// thread-safe (use AtomicGcra); the const State overloads are, on distinct
/// States.
///
///   tally::Gcra g(tally::Quota::per_second(10).with_burst(5));
///   if (auto d = g.try_acquire(now_ns); !d) reply_429(d.retry_after_ns);
class Gcra : public detail::SingleStateLimiter<Gcra> {
  public:
    /// Theoretical arrival time as an emission-grid index; 0 is fresh.
    struct State {
        std::uint64_t tat = 0;
    };

    explicit Gcra(const Quota& quota) : quota_(check(quota, "tally::Gcra::Gcra")), grid_(quota) {}

    // Inherited: quota(); try_acquire(now_ns, cost = 1) and allow(now_ns,
    // cost = 1) on the object's state; set_quota(quota, now_ns), which keeps
    // the state through rebase_state and throws std::invalid_argument
    // (nothing changed) for a bad quota.
    using SingleStateLimiter::try_acquire;

    // Per-key policy interface (PerKeyPolicy); fresh_state() is State{}.
    Decision try_acquire(State& s, std::uint64_t now_ns, std::uint64_t cost = 1) const noexcept {
        std::uint64_t next;
        const Decision d = grid_.gcra(s.tat, now_ns, cost, next);
        s.tat = next;
        return d;
    }
    [[nodiscard]] bool is_fresh(const State& s, std::uint64_t now_ns) const noexcept {
        return s.tat <= grid_.index(now_ns);
    }
    /// `s` made under `old`'s quota, moved to this quota at now_ns: the units
    /// not yet re-emitted at now_ns (on old's grid) stay spent, all of them,
    /// and are re-emitted at this rate from now_ns.
    [[nodiscard]] State rebase_state(const State& s, const Gcra& old, std::uint64_t now_ns) const noexcept {
        return State{grid_.rebase(s.tat, old.grid_, now_ns)};
    }

    /// The internal state (for inspection and tests).
    [[nodiscard]] State state() const noexcept { return state_; }

  private:
    friend SingleStateLimiter;
    static constexpr const char* set_quota_site = "tally::Gcra::set_quota";

    Quota quota_;
    EmissionGrid grid_;
    State state_{};
};

static_assert(sizeof(Gcra::State) == 8);

/// AtomicGcra: Gcra on one lock-free std::atomic<std::uint64_t> (the TAT
/// index), updated by compare-and-swap, for one limit shared by many threads.
/// Same decisions as Gcra for any serial order of calls; under contention
/// each decision is Gcra's at its point in the CAS order, so N threads never
/// admit more than b + index(e) - index(s) units with timestamps in [s, e],
/// even when a thread's now_ns is older than another's.
///
/// set_quota(q, now_ns) is Gcra's, applied atomically: every decision is made
/// wholly under the old quota or wholly under the new one, and the debt at
/// the change carries over as in Gcra::rebase_state. While a change is in
/// progress (a few loads and stores) acquirers wait for it.
///
/// Thread safety: every member is thread-safe. Acquiring is lock-free except
/// during set_quota; denials and peeks write nothing. The object is padded to
/// tally::false_sharing_size.
///
///   tally::AtomicGcra api_limit(tally::Quota::per_second(1000));
///   // any thread:
///   if (!api_limit.allow(tally::CoarseClock::now_ns())) reject();
class alignas(false_sharing_size) AtomicGcra : public detail::AtomicEmissionLimiter<AtomicGcra> {
  public:
    explicit AtomicGcra(const Quota& quota) : AtomicEmissionLimiter(quota) {}

    // Inherited, all thread-safe: quota(); try_acquire(now_ns, cost = 1);
    // allow(now_ns, cost = 1); set_quota(quota, now_ns), Gcra::set_quota
    // applied atomically (std::invalid_argument, nothing changed, for a bad quota).

    /// A snapshot of the state, as a Gcra::State on the current quota's grid.
    [[nodiscard]] Gcra::State state() const noexcept { return {cell_.index()}; }

  private:
    friend AtomicEmissionLimiter;
    static constexpr const char* ctor_site = "tally::AtomicGcra::AtomicGcra";
    static constexpr const char* set_quota_site = "tally::AtomicGcra::set_quota";
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(alignof(AtomicGcra) == false_sharing_size && sizeof(AtomicGcra) % false_sharing_size == 0);

TALLY_END_NAMESPACE
