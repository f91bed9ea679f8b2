// tally/limit/acquire_all.hpp: several local limits at once, all or nothing
// (per user AND per tenant AND global).
#pragma once

#include "../detail/abi.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "decision.hpp"

TALLY_BEGIN_NAMESPACE

/// acquire_all(now_ns, cost, limiters...): admits a request of `cost` at
/// now_ns only if every limiter admits it, and then charges every one;
/// otherwise charges none. Checking one by one and stopping at the first
/// denial would leave the earlier limiters charged for a request that was
/// refused; here each limiter decides on a copy, and the copies replace the
/// originals only when all admitted (so no limiter is charged twice, and a
/// denied call changes no limiter).
///
/// The Decision is the tightest: admitted, remaining = the smallest remaining
/// after the charge and reset_after_ns the largest; denied, retry_after_ns =
/// the largest among the denied limiters (tally::never if any is never), which
/// is exact: with no other traffic the same call passes at now +
/// retry_after_ns and not one nanosecond earlier; remaining = the smallest
/// that each limiter has now and reset_after_ns the largest, both uncharged.
/// degraded is true if any limiter's decision was.
///
/// Limiters: any copyable RateLimiter (the local ones, DryRun excepted); for
/// the atomic forms lock around the call or use one AtomicGcra per limit
/// only. Cost: one copy of each limiter per call (SlidingLogLimiter: O(log
/// entries)). Thread safety: none; the caller owns the limiters.
///
///   tally::Gcra per_user(Quota::per_second(10)), per_tenant(Quota::per_second(100));
///   tally::SlidingWindowLimiter<> global(Quota::per_minute(100'000));
///   if (auto d = tally::acquire_all(now_ns, 1, per_user, per_tenant, global); !d) reply_429(d);
template <class... Ls>
    requires(sizeof...(Ls) >= 1 && (RateLimiter<Ls> && ...) && (std::is_copy_constructible_v<Ls> && ...) &&
             (std::is_move_assignable_v<Ls> && ...))
Decision acquire_all(std::uint64_t now_ns, std::uint64_t cost, Ls&... limiters) noexcept(
    (std::is_nothrow_copy_constructible_v<Ls> && ...)) {
    constexpr std::size_t n = sizeof...(Ls);
    std::tuple<Ls...> trial(limiters...);
    std::array<Decision, n> d{};
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((d[I] = std::get<I>(trial).try_acquire(now_ns, cost)), ...);
    }(std::index_sequence_for<Ls...>{});
    bool all = true, degraded = false;
    for (const Decision& x : d) {
        all = all && x.allowed;
        degraded = degraded || x.degraded;
    }
    Decision out{all, never, 0, 0, degraded};
    if (all) {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            ((limiters = std::move(std::get<I>(trial))), ...);
        }(std::index_sequence_for<Ls...>{});
        for (const Decision& x : d) {
            if (x.remaining < out.remaining) out.remaining = x.remaining;
            if (x.reset_after_ns > out.reset_after_ns) out.reset_after_ns = x.reset_after_ns;
        }
        return out;
    }
    // Denied: nothing is charged. A limiter that admitted on its copy reports
    // what it has now through a peek on the original (cost 0 charges nothing).
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((d[I].allowed ? (void)(d[I] = limiters.try_acquire(now_ns, 0), d[I].allowed = true) : (void)0), ...);
    }(std::index_sequence_for<Ls...>{});
    for (const Decision& x : d) {
        if (!x.allowed && x.retry_after_ns > out.retry_after_ns) out.retry_after_ns = x.retry_after_ns;
        if (x.remaining < out.remaining) out.remaining = x.remaining;
        if (x.reset_after_ns > out.reset_after_ns) out.reset_after_ns = x.reset_after_ns;
    }
    return out;
}

TALLY_END_NAMESPACE
