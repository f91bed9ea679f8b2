// tally/limit/decision.hpp: the answer every limiter gives, and the concepts
// naming the limiter shape (RateLimiter) and the per-key state contract
// (PerKeyPolicy) that KeyedLimiter builds on.
#pragma once

#include "../detail/abi.hpp"

#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "quota.hpp"

TALLY_BEGIN_NAMESPACE

/// `retry_after_ns` of a request that can never pass (cost above the limit or
/// burst): no wait makes it admissible.
inline constexpr std::uint64_t never = std::numeric_limits<std::uint64_t>::max();

/// The outcome of one try_acquire, exact for the algorithm that made it:
/// - `allowed`: the request was admitted (and consumed `cost`) or denied
///   (and consumed nothing);
/// - `remaining`: units that could still be admitted right now, after this
///   request if it was admitted;
/// - `retry_after_ns`: 0 when allowed; otherwise the earliest wait after
///   which the same request (same cost, no other traffic) would pass:
///   retrying at now + retry_after_ns passes, at now + retry_after_ns - 1 it
///   is still denied. `tally::never` (UINT64_MAX) when it can never pass;
/// - `reset_after_ns`: wait until the limiter is fully replenished (as if
///   fresh), 0 if it already is.
/// - `degraded`: true only when a remote backend (Redis) failed and the
///   answer came from its fail mode; always false for local limiters.
/// These map onto the IETF RateLimit header fields (remaining -> r,
/// reset_after_ns -> t, rounded up to seconds) and Retry-After.
struct Decision {
    bool allowed;
    std::uint64_t remaining;
    std::uint64_t retry_after_ns;
    std::uint64_t reset_after_ns;
    bool degraded = false;

    explicit constexpr operator bool() const noexcept { return allowed; }
    friend constexpr bool operator==(const Decision&, const Decision&) = default;
};

/// The shape every tally limiter has: built from a Quota (validated, throws
/// std::invalid_argument), then
///   Decision try_acquire(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept
///   bool allow(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept
///   Quota quota() const noexcept
/// Semantics shared by all of them: a denied request consumes nothing;
/// cost == 0 is a peek (always allowed, consumes nothing, reports remaining
/// and reset_after_ns); a cost above the limit (window limiters) or burst
/// (bucket limiters) is denied with retry_after_ns == tally::never; a now_ns
/// earlier than one already seen never mints capacity nor moves a refill
/// origin backwards (each limiter documents exactly how it treats it).
template <class L>
concept RateLimiter = std::constructible_from<L, Quota> &&
                      requires(L& l, const L& cl, std::uint64_t now, std::uint64_t cost) {
                          { l.try_acquire(now, cost) } noexcept -> std::same_as<Decision>;
                          { l.try_acquire(now) } noexcept -> std::same_as<Decision>;
                          { l.allow(now, cost) } noexcept -> std::same_as<bool>;
                          { l.allow(now) } noexcept -> std::same_as<bool>;
                          { cl.quota() } noexcept -> std::same_as<Quota>;
                      };

/// PerKeyPolicy: the per-key state contract. The limiter object is a
/// *policy* (the Quota turned into constants, shared by all keys) applied to
/// a small external `State`, so a table can hold millions of keys at
/// sizeof(State) bytes each.
///
///   using State = ...;   trivially copyable; `State{}` is a fresh state
///   State fresh_state() const noexcept            what a new key starts with
///   Decision try_acquire(State& s, std::uint64_t now_ns,
///                        std::uint64_t cost = 1) const noexcept
///       the policy applied to `s`: the decisions of the object-level
///       try_acquire on a limiter whose state is `s`; a denial or peek
///       changes nothing observable in `s`
///   bool is_fresh(const State& s, std::uint64_t now_ns) const noexcept
///       `s` behaves exactly like fresh_state() for every request at now_ns
///       or later, so a table may drop the key
///   State rebase_state(const State& s, const L& old_policy,
///                      std::uint64_t now_ns) const noexcept
///       `s`, made under old_policy's quota, converted to this policy's
///       quota at now_ns (what set_quota does to the object's own state):
///       units spent stay spent, counts in the window stay, and the result
///       never admits more at now_ns than this quota allows; rebasing onto
///       an equal quota changes no decision
///
/// The const members touch no mutable member, so one policy may be shared by
/// threads that each own (or lock) their states. Satisfied by
/// FixedWindowLimiter, SlidingWindowLimiter, TokenBucket and Gcra.
template <class L>
concept PerKeyPolicy =
    RateLimiter<L> && std::is_trivially_copyable_v<typename L::State> &&
    std::is_default_constructible_v<typename L::State> &&
    requires(const L& cl, typename L::State& s, const typename L::State& cs, std::uint64_t now, std::uint64_t cost) {
        { cl.fresh_state() } noexcept -> std::same_as<typename L::State>;
        { cl.try_acquire(s, now, cost) } noexcept -> std::same_as<Decision>;
        { cl.try_acquire(s, now) } noexcept -> std::same_as<Decision>;
        { cl.is_fresh(cs, now) } noexcept -> std::same_as<bool>;
        { cl.rebase_state(cs, cl, now) } noexcept -> std::same_as<typename L::State>;
    };

TALLY_END_NAMESPACE
