// tally/limit/detail/limiter_base.hpp: the object-level face every limiter
// shares, written once: quota(), try_acquire(now, cost) over the State
// overload, allow(), and set_quota (validate, then rebase the state).
#pragma once

#include "../../detail/abi.hpp"

#include <cstdint>

#include "../decision.hpp"
#include "../quota.hpp"
#include "emission_grid.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

/// allow(now, cost) as try_acquire(now, cost).allowed.
template <class Derived>
class AllowFromDecision {
  public:
    bool allow(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept {
        return static_cast<Derived&>(*this).try_acquire(now_ns, cost).allowed;
    }
};

/// A limiter holding one State under one Quota. Derived keeps the members
/// quota_ and state_ (so its layout is its own), provides the const State
/// overloads (try_acquire(State&, now, cost), rebase_state(s, old, now)), a
/// constructor from a Quota and the site set_quota_site named in error
/// messages, may replace `check` (validate a quota or throw), and befriends
/// this base. set_quota copies the policy of a limiter built on the new quota
/// and keeps the rebased state.
template <class Derived>
class SingleStateLimiter : public AllowFromDecision<Derived> {
  public:
    [[nodiscard]] Quota quota() const noexcept { return static_cast<const Derived&>(*this).quota_; }

    Decision try_acquire(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept {
        Derived& d = static_cast<Derived&>(*this);
        return d.try_acquire(d.state_, now_ns, cost);
    }

    /// Replaces the quota at now_ns, keeping the state through rebase_state.
    /// Throws std::invalid_argument (nothing changed) for a bad quota.
    void set_quota(const Quota& quota, std::uint64_t now_ns) {
        Derived& d = static_cast<Derived&>(*this);
        const Derived next(Derived::check(quota, Derived::set_quota_site));
        const auto s = next.rebase_state(d.state_, d, now_ns);
        d = next;
        d.state_ = s;
    }

    [[nodiscard]] auto fresh_state() const noexcept { return typename Derived::State{}; }

  protected:
    static const Quota& check(const Quota& q, const char* who) {
        q.validate(who);
        return q;
    }
};

/// A limiter on one AtomicEmission cell (AtomicGcra, AtomicTokenBucket):
/// every member thread-safe; Derived names ctor_site and set_quota_site.
template <class Derived>
class AtomicEmissionLimiter : public AllowFromDecision<Derived> {
  public:
    AtomicEmissionLimiter(const AtomicEmissionLimiter&) = delete;
    AtomicEmissionLimiter& operator=(const AtomicEmissionLimiter&) = delete;

    [[nodiscard]] Quota quota() const noexcept { return cell_.quota(); }

    Decision try_acquire(std::uint64_t now_ns, std::uint64_t cost = 1) noexcept {
        return cell_.try_acquire(now_ns, cost);
    }

    /// The single-state limiter's set_quota, thread-safe. Throws
    /// std::invalid_argument (nothing changed) for a bad quota.
    void set_quota(const Quota& quota, std::uint64_t now_ns) {
        quota.validate(Derived::set_quota_site);
        cell_.set_quota(quota, now_ns);
    }

  protected:
    explicit AtomicEmissionLimiter(const Quota& quota) : cell_((quota.validate(Derived::ctor_site), quota)) {}

    AtomicEmission cell_;
};

}  // namespace detail
TALLY_END_NAMESPACE
