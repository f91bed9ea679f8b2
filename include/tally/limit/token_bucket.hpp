// tally/limit/token_bucket.hpp: the token bucket, 16 bytes per key, and
// AtomicTokenBucket, its lock-free single-word form.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>

#include "../core/platform.hpp"
#include "decision.hpp"
#include "gcra.hpp"
#include "quota.hpp"

namespace tally {

/// TokenBucket: a bucket of b = quota.capacity() tokens, refilled at exactly
/// limit tokens per window_ns; a request of cost c takes c tokens if there
/// are c, else it is denied and takes none. After idle time up to b requests
/// pass at once (the controlled burst the seed asks for), then one every
/// T = window_ns / limit.
///
/// Source: the token bucket of traffic shaping (Turner 1986; RFC 2697/2698
/// describe the metered form); see the seed 004 ("token bucket is the fourth
/// answer").
///
/// Exact integer refill: tokens arrive one at a time at the instants k*T of
/// a grid counted from time 0, T = window_ns / limit as an exact rational
/// (detail::EmissionGrid): index(t) = floor(t/T) tokens have arrived by t.
/// So the bucket never holds a fractional token, no rounding accumulates, the
/// long-run rate is exactly limit per window_ns, and in any interval (s, e]
/// at most b + index(e) - index(s) tokens are spent. The State is the refill
/// origin (grid index of the last admission) and the tokens missing then.
/// Gcra built from the same Quota makes identical decisions on every stream
/// (tested); it stores the sum origin + missing in 8 bytes instead.
///
/// Decision: remaining = tokens now (after the request if admitted);
/// retry_after_ns = time until c tokens are there, exact to the nanosecond;
/// reset_after_ns = time until the bucket is full. cost > b: denied with
/// retry_after_ns = tally::never.
///
/// Time going backwards: a now_ns whose grid index is before the refill
/// origin does not move the origin back; it is read as that earlier instant,
/// when the tokens that arrived since had not arrived yet, so it sees fewer
/// tokens, never more. Range: Quota's; within 2^40 grid instants of
/// t = 2^64 ns requests are denied rather than wrapped (as Gcra).
///
/// Memory: State is 16 bytes (static_assert). Thread safety: object-level
/// try_acquire / allow are not thread-safe (use AtomicTokenBucket); the
/// const State overloads, fresh_state, is_fresh, tokens and quota are
/// thread-safe on distinct States.
///
///   tally::TokenBucket upload(tally::Quota::per_second(1 << 20).with_burst(4 << 20));  // bytes
///   if (!upload.allow(now_ns, chunk.size())) defer(chunk);
class TokenBucket {
  public:
    /// Zero is fresh (a full bucket).
    struct State {
        std::uint64_t missing = 0;  // tokens short of full at the origin
        std::uint64_t origin = 0;   // grid index of the last admission
    };

    explicit TokenBucket(const Quota& quota) : quota_((quota.validate("tally::TokenBucket"), quota)), grid_(quota) {}

    [[nodiscard]] Quota quota() const noexcept { return quota_; }

    Decision try_acquire(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept {
        return try_acquire(state_, now_ns, cost);
    }
    bool allow(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept { return try_acquire(now_ns, cost).allowed; }

    /// Tokens available at now_ns.
    [[nodiscard]] std::uint64_t tokens(std::uint64_t now_ns) const noexcept { return tokens(state_, now_ns); }
    [[nodiscard]] std::uint64_t tokens(const State& s, std::uint64_t now_ns) const noexcept {
        const std::uint64_t m = missing_at(s, grid_.index(now_ns));
        return m >= grid_.cap ? 0 : grid_.cap - m;
    }

    // Per-key policy interface (KeyedRateLimiter).
    [[nodiscard]] State fresh_state() const noexcept { return State{}; }
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

    /// The internal state (for inspection and tests).
    [[nodiscard]] State state() const noexcept { return state_; }

  private:
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
    detail::EmissionGrid grid_;
    State state_{};
};

static_assert(sizeof(TokenBucket::State) == 16);

/// AtomicTokenBucket: TokenBucket on one lock-free std::atomic<std::uint64_t>
/// for one bucket shared by many threads. Two 64-bit fields do not fit one
/// CAS word, so the bucket is packed as the single grid index origin +
/// missing (the index at which it is full again) -- which is exactly GCRA's
/// theoretical arrival time, so the update is AtomicGcra's: same decisions
/// as TokenBucket for any serial order of calls, the same admission bound
/// under contention (never more than b + index(e) - index(s) tokens spent
/// with timestamps in [s, e]; tested under TSan), relaxed CAS (one word,
/// nothing else published), padded to tally::false_sharing_size.
///
/// Thread safety: every member is thread-safe. Lock-free (static_assert).
///
///   tally::AtomicTokenBucket egress(tally::Quota::per_second(125'000'000));  // bytes: 1 Gbit/s
///   if (!egress.allow(now_ns, packet_bytes)) drop();
class alignas(false_sharing_size) AtomicTokenBucket {
  public:
    explicit AtomicTokenBucket(const Quota& quota)
        : quota_((quota.validate("tally::AtomicTokenBucket"), quota)), grid_(quota) {}
    AtomicTokenBucket(const AtomicTokenBucket&) = delete;
    AtomicTokenBucket& operator=(const AtomicTokenBucket&) = delete;

    [[nodiscard]] Quota quota() const noexcept { return quota_; }

    Decision try_acquire(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept {
        return grid_.gcra_cas(word_, now_ns, cost);
    }
    bool allow(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept { return try_acquire(now_ns, cost).allowed; }

    /// Tokens available at now_ns (a snapshot).
    [[nodiscard]] std::uint64_t tokens(std::uint64_t now_ns) const noexcept {
        const std::uint64_t full_at = word_.load(std::memory_order_relaxed);
        const std::uint64_t n = grid_.index(now_ns);
        const std::uint64_t missing = full_at > n ? full_at - n : 0;
        return missing >= grid_.cap ? 0 : grid_.cap - missing;
    }

  private:
    std::atomic<std::uint64_t> word_{0};
    Quota quota_;
    detail::EmissionGrid grid_;
};

static_assert(alignof(AtomicTokenBucket) == false_sharing_size && sizeof(AtomicTokenBucket) % false_sharing_size == 0);

}  // namespace tally
