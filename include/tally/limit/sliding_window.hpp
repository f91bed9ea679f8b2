// tally/limit/sliding_window.hpp: the sliding-window counter limiter, a
// SlidingCounter ring and a limit.
#pragma once

#include "../detail/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "../detail/primitives.hpp"
#include "../window/sliding_counter.hpp"
#include "decision.hpp"
#include "detail/limiter_base.hpp"
#include "quota.hpp"

TALLY_BEGIN_NAMESPACE

/// SlidingWindowLimiter: admits a request of cost c at t iff the
/// SlidingCounter estimate of the admitted cost in (t - W, t] plus c is at most
/// `limit` (exact rational comparison). The ring has `Slots` buckets of
/// b = ceil(window_ns / (Slots - 1)) ns, so W = (Slots - 1) * b >= window_ns
/// (equal for every per_second/minute/hour/day quota with the default 11
/// slots). Slots = 2 is Cloudflare's "previous + current" counter (J. Desgats,
/// "How we built rate limiting capable of scaling to millions of domains",
/// 2017); more slots shrink the error. burst is ignored.
///
/// Guarantee, with oldest(t) the count of the ring's oldest bucket (the only
/// one whose placement is guessed): exact admitted cost in (t - W, t] <=
/// limit + oldest(t), and a request is denied only if its exact window count
/// + c > limit - oldest(t). About limit / (Slots - 1) for smooth traffic.
///
/// Decision: remaining = limit - ceil(estimate); retry_after_ns exact to the
/// nanosecond, tally::never for cost > limit; reset_after_ns = time until the
/// estimate is 0. A now_ns before the newest bucket is evaluated and charged
/// at that bucket's start, so it never sees more capacity.
///
/// set_quota(q, now_ns): every count still in the ring stays, moved to the
/// new ring's bucket holding the last instant of its old bucket (never
/// earlier, so it leaves the window no sooner than that instant allows).
///
/// Range: limit <= max(Slot) / 2, else std::invalid_argument. Memory: State
/// is SlidingCounter<Slot, Slots>::State, 56 bytes for the default. Thread
/// safety: object calls are not thread-safe; const State overloads are.
///
///   tally::SlidingWindowLimiter<> per_minute(tally::Quota::per_minute(600));  // 10 buckets of 6 s
///   if (!per_minute.allow(now_ns)) reject();
template <class Slot = std::uint32_t, std::size_t Slots = 11, SlidingOptions Options = SlidingOptions{}>
class SlidingWindowLimiter : public detail::SingleStateLimiter<SlidingWindowLimiter<Slot, Slots, Options>> {
    using Base = detail::SingleStateLimiter<SlidingWindowLimiter>;
    friend Base;

  public:
    using Counter = SlidingCounter<Slot, Slots, Options>;
    /// The ring; State{} is an empty ring (fresh).
    using State = typename Counter::State;

    static constexpr std::uint64_t max_limit = Counter::max_count / 2;

    explicit SlidingWindowLimiter(const Quota& quota)
        : quota_(check(quota, "tally::SlidingWindowLimiter::SlidingWindowLimiter")), counter_(bucket_for(quota.window_ns)) {}

    // Inherited: quota(); try_acquire(now_ns, cost = 1) on the object's state;
    // set_quota(quota, now_ns), which keeps the state through rebase_state and
    // throws std::invalid_argument (nothing changed) for a bad quota.
    using Base::quota;
    using Base::set_quota;
    using Base::try_acquire;
    /// The ring's window (Slots - 1) * bucket_ns, >= quota().window_ns.
    [[nodiscard]] std::uint64_t window_ns() const noexcept { return counter_.window_ns(); }
    [[nodiscard]] std::uint64_t bucket_ns() const noexcept { return counter_.bucket_ns(); }
    [[nodiscard]] const Counter& counter() const noexcept { return counter_; }

    /// try_acquire's decision without computing the waits (O(1) within a
    /// bucket, where try_acquire's waits are O(Slots)).
    bool allow(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept {
        if (cost == 0) return true;  // a peek, even when a stale charge left the estimate above limit
        State& s = state_;
        std::uint64_t t = now_ns;
        if (counter_.bucket_of(now_ns) < s.newest) t = s.newest * counter_.bucket_ns();
        return counter_.allow(s, t, quota_.limit, cost);
    }

    // Per-key policy interface (PerKeyPolicy); fresh_state() is State{}.
    using Base::fresh_state;
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
        return counter_.is_fresh(s, now_ns);
    }

    /// `s` made under `old`'s quota, moved to this quota at now_ns: each
    /// count in old's ring (advanced to now_ns, or to its newest bucket for a
    /// stale now_ns) is placed in this ring's bucket holding the last instant
    /// of its old bucket (capped at that time); counts that fall out of this
    /// ring are outside this window and dropped. An equal quota changes no
    /// decision.
    [[nodiscard]] State rebase_state(const State& s, const SlidingWindowLimiter& old,
                                     std::uint64_t now_ns) const noexcept {
        constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
        State src = s;
        const std::uint64_t ob = old.counter_.bucket_ns();
        std::uint64_t t = now_ns;
        if (old.counter_.bucket_of(now_ns) < src.newest) {
            const detail::uint128 start = static_cast<detail::uint128>(src.newest) * ob;
            t = start > max ? max : static_cast<std::uint64_t>(start);
        }
        (void)old.counter_.read(src, t);  // advance the ring to t
        const auto c = Counter::counts(src);
        State out{};
        for (std::size_t i = 0; i < Slots; ++i) {
            const std::uint64_t back = Slots - 1 - i;  // bucket src.newest - back
            if (c[i] == 0 || src.newest < back) continue;
            const detail::uint128 end = static_cast<detail::uint128>(src.newest - back + 1) * ob - 1;
            const std::uint64_t at = end < t ? static_cast<std::uint64_t>(end) : t;
            counter_.add(out, at, c[i]);
        }
        counter_.add(out, t, 0);  // the ring's newest bucket is t's
        return out;
    }

    [[nodiscard]] const State& state() const noexcept { return state_; }

  private:
    static constexpr const char* set_quota_site = "tally::SlidingWindowLimiter::set_quota";

    // The ring holds up to 2 * limit, so the limit is also bounded by Slot.
    static Quota check(const Quota& q, const char* who) {
        q.validate(who);
        detail::check_range(who, "limit", q.limit, std::uint64_t{1}, max_limit);
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

TALLY_END_NAMESPACE
