// tally/redis/sliding_window.hpp: tally::redis::SlidingWindowLimiter, the
// sliding-window counter ring kept in Redis.
#pragma once

#include "../detail/abi.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client.hpp"
#include "detail/fail_log.hpp"
#include "options.hpp"
#include "protocol.hpp"

TALLY_BEGIN_NAMESPACE
namespace redis {

/// SlidingWindowLimiter<Slots>: the sliding-window counter (a ring of Slots
/// sub-bucket counts, the oldest weighted by the part still inside the
/// window; Slots = 2 is Cloudflare's "previous + current" counter, Desgats
/// 2017) with the ring of each key stored in Redis and updated by one Lua
/// script per round trip.
///
/// Guarantee: the same decisions, every Decision field, as
/// tally::SlidingWindowLimiter<Slot, Slots> with the same quota (same bucket
/// width ceil(window_ns / (Slots - 1))), for any Slot wide enough that its
/// ring never saturates. The admission test estimate + cost <= limit is
/// exact (products through base-2^16 digits in the script). Refused with
/// std::invalid_argument: bucket widths outside [2^11, 2^53) ns and widths
/// whose 1000 / bucket_ns in lowest terms x/y has x*y >= 2^53.
///
/// Clock: try_acquire uses Redis TIME, try_acquire_at the caller's now_ns.
/// TTL: Slots * bucket_ns - elapsed (+2 ms; caller's time: +
/// Options::max_clock_skew), when the ring is empty again.
/// Failure: as GcraLimiter (degraded Decision from Options::on_error).
/// Memory in Redis: one string of about 20 + Slots * (digits + 1) bytes per
/// active key. Thread safety: all members are thread-safe.
///
///   tally::redis::SlidingWindowLimiter<> per_minute(client, tally::Quota::per_minute(600));
///   if (!per_minute.try_acquire("user:7")) reject();
template <std::size_t Slots = 11>
class SlidingWindowLimiter {
    static_assert(Slots >= 2 && Slots <= 1024, "Slots must lie in [2, 1024]");

  public:
    /// Takes the Client's Options unless given its own; refuses an evicting
    /// server as GcraLimiter does.
    SlidingWindowLimiter(Client& client, const Quota& quota, std::optional<Options> options = std::nullopt)
        : client_(&client), opt_(options ? std::move(*options) : client.options()), params_(quota, who) {
        detail::refuse_evicting(client.eviction_refusal(), opt_, who);
    }

    [[nodiscard]] Quota quota() const noexcept { return params_.local().quota(); }
    [[nodiscard]] std::uint64_t bucket_ns() const noexcept { return params_.local().bucket_ns(); }
    [[nodiscard]] std::uint64_t window_ns() const noexcept { return params_.local().window_ns(); }

    Decision try_acquire(std::string_view key, std::uint64_t cost = 1) { return one(key, cost, {}); }
    Decision try_acquire_at(std::string_view key, std::uint64_t now_ns, std::uint64_t cost = 1) {
        return one(key, cost, now_ns);
    }

    [[nodiscard]] std::uint64_t degraded_count() const noexcept { return fails_.count(); }
    [[nodiscard]] std::string last_error() const { return fails_.last_error(); }

  private:
    static constexpr const char* who = "tally::redis::SlidingWindowLimiter";

    Decision degraded(std::string why) { return fails_.degraded(opt_, std::move(why)); }

    Decision one(std::string_view key, std::uint64_t cost, std::optional<std::uint64_t> now_ns) {
        const protocol::Call call[1] = {
            params_.call(protocol::detail::prefixed_key(who, opt_.key_prefix, key, max_key_bytes), cost, now_ns, detail::skew_ms(opt_))};
        std::vector<Reply> replies;
        if (!opt_.allow_evicting_server && client_->evicting()) {
            client_->recheck_eviction();
            if (client_->evicting()) return degraded(client_->eviction_refusal());
        }
        if (!client_->run(call, replies)) return degraded(client_->last_error());
        // The policy check that rode with this call may have found the
        // server evicting: refused too (what the script charged stays).
        if (!opt_.allow_evicting_server && client_->evicting()) return degraded(client_->eviction_refusal());
        const protocol::Outcome o = params_.decode(replies[0], cost, now_ns, key);
        return o.ok ? o.decision : degraded(o.error);
    }

    Client* client_;
    Options opt_;
    protocol::SlidingParams<Slots> params_;
    detail::FailLog fails_;
};

}  // namespace redis
TALLY_END_NAMESPACE
