// tally/redis/protocol.hpp: the client-agnostic half of tally::redis. It
// turns limiter requests into script calls (Call: keys and arguments, all
// binary-safe strings) and script replies (Reply, a plain RESP value) into
// Decisions. Any Redis client can run a Call with EVALSHA (or EVAL) and hand
// the reply back converted to a Reply; client.hpp does exactly that for
// hiredis.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../detail/primitives.hpp"
#include "../limit/decision.hpp"
#include "../limit/gcra.hpp"
#include "../limit/quota.hpp"
#include "../limit/sliding_window.hpp"
#include "detail/quota_math.hpp"
#include "detail/scripts.hpp"

TALLY_BEGIN_NAMESPACE
namespace redis {

/// A RESP reply as plain data (what a client adapter hands to the protocol).
struct Reply {
    enum class Type : std::uint8_t { nil, integer, string, status, error, array };
    Type type = Type::nil;
    long long integer = 0;
    std::string str;  ///< string, status or error text
    std::vector<Reply> elements;
};

/// One limit of a multi-limit call: key (without the prefix), quota, cost.
struct Limit {
    std::string_view key;
    Quota quota;
    std::uint64_t cost = 1;
};

/// Longest key a limiter accepts, in bytes, before the prefix.
inline constexpr std::size_t max_key_bytes = 1024;
/// Most limits in one all-or-nothing call.
inline constexpr std::size_t max_limits_per_call = 64;

namespace protocol {

enum class Script : std::uint8_t { gcra = 0, sliding_window = 1, gcra_batch = 2 };
inline constexpr std::size_t script_count = 3;

/// The full Lua source of a script (for SCRIPT LOAD / EVAL).
inline const std::string& script_source(Script s) {
    static const std::array<std::string, script_count> sources{
        std::string(redis::detail::lua_prelude) + std::string(redis::detail::lua_gcra),
        std::string(redis::detail::lua_prelude) + std::string(redis::detail::lua_sliding),
        std::string(redis::detail::lua_prelude) + std::string(redis::detail::lua_gcra_batch)};
    return sources[static_cast<std::size_t>(s)];
}

/// One script invocation: EVALSHA <sha of script> <num_keys> <args...>
/// (the first num_keys args are the keys). Every script also takes the
/// lost-state guard (scripts.hpp, lua_prelude): Client adds it on the wire,
/// as two more keys after the call's keys (the sentinel counter and the
/// lost-at key; none on a cluster) and three more arguments at the end ("1"
/// or "0" for the sentinel, the highest count seen, "0" when none, and a
/// token), and strips the two integers and the echoed token the script
/// appends to every array reply (a reply whose token is not its call's is
/// out of step). Another client runs a Call the same way (without a
/// sentinel: "0" "0" <token>).
struct Call {
    Script script = Script::gcra;
    std::size_t num_keys = 0;
    std::vector<std::string> args;
};

/// The result of decoding a reply: a Decision, or why there is none.
struct Outcome {
    bool ok = false;
    Decision decision{false, 0, 0, 0};
    std::string error;
};

namespace detail {

inline bool int_in(const Reply& r, long long lo, long long hi) noexcept {
    return r.type == Reply::Type::integer && r.integer >= lo && r.integer <= hi;
}

inline Outcome fail(std::string why) {
    Outcome o;
    o.error = std::move(why);
    return o;
}

// A script's error reply in words.
inline Outcome script_error(const Reply& r, std::span<const std::string_view> keys) {
    return fail(script_error_text(r.str, keys));
}

}  // namespace detail

namespace detail {
// A call on one key: the key, then the mode letter (caller or server time).
inline Call one_key_call(Script script, std::string key, const char* mode, std::size_t num_args) {
    Call c;
    c.script = script;
    c.num_keys = 1;
    c.args.reserve(num_args);
    c.args.push_back(std::move(key));
    c.args.emplace_back(mode);
    return c;
}
}  // namespace detail

/// A Quota prepared for GCRA scripts: tally::Gcra's emission grid plus the
/// constants the script needs. Throws std::invalid_argument for a quota
/// Quota::validate refuses, or whose rate per microsecond in lowest terms
/// x/y has x * y >= 2^53 (the script could not compute Redis-time grid
/// indices exactly); every quota with a window of whole microseconds and a
/// limit up to about 2^53 / (window in microseconds) passes, as do all
/// per_second / per_minute / per_hour quotas up to millions.
class GcraParams {
  public:
    GcraParams(const Quota& q, const char* who) : quota_((q.validate(who), q)), grid_(q) {
        rate_ = detail::micro_rate(who, "limit / window", grid_.num, grid_.den,
                                   "quota limit " + std::to_string(q.limit) + " per window_ns " +
                                       std::to_string(q.window_ns));
        char buf[40];
        std::snprintf(buf, sizeof buf, "%.17g",
                      static_cast<double>(q.window_ns) / static_cast<double>(q.limit) / 1e6);
        ms_per_unit_ = buf;
    }
    [[nodiscard]] const Quota& quota() const noexcept { return quota_; }
    [[nodiscard]] const tally::EmissionGrid& grid() const noexcept { return grid_; }

    /// Appends the script's six per-limit arguments. skew_ms (caller's time
    /// only): how much longer than the debt each written key lives, so a
    /// caller clock up to that far behind Redis's never finds it expired.
    void append_args(std::vector<std::string>& args, std::uint64_t cost, std::optional<std::uint64_t> now_ns,
                     std::uint64_t skew_ms = 0) const {
        args.push_back(std::to_string(grid_.cap));
        args.push_back(std::to_string(std::min(cost, detail::max_cost_sent)));
        if (now_ns) {
            const std::uint64_t n = grid_.index(*now_ns);
            args.push_back(std::to_string(n >> 32));
            args.push_back(std::to_string(n & 0xffffffffu));
            args.push_back(ms_per_unit_);
            char buf[40];
            std::snprintf(buf, sizeof buf, "%.17g",
                          static_cast<double>(*now_ns - grid_.time_of(n)) / 1e6 - static_cast<double>(skew_ms));
            args.emplace_back(buf);
        } else {
            args.push_back(std::to_string(rate_.x));
            args.push_back(std::to_string(rate_.y));
            args.push_back(ms_per_unit_);
            args.emplace_back("0");
        }
    }

  private:
    Quota quota_;
    tally::EmissionGrid grid_;
    detail::MicroRate rate_;
    std::string ms_per_unit_;
};

/// The GCRA call for limits[i] = (prefixed key, params, cost); now_ns empty
/// means Redis TIME.
inline Call gcra_call(std::span<const std::string> keys, std::span<const GcraParams* const> params,
                      std::span<const std::uint64_t> costs, std::optional<std::uint64_t> now_ns,
                      std::uint64_t skew_ms = 0) {
    Call c;
    c.script = Script::gcra;
    c.num_keys = keys.size();
    c.args.reserve(keys.size() * 7 + 1);
    for (const auto& k : keys) c.args.push_back(k);
    c.args.emplace_back(now_ns ? "c" : "s");
    for (std::size_t i = 0; i < keys.size(); ++i) params[i]->append_args(c.args, costs[i], now_ns, skew_ms);
    return c;
}

/// Decodes a GCRA reply into the tightest Decision over the limits: every
/// field is what tally::Gcra decides from the state the script read (so the
/// identity with the local limiter holds by construction), cross-checked
/// against the script's own admission bits. all-or-nothing: when any limit
/// denies, nothing was charged, the others are reported as peeks.
inline Outcome gcra_decode(const Reply& r, std::span<const GcraParams* const> params,
                           std::span<const std::uint64_t> costs, std::optional<std::uint64_t> now_ns,
                           std::span<const std::string_view> user_keys) {
    if (r.type == Reply::Type::error) return detail::script_error(r, user_keys);
    const std::size_t m = params.size();
    if (r.type != Reply::Type::array || r.elements.size() != 2 + 3 * m)
        return detail::fail("malformed reply to the GCRA script (type or length)");
    const auto& e = r.elements;
    constexpr long long max32 = 0xffffffffLL;
    if (!detail::int_in(e[0], 0, 1) || !detail::int_in(e[1], 0, (1LL << 53) - 1))
        return detail::fail("malformed reply to the GCRA script (header)");
    if (now_ns && e[1].integer != 0) return detail::fail("malformed reply to the GCRA script (time)");
    const std::uint64_t now = now_ns ? *now_ns : static_cast<std::uint64_t>(e[1].integer) * 1000;
    const bool all = e[0].integer == 1;
    Outcome o;
    o.ok = true;
    o.decision = Decision{all, never, 0, 0};
    bool every = true;
    for (std::size_t i = 0; i < m; ++i) {
        const Reply& hi = e[2 + 3 * i];
        const Reply& lo = e[3 + 3 * i];
        const Reply& ok = e[4 + 3 * i];
        if (!detail::int_in(hi, 0, max32) || !detail::int_in(lo, 0, max32) || !detail::int_in(ok, 0, 1))
            return detail::fail("malformed reply to the GCRA script (state)");
        const std::uint64_t tat = (static_cast<std::uint64_t>(hi.integer) << 32) | static_cast<std::uint64_t>(lo.integer);
        std::uint64_t next;
        const Decision own = params[i]->grid().gcra(tat, now, costs[i], next);
        if (own.allowed != (ok.integer == 1)) return detail::fail("inconsistent reply to the GCRA script");
        every = every && own.allowed;
        const Decision d = (all || !own.allowed) ? own : params[i]->grid().gcra(tat, now, 0, next);
        Decision& t = o.decision;
        t.remaining = std::min(t.remaining, d.remaining);
        t.reset_after_ns = std::max(t.reset_after_ns, d.reset_after_ns);
        if (!d.allowed) t.retry_after_ns = std::max(t.retry_after_ns, d.retry_after_ns);
    }
    if (every != all) return detail::fail("inconsistent reply to the GCRA script");
    if (m == 0) o.decision.remaining = 0;
    return o;
}

/// The GCRA call for a batch: every key decided and charged on its own, one
/// quota and cost, in one script call. gcra_batch_append_args appends what
/// follows the keys (for a caller that builds the keys in place).
inline void gcra_batch_append_args(std::vector<std::string>& args, const GcraParams& params, std::uint64_t cost,
                                   std::optional<std::uint64_t> now_ns, std::uint64_t skew_ms = 0) {
    args.emplace_back(now_ns ? "C" : "S");
    params.append_args(args, cost, now_ns, skew_ms);
}
inline Call gcra_batch_call(std::span<const std::string> keys, const GcraParams& params, std::uint64_t cost,
                            std::optional<std::uint64_t> now_ns, std::uint64_t skew_ms = 0) {
    Call c;
    c.script = Script::gcra_batch;
    c.num_keys = keys.size();
    c.args.reserve(keys.size() + 7);
    for (const auto& k : keys) c.args.push_back(k);
    gcra_batch_append_args(c.args, params, cost, now_ns, skew_ms);
    return c;
}

/// Decodes a batch reply (see detail/scripts.hpp, lua_gcra_batch): out[i] is
/// tally::Gcra's decision for key i from the TAT the script read, or an
/// error text when the key held a foreign value or its entry is malformed.
/// Returns false, with `error` set, when the whole reply is unusable.
inline bool gcra_batch_decode(const Reply& r, const GcraParams& params, std::uint64_t cost,
                              std::optional<std::uint64_t> now_ns, std::span<const std::string_view> user_keys,
                              std::span<Outcome> out, std::string& error) {
    const std::size_t m = user_keys.size();
    if (r.type == Reply::Type::error) {
        error = detail::script_error(r, user_keys).error;
        return false;
    }
    const auto& e = r.elements;
    if (r.type != Reply::Type::array || e.size() < 2 + m || out.size() != m || !detail::int_in(e[0], 0, 1LL << 32) ||
        e.size() != 2 + m + 3 * static_cast<std::size_t>(e[0].integer)) {
        error = "malformed reply to the GCRA script (type or length)";
        return false;
    }
    if (!detail::int_in(e[1], 0, (1LL << 53) - 1) || (now_ns && e[1].integer != 0)) {
        error = "malformed reply to the GCRA script (header)";
        return false;
    }
    constexpr long long max32 = 0xffffffffLL;
    const std::uint64_t now = now_ns ? *now_ns : static_cast<std::uint64_t>(e[1].integer) * 1000;
    const std::uint64_t n = params.grid().index(now);
    std::size_t ext = 2 + m;  // the next triple of a debt of 2^50 or more
    for (std::size_t i = 0; i < m; ++i) {
        const Reply& ri = e[2 + i];
        if (!detail::int_in(ri, 0, (1LL << 52) + 3)) {
            out[i] = detail::fail("malformed reply to the GCRA script (state)");
            continue;
        }
        const auto v = static_cast<std::uint64_t>(ri.integer);
        std::uint64_t tat = 0, ok = v & 3;
        if (ok == 2 && v == 2) {
            Reply foreign;
            foreign.type = Reply::Type::error;
            foreign.str = "TALLYFOREIGN 1 holds a value tally did not write";
            out[i] = detail::script_error(foreign, user_keys.subspan(i, 1));
            continue;
        }
        if (ok == 3 && v == 3) {
            if (ext + 3 > e.size()) {
                error = "malformed reply to the GCRA script (type or length)";
                return false;
            }
            const Reply& hi = e[ext];
            const Reply& lo = e[ext + 1];
            const Reply& o = e[ext + 2];
            ext += 3;
            if (!detail::int_in(hi, 0, max32) || !detail::int_in(lo, 0, max32) || !detail::int_in(o, 0, 1)) {
                out[i] = detail::fail("malformed reply to the GCRA script (state)");
                continue;
            }
            tat = (static_cast<std::uint64_t>(hi.integer) << 32) | static_cast<std::uint64_t>(lo.integer);
            ok = static_cast<std::uint64_t>(o.integer);
        } else if (ok >= 2 || (v >> 2) > ~n) {  // a debt must not run past the end of the clock
            out[i] = detail::fail("malformed reply to the GCRA script (state)");
            continue;
        } else if (v >= 4) {
            tat = n + (v >> 2);
        }
        // A TAT at or behind index(now) decides as a fresh key (0) does.
        std::uint64_t next;
        const Decision d = params.grid().gcra(tat, now, cost, next);
        if (d.allowed != (ok == 1)) {
            out[i] = detail::fail("inconsistent reply to the GCRA script");
            continue;
        }
        out[i].ok = true;
        out[i].decision = d;
        out[i].error.clear();
    }
    if (ext != e.size()) {
        error = "malformed reply to the GCRA script (type or length)";
        return false;
    }
    return true;
}

/// A sliding-window quota prepared for the script: tally::SlidingWindowLimiter
/// <std::uint64_t, Slots> as the policy, plus the script's constants. Refuses
/// (std::invalid_argument) what Quota::validate refuses, bucket widths outside
/// [2^11, 2^53) ns, and widths whose 1000 / bucket_ns in lowest terms x/y has
/// x * y >= 2^53.
template <std::size_t Slots>
class SlidingParams {
  public:
    using Local = tally::SlidingWindowLimiter<std::uint64_t, Slots>;
    static constexpr std::uint64_t min_bucket_ns = std::uint64_t{1} << 11;

    SlidingParams(const Quota& q, const char* who) : local_(q) {
        const std::uint64_t w = local_.bucket_ns();
        tally::detail::check_range(who, "bucket_ns (window_ns / (Slots - 1), rounded up)", w, min_bucket_ns,
                                   detail::exact_limit, tally::detail::Bounds::right_open);
        rate_ = detail::micro_rate(who, "1 / bucket_ns", 1, w, "bucket_ns " + std::to_string(w));
        g_ = w / rate_.y;
    }
    [[nodiscard]] const Local& local() const noexcept { return local_; }

    [[nodiscard]] Call call(std::string key, std::uint64_t cost, std::optional<std::uint64_t> now_ns,
                            std::uint64_t skew_ms = 0) const {
        Call c = detail::one_key_call(Script::sliding_window, std::move(key), now_ns ? "c" : "s", 10);
        c.args.push_back(std::to_string(Slots));
        c.args.push_back(std::to_string(local_.quota().limit));
        c.args.push_back(std::to_string(std::min(cost, detail::max_cost_sent)));
        c.args.push_back(std::to_string(local_.bucket_ns()));
        if (now_ns) {
            const std::uint64_t b = *now_ns / local_.bucket_ns();
            c.args.push_back(std::to_string(b));
            c.args.push_back(std::to_string(*now_ns - b * local_.bucket_ns()));
        } else {
            c.args.push_back(std::to_string(rate_.x));
            c.args.push_back(std::to_string(rate_.y));
        }
        c.args.push_back(std::to_string(g_));
        c.args.push_back(std::to_string(now_ns ? std::min(skew_ms, detail::exact_limit / 2) : 0));
        return c;
    }

    [[nodiscard]] Outcome decode(const Reply& r, std::uint64_t cost, std::optional<std::uint64_t> now_ns,
                                 std::string_view user_key) const {
        const std::string_view keys[1] = {user_key};
        if (r.type == Reply::Type::error) return detail::script_error(r, keys);
        if (r.type != Reply::Type::array || r.elements.size() != 3 + Slots)
            return detail::fail("malformed reply to the sliding-window script (type or length)");
        const auto& e = r.elements;
        constexpr long long top = (1LL << 53) - 1;
        if (!detail::int_in(e[0], 0, 1) || !detail::int_in(e[1], 0, top) || !detail::int_in(e[2], 0, top))
            return detail::fail("malformed reply to the sliding-window script (header)");
        if (now_ns && e[1].integer != 0) return detail::fail("malformed reply to the sliding-window script (time)");
        const std::uint64_t now = now_ns ? *now_ns : static_cast<std::uint64_t>(e[1].integer) * 1000;
        typename Local::State s{};
        s.newest = static_cast<std::uint64_t>(e[2].integer);
        std::uint64_t total = 0;
        for (std::size_t p = 0; p < Slots; ++p) {
            if (!detail::int_in(e[3 + p], 0, top)) return detail::fail("malformed reply to the sliding-window script (ring)");
            s.slots[p] = static_cast<std::uint64_t>(e[3 + p].integer);
            total += s.slots[p];
        }
        if (total > top) return detail::fail("malformed reply to the sliding-window script (ring total)");
        // The local ring keeps the ring total in the newest bucket's slot.
        s.slots[s.newest % Slots] = total;
        Outcome o;
        o.ok = true;
        o.decision = local_.try_acquire(s, now, cost);
        if (o.decision.allowed != (e[0].integer == 1)) return detail::fail("inconsistent reply to the sliding-window script");
        return o;
    }

  private:
    Local local_;
    detail::MicroRate rate_;
    std::uint64_t g_ = 1;
};


/// What a lease script call returned: the Decision for the request that
/// asked (tally::Gcra's, as if it had charged `granted` at once), the tokens
/// granted (>= cost when allowed, 0 when denied), the TAT grid index the
/// charge left (the token for handing tokens back later), how many unused
/// tokens of the previous lease went back, and the time used (ns).
struct LeaseOutcome {
    bool ok = false;
    Decision decision{false, 0, 0, 0};
    std::uint64_t granted = 0;
    std::uint64_t tat_after = 0;
    std::uint64_t returned = 0;
    std::uint64_t now_ns = 0;
    std::string error;
};

/// The lease call: charge min(want, max(cost, floor(avail / share))) tokens
/// of one key when cost fits (avail: what tally::Gcra would admit now),
/// after handing back `ret_n` tokens iff the key's TAT is still `ret_tat`.
/// want >= cost >= 1 (or want = cost = 0: only the hand-back), share >= 1.
inline Call lease_call(std::string key, const GcraParams& params, std::uint64_t cost, std::uint64_t want,
                       std::uint64_t share, std::uint64_t ret_tat, std::uint64_t ret_n,
                       std::optional<std::uint64_t> now_ns, std::uint64_t skew_ms = 0) {
    Call c = detail::one_key_call(Script::gcra, std::move(key), now_ns ? "k" : "l", 13);
    params.append_args(c.args, cost, now_ns, skew_ms);
    c.args.push_back(std::to_string(std::min(want, detail::max_cost_sent)));
    c.args.push_back(std::to_string(std::min(share, detail::max_cost_sent)));
    c.args.push_back(std::to_string(ret_tat >> 32));
    c.args.push_back(std::to_string(ret_tat & 0xffffffffu));
    c.args.push_back(std::to_string(std::min(ret_n, detail::max_cost_sent)));
    return c;
}

/// Decodes a lease reply. The grant is recomputed here from the TAT the
/// script read (after any hand-back) with tally::Gcra's own grid code and
/// must equal the script's, so the charge is exact by construction.
inline LeaseOutcome lease_decode(const Reply& r, const GcraParams& params, std::uint64_t cost, std::uint64_t want,
                                 std::uint64_t share, std::uint64_t ret_n, std::optional<std::uint64_t> now_ns,
                                 std::string_view user_key) {
    LeaseOutcome o;
    const std::string_view keys[1] = {user_key};
    if (r.type == Reply::Type::error) {
        o.error = detail::script_error(r, keys).error;
        return o;
    }
    auto bad = [&](const char* why) {
        o.error = std::string("malformed reply to the lease script (") + why + ")";
        return o;
    };
    if (r.type != Reply::Type::array || r.elements.size() != 6) return bad("type or length");
    const auto& e = r.elements;
    constexpr long long max32 = 0xffffffffLL;
    if (!detail::int_in(e[0], 0, 1) || !detail::int_in(e[1], 0, (1LL << 53) - 1) || (now_ns && e[1].integer != 0))
        return bad("header");
    if (!detail::int_in(e[2], 0, max32) || !detail::int_in(e[3], 0, max32) ||
        !detail::int_in(e[4], 0, (1LL << 53) - 1) || !detail::int_in(e[5], 0, (1LL << 53) - 1))
        return bad("state");
    const std::uint64_t now = now_ns ? *now_ns : static_cast<std::uint64_t>(e[1].integer) * 1000;
    const std::uint64_t tat = (static_cast<std::uint64_t>(e[2].integer) << 32) | static_cast<std::uint64_t>(e[3].integer);
    const std::uint64_t returned = static_cast<std::uint64_t>(e[5].integer);
    if (returned != 0 && returned != std::min(ret_n, detail::max_cost_sent)) return bad("hand-back");
    std::uint64_t next = tat;
    const std::uint64_t avail = params.grid().gcra(tat, now, 0, next).remaining;
    const std::uint64_t c = std::min(cost, detail::max_cost_sent);
    std::uint64_t g = 0;
    if (c <= avail) g = std::max(c, std::min(std::min(want, detail::max_cost_sent), avail / std::max<std::uint64_t>(share, 1)));
    const bool allowed = (c <= avail) && cost <= detail::max_cost_sent;
    if (static_cast<std::uint64_t>(e[4].integer) != (allowed ? g : 0) || (e[0].integer == 1) != allowed)
        return bad("inconsistent grant");
    o.ok = true;
    o.now_ns = now;
    o.returned = returned;
    if (allowed) {
        o.granted = g;
        o.decision = params.grid().gcra(tat, now, g, next);
        o.tat_after = next;
        // The request itself took `cost`; the rest is held by the lease.
        o.decision.remaining += g - cost;
    } else {
        o.decision = params.grid().gcra(tat, now, cost, next);
        o.tat_after = tat;
    }
    return o;
}

}  // namespace protocol
}  // namespace redis
TALLY_END_NAMESPACE
