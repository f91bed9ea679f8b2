// tally/limit/gcra.hpp: the Generic Cell Rate Algorithm, 8 bytes per key,
// and AtomicGcra, its lock-free single-word form.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>

#include "../core/platform.hpp"
#include "decision.hpp"
#include "quota.hpp"

namespace tally {
namespace detail {

__extension__ typedef unsigned __int128 limit_u128;

/// The emission grid shared by TokenBucket, Gcra and their atomic forms.
///
/// The rate is limit / window_ns exactly: with g = gcd(limit, window_ns),
/// num = limit / g and den = window_ns / g, the emission interval is the
/// rational T = den / num nanoseconds (T >= 1 because Quota requires
/// limit <= window_ns). Grid instant k is k * T; index(t) = floor(t / T) is
/// the number of grid instants in (0, t]. Every interval of window_ns holds
/// exactly `limit` grid instants, so the long-run rate is exact with integer
/// arithmetic only (no floating drift, no per-request rounding).
struct EmissionGrid {
    std::uint64_t num = 1;       // limit / g
    std::uint64_t den = 1;       // window_ns / g, den >= num
    std::uint64_t cap = 1;       // bucket size: burst, or limit if 0
    std::uint64_t fast_t = 0;    // t <= fast_t: t * num fits 64 bits
    std::uint64_t fast_k = 0;    // k <= fast_k: k * den fits 64 bits

    EmissionGrid() = default;
    explicit EmissionGrid(const Quota& q) noexcept {
        std::uint64_t a = q.limit, b = q.window_ns;
        while (b != 0) {
            const std::uint64_t r = a % b;
            a = b;
            b = r;
        }
        num = q.limit / a;
        den = q.window_ns / a;
        cap = q.capacity();
        fast_t = std::numeric_limits<std::uint64_t>::max() / num;
        fast_k = std::numeric_limits<std::uint64_t>::max() / den;
    }

    /// floor(t * num / den): grid instants in (0, t]. At most t.
    TALLY_ALWAYS_INLINE std::uint64_t index(std::uint64_t t) const noexcept {
        if (TALLY_LIKELY(t <= fast_t)) return t * num / den;
        return static_cast<std::uint64_t>(static_cast<limit_u128>(t) * num / den);
    }

    /// Earliest t with index(t) >= k, i.e. ceil(k * den / num); saturates at
    /// UINT64_MAX when that time is past the end of the clock.
    TALLY_ALWAYS_INLINE std::uint64_t time_of(std::uint64_t k) const noexcept {
        if (TALLY_LIKELY(k <= fast_k)) {
            const std::uint64_t p = k * den;
            return p / num + (p % num != 0 ? 1 : 0);
        }
        const limit_u128 p = static_cast<limit_u128>(k) * den;
        const limit_u128 t = p / num + (p % num != 0 ? 1 : 0);
        return t > std::numeric_limits<std::uint64_t>::max() ? std::numeric_limits<std::uint64_t>::max()
                                                               : static_cast<std::uint64_t>(t);
    }

    /// Wait from `now` until grid index `k` is reached (0 if already).
    /// `never` if k lies past the end of the clock.
    TALLY_ALWAYS_INLINE std::uint64_t wait_until(std::uint64_t k, std::uint64_t now) const noexcept {
        const std::uint64_t t = time_of(k);
        if (t == std::numeric_limits<std::uint64_t>::max() && index(t) < k) return never;
        return t > now ? t - now : 0;
    }

    /// GCRA on theoretical-arrival index `tat` (TAT = tat * T). Returns the
    /// decision; `next` receives the new index (== tat unless admitted with
    /// cost > 0).
    TALLY_ALWAYS_INLINE Decision gcra(std::uint64_t tat, std::uint64_t now, std::uint64_t cost,
                                      std::uint64_t& next) const noexcept {
        constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
        const std::uint64_t n = index(now);
        // debt: tokens not yet re-emitted at `now`. A stale `now` (before an
        // admitted request's grid instant) makes it larger, never smaller.
        const std::uint64_t debt = tat > n ? tat - n : 0;
        const std::uint64_t level = debt >= cap ? 0 : cap - debt;
        const std::uint64_t base = tat > n ? tat : n;
        // End of the clock (index within 2^40 of 2^64): what would push the
        // index past 2^64 - 1 is denied for good rather than wrapped.
        const std::uint64_t room = max - base;
        const std::uint64_t avail = level < room ? level : room;
        next = tat;
        if (TALLY_LIKELY(cost <= avail)) {
            if (TALLY_UNLIKELY(cost == 0)) return Decision{true, avail, 0, debt != 0 ? wait_until(tat, now) : 0};
            next = base + cost;
            return Decision{true, avail - cost, 0, wait_until(next, now)};
        }
        const std::uint64_t reset = debt != 0 ? wait_until(tat, now) : 0;
        if (cost > cap || cost <= level || cost > room) return Decision{false, avail, never, reset};
        // Admissible once index(now') >= tat + cost - cap (> n here; tat > n).
        return Decision{false, avail, wait_until(tat + cost - cap, now), reset};
    }

    /// gcra() on a shared atomic index with a relaxed compare-and-swap loop
    /// (AtomicGcra and AtomicTokenBucket). The word publishes no other data,
    /// and read-modify-writes of one atomic are totally ordered whatever
    /// their order argument, so relaxed is enough for the admission bound.
    /// Denials and peeks are a single load.
    Decision gcra_cas(std::atomic<std::uint64_t>& word, std::uint64_t now, std::uint64_t cost) const noexcept {
        std::uint64_t tat = word.load(std::memory_order_relaxed);
        for (;;) {
            std::uint64_t next;
            const Decision d = gcra(tat, now, cost, next);
            if (next == tat) return d;
            if (word.compare_exchange_weak(tat, next, std::memory_order_relaxed, std::memory_order_relaxed)) return d;
        }
    }
};

}  // namespace detail

/// Gcra: the Generic Cell Rate Algorithm (ITU-T I.371 / ATM Forum TM 4.0,
/// "virtual scheduling" form), the single-timestamp equivalent of a token
/// bucket. State is one 8-byte number, the theoretical arrival time (TAT).
///
/// Parameters from a Quota: emission interval T = window_ns / limit (an
/// exact rational, see below), burst b = quota.capacity(), burst tolerance
/// tau = T * (b - 1). A request of cost c at time t is admitted iff
/// max(TAT, t) + c*T - t <= tau + T, i.e. at most b units pass at one
/// instant after idle time and the long-run rate is limit per window_ns;
/// admitted, TAT becomes max(TAT, t) + c*T.
///
/// Exact integer arithmetic: TAT is kept as an index J on the emission grid
/// (TAT = J*T, grid instants k*T counted from time 0) and arrival times are
/// read as index(t) = floor(t/T). So units are re-emitted at the grid
/// instants k*T, whatever the phase of the first request: in any interval
/// (s, e] at most b + index(e) - index(s) units are admitted, which over a
/// window_ns is b + limit, the same bound as a continuous bucket. No
/// rounding accumulates, and TokenBucket built from the same Quota makes
/// identical decisions on every stream (tested).
///
/// Decision: remaining = b - debt (debt = max(0, J - index(t)), the units not
/// yet re-emitted); retry_after_ns = time until debt <= b - c, exact to the
/// nanosecond; reset_after_ns = time until debt is 0. cost > b: denied,
/// retry_after_ns = tally::never. Denials and peeks (cost 0) write nothing.
///
/// Time going backwards: J never decreases, and a stale t is read as that
/// earlier instant, when fewer units had been re-emitted, so it sees less
/// capacity, never more (stricter than clamping it forward).
///
/// Range: Quota's (limit <= 2^40, limit <= window_ns <= 2^62, burst <=
/// 2^40); 128-bit products where 64 bits could overflow. Within 2^40 grid
/// instants of t = 2^64 ns (584 years after the clock's epoch) requests are
/// denied rather than wrapped.
///
/// Memory: State is 8 bytes (static_assert). Thread safety: try_acquire /
/// allow on the object mutate its internal state (not thread-safe; use
/// AtomicGcra); the const State overloads, fresh_state, is_fresh and quota
/// are thread-safe on distinct States.
///
///   tally::Gcra g(tally::Quota::per_second(10).with_burst(5));
///   if (auto d = g.try_acquire(now_ns); !d) reply_429(d.retry_after_ns);
class Gcra {
  public:
    /// Theoretical arrival time as an emission-grid index; 0 is fresh.
    struct State {
        std::uint64_t tat = 0;
    };

    explicit Gcra(const Quota& quota) : quota_((quota.validate("tally::Gcra"), quota)), grid_(quota) {}

    [[nodiscard]] Quota quota() const noexcept { return quota_; }

    Decision try_acquire(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept {
        return try_acquire(state_, now_ns, cost);
    }
    bool allow(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept { return try_acquire(now_ns, cost).allowed; }

    // Per-key policy interface (KeyedRateLimiter).
    [[nodiscard]] State fresh_state() const noexcept { return State{}; }
    Decision try_acquire(State& s, std::uint64_t now_ns, std::uint64_t cost = 1) const noexcept {
        std::uint64_t next;
        const Decision d = grid_.gcra(s.tat, now_ns, cost, next);
        s.tat = next;
        return d;
    }
    [[nodiscard]] bool is_fresh(const State& s, std::uint64_t now_ns) const noexcept {
        return s.tat <= grid_.index(now_ns);
    }

    /// The internal state (for inspection and tests).
    [[nodiscard]] State state() const noexcept { return state_; }

  private:
    Quota quota_;
    detail::EmissionGrid grid_;
    State state_{};
};

static_assert(sizeof(Gcra::State) == 8);

/// AtomicGcra: Gcra on one lock-free std::atomic<std::uint64_t> (the TAT
/// index), updated with a compare-and-swap loop, for one limit shared by many
/// threads. Same decisions as Gcra for any serial order of calls; under
/// contention each call's decision is Gcra's at its point in the CAS order,
/// so N threads together never admit more than b + index(e) - index(s)
/// units with timestamps in [s, e] (tested under TSan), even when a thread's
/// now_ns is older than another's.
///
/// Memory orders: the word publishes no other data, and read-modify-writes
/// on one atomic are totally ordered whatever their order argument, so
/// relaxed loads and CAS are enough for the admission bound. The object is
/// aligned and padded to tally::false_sharing_size so the hot word shares
/// its line with nothing written by other code.
///
/// Thread safety: every member is thread-safe. Lock-free (static_assert).
/// Denials and peeks are a single load.
///
///   tally::AtomicGcra api_limit(tally::Quota::per_second(1000));
///   // any thread:
///   if (!api_limit.allow(tally::CoarseClock::now_ns())) reject();
class alignas(false_sharing_size) AtomicGcra {
  public:
    explicit AtomicGcra(const Quota& quota)
        : quota_((quota.validate("tally::AtomicGcra"), quota)), grid_(quota) {}
    AtomicGcra(const AtomicGcra&) = delete;
    AtomicGcra& operator=(const AtomicGcra&) = delete;

    [[nodiscard]] Quota quota() const noexcept { return quota_; }

    Decision try_acquire(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept {
        return grid_.gcra_cas(tat_, now_ns, cost);
    }
    bool allow(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept { return try_acquire(now_ns, cost).allowed; }

    /// A snapshot of the state, as a Gcra::State.
    [[nodiscard]] Gcra::State state() const noexcept { return {tat_.load(std::memory_order_relaxed)}; }

  private:
    std::atomic<std::uint64_t> tat_{0};
    Quota quota_;
    detail::EmissionGrid grid_;
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(alignof(AtomicGcra) == false_sharing_size && sizeof(AtomicGcra) % false_sharing_size == 0);

}  // namespace tally
