// tally/limit/emission_grid.hpp: the exact-rational emission grid of a Quota
// (TokenBucket, Gcra, their atomic forms, and the Redis GCRA scripts).
#pragma once

#include "../detail/abi.hpp"

#include <cstdint>
#include <limits>

#include "../core/platform.hpp"
#include "../detail/primitives.hpp"
#include "decision.hpp"
#include "quota.hpp"

TALLY_BEGIN_NAMESPACE

/// EmissionGrid: the instants at which a quota lets one unit through, the
/// grid shared by TokenBucket, Gcra, their atomic forms and the Redis
/// scripts (redis::GcraParams::grid()). Thread safety: immutable.
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
        return static_cast<std::uint64_t>(static_cast<detail::uint128>(t) * num / den);
    }

    /// Earliest t with index(t) >= k, i.e. ceil(k * den / num); saturates at
    /// UINT64_MAX when that time is past the end of the clock.
    TALLY_ALWAYS_INLINE std::uint64_t time_of(std::uint64_t k) const noexcept {
        if (TALLY_LIKELY(k <= fast_k)) {
            const std::uint64_t p = k * den;
            return p / num + (p % num != 0 ? 1 : 0);
        }
        const detail::uint128 p = static_cast<detail::uint128>(k) * den;
        const detail::uint128 t = p / num + (p % num != 0 ? 1 : 0);
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
    /// cost > 0). No index above `top` is ever produced (the end of the clock).
    TALLY_ALWAYS_INLINE Decision gcra(std::uint64_t tat, std::uint64_t now, std::uint64_t cost, std::uint64_t& next,
                                      std::uint64_t top = std::numeric_limits<std::uint64_t>::max()) const noexcept {
        const std::uint64_t n = index(now);
        // debt: tokens not yet re-emitted at `now`. A stale `now` (before an
        // admitted request's grid instant) makes it larger, never smaller.
        const std::uint64_t debt = tat > n ? tat - n : 0;
        const std::uint64_t level = debt >= cap ? 0 : cap - debt;
        const std::uint64_t base = tat > n ? tat : n;
        // End of the clock (index within 2^40 of 2^64): what would push the
        // index past 2^64 - 1 is denied for good rather than wrapped.
        const std::uint64_t room = base < top ? top - base : 0;
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

    /// The index `tat`, made on grid `from`, moved onto this grid at `now`:
    /// the debt (units not yet re-emitted at now on `from`) stays, whole, and
    /// is re-emitted on this grid from now. It is not clamped to this bucket's
    /// size: a key that spent 10 under a burst of 10, moved to a burst of 5
    /// and back, must not spend 5 more at the same instant. A never used
    /// state (0) stays fresh.
    [[nodiscard]] std::uint64_t rebase(std::uint64_t tat, const EmissionGrid& from, std::uint64_t now) const noexcept {
        if (tat == 0) return 0;
        const std::uint64_t n = from.index(now);
        return detail::sat_add(index(now), tat > n ? tat - n : 0);
    }
};

TALLY_END_NAMESPACE
