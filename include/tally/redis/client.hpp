// tally/redis/client.hpp: tally::redis::Client, the hiredis adapter (the only
// file of tally that includes a third-party header). Works with hiredis 0.14
// (Debian 12) and 1.x.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "../detail/primitives.hpp"
#include "../detail/throw.hpp"
#include "cluster.hpp"
#include "detail/connection.hpp"
#include "options.hpp"
#include "protocol.hpp"

TALLY_BEGIN_NAMESPACE
namespace redis {

/// Client: a pool of non-blocking connections to one Redis (or Valkey)
/// server, over TCP or a unix socket, or to each master of a Redis Cluster.
/// - One deadline per call (now + command_timeout at entry), shared by every
///   write, read, reload, redirect and wait of the call; at the deadline the
///   limiters answer their fail mode. Never throws on I/O, never hangs.
/// - Nothing else happens inside a call. Names resolve at connect and then
///   in the background; each server has a background opener that connects,
///   authenticates, selects the database, reads the eviction policy and
///   loads the scripts within connect_timeout, with backoff (25 ms doubling
///   to 1 s) after a failure. A call takes a ready connection or fails fast:
///   a call degraded for want of a connection has sent nothing and charged
///   no key; one that timed out after sending may still run on the server
///   and charge (its fail mode decided it).
/// - Replies stay in step: each script reply echoes its call's token (after
///   an error Redis raised or a plain command, the next use first reads back
///   an ECHO of a fresh one); a connection is reused only with nothing
///   unread; a reply that does not decode or match closes it; a late reply
///   is drained in the background and the connection reused.
/// - Eviction: maxmemory-policy is read on every new connection and again,
///   pipelined with a call, when 900 ms have passed since the last check was
///   sent; while it can evict keys with a TTL, evicting() is true and the
///   limiters refuse, the call whose check found it included. An error reply
///   to the check never clears a refusal.
/// - Lost state: a sentinel counter detects restarts, FLUSHALL and lossy
///   failovers. Cluster: MOVED/ASK followed, TRYAGAIN retried to the deadline.
/// Thread safety: every member is thread-safe.
///
///   auto client = tally::redis::Client::connect("127.0.0.1", 6379);
///   tally::redis::GcraLimiter per_key(client, tally::Quota::per_second(100));
///   if (!per_key.try_acquire("api-key:42")) reply_429();
class Client {
  public:
    /// TCP, to a host name or a numeric address. Resolves the name and opens
    /// one connection now, all within connect_timeout; when that fails the
    /// Client is still usable, keeps trying in the background, and calls
    /// answer degraded until it succeeds (connected() and last_error() tell).
    /// std::invalid_argument for a port outside [1, 65535] or a database
    /// outside [0, 2^31 - 1].
    static Client connect(std::string host, int port, Options options = {}) {
        tally::detail::check_range("tally::redis::Client::connect", "port", port, 1, 65535);
        Client c(std::move(options));
        c.s_->add_node(std::move(host), port);
        c.s_->wait_ready({0}, Clock::now() + c.s_->opt.connect_timeout);
        return c;
    }
    /// Unix-domain socket.
    static Client connect_unix(std::string path, Options options = {}) {
        Client c(std::move(options));
        c.s_->add_node(std::move(path), -1);
        c.s_->wait_ready({0}, Clock::now() + c.s_->opt.connect_timeout);
        return c;
    }
    /// Redis Cluster, from one or more "host:port" seeds (any nodes of the
    /// cluster). Reads the slot map now; when no seed answers, the Client is
    /// still usable and retries on its next call. std::invalid_argument for
    /// no seeds, a seed that is not host:port with a port in [1, 65535], or
    /// a database other than 0.
    static Client connect_cluster(std::vector<std::string> seeds, Options options = {}) {
        constexpr const char* who = "tally::redis::Client::connect_cluster";
        tally::detail::check_range(who, "number of seeds", seeds.size(), std::size_t{1}, std::size_t{1024});
        tally::detail::check_range(who, "Options::database (a cluster has only database 0)", options.database, 0, 0);
        Client c(std::move(options));
        c.s_->cluster = true;
        for (const auto& seed : seeds) {
            const auto colon = seed.rfind(':');
            unsigned long port = 0;
            bool digits = colon != std::string::npos && colon + 1 < seed.size() && seed.size() - colon <= 6;
            for (std::size_t i = colon + 1; digits && i < seed.size(); ++i) {
                digits = seed[i] >= '0' && seed[i] <= '9';
                port = port * 10 + static_cast<unsigned long>(seed[i] - '0');
            }
            if (!digits || colon == 0)
                tally::detail::throw_invalid_argument(std::string(who) + ": seed \"" + seed + "\" is not host:port");
            tally::detail::check_range(who, "seed port", port, 1UL, 65535UL);
            c.s_->add_node(seed.substr(0, colon), static_cast<int>(port));
        }
        const auto budget = c.s_->opt.connect_timeout + c.s_->opt.command_timeout;
        if (c.s_->refresh(Clock::now() + budget)) {
            std::vector<std::size_t> masters;
            {
                std::lock_guard<std::mutex> lock(c.s_->mu);
                for (const auto o : c.s_->owner)
                    if (o != Shared::none && std::find(masters.begin(), masters.end(), o) == masters.end())
                        masters.push_back(o);
            }
            c.s_->wait_ready(masters, Clock::now() + c.s_->opt.connect_timeout);
        }
        return c;
    }

    Client(Client&&) noexcept = default;
    Client& operator=(Client&&) noexcept = default;
    /// Stops the background openers (within about connect_timeout: a name
    /// resolution in progress is left to finish on its own thread).
    ~Client() = default;

    [[nodiscard]] const Options& options() const noexcept { return s_->opt; }
    /// True for a Client made by connect_cluster.
    [[nodiscard]] bool is_cluster() const noexcept { return s_->cluster; }
    /// Connections per server (Options::pool_size, or its default).
    [[nodiscard]] std::size_t pool_size() const noexcept { return s_->pool; }
    /// True while a connection is open (it may still turn out dead); for a
    /// cluster, while one to every master in the slot map is open.
    [[nodiscard]] bool connected() const {
        std::lock_guard<std::mutex> lock(s_->mu);
        if (!s_->cluster) return s_->nodes[0]->open > 0;
        if (s_->owner.empty()) return false;
        for (const auto o : s_->owner)
            if (o == Shared::none || s_->nodes[o]->open == 0) return false;
        return true;
    }
    /// Why the last failed operation failed, or the last note (a disabled
    /// CONFIG, a detected loss of state); empty if none yet.
    [[nodiscard]] std::string last_error() const {
        std::lock_guard<std::mutex> lock(s_->error_mu);
        return s_->error;
    }
    /// Round trips of calls so far (a pipelined batch counts once per
    /// server); the background openers' setup round trips are not counted.
    [[nodiscard]] std::uint64_t round_trips() const noexcept { return s_->trips.load(std::memory_order_relaxed); }
    /// Connections opened so far (all servers): steady while a server is
    /// healthy, a few a second at most while it fails.
    [[nodiscard]] std::uint64_t connections_opened() const {
        std::lock_guard<std::mutex> lock(s_->mu);
        std::uint64_t total = 0;
        for (const auto& n : s_->nodes) total += n->opened;
        return total;
    }
    /// Losses of state detected through the sentinel (restart without
    /// persistence, FLUSHALL, a lossy failover) since the Client was made.
    [[nodiscard]] std::uint64_t lost_state_events() const noexcept { return s_->lost.load(std::memory_order_relaxed); }
    /// The maxmemory-policy last read ("" when unknown: not connected yet,
    /// or CONFIG disabled).
    [[nodiscard]] std::string maxmemory_policy() const {
        std::lock_guard<std::mutex> lock(s_->mu);
        for (const auto& n : s_->nodes)
            if (n->evicting) return n->policy;
        for (const auto& n : s_->nodes)
            if (!n->policy.empty()) return n->policy;
        return {};
    }
    /// True while a server of this Client has a maxmemory-policy that can
    /// evict keys with a TTL (volatile-*, allkeys-*).
    [[nodiscard]] bool evicting() const noexcept { return s_->evicting_nodes.load(std::memory_order_relaxed) > 0; }
    /// Rereads maxmemory-policy (within command_timeout) on each server found
    /// evicting more than a second ago, so a fixed server is used again;
    /// limiters call it before refusing a call.
    void recheck_eviction() {
        if (!evicting()) return;
        const Deadline d = Clock::now() + s_->opt.command_timeout;
        std::vector<std::size_t> due;
        {
            std::lock_guard<std::mutex> lock(s_->mu);
            for (std::size_t i = 0; i < s_->nodes.size(); ++i)
                if (s_->nodes[i]->evicting && Clock::now() - s_->nodes[i]->checked >= std::chrono::seconds(1))
                    due.push_back(i);
        }
        for (const std::size_t i : due) s_->probe_policy(s_->node(i), d);
    }
    /// The refusal text for an evicting server ("" when none is known):
    /// names maxmemory-policy, its value and the fix.
    [[nodiscard]] std::string eviction_refusal() const {
        if (!evicting()) return {};
        return "the Redis server's maxmemory-policy is " + maxmemory_policy() +
               ", which can evict limiter keys (every tally key has a TTL) and so over-admit silently; set "
               "maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction, or a dedicated instance), or "
               "set Options::allow_evicting_server = true to accept that risk";
    }

    /// Runs the calls pipelined and fills `replies` (one per call, a script
    /// error as Reply::Type::error), all within one command_timeout. False,
    /// with last_error() set, when the transport failed or the deadline
    /// passed: then no reply is trustworthy. On a cluster a failed node
    /// gives error replies for its calls only (false only when no slot map
    /// could be read), and a call whose keys span slots gets an error reply
    /// without being sent.
    bool run(std::span<const protocol::Call> calls, std::vector<Reply>& replies) {
        const Deadline deadline = Clock::now() + s_->opt.command_timeout;
        std::vector<Item> items(calls.size());
        for (std::size_t i = 0; i < calls.size(); ++i) items[i].call = &calls[i];
        if (!s_->cluster) return s_->single(items, replies, deadline);
        return s_->route(items, replies, deadline);
    }

    /// One plain command (administration, tests), within command_timeout;
    /// nullopt on transport failure. On a cluster it goes to the master of
    /// the slot of its second argument (the key of GET key, EXISTS key, TTL
    /// key ...), or of slot 0 when there is none. std::invalid_argument for
    /// no arguments or a command that changes the state of the connection it
    /// runs on (AUTH, SELECT, HELLO, MULTI/EXEC, WATCH, SUBSCRIBE, MONITOR,
    /// CLIENT REPLY, RESET ...): a pooled connection must stay like the
    /// others; credentials and the database belong in Options.
    std::optional<Reply> command(std::initializer_list<std::string_view> args) {
        constexpr const char* who = "tally::redis::Client::command";
        if (args.size() == 0) tally::detail::throw_invalid_argument(std::string(who) + ": no command given");
        const std::string_view cmd = *args.begin();
        const std::string_view sub = args.size() > 1 ? *(args.begin() + 1) : std::string_view();
        if (detail::changes_connection_state(cmd, sub))
            tally::detail::throw_invalid_argument(
                std::string(who) + ": " + std::string(cmd) + (sub.empty() ? "" : " " + std::string(sub)) +
                " changes the state of the one pooled connection it would run on; set Options::user, "
                "Options::password and Options::database instead (applied to every connection)");
        const Deadline deadline = Clock::now() + s_->opt.command_timeout;
        std::vector<Item> items(1);
        items[0].raw.assign(args.begin(), args.end());
        std::vector<Reply> out;
        if (!s_->cluster) {
            if (s_->single(items, out, deadline)) return std::move(out[0]);
            return std::nullopt;
        }
        if (!s_->route(items, out, deadline) || out[0].str.rfind("TALLYNODE ", 0) == 0) return std::nullopt;
        return std::move(out[0]);
    }

  private:
    using Clock = detail::Clock;
    using Deadline = detail::Deadline;
    using Conn = detail::Conn;
    using Address = detail::Address;

    // One unit of a round trip: a script call, or a raw command.
    struct Item {
        const protocol::Call* call = nullptr;
        std::vector<std::string_view> raw;
    };

    static Reply error_reply(std::string text) {
        Reply r;
        r.type = Reply::Type::error;
        r.str = std::move(text);
        return r;
    }

    // The script SHA1s, the same for every server (learnt from the first
    // SCRIPT LOAD reply of the process).
    struct Shas {
        std::mutex mu;
        std::array<std::string, protocol::script_count> sha;
    };
    static Shas& shas() {
        static Shas s;
        return s;
    }
    static std::string sha_of(protocol::Script s) {
        Shas& t = shas();
        std::lock_guard<std::mutex> lock(t.mu);
        return t.sha[static_cast<std::size_t>(s)];
    }

    // What a Client remembers of a server's sentinel: the highest count.
    struct Seen {
        long long count = 0;
    };

    // A connection whose reply came after its call's deadline: drained in
    // the background until `until`, then reused or closed.
    struct Late {
        std::unique_ptr<Conn> conn;
        Deadline until;
    };

    // One server: where it is, its pool, its background threads and what
    // the Client knows of it. Every field is under Shared::mu.
    struct Node {
        std::string host;
        int port = 0;
        std::string where;
        bool numeric = false;                          // host needs no resolver
        std::vector<Address> addrs;                    // last good resolution
        Clock::time_point resolved_at{};
        std::shared_ptr<detail::Resolution> resolving;  // in flight, or finished and not yet taken
        std::vector<std::unique_ptr<Conn>> idle;
        std::vector<Late> late;
        std::size_t open = 0;     // idle + in use + late
        std::size_t waiting = 0;  // calls waiting for a connection
        bool opening = false, failing = false;
        std::string failure;
        Clock::time_point next_attempt{}, last_used = Clock::now();
        std::chrono::milliseconds backoff{0};
        std::uint64_t opened = 0;
        // While the server is failing and no attempt is due: until when (ns
        // of Clock), so calls fail fast without taking Shared::mu; 0 when up.
        std::atomic<std::int64_t> down_until{0};
        std::condition_variable ready;   // a connection became idle, or an attempt ended
        std::condition_variable work;    // for the opener
        std::condition_variable drains;  // for the drainer
        std::thread opener, drainer;
        std::array<bool, protocol::script_count> loaded{};
        Seen seen;
        std::string policy;
        bool evicting = false;
        Clock::time_point checked{};
    };

    // The connections a call holds on one node while its group is in flight.
    struct Group {
        std::size_t node = 0;
        bool asking = false;
        std::string fence;          // when not empty: an ECHO of it rides first
        bool policy_check = false;  // a CONFIG GET maxmemory-policy rides next
        std::vector<std::size_t> idx;
        std::vector<std::string> tokens;  // per idx: what its script reply must echo
        std::unique_ptr<Conn> conn;
        std::vector<protocol::Script> loads;
        bool sent = false;
    };

    struct Shared {
        static constexpr std::uint16_t none = 0xffff;
        mutable std::mutex mu;
        Options opt;
        std::size_t pool = 1;
        std::string sentinel, lost_key;  // <key_prefix>!sentinel, <key_prefix>!lost (single server)
        std::atomic<std::uint64_t> trips{0}, lost{0}, tokens{0};
        std::atomic<int> evicting_nodes{0};
        // The last note, under its own lock: read by every degraded call, so
        // never behind the pool's lock (a spinning caller must not starve
        // a thread waking for a connection).
        mutable std::mutex error_mu;
        std::string error;
        std::vector<std::unique_ptr<Node>> nodes;  // [0] alone when not a cluster
        bool cluster = false;
        bool stopping = false;
        std::vector<std::uint16_t> owner;  // slot -> index in nodes (cluster)
        bool stale = true;
        Clock::time_point refreshed{};

        Shared() = default;
        Shared(const Shared&) = delete;
        Shared& operator=(const Shared&) = delete;
        ~Shared() {
            {
                std::lock_guard<std::mutex> lock(mu);
                stopping = true;
                for (auto& n : nodes) {
                    n->work.notify_all();
                    n->drains.notify_all();
                    n->ready.notify_all();
                }
            }
            for (auto& n : nodes) {
                if (n->opener.joinable()) n->opener.join();
                if (n->drainer.joinable()) n->drainer.join();
            }
        }

        void note(std::string why) { set_error(std::move(why)); }
        void set_error(std::string why) {
            std::lock_guard<std::mutex> lock(error_mu);
            error = std::move(why);
        }
        Node& node(std::size_t i) {
            std::lock_guard<std::mutex> lock(mu);
            return *nodes[i];
        }
        std::size_t add_node(std::string host, int port) {
            std::lock_guard<std::mutex> lock(mu);
            return add_node_locked(std::move(host), port);
        }
        std::size_t add_node_locked(std::string host, int port) {
            auto n = std::make_unique<Node>();
            n->where = port < 0 ? host : host + ":" + std::to_string(port);
            Address a;
            n->numeric = detail::numeric_address(host, port, a);
            if (n->numeric) n->addrs.push_back(a);
            n->host = std::move(host);
            n->port = port;
            Node* p = n.get();
            nodes.push_back(std::move(n));
            p->opener = std::thread([this, p] { open_loop(*p); });
            p->drainer = std::thread([this, p] { drain_loop(*p); });
            return nodes.size() - 1;
        }
        std::size_t node_index(std::string_view host, int port) {  // under mu
            for (std::size_t i = 0; i < nodes.size(); ++i)
                if (nodes[i]->host == host && nodes[i]->port == port) return i;
            if (nodes.size() >= none) return none;
            return add_node_locked(std::string(host), port);
        }

        // Waits until each listed node has a connection ready or has failed
        // an attempt, or the deadline; notes the failure of the first that
        // has none.
        void wait_ready(std::initializer_list<std::size_t> which, Deadline d) {
            wait_ready(std::vector<std::size_t>(which), d);
        }
        void wait_ready(const std::vector<std::size_t>& which, Deadline d) {
            std::unique_lock<std::mutex> lock(mu);
            for (const std::size_t i : which) {
                Node& n = *nodes[i];
                n.last_used = Clock::now();
                n.work.notify_one();
                n.ready.wait_until(lock, d, [&] { return !n.idle.empty() || (n.failing && !n.opening); });
                if (!n.idle.empty()) continue;
                take_resolution(n);
                const std::string budget = std::to_string(opt.connect_timeout.count()) + " ms";
                if (n.addrs.empty() && n.resolving)
                    set_error("resolving " + n.host + " took longer than connect_timeout (" + budget +
                            "); it goes on in the background");
                else if (n.failing)
                    set_error(n.failure);
                else
                    set_error("connecting to " + n.where + " did not finish within connect_timeout (" + budget +
                            "); it goes on in the background");
            }
        }

        // Takes a finished resolution into n.addrs. Under mu.
        void take_resolution(Node& n) {
            if (!n.resolving) return;
            std::lock_guard<std::mutex> lock(n.resolving->mu);
            if (!n.resolving->done) return;
            if (!n.resolving->found.empty()) {
                n.addrs = std::move(n.resolving->found);
                n.resolved_at = Clock::now();
            } else {
                set_error(n.resolving->error);
            }
            n.resolving.reset();
        }
        // Under mu: a background resolution unless one is in flight.
        void resolve_again(Node& n) {
            if (n.numeric || n.resolving) return;
            n.resolving = detail::resolve_in_background(n.host, n.port);
        }
        // The addresses to try: the last resolution's (refreshed in the
        // background every 30 s), or a first one waited for until `d`.
        bool addresses(Node& n, Deadline d, std::vector<Address>& out, std::string& why, bool& resolving) {
            resolving = false;
            std::unique_lock<std::mutex> lock(mu);
            take_resolution(n);
            if (!n.addrs.empty()) {
                if (!n.numeric && Clock::now() - n.resolved_at >= std::chrono::seconds(30)) resolve_again(n);
                out = n.addrs;
                return true;
            }
            resolve_again(n);
            const auto r = n.resolving;
            lock.unlock();
            // In slices, so a closing Client is not held up by a slow resolver.
            while (!r->wait_until(std::min(d, Clock::now() + std::chrono::milliseconds(20)))) {
                if (Clock::now() >= d || stopping_now()) {
                    why = "resolving " + n.host + " took longer than connect_timeout (" +
                          std::to_string(opt.connect_timeout.count()) + " ms); it goes on in the background";
                    resolving = true;
                    return false;
                }
            }
            lock.lock();
            take_resolution(n);
            if (n.addrs.empty()) {
                why = r->error;
                return false;
            }
            out = n.addrs;
            return true;
        }
        std::string failure_of(Node& n) {
            std::lock_guard<std::mutex> lock(mu);
            return n.failure.empty() ? "no connection to " + n.where : n.failure;
        }
        bool stopping_now() {
            std::lock_guard<std::mutex> lock(mu);
            return stopping;
        }

        // Applies a CONFIG GET maxmemory-policy reply to a check sent at
        // `sent`. False for a reply of another shape (out of step: the caller
        // closes the connection). An error reply (CONFIG disabled, -BUSY,
        // NOPERM) keeps what was known.
        bool apply_policy(Node& n, const Reply& r, Clock::time_point sent) {
            std::lock_guard<std::mutex> lock(mu);
            n.checked = std::max(n.checked, sent);
            const bool was = n.evicting;
            if (r.type == Reply::Type::array && r.elements.size() == 2 && r.elements[1].type == Reply::Type::string) {
                n.policy = r.elements[1].str;
                n.evicting = n.policy.rfind("volatile-", 0) == 0 || n.policy.rfind("allkeys-", 0) == 0;
            } else if (r.type == Reply::Type::error || (r.type == Reply::Type::array && r.elements.empty())) {
                set_error("CONFIG GET maxmemory-policy on " + n.where + " was refused (" +
                        (r.type == Reply::Type::error ? r.str : std::string("no value")) + "): " +
                        (n.evicting ? "the server stays refused until a check reads a policy that cannot evict"
                                    : "the eviction policy is not checked; make sure it is noeviction"));
            } else {
                return false;
            }
            if (was != n.evicting) evicting_nodes.fetch_add(n.evicting ? 1 : -1, std::memory_order_relaxed);
            return true;
        }
        // One CONFIG GET maxmemory-policy round trip on a pooled connection.
        void probe_policy(Node& n, Deadline d) {
            std::string why;
            auto c = acquire(n, d, why);
            if (!c) return;
            const std::string_view args[3] = {"CONFIG", "GET", "maxmemory-policy"};
            Reply r;
            const auto sent = Clock::now();
            if (c->append(args, n.where) && c->flush(d, n.where) && c->read(d, n.where, r) &&
                !apply_policy(n, r, sent))
                c->fail("an out-of-step reply to CONFIG GET from " + n.where);
            release(n, std::move(c));
        }

        // Makes a new connection ready for calls, within connect_timeout:
        // connect to the first address that answers, then one pipeline of
        // AUTH, SELECT, CONFIG GET maxmemory-policy and the scripts (SCRIPT
        // EXISTS when their SHA1s are known, SCRIPT LOAD of any missing).
        std::unique_ptr<Conn> open_ready(Node& n, std::string& why, bool& resolving) {
            const Deadline d = Clock::now() + opt.connect_timeout;
            std::vector<Address> addrs;
            if (!addresses(n, d, addrs, why, resolving)) return nullptr;
            auto c = std::make_unique<Conn>();
            bool ok = false;
            for (const Address& a : addrs) {
                if (Clock::now() >= d) break;
                if ((ok = c->open(a, d, n.where))) break;
            }
            if (!ok) {
                why = c->error.empty() ? "connect to " + n.where + " timed out" : c->error;
                std::lock_guard<std::mutex> lock(mu);
                resolve_again(n);  // the name may point elsewhere now
                return nullptr;
            }
            if (!prime(n, *c, d)) {
                why = c->error;
                return nullptr;
            }
            return c;
        }
        bool expect_ok(Conn& c, Deadline d, const std::string& where, const char* what) {
            Reply r;
            if (!c.read(d, where, r)) return false;
            if (r.type == Reply::Type::status && r.str == "OK") return true;
            return c.fail(std::string(what) + " on " + where + " failed: " +
                          (r.type == Reply::Type::error ? r.str : std::string("unexpected reply")));
        }
        bool prime(Node& n, Conn& c, Deadline d) {
            const std::string db = std::to_string(opt.database);
            if (!opt.password.empty()) {
                const std::string_view with_user[3] = {"AUTH", opt.user, opt.password};
                const std::string_view plain[2] = {"AUTH", opt.password};
                if (!c.append(opt.user.empty() ? std::span<const std::string_view>(plain)
                                               : std::span<const std::string_view>(with_user),
                              n.where))
                    return false;
            }
            if (opt.database != 0) {
                const std::string_view args[2] = {"SELECT", db};
                if (!c.append(args, n.where)) return false;
            }
            const std::string_view policy[3] = {"CONFIG", "GET", "maxmemory-policy"};
            if (!c.append(policy, n.where)) return false;
            std::array<std::string, protocol::script_count> sha;
            bool known = true;
            for (std::size_t s = 0; s < protocol::script_count; ++s) {
                sha[s] = sha_of(static_cast<protocol::Script>(s));
                known = known && !sha[s].empty();
            }
            std::vector<std::string_view> exists = {"SCRIPT", "EXISTS"};
            std::vector<protocol::Script> load;
            if (known) {
                for (const auto& h : sha) exists.emplace_back(h);
                if (!c.append(exists, n.where)) return false;
            } else {
                for (std::size_t s = 0; s < protocol::script_count; ++s) load.push_back(static_cast<protocol::Script>(s));
                if (!append_loads(n, c, load)) return false;
            }
            const auto sent = Clock::now();
            if (!c.flush(d, n.where)) return false;
            if (!opt.password.empty() && !expect_ok(c, d, n.where, "AUTH")) return false;
            if (opt.database != 0 && !expect_ok(c, d, n.where, "SELECT")) return false;
            Reply r;
            if (!c.read(d, n.where, r)) return false;
            if (r.type == Reply::Type::error && r.str.rfind("NOAUTH", 0) == 0)
                return c.fail(n.where + " requires authentication (" + r.str +
                              "): set Options::password (and Options::user for an ACL user)");
            if (!apply_policy(n, r, sent)) return c.fail("an out-of-step reply to CONFIG GET from " + n.where);
            if (known) {
                if (!c.read(d, n.where, r)) return false;
                if (r.type != Reply::Type::array || r.elements.size() != protocol::script_count)
                    return c.fail("an out-of-step reply to SCRIPT EXISTS from " + n.where);
                for (std::size_t s = 0; s < protocol::script_count; ++s)
                    if (r.elements[s].type != Reply::Type::integer || r.elements[s].integer != 1)
                        load.push_back(static_cast<protocol::Script>(s));
                if (!load.empty() && (!append_loads(n, c, load) || !c.flush(d, n.where))) return false;
            }
            if (!read_loads(n, c, load, d)) return false;
            std::lock_guard<std::mutex> lock(mu);
            n.loaded.fill(true);
            return true;
        }
        bool append_loads(Node& n, Conn& c, const std::vector<protocol::Script>& load) {
            for (const protocol::Script s : load) {
                const std::string_view args[3] = {"SCRIPT", "LOAD", protocol::script_source(s)};
                if (!c.append(args, n.where)) return false;
            }
            return true;
        }
        // Reads SCRIPT LOAD replies: each the script's SHA1 (learnt by the
        // process from the first, checked against it after).
        bool read_loads(Node& n, Conn& c, const std::vector<protocol::Script>& load, Deadline d) {
            for (const protocol::Script s : load) {
                Reply r;
                if (!c.read(d, n.where, r)) return false;
                if (r.type != Reply::Type::string || r.str.size() != 40)
                    return c.fail("SCRIPT LOAD failed on " + n.where + ": " + r.str);
                Shas& t = shas();
                std::lock_guard<std::mutex> lock(t.mu);
                auto& known = t.sha[static_cast<std::size_t>(s)];
                if (known.empty()) known = r.str;
                if (known != r.str) return c.fail("SCRIPT LOAD on " + n.where + " answered another SHA1");
            }
            return true;
        }

        // The opener: keeps one connection while the node is in use, opens
        // more while calls wait and the pool has room, backs off after a
        // failure.
        void open_loop(Node& n) {
            std::unique_lock<std::mutex> lock(mu);
            while (!stopping) {
                const auto now = Clock::now();
                const bool in_use = now - n.last_used < std::chrono::seconds(60);
                const bool need = n.open < pool && ((n.open == 0 && in_use) || (n.waiting > 0 && n.idle.empty()));
                if (!need) {
                    n.work.wait(lock);
                    continue;
                }
                if (now < n.next_attempt) {
                    n.work.wait_until(lock, n.next_attempt);
                    continue;
                }
                n.opening = true;
                n.down_until.store(0, std::memory_order_relaxed);
                lock.unlock();
                std::string why;
                bool resolving = false;
                auto c = open_ready(n, why, resolving);
                lock.lock();
                n.opening = false;
                if (c) {
                    ++n.open;
                    ++n.opened;
                    n.failing = false;
                    n.backoff = std::chrono::milliseconds(0);
                    n.idle.push_back(std::move(c));
                    n.down_until.store(0, std::memory_order_relaxed);
                } else {
                    n.failing = true;
                    n.failure = why;
                    set_error(why);
                    // A resolution still in flight is waited for again at
                    // once: its answer is used the moment it comes.
                    if (!resolving)
                        n.backoff =
                            std::clamp(n.backoff * 2, std::chrono::milliseconds(25), std::chrono::milliseconds(1000));
                    n.next_attempt = resolving ? Clock::now() : Clock::now() + n.backoff;
                    if (n.open == 0 && !resolving)
                        n.down_until.store(n.next_attempt.time_since_epoch().count(), std::memory_order_release);
                }
                n.ready.notify_all();
            }
        }
        // The drainer: reads the replies a late connection still owes, then
        // puts it back in the pool if it is in step, else closes it.
        void drain_loop(Node& n) {
            std::unique_lock<std::mutex> lock(mu);
            while (!stopping) {
                if (n.late.empty()) {
                    n.drains.wait(lock);
                    continue;
                }
                Late l = std::move(n.late.front());
                n.late.erase(n.late.begin());
                lock.unlock();
                bool ok = true;
                while (ok && l.conn->owed > 0) {
                    // In slices, so a closing Client is not held up.
                    l.conn->timed_out = false;
                    Reply r;
                    if (l.conn->read(std::min(l.until, Clock::now() + std::chrono::milliseconds(20)), n.where, r)) {
                        note_late_reply(n, r);
                        continue;
                    }
                    ok = l.conn->alive() && Clock::now() < l.until && !stopping_now();
                }
                l.conn->timed_out = false;
                ok = ok && l.conn->in_step();
                lock.lock();
                if (ok) {
                    n.idle.push_back(std::move(l.conn));
                    n.down_until.store(0, std::memory_order_relaxed);
                } else {
                    --n.open;
                    n.work.notify_one();
                }
                n.ready.notify_all();
            }
        }

        // A ready connection of n: an idle one in step, or one the opener
        // hands over before the deadline. Null with `why` when none comes,
        // at once while the node is failing and no attempt is due in time.
        std::unique_ptr<Conn> acquire(Node& n, Deadline d, std::string& why) {
            if (n.down_until.load(std::memory_order_acquire) > d.time_since_epoch().count()) {
                why.clear();  // the opener's note says why
                return nullptr;
            }
            std::unique_lock<std::mutex> lock(mu);
            n.last_used = Clock::now();
            for (;;) {
                while (!n.idle.empty()) {
                    auto c = std::move(n.idle.back());
                    n.idle.pop_back();
                    lock.unlock();
                    const bool usable = c->in_step();  // closed by the server, or a stray reply arrived
                    lock.lock();
                    if (usable) return c;
                    --n.open;
                    n.work.notify_one();
                }
                if (n.failing && !n.opening && n.open == 0 && n.next_attempt > d) {
                    why = n.failure;
                    return nullptr;
                }
                take_resolution(n);
                if (n.open == 0 && n.addrs.empty() && n.resolving) {  // no address to connect to yet
                    why = "resolving " + n.host + " is still in progress (" +
                          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                             Clock::now() - n.resolving->started)
                                             .count()) +
                          " ms so far); calls fail until it answers";
                    return nullptr;
                }
                if (Clock::now() >= d) {
                    why = n.open >= pool ? "all " + std::to_string(pool) + " connections to " + n.where +
                                               " stayed busy until the deadline"
                          : n.failing ? n.failure
                                      : "no connection to " + n.where + " was ready before the deadline";
                    return nullptr;
                }
                ++n.waiting;
                n.work.notify_one();
                n.ready.wait_until(lock, d);
                --n.waiting;
            }
        }
        // Back to the pool only in step; a connection that timed out owing
        // replies goes to the drainer; anything else is closed.
        void release(Node& n, std::unique_ptr<Conn> c) {
            if (!c) return;
            if (c->alive() && c->timed_out && !c->unsent && c->owed > 0) {
                std::lock_guard<std::mutex> lock(mu);
                n.late.push_back(Late{std::move(c), Clock::now() + opt.connect_timeout});
                n.drains.notify_one();
                return;
            }
            const bool keep = c->in_step();
            std::lock_guard<std::mutex> lock(mu);
            if (keep)
                n.idle.push_back(std::move(c));
            else
                --n.open;
            n.ready.notify_one();
            n.work.notify_one();
        }

        // A live connection's policy check rides with the first call sent
        // this long after the last check was sent: a policy switched on at
        // runtime is found by a call started at most this long after the
        // switch (plus one round trip), and that call is refused.
        static constexpr std::chrono::milliseconds policy_every{900};

        // Appends items[g.idx...] (each after ASKING when asking) to g.conn,
        // after an ECHO fence when the connection needs one, a policy check
        // when one is due and the SCRIPT LOADs the node lacks, and writes
        // them. A check claimed and not read back is due again at once.
        bool send(Group& g, std::span<const Item> items, Deadline d) {
            if (send_group(g, items, d)) return true;
            if (g.policy_check) {
                g.policy_check = false;
                unclaim_check(node(g.node));
            }
            return false;
        }
        void unclaim_check(Node& n) {
            std::lock_guard<std::mutex> lock(mu);
            n.checked = Clock::time_point{};
        }
        bool send_group(Group& g, std::span<const Item> items, Deadline d) {
            Node& n = node(g.node);
            Conn& c = *g.conn;
            std::array<bool, protocol::script_count> need{};
            Seen seen;
            {
                std::lock_guard<std::mutex> lock(mu);
                for (const std::size_t i : g.idx)
                    if (const auto* call = items[i].call;
                        call != nullptr && !n.loaded[static_cast<std::size_t>(call->script)])
                        need[static_cast<std::size_t>(call->script)] = true;
                seen = n.seen;
                g.policy_check = Clock::now() - n.checked >= policy_every;
                if (g.policy_check) n.checked = Clock::now();
            }
            // After a reply that carried no token (an error Redis raised
            // itself, a plain command's), and before a plain command: an
            // ECHO of a fresh token first, so a copy of that reply still on
            // its way is read here, not as this call's.
            g.fence.clear();
            const bool raw =
                std::any_of(g.idx.begin(), g.idx.end(), [&](std::size_t i) { return items[i].call == nullptr; });
            if (c.fence || raw) {
                g.fence = "tally-fence-" + std::to_string(tokens.fetch_add(1, std::memory_order_relaxed) + 1);
                const std::string_view args[2] = {"ECHO", g.fence};
                if (!c.append(args, n.where)) return false;
            }
            if (g.policy_check) {
                const std::string_view args[3] = {"CONFIG", "GET", "maxmemory-policy"};
                if (!c.append(args, n.where)) return false;
            }
            g.loads.clear();
            std::array<std::string, protocol::script_count> sha;
            for (std::size_t s = 0; s < protocol::script_count; ++s) {
                bool used = need[s];
                for (std::size_t k = 0; !used && k < g.idx.size(); ++k)
                    used =
                        items[g.idx[k]].call != nullptr && static_cast<std::size_t>(items[g.idx[k]].call->script) == s;
                if (!used) continue;
                sha[s] = sha_of(static_cast<protocol::Script>(s));
                if (need[s] || sha[s].empty()) {
                    const std::string_view args[3] = {"SCRIPT", "LOAD",
                                                      protocol::script_source(static_cast<protocol::Script>(s))};
                    if (!c.append(args, n.where)) return false;
                    g.loads.push_back(static_cast<protocol::Script>(s));
                }
            }
            if (std::any_of(g.loads.begin(), g.loads.end(),
                            [&](protocol::Script s) { return sha[static_cast<std::size_t>(s)].empty(); })) {
                // The first load of the process: learn the SHA1s before calling by them.
                if (!c.flush(d, n.where) || !read_fence(g, n, c, d) || (g.policy_check && !read_policy(n, c, d)) ||
                    !read_loads(n, c, g.loads, d))
                    return false;
                g.policy_check = false;
                g.loads.clear();
                for (std::size_t s = 0; s < protocol::script_count; ++s)
                    sha[s] = sha_of(static_cast<protocol::Script>(s));
                trips.fetch_add(1, std::memory_order_relaxed);
            }
            const bool guard = !cluster;
            const std::string cnt = std::to_string(seen.count);
            std::vector<std::string_view> argv;
            g.tokens.assign(g.idx.size(), std::string());
            for (std::size_t k = 0; k < g.idx.size(); ++k) {
                if (g.asking) {
                    const std::string_view a[1] = {"ASKING"};
                    if (!c.append(a, n.where)) return false;
                }
                const Item& it = items[g.idx[k]];
                if (it.call == nullptr) {
                    if (!c.append(it.raw, n.where)) return false;
                    continue;
                }
                const protocol::Call& call = *it.call;
                g.tokens[k] = std::to_string(tokens.fetch_add(1, std::memory_order_relaxed) + 1);
                const std::size_t nk = std::min(call.num_keys, call.args.size());
                const std::string nks = std::to_string(nk + (guard ? 2 : 0));
                argv.clear();
                argv.reserve(call.args.size() + 8);
                argv.emplace_back("EVALSHA");
                argv.emplace_back(sha[static_cast<std::size_t>(call.script)]);
                argv.emplace_back(nks);
                for (std::size_t j = 0; j < nk; ++j) argv.emplace_back(call.args[j]);
                if (guard) {
                    argv.emplace_back(sentinel);
                    argv.emplace_back(lost_key);
                }
                for (std::size_t j = nk; j < call.args.size(); ++j) argv.emplace_back(call.args[j]);
                argv.emplace_back(guard ? std::string_view("1") : std::string_view("0"));
                argv.emplace_back(guard ? std::string_view(cnt) : std::string_view("0"));
                argv.emplace_back(g.tokens[k]);
                if (!c.append(argv, n.where)) return false;
            }
            g.sent = c.flush(d, n.where);
            return g.sent;
        }
        bool read_policy(Node& n, Conn& c, Deadline d) {
            Reply r;
            if (!c.read(d, n.where, r)) return false;
            if (!apply_policy(n, r, Clock::time_point{}))
                return c.fail("an out-of-step reply to CONFIG GET from " + n.where);
            return true;
        }
        // The ECHO fence's reply, when one was sent: its token, or the
        // connection is out of step (an error, ECHO refused by an ACL
        // included: closing is the safe answer).
        bool read_fence(Group& g, Node& n, Conn& c, Deadline d) {
            if (g.fence.empty()) return true;
            Reply r;
            if (!c.read(d, n.where, r)) return false;
            if (r.type != Reply::Type::string || r.str != g.fence)
                return c.fail("a reply from " + n.where +
                              " out of step with its call (a stray or duplicated reply): connection closed");
            g.fence.clear();
            c.fence = false;
            return true;
        }
        // The script replies end with the sentinel's count, a flag "this
        // call detected a loss" and the call's token: check, strip and
        // remember them. tally's scripts end their error replies with
        // " @<token>": checked and stripped too. An error Redis raised
        // itself carries no token: taken as this call's, and the connection
        // is fenced before its next use. False when the reply is not this
        // call's.
        bool take_suffix(Node& n, Conn& c, Reply& r, const std::string& token) {
            if (r.type == Reply::Type::error) {
                const auto at = r.str.rfind(" @");
                const bool tokened = at != std::string::npos && at + 2 < r.str.size() &&
                                     std::all_of(r.str.begin() + static_cast<std::ptrdiff_t>(at + 2), r.str.end(),
                                                 [](char ch) { return ch >= '0' && ch <= '9'; });
                if (!tokened) {
                    c.fence = true;
                    return true;
                }
                if (r.str.compare(at + 2, std::string::npos, token) != 0) return false;
                r.str.resize(at);
                return true;
            }
            if (r.type != Reply::Type::array) return false;
            auto& e = r.elements;
            if (e.size() < 3 || e.back().type != Reply::Type::string || e.back().str != token) return false;
            e.pop_back();
            if (!protocol::detail::int_in(e[e.size() - 2], 0, (1LL << 53) - 1) ||
                !protocol::detail::int_in(e[e.size() - 1], 0, 1))
                return false;
            const long long cnt = e[e.size() - 2].integer;
            const bool detected = e[e.size() - 1].integer == 1;
            e.resize(e.size() - 2);
            note_sentinel(n, cnt, detected);
            return true;
        }
        // What a script reply says of the sentinel; also for the late
        // replies the drainer reads, so a loss that a timed-out call
        // detected is still counted and its count remembered.
        void note_sentinel(Node& n, long long cnt, bool detected) {
            if (cluster) return;
            std::lock_guard<std::mutex> lock(mu);
            // After a loss the count starts again: take the new one as is.
            n.seen.count = detected ? cnt : std::max(n.seen.count, cnt);
            if (detected) {
                lost.fetch_add(1, std::memory_order_relaxed);
                set_error("state lost on " + n.where +
                          " (restart without persistence, FLUSHALL or a lossy failover): keys that come back missing "
                          "start spent for one time to full replenishment");
            }
        }
        void note_late_reply(Node& n, const Reply& r) {
            if (r.type != Reply::Type::array || r.elements.size() < 3) return;
            const auto& e = r.elements;
            if (e.back().type != Reply::Type::string ||
                !protocol::detail::int_in(e[e.size() - 3], 0, (1LL << 53) - 1) ||
                !protocol::detail::int_in(e[e.size() - 2], 0, 1))
                return;
            note_sentinel(n, e[e.size() - 3].integer, e[e.size() - 2].integer == 1);
        }
        // Reads the replies of send() into replies[g.idx...]; NOSCRIPT: the
        // script did not run, reload it and repeat those calls once.
        bool receive(Group& g, std::span<const Item> items, Deadline d, std::vector<Reply>& replies,
                     bool again = false) {
            Node& n = node(g.node);
            Conn& c = *g.conn;
            Reply r;
            if (!read_fence(g, n, c, d)) return false;
            if (g.policy_check) {
                if (!read_policy(n, c, d)) {
                    unclaim_check(n);
                    return false;
                }
                g.policy_check = false;
            }
            for (const protocol::Script s : g.loads) {
                if (!c.read(d, n.where, r)) return false;
                if (r.type != Reply::Type::string || r.str != sha_of(s))
                    return c.fail("SCRIPT LOAD failed on " + n.where + ": " + r.str);
                std::lock_guard<std::mutex> lock(mu);
                n.loaded[static_cast<std::size_t>(s)] = true;
            }
            std::vector<std::size_t> retry;
            for (std::size_t k = 0; k < g.idx.size(); ++k) {
                const std::size_t i = g.idx[k];
                if (g.asking && !c.read(d, n.where, r)) return false;  // the ASKING reply
                if (!c.read(d, n.where, r)) return false;
                if (items[i].call != nullptr) {
                    if (r.type == Reply::Type::error && r.str.rfind("NOSCRIPT", 0) == 0 && !again) {
                        retry.push_back(i);
                        std::lock_guard<std::mutex> lock(mu);
                        n.loaded[static_cast<std::size_t>(items[i].call->script)] = false;
                    } else if (!take_suffix(n, c, r, g.tokens[k])) {
                        return c.fail("a reply from " + n.where +
                                      " out of step with its call (a stray or duplicated reply): connection closed");
                    }
                } else {
                    c.fence = true;  // a plain command's reply carries no token
                }
                replies[i] = std::move(r);
            }
            trips.fetch_add(1, std::memory_order_relaxed);
            if (retry.empty()) return true;
            Group h;
            h.node = g.node;
            h.asking = g.asking;
            h.idx = std::move(retry);
            h.conn = std::move(g.conn);
            const bool ok = send(h, items, d) && receive(h, items, d, replies, true);
            g.conn = std::move(h.conn);
            return ok;
        }

        bool single(std::span<const Item> items, std::vector<Reply>& replies, Deadline d) {
            replies.assign(items.size(), Reply{});
            Group g;
            g.node = 0;
            g.idx.resize(items.size());
            for (std::size_t i = 0; i < items.size(); ++i) g.idx[i] = i;
            Node& n = node(0);
            std::string why;
            g.conn = acquire(n, d, why);
            if (!g.conn) {
                if (!why.empty()) note(std::move(why));
                return false;
            }
            const bool ok = send(g, items, d) && receive(g, items, d, replies);
            if (!ok) why = g.conn->error;
            release(n, std::move(g.conn));
            if (!ok) note(std::move(why));
            return ok;
        }

        // Reads CLUSTER SLOTS from the first node that answers it: nodes
        // with an open connection first, no node tried after `deadline`.
        bool refresh(Deadline d) {
            std::vector<std::size_t> order;
            {
                std::lock_guard<std::mutex> lock(mu);
                refreshed = Clock::now();
                for (const bool open : {true, false})
                    for (std::size_t n = 0; n < nodes.size(); ++n)
                        if ((nodes[n]->open > 0) == open) order.push_back(n);
            }
            std::string why = "no node answered CLUSTER SLOTS";
            for (const std::size_t i : order) {
                if (Clock::now() >= d) break;
                Node& n = node(i);
                Group g;
                g.node = i;
                g.conn = acquire(n, d, why);
                if (!g.conn) {
                    if (why.empty()) why = failure_of(n);
                    continue;
                }
                Item item;
                item.raw = {"CLUSTER", "SLOTS"};
                const Item items[1] = {item};
                std::vector<Reply> out(1);
                g.idx = {0};
                const bool ok = send(g, items, d) && receive(g, items, d, out);
                if (!ok) why = g.conn->error;
                release(n, std::move(g.conn));
                if (!ok) continue;
                std::lock_guard<std::mutex> lock(mu);
                std::vector<std::uint16_t> map(cluster_slots, none);
                if (!parse_slots(out[0], n.host, map)) {
                    why = "unusable CLUSTER SLOTS reply from " + n.where +
                          (out[0].type == Reply::Type::error ? ": " + out[0].str : std::string());
                    continue;
                }
                owner = std::move(map);
                stale = false;
                return true;
            }
            note("cluster slot map: " + why);
            return false;
        }
        // [[start, end, [host, port, id...], replicas...]...]; an empty host
        // means the host we asked. Under mu.
        bool parse_slots(const Reply& r, const std::string& asked, std::vector<std::uint16_t>& map) {
            if (r.type != Reply::Type::array) return false;
            for (const Reply& range : r.elements) {
                if (range.type != Reply::Type::array || range.elements.size() < 3) return false;
                const Reply& lo = range.elements[0];
                const Reply& hi = range.elements[1];
                const Reply& master = range.elements[2];
                if (lo.type != Reply::Type::integer || hi.type != Reply::Type::integer || lo.integer < 0 ||
                    hi.integer < lo.integer || hi.integer >= static_cast<long long>(cluster_slots) ||
                    master.type != Reply::Type::array || master.elements.size() < 2 ||
                    master.elements[0].type != Reply::Type::string || master.elements[1].type != Reply::Type::integer ||
                    master.elements[1].integer < 1 || master.elements[1].integer > 65535)
                    return false;
                const std::string host =
                    master.elements[0].str.empty() || master.elements[0].str == "?" ? asked : master.elements[0].str;
                const std::size_t n = node_index(host, static_cast<int>(master.elements[1].integer));
                if (n == none) return false;
                for (long long s = lo.integer; s <= hi.integer; ++s)
                    map[static_cast<std::size_t>(s)] = static_cast<std::uint16_t>(n);
            }
            return true;
        }

        // "MOVED 3999 127.0.0.1:6381" / "ASK ...": slot and node index. Under mu.
        bool parse_redirect(const std::string& s, std::size_t skip, std::uint32_t& slot, std::size_t& node) {
            const auto sp = s.find(' ', skip);
            const auto colon = s.rfind(':');
            if (sp == std::string::npos || colon == std::string::npos || colon < sp) return false;
            unsigned long v = 0;
            for (std::size_t i = skip; i < sp; ++i) {
                if (s[i] < '0' || s[i] > '9' || v >= cluster_slots) return false;
                v = v * 10 + static_cast<unsigned long>(s[i] - '0');
            }
            unsigned long port = 0;
            for (std::size_t i = colon + 1; i < s.size(); ++i) {
                if (s[i] < '0' || s[i] > '9' || port > 65535) return false;
                port = port * 10 + static_cast<unsigned long>(s[i] - '0');
            }
            if (sp == skip || v >= cluster_slots || port < 1 || port > 65535) return false;
            std::string host = s.substr(sp + 1, colon - sp - 1);
            if (host.empty()) return false;
            slot = static_cast<std::uint32_t>(v);
            node = node_index(host, static_cast<int>(port));
            return node != none;
        }

        // The slot of an item's keys; -1 for keys that span slots.
        static long slot_of(const Item& it) {
            if (it.call == nullptr) return it.raw.size() > 1 ? static_cast<long>(cluster_slot(it.raw[1])) : 0;
            const auto& c = *it.call;
            if (c.num_keys == 0 || c.args.empty()) return 0;
            const std::uint32_t s = cluster_slot(c.args[0]);
            for (std::size_t k = 1; k < c.num_keys && k < c.args.size(); ++k)
                if (cluster_slot(c.args[k]) != s) return -1;
            return static_cast<long>(s);
        }

        bool route(std::span<const Item> items, std::vector<Reply>& replies, Deadline d) {
            replies.assign(items.size(), Reply{});
            bool need;
            {
                std::lock_guard<std::mutex> lock(mu);
                need = owner.empty() || (stale && Clock::now() - refreshed >= std::chrono::milliseconds(100));
            }
            if (need) refresh(d);
            std::vector<std::size_t> target(items.size(), none);
            std::vector<char> asking(items.size(), 0);
            std::vector<std::size_t> pending;
            {
                std::lock_guard<std::mutex> lock(mu);
                if (owner.empty()) return false;
                for (std::size_t i = 0; i < items.size(); ++i) {
                    const long s = slot_of(items[i]);
                    if (s < 0) {
                        replies[i] = error_reply("CROSSSLOT tally: the keys of one call must share a hash slot");
                    } else if (owner[static_cast<std::size_t>(s)] == none) {
                        replies[i] = error_reply("CLUSTERDOWN tally: no master serves hash slot " + std::to_string(s));
                    } else {
                        target[i] = owner[static_cast<std::size_t>(s)];
                        pending.push_back(i);
                    }
                }
            }
            auto backoff = std::chrono::milliseconds(1);
            for (int attempt = 0; !pending.empty() && attempt < 100'000; ++attempt) {
                // Group by (node, asking); write to every node, then read.
                std::vector<Group> groups;
                for (const std::size_t i : pending) {
                    auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) {
                        return x.node == target[i] && x.asking == (asking[i] != 0);
                    });
                    if (g == groups.end()) {
                        groups.emplace_back();
                        g = groups.end() - 1;
                        g->node = target[i];
                        g->asking = asking[i] != 0;
                    }
                    g->idx.push_back(i);
                }
                std::vector<std::string> why(groups.size());
                for (std::size_t k = 0; k < groups.size(); ++k) {
                    Group& g = groups[k];
                    g.conn = acquire(node(g.node), d, why[k]);
                    if (!g.conn && why[k].empty()) why[k] = failure_of(node(g.node));
                    if (g.conn && !send(g, items, d)) why[k] = g.conn->error;
                }
                for (std::size_t k = 0; k < groups.size(); ++k) {
                    Group& g = groups[k];
                    Node& n = node(g.node);
                    const bool ok = g.sent && receive(g, items, d, replies);
                    if (!ok && g.conn) why[k] = g.conn->error;
                    if (g.conn) release(n, std::move(g.conn));
                    if (ok) continue;
                    // This node failed: its calls fail, the others stand; a
                    // failover may have moved its slots.
                    {
                        std::lock_guard<std::mutex> lock(mu);
                        set_error(why[k]);
                        stale = true;
                    }
                    for (const std::size_t i : g.idx) replies[i] = error_reply("TALLYNODE " + why[k]);
                }
                std::vector<std::size_t> next;
                const bool may_retry = Clock::now() < d;
                bool wait = false;
                {
                    std::lock_guard<std::mutex> lock(mu);
                    for (const std::size_t i : pending) {
                        Reply& r = replies[i];
                        if (r.type != Reply::Type::error || !may_retry) continue;
                        std::uint32_t slot = 0;
                        std::size_t nd = none;
                        if (r.str.rfind("MOVED ", 0) == 0 && parse_redirect(r.str, 6, slot, nd)) {
                            owner[slot] = static_cast<std::uint16_t>(nd);
                            stale = true;
                            refreshed = {};
                            target[i] = nd;
                            asking[i] = 0;
                            next.push_back(i);
                        } else if (r.str.rfind("ASK ", 0) == 0 && parse_redirect(r.str, 4, slot, nd)) {
                            target[i] = nd;
                            asking[i] = 1;
                            next.push_back(i);
                        } else if (r.str.rfind("TRYAGAIN", 0) == 0 || r.str.rfind("CLUSTERDOWN", 0) == 0) {
                            asking[i] = 0;
                            wait = true;
                            next.push_back(i);
                        }
                    }
                }
                if (wait) {
                    const auto left = d - Clock::now();
                    std::this_thread::sleep_for(
                        std::min<Clock::duration>(backoff, std::max<Clock::duration>(left, {})));
                    backoff = std::min(backoff * 2, std::chrono::milliseconds(16));
                }
                pending = std::move(next);
            }
            return true;
        }
    };


    explicit Client(Options options) : s_(std::make_unique<Shared>()) {
        tally::detail::check_range("tally::redis::Options", "database", options.database, 0, 2147483647);
        s_->opt = std::move(options);
        const std::size_t hw = std::max<std::size_t>(1, std::thread::hardware_concurrency());
        s_->pool = s_->opt.pool_size != 0 ? s_->opt.pool_size : std::min<std::size_t>(hw, 8);
        s_->sentinel = s_->opt.key_prefix + "!sentinel";
        s_->lost_key = s_->opt.key_prefix + "!lost";
    }

    std::unique_ptr<Shared> s_;
};

}  // namespace redis
TALLY_END_NAMESPACE
