// tally/limit/token_bucket.hpp: the token bucket, 16 bytes per key, and
// AtomicTokenBucket, its lock-free single-word form.
#pragma once

#include "../detail/abi.hpp"

#include <atomic>
#include <cstdint>
#include <limits>

#include "../core/platform.hpp"
#include "decision.hpp"
#include "detail/emission_grid.hpp"
#include "detail/limiter_base.hpp"
#include "quota.hpp"

TALLY_BEGIN_NAMESPACE

/// TokenBucket: a bucket of b = quota.capacity() tokens, refilled at exactly
/// limit tokens per window_ns; a request of cost c takes c tokens if there are
/// c, else it is denied and takes none. After idle time up to b requests pass
/// at once, then one every T = window_ns / limit.
///
/// Source: the token bucket of traffic shaping (J. Turner, "New directions in
/// communications", 1986; RFC 2697/2698 describe the metered form).
///
/// Exact integer refill: tokens arrive one at a time at the instants k*T of a
/// grid counted from time 0 (T an exact rational, EmissionGrid), so
/// the bucket never holds a fractional token and in any interval (s, e] at
/// most b + index(e) - index(s) tokens are spent. Gcra on the same Quota
/// decides identically on every stream (it stores origin + missing in 8 bytes).
///
/// Decision: remaining = tokens now (after the request if admitted);
/// retry_after_ns exact to the nanosecond; reset_after_ns = time until full;
/// cost > b is denied with tally::never. A stale now_ns never moves the refill
/// origin back and sees fewer tokens, never more.
///
/// set_quota(q, now_ns): the tokens missing at now_ns stay missing (even more
/// than the new b: the bucket then stays empty until they are refilled) and
/// refill at the new rate from now_ns.
///
/// Memory: 16-byte State. Thread safety: object-level calls are not
/// thread-safe (use AtomicTokenBucket); the const State overloads are, on
/// distinct States.
///
///   tally::TokenBucket upload(tally::Quota::per_second(1 << 20).with_burst(4 << 20));  // bytes
///   if (!upload.allow(now_ns, chunk.size())) defer(chunk);
class TokenBucket : public detail::SingleStateLimiter<TokenBucket> {
  public:
    /// Zero is fresh (a full bucket).
    struct State {
        std::uint64_t missing = 0;  // tokens short of full at the origin
        std::uint64_t origin = 0;   // grid index of the last admission
    };

    explicit TokenBucket(const Quota& quota) : quota_(check(quota, "tally::TokenBucket::TokenBucket")), grid_(quota) {}

    // Inherited: quota(); try_acquire(now_ns, cost = 1) and allow(now_ns,
    // cost = 1) on the object's state; set_quota(quota, now_ns), which keeps
    // the state through rebase_state and throws std::invalid_argument
    // (nothing changed) for a bad quota.
    using SingleStateLimiter::try_acquire;

    /// Tokens available at now_ns.
    [[nodiscard]] std::uint64_t tokens(std::uint64_t now_ns) const noexcept { return tokens(state_, now_ns); }
    [[nodiscard]] std::uint64_t tokens(const State& s, std::uint64_t now_ns) const noexcept {
        const std::uint64_t m = missing_at(s, grid_.index(now_ns));
        return m >= grid_.cap ? 0 : grid_.cap - m;
    }

    // Per-key policy interface (PerKeyPolicy); fresh_state() is State{}.
    Decision try_acquire(State& s, std::uint64_t now_ns, std::uint64_t cost = 1) const noexcept {
        constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
        const std::uint64_t b = grid_.cap;
        const std::uint64_t n = grid_.index(now_ns);
        const bool stale = n < s.origin;
        const std::uint64_t missing = missing_at(s, n);
        const std::uint64_t level = missing >= b ? 0 : b - missing;
        // Grid index at which the bucket is full again (before this request).
        const std::uint64_t full_at = stale ? s.origin + s.missing : n + missing;
        // End of the clock: a request that would push full_at past 2^64 - 1
        // is denied for good (as Gcra).
        const std::uint64_t room = max - full_at;
        const std::uint64_t have = level < room ? level : room;
        const std::uint64_t reset = grid_.wait_until(full_at, now_ns);
        if (cost <= have) {
            if (cost == 0) return Decision{true, have, 0, reset};
            if (stale) {
                s.missing += cost;  // the origin stays: a stale time never moves it back
            } else {
                s.origin = n;
                s.missing = missing + cost;
            }
            return Decision{true, have - cost, 0, grid_.wait_until(full_at + cost, now_ns)};
        }
        if (cost > b || cost <= level || cost > room) return Decision{false, have, never, reset};
        // Enough tokens once the bucket is within b - cost of full.
        return Decision{false, have, grid_.wait_until(full_at + cost - b, now_ns), reset};
    }
    [[nodiscard]] bool is_fresh(const State& s, std::uint64_t now_ns) const noexcept {
        const std::uint64_t n = grid_.index(now_ns);
        return n >= s.origin && n - s.origin >= s.missing;
    }

    /// `s` made under `old`'s quota, moved to this quota at now_ns: the tokens
    /// missing at now_ns stay missing, all of them, and refill at this rate
    /// from now_ns. A fresh state stays fresh.
    [[nodiscard]] State rebase_state(const State& s, const TokenBucket& old, std::uint64_t now_ns) const noexcept {
        if (s.missing == 0 && s.origin == 0) return State{};
        const std::uint64_t n = grid_.index(now_ns);
        std::uint64_t m = missing_at(s, old.grid_.index(now_ns));
        if (m > std::numeric_limits<std::uint64_t>::max() - n) m = std::numeric_limits<std::uint64_t>::max() - n;
        return State{m, n};
    }

    /// The internal state (for inspection and tests).
    [[nodiscard]] State state() const noexcept { return state_; }

  private:
    friend SingleStateLimiter;
    static constexpr const char* set_quota_site = "tally::TokenBucket::set_quota";

    // Tokens short of full at grid index n: refilled one per index since the
    // origin; before the origin (stale time) the refill since then is undone.
    [[nodiscard]] static std::uint64_t missing_at(const State& s, std::uint64_t n) noexcept {
        if (n >= s.origin) {
            const std::uint64_t refilled = n - s.origin;
            return s.missing > refilled ? s.missing - refilled : 0;
        }
        const std::uint64_t back = s.origin - n;
        return back > std::numeric_limits<std::uint64_t>::max() - s.missing ? std::numeric_limits<std::uint64_t>::max()
                                                                             : s.missing + back;
    }

    Quota quota_;
    EmissionGrid grid_;
    State state_{};
};

static_assert(sizeof(TokenBucket::State) == 16);

/// AtomicTokenBucket: TokenBucket on one lock-free std::atomic<std::uint64_t>
/// for one bucket shared by many threads. The bucket is packed as the single
/// grid index origin + missing (where it is full again), which is Gcra's
/// theoretical arrival time, so the update is AtomicGcra's: TokenBucket's
/// decisions for any serial order of calls, never more than b + index(e) -
/// index(s) tokens spent with timestamps in [s, e] under contention, and
/// set_quota(q, now_ns) thread-safe with TokenBucket::set_quota's semantics
/// (each decision wholly under one quota; acquirers wait while a change is
/// in progress).
///
/// Thread safety: every member is thread-safe. Padded to
/// tally::false_sharing_size.
///
///   tally::AtomicTokenBucket egress(tally::Quota::per_second(125'000'000));  // bytes: 1 Gbit/s
///   if (!egress.allow(now_ns, packet_bytes)) drop();
class alignas(false_sharing_size) AtomicTokenBucket : public detail::AtomicEmissionLimiter<AtomicTokenBucket> {
    friend AtomicEmissionLimiter;
    static constexpr const char* ctor_site = "tally::AtomicTokenBucket::AtomicTokenBucket";
    static constexpr const char* set_quota_site = "tally::AtomicTokenBucket::set_quota";

  public:
    explicit AtomicTokenBucket(const Quota& quota) : AtomicEmissionLimiter(quota) {}

    // Inherited, all thread-safe: quota(); try_acquire(now_ns, cost = 1);
    // allow(now_ns, cost = 1); set_quota(quota, now_ns), TokenBucket::set_quota
    // applied atomically (std::invalid_argument, nothing changed, for a bad quota).

    /// Tokens available at now_ns (a snapshot).
    [[nodiscard]] std::uint64_t tokens(std::uint64_t now_ns) const noexcept { return cell_.tokens(now_ns); }
};

static_assert(alignof(AtomicTokenBucket) == false_sharing_size && sizeof(AtomicTokenBucket) % false_sharing_size == 0);

TALLY_END_NAMESPACE
