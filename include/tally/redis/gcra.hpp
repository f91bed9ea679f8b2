// tally/redis/gcra.hpp: tally::redis::GcraLimiter, GCRA with its state in
// Redis: the decisions of tally::Gcra, fleet-wide.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../detail/primitives.hpp"
#include "client.hpp"
#include "cluster.hpp"
#include "detail/fail_log.hpp"
#include "options.hpp"
#include "protocol.hpp"

TALLY_BEGIN_NAMESPACE
namespace redis {

/// GcraLimiter: tally::Gcra (ITU-T I.371 virtual scheduling on tally's exact
/// emission grid) whose per-key state, the theoretical arrival time, lives
/// in Redis, so every process of a fleet shares one limit per key. One Lua
/// script per round trip reads the state, decides and writes it.
/// Guarantee (decision identity): for the same quota, key history and
/// times, every Decision field (allowed, remaining, retry_after_ns,
/// reset_after_ns) equals tally::Gcra's. The script keeps 64-bit grid indices
/// as two exact 32-bit halves; the Decision is computed here by tally::Gcra's
/// own code from the state the script read. Quotas whose rate per
/// microsecond x/y (lowest terms) has x*y >= 2^53 are refused with
/// std::invalid_argument (see protocol::GcraParams).
/// Clock: try_acquire uses the Redis server's TIME (microseconds, one clock
/// for the fleet); try_acquire_at uses the caller's now_ns (tests, replays).
/// A key's TTL is its time to full replenishment (+2 ms; caller's time: +
/// Options::max_clock_skew), so Redis holds only keys that are not fresh.
/// All-or-nothing: try_acquire_all charges every limit of the list or none.
/// Failure: within the Client's command_timeout
/// from the call's entry, Options::on_error decides, the Decision is
/// degraded and degraded_count() grows. Lost state: see Client.
/// Redis Cluster: a batch is one script call per key, pipelined per node;
/// the keys of try_acquire_all must share a hash slot (else
/// std::invalid_argument, before anything is charged).
/// Cost: one round trip per call or per batch; the script is O(limits).
/// Thread safety: all members are thread-safe (parallel round trips on the
/// Client's pool).
/// The limiter keeps a pointer to the Client: it must outlive the limiter.
///   tally::redis::GcraLimiter api(client, tally::Quota::per_minute(600));
///   auto d = api.try_acquire("key:42");
///   if (!d) reply_429(d.retry_after_ns);
class GcraLimiter {
  public:
    /// Takes the Client's Options (key prefix, fail mode) unless given its
    /// own. std::invalid_argument when the Client's server has a
    /// maxmemory-policy that can evict keys, unless allow_evicting_server.
    GcraLimiter(Client& client, const Quota& quota, std::optional<Options> options = std::nullopt)
        : client_(&client),
          opt_(options ? std::move(*options) : client.options()),
          params_(quota, "tally::redis::GcraLimiter") {
        detail::refuse_evicting(client.eviction_refusal(), opt_, who);
    }

    [[nodiscard]] Quota quota() const noexcept { return params_.quota(); }
    [[nodiscard]] const Options& options() const noexcept { return opt_; }

    /// Redis server time.
    Decision try_acquire(std::string_view key, std::uint64_t cost = 1) { return one(key, params_, cost, {}); }
    /// Redis server time, this call's quota (tiers sharing one limiter).
    Decision try_acquire(std::string_view key, const Quota& quota, std::uint64_t cost = 1) {
        return one(key, params_for(quota), cost, {});
    }
    /// The caller's time.
    Decision try_acquire_at(std::string_view key, std::uint64_t now_ns, std::uint64_t cost = 1) {
        return one(key, params_, cost, now_ns);
    }
    Decision try_acquire_at(std::string_view key, const Quota& quota, std::uint64_t now_ns, std::uint64_t cost = 1) {
        return one(key, params_for(quota), cost, now_ns);
    }

    /// out[i] = try_acquire(keys[i], cost) for every key, in order (a key may
    /// repeat), in one round trip: one script call per 256 keys, pipelined
    /// (Redis time). std::invalid_argument when the sizes differ.
    void try_acquire_batch(std::span<const std::string_view> keys, std::span<Decision> out, std::uint64_t cost = 1) {
        batch(keys, out, cost, {});
    }
    void try_acquire_batch_at(std::span<const std::string_view> keys, std::span<Decision> out, std::uint64_t now_ns,
                              std::uint64_t cost = 1) {
        batch(keys, out, cost, now_ns);
    }

    /// Several limits at once, all or nothing, in one script: admitted iff
    /// every limit admits its cost, and then every one is charged; otherwise
    /// none is. The Decision is the tightest: remaining = the smallest,
    /// retry_after_ns = the largest among the denying limits, reset_after_ns =
    /// the largest. Keys must differ; at most max_limits_per_call limits.
    Decision try_acquire_all(std::span<const Limit> limits) { return all(limits, {}); }
    Decision try_acquire_all_at(std::span<const Limit> limits, std::uint64_t now_ns) { return all(limits, now_ns); }

    /// Calls answered by the fail mode so far.
    [[nodiscard]] std::uint64_t degraded_count() const noexcept { return fails_.count(); }
    /// Why the last degraded call was degraded.
    [[nodiscard]] std::string last_error() const { return fails_.last_error(); }

  private:
    static constexpr const char* who = "tally::redis::GcraLimiter";

    protocol::GcraParams params_for(const Quota& q) const {
        return q == params_.quota() ? params_ : protocol::GcraParams(q, who);
    }

    Decision degraded(std::string why) { return fails_.degraded(opt_, std::move(why)); }

    Decision finish(const protocol::Outcome& o) { return o.ok ? o.decision : degraded(o.error); }

    Decision one(std::string_view key, const protocol::GcraParams& p, std::uint64_t cost,
                 std::optional<std::uint64_t> now_ns) {
        const std::string k[1] = {protocol::detail::prefixed_key(who, opt_.key_prefix, key, max_key_bytes)};
        const protocol::GcraParams* ps[1] = {&p};
        const std::uint64_t costs[1] = {cost};
        const std::string_view user[1] = {key};
        const protocol::Call call[1] = {protocol::gcra_call(k, ps, costs, now_ns, detail::skew_ms(opt_))};
        std::vector<Reply> replies;
        if (refused()) return degraded(client_->eviction_refusal());
        if (!client_->run(call, replies)) return degraded(client_->last_error());
        if (found_evicting()) return degraded(client_->eviction_refusal());
        return finish(protocol::gcra_decode(replies[0], ps, costs, now_ns, user));
    }

    bool refused() {
        if (opt_.allow_evicting_server || !client_->evicting()) return false;
        client_->recheck_eviction();
        return client_->evicting();
    }
    // After a round trip: the policy check that rode with it may have found
    // the server evicting; then this call is refused too (what the script
    // charged stays charged).
    bool found_evicting() const { return !opt_.allow_evicting_server && client_->evicting(); }

    void batch(std::span<const std::string_view> keys, std::span<Decision> out, std::uint64_t cost,
               std::optional<std::uint64_t> now_ns) {
        if (keys.size() != out.size())
            tally::detail::throw_invalid_argument(std::string(who) + "::try_acquire_batch: keys.size() " +
                                                  std::to_string(keys.size()) + " != out.size() " +
                                                  std::to_string(out.size()));
        if (keys.empty()) return;
        // One script call per chunk of keys, all chunks pipelined: one round
        // trip, and the script's per-call overhead paid once per chunk. On a
        // cluster, one call per key: the Client sends each to its node, and a
        // key whose slot is migrating is followed alone (ASK), where a
        // multi-key call would be refused (TRYAGAIN) until the move ends.
        constexpr std::size_t chunk = 256;
        const std::size_t per_call = client_->is_cluster() ? 1 : chunk;
        // Keys [c * per_call, ...) go to call c; each call's prefixed keys are
        // built in place as its first arguments.
        const std::size_t n_calls = (keys.size() + per_call - 1) / per_call;
        std::vector<protocol::Call> calls(n_calls);
        for (std::size_t c = 0; c < n_calls; ++c) {
            const std::size_t at = c * per_call, m = std::min(per_call, keys.size() - at);
            protocol::Call& call = calls[c];
            call.script = protocol::Script::gcra_batch;
            call.num_keys = m;
            call.args.reserve(m + 7);
            for (std::size_t i = at; i < at + m; ++i)
                call.args.push_back(protocol::detail::prefixed_key(who, opt_.key_prefix, keys[i], max_key_bytes));
            protocol::gcra_batch_append_args(call.args, params_, cost, now_ns, detail::skew_ms(opt_));
        }
        std::vector<Reply> replies;
        bool refuse = refused();
        const bool sent = !refuse && client_->run(calls, replies);
        refuse = refuse || (sent && found_evicting());
        if (!sent || refuse) {
            const std::string why = refuse ? client_->eviction_refusal() : client_->last_error();
            for (auto& d : out) d = degraded(why);
            return;
        }
        std::vector<protocol::Outcome> outcomes;
        std::string error;
        for (std::size_t c = 0; c < n_calls; ++c) {
            const std::size_t at = c * per_call, m = calls[c].num_keys;
            outcomes.resize(m);
            if (!protocol::gcra_batch_decode(replies[c], params_, cost, now_ns, keys.subspan(at, m), outcomes, error)) {
                for (std::size_t j = 0; j < m; ++j) out[at + j] = degraded(error);
                continue;
            }
            for (std::size_t j = 0; j < m; ++j) out[at + j] = finish(outcomes[j]);
        }
    }

    Decision all(std::span<const Limit> limits, std::optional<std::uint64_t> now_ns) {
        tally::detail::check_range("tally::redis::GcraLimiter::try_acquire_all", "number of limits", limits.size(), std::size_t{1},
                                   max_limits_per_call);
        std::vector<std::string> keys;
        std::vector<protocol::GcraParams> params;
        std::vector<const protocol::GcraParams*> ps;
        std::vector<std::uint64_t> costs;
        std::vector<std::string_view> user;
        keys.reserve(limits.size());
        params.reserve(limits.size());
        for (const Limit& l : limits) {
            keys.push_back(protocol::detail::prefixed_key(who, opt_.key_prefix, l.key, max_key_bytes));
            params.push_back(params_for(l.quota));
            costs.push_back(l.cost);
            user.push_back(l.key);
        }
        for (std::size_t i = 0; i < limits.size(); ++i)
            for (std::size_t j = 0; j < i; ++j)
                if (limits[i].key == limits[j].key)
                    tally::detail::throw_invalid_argument(
                        "tally::redis::GcraLimiter::try_acquire_all: limits " + std::to_string(j) + " and " +
                        std::to_string(i) + " name the same key (each key may appear once)");
        // Redis Cluster runs a script only when all its keys share a hash
        // slot: refuse here, before anything is charged.
        if (client_->is_cluster())
            for (std::size_t i = 1; i < keys.size(); ++i)
                if (cluster_slot(keys[i]) != cluster_slot(keys[0]))
                    tally::detail::throw_invalid_argument(
                        "tally::redis::GcraLimiter::try_acquire_all: keys \"" + std::string(limits[0].key) +
                        "\" (hash slot " + std::to_string(cluster_slot(keys[0])) + ") and \"" +
                        std::string(limits[i].key) + "\" (hash slot " + std::to_string(cluster_slot(keys[i])) +
                        ") differ; on a Redis Cluster the keys of one call must share a slot: give them one "
                        "hash tag, e.g. {tenant:7}:user:42 and {tenant:7}:global");
        for (const auto& p : params) ps.push_back(&p);
        const protocol::Call call[1] = {protocol::gcra_call(keys, ps, costs, now_ns, detail::skew_ms(opt_))};
        std::vector<Reply> replies;
        if (refused()) return degraded(client_->eviction_refusal());
        if (!client_->run(call, replies)) return degraded(client_->last_error());
        if (found_evicting()) return degraded(client_->eviction_refusal());
        return finish(protocol::gcra_decode(replies[0], ps, costs, now_ns, user));
    }

    Client* client_;
    Options opt_;
    protocol::GcraParams params_;
    detail::FailLog fails_;
};

}  // namespace redis
TALLY_END_NAMESPACE
