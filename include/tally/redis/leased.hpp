// tally/redis/leased.hpp: tally::redis::LeasedLimiter, fleet-wide GCRA
// decided locally from leases of tokens charged to Redis up front.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "../core/hash.hpp"
#include "../detail/primitives.hpp"
#include "../core/detail/spin_lock.hpp"
#include "client.hpp"
#include "detail/fail_log.hpp"
#include "options.hpp"
#include "protocol.hpp"

TALLY_BEGIN_NAMESPACE
namespace redis {

/// Lease sizing and the local table of a LeasedLimiter.
struct LeaseOptions {
    /// Most tokens one lease takes, in [0, quota capacity]; 0 picks
    /// min(64, max(1, capacity / 2)).
    std::uint64_t max_lease = 0;
    /// Lease lifetime d in ns, in [0, min(window_ns, (capacity - max_lease)
    /// emission intervals)]; 0 picks min(4 * max_lease emission intervals,
    /// that bound). Tokens not spent within d of their charge are never
    /// spent (handed back when possible). Leases are charged against the
    /// burst less the tokens emitted in d (lease_burst()): longer leases mean
    /// fewer round trips and a smaller fleet-wide burst.
    std::uint64_t lease_ns = 0;
    /// A lease takes at most max(cost, floor(available / share)) tokens, so
    /// near the limit every lease is one token. In [1, 2^20].
    std::uint64_t share = 8;
    /// Most keys with lease state in this process, in [1, 2^32].
    std::size_t max_keys = std::size_t{1} << 16;
};

/// LeasedLimiter: tally::Gcra shared by a fleet through Redis (the state of
/// GcraLimiter). A process charges a lease of up to L tokens of a key in one
/// round trip, then admits from it locally until it is spent or d =
/// lease_ns has passed. Design, proofs and measurements: docs/redis.md.
///
/// Guarantee: the fleet never admits more than one tally::Gcra with the same
/// quota: with b = burst and index(t) = floor(t * limit / window_ns), the
/// admissions in any [s, e] number at most b + index(e) - index(s - 1). Why:
/// every token is charged to the key's exact GCRA state before it is
/// admitted and admitted within d of its charge, and charges use the burst
/// b' = b - ceil(d * limit / window_ns) (lease_burst()), which absorbs the
/// tokens a window can gain from charges up to d older than it. Unused
/// tokens go back (next lease, release(), destructor) iff no later charge was
/// made (compare-and-set on the TAT), else are lost: never minted.
/// Under-admission: at most P * max_lease tokens sit in the leases of P
/// processes, and bursts are b' instead of b (a cost above b' is denied with
/// tally::never, as Gcra denies one above b). Size adapts per key: doubles
/// when a lease is spent within d, falls to what was spent when one expires,
/// 1 on a denial; a lease takes at most max(cost, avail / share).
///
/// Clock: try_acquire charges at Redis TIME and times leases on the steady
/// clock; try_acquire_at uses now_ns for both (one per key). Failure: a lease
/// in hand is still spent; a failed round trip answers Options::on_error.
/// Thread safety: all members (16 spinlocked shards, at most max_keys keys;
/// an evicted key's unused tokens are lost). Cost: a lease-served decision
/// is a hash, a lock and a decrement. The Client must outlive the limiter.
///
///   tally::redis::LeasedLimiter api(client, tally::Quota::per_second(1000));
///   if (auto d = api.try_acquire("key:42"); !d) reply_429(d.retry_after_ns);
class LeasedLimiter {
  public:
    /// Takes the Client's Options unless given its own; refuses an evicting
    /// server as GcraLimiter does.
    LeasedLimiter(Client& client, const Quota& quota, LeaseOptions lease = {},
                  std::optional<Options> options = std::nullopt)
        : client_(&client),
          opt_(options ? std::move(*options) : client.options()),
          lease_opt_(lease),
          params_(quota, who) {
        detail::refuse_evicting(client.eviction_refusal(), opt_, who);
        const Quota q = params_.quota();
        const std::uint64_t b = q.capacity();
        tally::detail::check_range(who, "max_lease", lease.max_lease, std::uint64_t{0}, b);
        if (lease_opt_.max_lease == 0) lease_opt_.max_lease = std::clamp<std::uint64_t>(b / 2, 1, 64);
        const std::uint64_t m = lease_opt_.max_lease;
        // The longest d whose emitted tokens, ceil(d * limit / window_ns),
        // fit in the burst beside one full lease.
        using u128 = tally::detail::uint128;
        const u128 fit = static_cast<u128>(b - m) * q.window_ns / q.limit;
        const std::uint64_t d_max = fit < q.window_ns ? static_cast<std::uint64_t>(fit) : q.window_ns;
        tally::detail::check_range(who, "lease_ns", lease.lease_ns, std::uint64_t{0}, d_max);
        tally::detail::check_range(who, "share", lease.share, std::uint64_t{1}, std::uint64_t{1} << 20);
        tally::detail::check_range(who, "max_keys", lease.max_keys, std::size_t{1}, std::size_t{1} << 32);
        if (lease_opt_.lease_ns == 0) {
            const u128 d = static_cast<u128>(q.window_ns) / q.limit * 4 * m;
            lease_opt_.lease_ns = d < d_max ? static_cast<std::uint64_t>(d) : d_max;
        }
        // A lease of one token is spent when charged: nothing is deferred.
        const u128 emitted = m <= 1 ? 0 : (static_cast<u128>(lease_opt_.lease_ns) * q.limit + q.window_ns - 1) / q.window_ns;
        lease_burst_ = b - static_cast<std::uint64_t>(emitted);
        charge_.emplace(Quota{q.limit, q.window_ns, lease_burst_}, who);
        per_shard_ = (lease_opt_.max_keys + shard_count - 1) / shard_count;
    }
    LeasedLimiter(const LeasedLimiter&) = delete;
    LeasedLimiter& operator=(const LeasedLimiter&) = delete;
    /// Hands unused tokens back (best effort: one round trip per held key,
    /// stopping at the first that fails).
    ~LeasedLimiter() { release_all(); }

    [[nodiscard]] Quota quota() const noexcept { return params_.quota(); }
    [[nodiscard]] const LeaseOptions& lease_options() const noexcept { return lease_opt_; }
    /// The lease lifetime d in ns.
    [[nodiscard]] std::uint64_t lease_ns() const noexcept { return lease_opt_.lease_ns; }
    /// The burst leases are charged against: capacity - ceil(d * limit /
    /// window_ns), or the capacity when max_lease is 1. At least max_lease.
    [[nodiscard]] std::uint64_t lease_burst() const noexcept { return lease_burst_; }

    /// Redis server time for charges, the steady clock for lease lifetimes.
    Decision try_acquire(std::string_view key, std::uint64_t cost = 1) { return acquire(key, cost, steady_ns(), false); }
    /// The caller's time for both.
    Decision try_acquire_at(std::string_view key, std::uint64_t now_ns, std::uint64_t cost = 1) {
        return acquire(key, cost, now_ns, true);
    }

    /// Hands the unused tokens of `key`'s lease back (one round trip if any
    /// are held) and forgets the lease. Call it for keys going idle (the
    /// destructor does it for all).
    /// False when the round trip failed.
    bool release(std::string_view key) {
        const Hashed h{key, hash_of(key)};
        Shard& sh = shard_of(h);
        std::uint64_t tat = 0, n = 0;
        {
            Guard lock(sh.mu);
            auto it = sh.map.find(h);
            if (it == sh.map.end() || it->second.refilling) return true;
            n = std::min(it->second.left, it->second.returnable);
            tat = it->second.tat_after;
            sh.map.erase(it);
            sh.last = nullptr;
        }
        if (n == 0) return true;
        const std::string k = protocol::detail::prefixed_key(who, opt_.key_prefix, key, max_key_bytes);
        const protocol::Call call[1] = {protocol::lease_call(k, *charge_, 0, 0, 1, tat, n, std::nullopt)};
        std::vector<Reply> replies;
        trips_.fetch_add(1, std::memory_order_relaxed);
        if (!client_->run(call, replies)) return false;
        const auto o = protocol::lease_decode(replies[0], *charge_, 0, 0, 1, n, std::nullopt, key);
        if (o.ok) returned_.fetch_add(o.returned, std::memory_order_relaxed);
        return true;
    }
    /// release() for every key holding tokens; stops at the first failed
    /// round trip (Redis away: each would wait command_timeout).
    void release_all() {
        std::vector<std::string> keys;
        for (auto& sh : shards_) {
            Guard lock(sh.mu);
            for (const auto& [k, l] : sh.map)
                if (l.left > 0) keys.push_back(k);
        }
        for (const auto& k : keys)
            if (!release(k)) return;
    }

    /// Tokens of `key` held unused in this process's lease (monitoring, tests).
    [[nodiscard]] std::uint64_t leased_tokens(std::string_view key) const {
        const Hashed h{key, hash_of(key)};
        const Shard& sh = shard_of(h);
        Guard lock(sh.mu);
        auto it = sh.map.find(h);
        return it == sh.map.end() ? 0 : it->second.left;
    }
    /// Keys with lease state in this process (at most max_keys rounded up
    /// to a multiple of the 16 shards).
    [[nodiscard]] std::size_t size() const {
        std::size_t n = 0;
        for (const auto& sh : shards_) {
            Guard lock(sh.mu);
            n += sh.map.size();
        }
        return n;
    }
    /// Round trips this limiter made.
    [[nodiscard]] std::uint64_t round_trips() const noexcept { return trips_.load(std::memory_order_relaxed); }
    /// Tokens charged to Redis by this limiter's leases, and handed back.
    [[nodiscard]] std::uint64_t tokens_leased() const noexcept { return leased_.load(std::memory_order_relaxed); }
    [[nodiscard]] std::uint64_t tokens_returned() const noexcept { return returned_.load(std::memory_order_relaxed); }
    /// Calls answered by the fail mode so far.
    [[nodiscard]] std::uint64_t degraded_count() const noexcept { return fails_.count(); }
    [[nodiscard]] std::string last_error() const { return fails_.last_error(); }

  private:
    static constexpr const char* who = "tally::redis::LeasedLimiter";
    static constexpr std::size_t shard_count = 16;

    struct Lease {
        std::uint64_t left = 0;        // unspent tokens
        std::uint64_t returnable = 0;  // of them, from the lease that set tat_after
        std::uint64_t granted = 0;     // size of the current lease
        std::uint64_t tat_after = 0;   // TAT that lease wrote (compare-and-set token)
        std::uint64_t start = 0;       // local time the lease counts from
        std::uint64_t expires = 0;     // start + d
        std::uint64_t remaining = 0;   // Redis remaining at lease time
        std::uint64_t reset_at = 0;    // local time the key is fresh, as of the lease
        std::uint64_t want = 1;        // next lease size
        std::uint64_t denied_until = 0;
        std::uint64_t denied_cost = 0;
        bool refilling = false;
    };
    // One hash per call: the shard comes from its high bits, and the map is
    // searched with the hash already computed (transparent lookup).
    struct Hashed {
        std::string_view key;
        std::size_t hash;
    };
    static std::size_t hash_of(std::string_view s) noexcept { return static_cast<std::size_t>(Hasher<std::string_view>{}(s)); }
    struct Hash {
        using is_transparent = void;
        std::size_t operator()(const std::string& s) const noexcept { return hash_of(s); }
        std::size_t operator()(const Hashed& h) const noexcept { return h.hash; }
    };
    struct Eq {
        using is_transparent = void;
        bool operator()(const std::string& a, const std::string& b) const noexcept { return a == b; }
        bool operator()(const Hashed& a, const std::string& b) const noexcept { return a.key == b; }
        bool operator()(const std::string& a, const Hashed& b) const noexcept { return a == b.key; }
    };
    struct alignas(tally::cache_line_size) Shard {
        mutable tally::detail::SpinLock mu;
        std::unordered_map<std::string, Lease, Hash, Eq> map;
        // The last entry used: a hot key skips the bucket search (the
        // modulo by a prime bucket count). Nodes are stable until erased.
        std::pair<const std::string, Lease>* last = nullptr;
        std::size_t last_hash = 0;
    };
    using Guard = std::lock_guard<tally::detail::SpinLock>;

    static std::uint64_t steady_ns() noexcept {
        return static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
                .count());
    }
    Shard& shard_of(const Hashed& h) noexcept { return shards_[(h.hash >> (sizeof(std::size_t) * 8 - 4)) % shard_count]; }
    const Shard& shard_of(const Hashed& h) const noexcept { return shards_[(h.hash >> (sizeof(std::size_t) * 8 - 4)) % shard_count]; }

    Decision degraded(std::string why) { return fails_.degraded(opt_, std::move(why)); }

    // The key's entry, inserted (evicting another when the shard is full).
    Lease& entry(Shard& sh, const Hashed& key) {
        if (sh.last != nullptr && sh.last_hash == key.hash && sh.last->first == key.key) return sh.last->second;
        auto it = sh.map.find(key);
        if (it == sh.map.end()) {
            if (sh.map.size() >= per_shard_) {
                for (auto v = sh.map.begin(); v != sh.map.end(); ++v)
                    if (!v->second.refilling) {
                        sh.map.erase(v);
                        break;
                    }
            }
            it = sh.map.emplace(std::string(key.key), Lease{}).first;
        }
        sh.last = &*it;
        sh.last_hash = key.hash;
        return it->second;
    }

    Decision acquire(std::string_view key, std::uint64_t cost, std::uint64_t now, bool caller_time) {
        tally::detail::check_range(who, "key length", key.size(), std::size_t{0}, max_key_bytes);
        const Hashed h{key, hash_of(key)};
        Shard& sh = shard_of(h);
        std::uint64_t want = cost, ret_tat = 0, ret_n = 0;
        bool own_refill = false;
        {
            Guard lock(sh.mu);
            Lease& l = entry(sh, h);
            const bool live = now >= l.start && now < l.expires;
            if (live && cost <= l.left && cost > 0) {
                l.left -= cost;
                return Decision{true, l.left + l.remaining, 0, l.reset_at > now ? l.reset_at - now : 0};
            }
            if (cost > 0 && cost >= l.denied_cost && l.denied_cost > 0 && now < l.denied_until)
                return Decision{false, l.left + l.remaining, l.denied_until - now,
                                l.reset_at > now ? l.reset_at - now : 0};
            if (!l.refilling) {
                // Adapt: a lease spent within d doubles, an expired one
                // shrinks to what was spent.
                if (l.granted > 0) {
                    if (live) l.want = std::min(lease_opt_.max_lease, std::max(l.want, l.granted) * 2);
                    else l.want = std::max<std::uint64_t>(1, l.granted - std::min(l.granted, l.left));
                }
                own_refill = true;
                l.refilling = true;
                want = std::max(cost, l.want);
                ret_n = std::min(l.left, l.returnable);
                ret_tat = l.tat_after;
                l.left = 0;
                l.returnable = 0;
                l.granted = 0;
            }
        }
        // Another thread is taking this key's lease: charge this request
        // alone (a plain exact GCRA call).
        const std::string k = protocol::detail::prefixed_key(who, opt_.key_prefix, key, max_key_bytes);
        std::optional<std::uint64_t> at;
        if (caller_time) at.emplace(now);
        const std::uint64_t share = own_refill ? lease_opt_.share : 1;
        const protocol::Call call[1] = {
            protocol::lease_call(k, *charge_, cost, want, share, ret_tat, ret_n, at, detail::skew_ms(opt_))};
        std::vector<Reply> replies;
        trips_.fetch_add(1, std::memory_order_relaxed);
        bool refuse = !opt_.allow_evicting_server && client_->evicting();
        if (refuse) {
            client_->recheck_eviction();
            refuse = client_->evicting();
        }
        bool sent = !refuse && client_->run(call, replies);
        // The policy check that rode with this call may have found the
        // server evicting: refused too, its lease unused.
        if (sent && !opt_.allow_evicting_server && client_->evicting()) {
            refuse = true;
            sent = false;
        }
        protocol::LeaseOutcome o;
        if (sent) o = protocol::lease_decode(replies[0], *charge_, cost, want, share, ret_n, at, key);
        const std::string why = refuse ? client_->eviction_refusal() : sent ? std::string() : client_->last_error();
        if (!own_refill) {
            if (!sent) return degraded(why);
            if (!o.ok) return degraded(o.error);
            leased_.fetch_add(o.granted, std::memory_order_relaxed);
            return o.decision;
        }
        Guard lock(sh.mu);
        Lease& l = entry(sh, h);
        l.refilling = false;
        if (!sent || !o.ok) {
            l.granted = 0;
            return degraded(sent ? o.error : why);
        }
        returned_.fetch_add(o.returned, std::memory_order_relaxed);
        leased_.fetch_add(o.granted, std::memory_order_relaxed);
        const Decision& d = o.decision;
        l.reset_at = now + std::min(d.reset_after_ns, ~std::uint64_t{0} - now);
        if (!d.allowed) {
            l.want = 1;
            l.denied_cost = cost;
            l.denied_until = now + std::min(d.retry_after_ns, ~std::uint64_t{0} - now);
            l.remaining = d.remaining;
            return d;
        }
        l.denied_cost = 0;
        l.granted = o.granted;
        l.left = o.granted - cost;
        l.returnable = l.left;
        l.tat_after = o.tat_after;
        l.start = now;
        l.expires = now + std::min(lease_opt_.lease_ns, ~std::uint64_t{0} - now);
        l.remaining = d.remaining - l.left;
        return d;
    }

    Client* client_;
    Options opt_;
    LeaseOptions lease_opt_;
    protocol::GcraParams params_;
    std::optional<protocol::GcraParams> charge_;  // params_ with burst lease_burst_
    std::uint64_t lease_burst_ = 0;
    std::size_t per_shard_ = 1;
    std::array<Shard, shard_count> shards_{};
    std::atomic<std::uint64_t> trips_{0}, leased_{0}, returned_{0};
    detail::FailLog fails_;
};

}  // namespace redis
TALLY_END_NAMESPACE
