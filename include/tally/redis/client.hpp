// tally/redis/client.hpp: tally::redis::Client, the hiredis adapter (the only
// file of tally that includes a third-party header). Works with hiredis 0.14
// (Debian 12) and 1.x.
#pragma once

#include "../detail/abi.hpp"

#include <hiredis/hiredis.h>

#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <ctime>
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
#include "cluster.hpp"
#include "options.hpp"
#include "protocol.hpp"

TALLY_BEGIN_NAMESPACE
namespace redis {

/// Client: blocking hiredis connections to one Redis (or Valkey, Dragonfly)
/// server, over TCP or a unix socket, or to a Redis Cluster; the limiters
/// take either kind.
///
/// - Failure never throws and never hangs: connect waits at most
///   connect_timeout, every read and write at most command_timeout. A failed
///   round trip closes the connection; the next call reconnects (waiting at
///   most min(connect_timeout, command_timeout)).
/// - Scripts are loaded once per server (SCRIPT LOAD) and called by SHA1
///   (EVALSHA); a NOSCRIPT reply (after SCRIPT FLUSH, a restart or a
///   failover) reloads the script and repeats the calls that did not run.
/// - run() sends a whole batch pipelined: one round trip per server for any
///   number of calls (two when a script has to be (re)loaded).
/// - Cluster (connect_cluster): the slot map comes from CLUSTER SLOTS; each
///   call goes to the master of its keys' slot (CRC16, hash tags), a batch is
///   split per node, written to all nodes before any reply is read, and
///   reassembled in order. MOVED updates the slot and refreshes the map, ASK
///   retries on the target after ASKING, TRYAGAIN waits briefly: at most
///   max_redirects retries, all within the call's command_timeout. A node
///   that fails answers its calls with an error reply (the limiters' fail
///   mode); the others keep working. The keys of one call share a slot.
/// - SIGPIPE from a vanished peer is discarded, never delivered.
///
/// Thread safety: every member is thread-safe; calls on one Client are
/// serialised by an internal mutex. Use one Client per thread for parallel
/// round trips.
///
///   auto client = tally::redis::Client::connect("127.0.0.1", 6379);
///   tally::redis::GcraLimiter per_key(client, tally::Quota::per_second(100));
///   if (!per_key.try_acquire("api-key:42")) reply_429();
class Client {
  public:
    /// Most MOVED / ASK / TRYAGAIN retries of one call (cluster).
    static constexpr int max_redirects = 5;

    /// TCP. Connects now; when that fails the Client is still usable and
    /// reconnects on its next call (connected() and last_error() tell).
    static Client connect(std::string host, int port, Options options = {}) {
        Client c(std::move(options));
        std::lock_guard<std::mutex> lock(c.s_->mu);
        Conn& conn = c.s_->add_node(std::move(host), port);
        if (!conn.reconnect(c.s_->opt.connect_timeout)) c.s_->error = conn.error;
        return c;
    }
    /// Unix-domain socket.
    static Client connect_unix(std::string path, Options options = {}) {
        Client c(std::move(options));
        std::lock_guard<std::mutex> lock(c.s_->mu);
        Conn& conn = c.s_->add_node(std::move(path), -1);
        if (!conn.reconnect(c.s_->opt.connect_timeout)) c.s_->error = conn.error;
        return c;
    }
    /// Redis Cluster, from one or more "host:port" seeds (any nodes of the
    /// cluster). Reads the slot map now; when no seed answers, the Client is
    /// still usable and retries on its next call. std::invalid_argument for
    /// no seeds or a seed that is not host:port with a port in [1, 65535].
    static Client connect_cluster(std::vector<std::string> seeds, Options options = {}) {
        constexpr const char* who = "tally::redis::Client::connect_cluster";
        tally::detail::check_range(who, "number of seeds", seeds.size(), std::size_t{1}, std::size_t{1024});
        Client c(std::move(options));
        std::lock_guard<std::mutex> lock(c.s_->mu);
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
                tally::detail::throw_invalid_argument(std::string(who) + ": seed \"" + seed +
                                                      "\" is not host:port");
            tally::detail::check_range(who, "seed port", port, 1UL, 65535UL);
            c.s_->add_node(seed.substr(0, colon), static_cast<int>(port));
        }
        if (c.s_->refresh())
            for (const auto o : c.s_->owner)
                if (o != Shared::none) c.s_->nodes[o]->ensure();  // open every master now
        return c;
    }

    Client(Client&&) noexcept = default;
    Client& operator=(Client&&) noexcept = default;
    ~Client() = default;

    [[nodiscard]] const Options& options() const noexcept { return s_->opt; }
    /// True for a Client made by connect_cluster.
    [[nodiscard]] bool is_cluster() const noexcept { return s_->cluster; }
    /// True while a connection is open (it may still turn out dead); for a
    /// cluster, while one to every master in the slot map is open.
    [[nodiscard]] bool connected() const {
        std::lock_guard<std::mutex> lock(s_->mu);
        if (!s_->cluster) return s_->nodes[0]->ctx != nullptr;
        if (s_->owner.empty()) return false;
        for (const auto o : s_->owner)
            if (o == Shared::none || s_->nodes[o]->ctx == nullptr) return false;
        return true;
    }
    /// Why the last failed operation failed (empty if none did yet).
    [[nodiscard]] std::string last_error() const {
        std::lock_guard<std::mutex> lock(s_->mu);
        return s_->error;
    }
    /// Round trips made so far (a pipelined batch counts once per server).
    [[nodiscard]] std::uint64_t round_trips() const noexcept { return s_->trips.load(std::memory_order_relaxed); }

    /// Runs the calls pipelined and fills `replies` (one per call, a script
    /// error as Reply::Type::error). False, with last_error() set, when the
    /// transport failed: then no reply is trustworthy. On a cluster a failed
    /// node gives error replies for its calls only (false only when no slot
    /// map could be read), and a call whose keys span slots gets an error
    /// reply without being sent.
    bool run(std::span<const protocol::Call> calls, std::vector<Reply>& replies) {
        std::lock_guard<std::mutex> lock(s_->mu);
        std::vector<Item> items(calls.size());
        for (std::size_t i = 0; i < calls.size(); ++i) items[i].call = &calls[i];
        if (!s_->cluster) {
            Conn& c = *s_->nodes[0];
            std::vector<std::size_t> all(calls.size());
            for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
            replies.assign(calls.size(), Reply{});
            const bool ok = c.start(items, all, false) && c.finish(items, all, false, replies);
            if (!ok) s_->error = c.error;
            return ok;
        }
        return s_->route(items, replies);
    }

    /// One plain command (administration, tests); nullopt on transport
    /// failure. On a cluster it goes to the master of the slot of its second
    /// argument (the key of GET key, EXISTS key, TTL key ...), or of slot 0
    /// when there is none.
    std::optional<Reply> command(std::initializer_list<std::string_view> args) {
        std::lock_guard<std::mutex> lock(s_->mu);
        std::vector<Item> items(1);
        items[0].raw.assign(args.begin(), args.end());
        std::vector<Reply> out;
        if (!s_->cluster) {
            Conn& c = *s_->nodes[0];
            const std::size_t idx[1] = {0};
            out.resize(1);
            if (c.start(items, idx, false) && c.finish(items, idx, false, out)) return std::move(out[0]);
            s_->error = c.error;
            return std::nullopt;
        }
        if (!s_->route(items, out) || out[0].str.rfind("TALLYNODE ", 0) == 0) return std::nullopt;
        return std::move(out[0]);
    }

  private:
    // One unit of a round trip: a script call, or a raw command.
    struct Item {
        const protocol::Call* call = nullptr;
        std::vector<std::string_view> raw;
    };

    // Blocks SIGPIPE in this thread while hiredis writes; drops one that the
    // write raised, restores the mask.
    class SigpipeGuard {
      public:
        SigpipeGuard() noexcept {
            sigset_t pending;
            sigemptyset(&block_);
            sigaddset(&block_, SIGPIPE);
            sigpending(&pending);
            was_pending_ = sigismember(&pending, SIGPIPE) == 1;
            if (!was_pending_) blocked_ = pthread_sigmask(SIG_BLOCK, &block_, &old_) == 0;
        }
        ~SigpipeGuard() {
            if (!blocked_) return;
            sigset_t pending;
            sigpending(&pending);
            if (sigismember(&pending, SIGPIPE) == 1) {
                const timespec zero{0, 0};
                while (sigtimedwait(&block_, nullptr, &zero) == -1 && errno == EINTR) {
                }
            }
            pthread_sigmask(SIG_SETMASK, &old_, nullptr);
        }
        SigpipeGuard(const SigpipeGuard&) = delete;
        SigpipeGuard& operator=(const SigpipeGuard&) = delete;

      private:
        sigset_t block_{}, old_{};
        bool was_pending_ = false, blocked_ = false;
    };

    struct ContextDeleter {
        void operator()(redisContext* c) const noexcept { redisFree(c); }
    };

    static timeval to_timeval(std::chrono::milliseconds ms) noexcept {
        const long long v = std::max<long long>(ms.count(), 1);
        timeval tv{};
        tv.tv_sec = static_cast<decltype(tv.tv_sec)>(v / 1000);
        tv.tv_usec = static_cast<decltype(tv.tv_usec)>((v % 1000) * 1000);
        return tv;
    }

    static Reply error_reply(std::string text) {
        Reply r;
        r.type = Reply::Type::error;
        r.str = std::move(text);
        return r;
    }

    // One connection to one server.
    struct Conn {
        const Options* opt = nullptr;
        std::atomic<std::uint64_t>* trips = nullptr;
        std::string host;
        int port = 0;
        std::unique_ptr<redisContext, ContextDeleter> ctx;
        std::array<std::string, protocol::script_count> sha;  // empty: not loaded here
        std::string error;
        bool shortened = false;  // the I/O timeout is below command_timeout

        void drop(std::string why) {
            error = std::move(why);
            ctx.reset();
        }
        bool reconnect(std::chrono::milliseconds timeout) {
            ctx.reset();
            shortened = false;
            const timeval tv = to_timeval(timeout);
            redisContext* c = port < 0 ? redisConnectUnixWithTimeout(host.c_str(), tv)
                                       : redisConnectWithTimeout(host.c_str(), port, tv);
            if (c == nullptr) {
                error = "cannot allocate a hiredis context";
                return false;
            }
            ctx.reset(c);
            if (c->err != 0) {
                drop(std::string("connect to ") + where() + " failed: " + c->errstr);
                return false;
            }
            if (redisSetTimeout(c, to_timeval(opt->command_timeout)) != REDIS_OK) {
                drop(std::string("cannot set the command timeout on ") + where());
                return false;
            }
            return true;
        }
        std::string where() const { return port < 0 ? host : host + ":" + std::to_string(port); }
        bool ensure() {
            return ctx != nullptr || reconnect(std::min(opt->connect_timeout, opt->command_timeout));
        }
        bool send(std::span<const std::string_view> args) {
            std::vector<const char*> argv(args.size());
            std::vector<std::size_t> len(args.size());
            for (std::size_t i = 0; i < args.size(); ++i) {
                argv[i] = args[i].data();
                len[i] = args[i].size();
            }
            if (redisAppendCommandArgv(ctx.get(), static_cast<int>(args.size()), argv.data(), len.data()) != REDIS_OK) {
                drop(std::string("hiredis could not format a command: ") + ctx->errstr);
                return false;
            }
            return true;
        }
        // Writes everything appended so far (so that several servers work on
        // their parts of a batch at once).
        bool flush() {
            SigpipeGuard guard;
            int done = 0;
            for (int i = 0; i < 1'000'000 && done == 0; ++i)
                if (redisBufferWrite(ctx.get(), &done) != REDIS_OK) {
                    drop(std::string("write to ") + where() + " failed: " + ctx->errstr);
                    return false;
                }
            return done != 0;
        }
        static Reply convert(const redisReply* r) {
            Reply out;
            switch (r->type) {
                case REDIS_REPLY_STRING:
                    out.type = Reply::Type::string;
                    out.str.assign(r->str, r->len);
                    break;
                case REDIS_REPLY_STATUS:
                    out.type = Reply::Type::status;
                    out.str.assign(r->str, r->len);
                    break;
                case REDIS_REPLY_ERROR:
                    out.type = Reply::Type::error;
                    out.str.assign(r->str, r->len);
                    break;
                case REDIS_REPLY_INTEGER:
                    out.type = Reply::Type::integer;
                    out.integer = r->integer;
                    break;
                case REDIS_REPLY_NIL:
                    out.type = Reply::Type::nil;
                    break;
                case REDIS_REPLY_ARRAY:
                    out.type = Reply::Type::array;
                    out.elements.reserve(r->elements);
                    for (std::size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
                    break;
                default:  // RESP3 types (hiredis 1.x): never sent to a RESP2 connection
                    out.type = Reply::Type::error;
                    out.str = "tally: unexpected reply type " + std::to_string(r->type);
                    break;
            }
            return out;
        }
        bool receive(std::size_t n, std::vector<Reply>& out) {
            SigpipeGuard guard;
            trips->fetch_add(1, std::memory_order_relaxed);
            out.clear();
            out.reserve(n);
            for (std::size_t i = 0; i < n; ++i) {
                void* raw = nullptr;
                if (redisGetReply(ctx.get(), &raw) != REDIS_OK || raw == nullptr) {
                    drop(std::string("round trip to ") + where() + " failed: " +
                         (ctx->errstr[0] != 0 ? ctx->errstr : "no reply"));
                    return false;
                }
                std::unique_ptr<redisReply, void (*)(void*)> r(static_cast<redisReply*>(raw), freeReplyObject);
                out.push_back(convert(r.get()));
            }
            return true;
        }
        bool load(protocol::Script s) {
            const std::string_view args[3] = {"SCRIPT", "LOAD", protocol::script_source(s)};
            std::vector<Reply> out;
            if (!send(args) || !receive(1, out)) return false;
            if (out[0].type != Reply::Type::string || out[0].str.size() != 40) {
                drop("SCRIPT LOAD failed: " + out[0].str);
                return false;
            }
            sha[static_cast<std::size_t>(s)] = out[0].str;
            return true;
        }
        bool send_item(const Item& it, bool asking) {
            if (asking) {
                const std::string_view a[1] = {"ASKING"};
                if (!send(a)) return false;
            }
            if (it.call == nullptr) return send(it.raw);
            const protocol::Call& c = *it.call;
            std::vector<std::string_view> argv;
            argv.reserve(c.args.size() + 3);
            const std::string nk = std::to_string(c.num_keys);
            argv.emplace_back("EVALSHA");
            argv.emplace_back(sha[static_cast<std::size_t>(c.script)]);
            argv.emplace_back(nk);
            for (const auto& a : c.args) argv.emplace_back(a);
            return send(argv);
        }
        // Sends items[idx...] (each after ASKING when asking) without reading.
        // `budget`: this round trip's I/O timeout when less than
        // command_timeout is left of the call (cluster retries).
        bool start(std::span<const Item> items, std::span<const std::size_t> idx, bool asking,
                   std::optional<std::chrono::milliseconds> budget = std::nullopt) {
            if (!ensure()) return false;
            if (budget || shortened) {
                shortened = budget.has_value();
                if (redisSetTimeout(ctx.get(), to_timeval(budget ? *budget : opt->command_timeout)) != REDIS_OK) {
                    drop(std::string("cannot set the command timeout on ") + where());
                    return false;
                }
            }
            for (const std::size_t i : idx)
                if (const auto* c = items[i].call; c != nullptr && sha[static_cast<std::size_t>(c->script)].empty() &&
                                                   !load(c->script))
                    return false;
            for (const std::size_t i : idx)
                if (!send_item(items[i], asking)) return false;
            return flush();
        }
        // Reads the replies of start() into replies[idx...]; NOSCRIPT (the
        // script did not run): reload it and repeat those calls once.
        bool finish(std::span<const Item> items, std::span<const std::size_t> idx, bool asking,
                    std::vector<Reply>& replies) {
            const std::size_t per = asking ? 2 : 1;
            std::vector<Reply> got;
            if (!receive(idx.size() * per, got)) return false;
            std::vector<std::size_t> again;
            for (std::size_t j = 0; j < idx.size(); ++j) {
                Reply& r = got[j * per + per - 1];
                if (r.type == Reply::Type::error && r.str.rfind("NOSCRIPT", 0) == 0 && items[idx[j]].call != nullptr)
                    again.push_back(idx[j]);
                replies[idx[j]] = std::move(r);
            }
            if (again.empty()) return true;
            for (const std::size_t i : again) sha[static_cast<std::size_t>(items[i].call->script)].clear();
            return start(items, again, asking) && finish_once(again, asking, replies);
        }
        bool finish_once(std::span<const std::size_t> idx, bool asking, std::vector<Reply>& replies) {
            const std::size_t per = asking ? 2 : 1;
            std::vector<Reply> got;
            if (!receive(idx.size() * per, got)) return false;
            for (std::size_t j = 0; j < idx.size(); ++j) replies[idx[j]] = std::move(got[j * per + per - 1]);
            return true;
        }
    };

    struct Shared {
        static constexpr std::uint16_t none = 0xffff;
        mutable std::mutex mu;
        Options opt;
        std::atomic<std::uint64_t> trips{0};
        std::string error;
        std::vector<std::unique_ptr<Conn>> nodes;  // [0] alone when not a cluster
        bool cluster = false;
        std::vector<std::uint16_t> owner;  // slot -> index in nodes (cluster)
        bool stale = true;
        std::chrono::steady_clock::time_point refreshed{};

        Conn& add_node(std::string host, int port) {
            auto c = std::make_unique<Conn>();
            c->opt = &opt;
            c->trips = &trips;
            c->host = std::move(host);
            c->port = port;
            nodes.push_back(std::move(c));
            return *nodes.back();
        }
        std::size_t node_index(std::string_view host, int port) {
            for (std::size_t i = 0; i < nodes.size(); ++i)
                if (nodes[i]->host == host && nodes[i]->port == port) return i;
            if (nodes.size() >= none) return none;
            add_node(std::string(host), port);
            return nodes.size() - 1;
        }

        // Reads CLUSTER SLOTS from the first node that answers it: nodes
        // with an open connection first (a failed one was closed), no new
        // node tried after `deadline`.
        bool refresh(std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) {
            const bool bounded = deadline != std::chrono::steady_clock::time_point::max();
            refreshed = std::chrono::steady_clock::now();
            std::string why = "no node answered CLUSTER SLOTS";
            std::vector<std::size_t> order;
            for (const bool open : {true, false})
                for (std::size_t n = 0; n < nodes.size(); ++n)
                    if ((nodes[n]->ctx != nullptr) == open) order.push_back(n);
            for (const std::size_t n : order) {
                if (std::chrono::steady_clock::now() >= deadline) break;
                Conn& c = *nodes[n];
                std::vector<Item> items(1);
                items[0].raw = {"CLUSTER", "SLOTS"};
                const std::size_t idx[1] = {0};
                std::vector<Reply> out(1);
                if (!c.start(items, idx, false, bounded ? std::optional(left(deadline)) : std::nullopt) ||
                    !c.finish(items, idx, false, out)) {
                    why = c.error;
                    continue;
                }
                std::vector<std::uint16_t> map(cluster_slots, none);
                if (!parse_slots(out[0], c.host, map)) {
                    why = "unusable CLUSTER SLOTS reply from " + c.where() +
                          (out[0].type == Reply::Type::error ? ": " + out[0].str : std::string());
                    continue;
                }
                owner = std::move(map);
                stale = false;
                return true;
            }
            error = "cluster slot map: " + why;
            return false;
        }
        // [[start, end, [host, port, id...], replicas...]...]; an empty host
        // means the host we asked.
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
                const std::string& host = master.elements[0].str.empty() || master.elements[0].str == "?"
                                              ? asked
                                              : master.elements[0].str;
                const std::size_t n = node_index(host, static_cast<int>(master.elements[1].integer));
                if (n == none) return false;
                for (long long s = lo.integer; s <= hi.integer; ++s)
                    map[static_cast<std::size_t>(s)] = static_cast<std::uint16_t>(n);
            }
            return true;
        }

        static std::chrono::milliseconds left(std::chrono::steady_clock::time_point deadline) {
            const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            return std::max(ms, std::chrono::milliseconds(1));
        }

        // "MOVED 3999 127.0.0.1:6381" / "ASK ...": slot and node index.
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

        bool route(std::span<const Item> items, std::vector<Reply>& replies) {
            const auto deadline = std::chrono::steady_clock::now() + opt.command_timeout;
            replies.assign(items.size(), Reply{});
            bool refreshed_now = false;
            if (owner.empty() || (stale && std::chrono::steady_clock::now() - refreshed >= std::chrono::milliseconds(100))) {
                refresh(deadline);
                refreshed_now = true;
            }
            if (owner.empty()) return false;
            std::vector<std::size_t> target(items.size(), none);
            std::vector<char> asking(items.size(), 0);
            std::vector<std::size_t> pending;
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
            for (int attempt = 0; !pending.empty(); ++attempt) {
                // Group by (node, asking); write to every node, then read.
                std::vector<std::pair<std::size_t, std::vector<std::size_t>>> groups;  // key = node * 2 + asking
                for (const std::size_t i : pending) {
                    const std::size_t key = target[i] * 2 + static_cast<std::size_t>(asking[i]);
                    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == key; });
                    if (g == groups.end()) {
                        groups.emplace_back(key, std::vector<std::size_t>{});
                        g = groups.end() - 1;
                    }
                    g->second.push_back(i);
                }
                // After a refresh or a redirect, what is left of the call's
                // command_timeout bounds the round trip.
                const auto budget = attempt > 0 || refreshed_now ? std::optional(left(deadline)) : std::nullopt;
                std::vector<char> sent(groups.size(), 0);
                for (std::size_t g = 0; g < groups.size(); ++g)
                    sent[g] = nodes[groups[g].first / 2]->start(items, groups[g].second, groups[g].first % 2 != 0, budget);
                for (std::size_t g = 0; g < groups.size(); ++g) {
                    Conn& c = *nodes[groups[g].first / 2];
                    if (sent[g] && c.finish(items, groups[g].second, groups[g].first % 2 != 0, replies)) continue;
                    // This node failed: its calls fail, the others stand; a
                    // failover may have moved its slots.
                    error = c.error;
                    stale = true;
                    for (const std::size_t i : groups[g].second) replies[i] = error_reply("TALLYNODE " + c.error);
                }
                std::vector<std::size_t> next;
                const bool may_retry = attempt < max_redirects && std::chrono::steady_clock::now() < deadline;
                bool wait = false;
                for (const std::size_t i : pending) {
                    Reply& r = replies[i];
                    if (r.type != Reply::Type::error || !may_retry) continue;
                    std::uint32_t slot = 0;
                    std::size_t node = none;
                    if (r.str.rfind("MOVED ", 0) == 0 && parse_redirect(r.str, 6, slot, node)) {
                        owner[slot] = static_cast<std::uint16_t>(node);
                        stale = true;
                        refreshed = {};
                        target[i] = node;
                        asking[i] = 0;
                        next.push_back(i);
                    } else if (r.str.rfind("ASK ", 0) == 0 && parse_redirect(r.str, 4, slot, node)) {
                        target[i] = node;
                        asking[i] = 1;
                        next.push_back(i);
                    } else if (r.str.rfind("TRYAGAIN", 0) == 0) {
                        asking[i] = 0;
                        wait = true;
                        next.push_back(i);
                    }
                }
                if (wait) {
                    const auto left = deadline - std::chrono::steady_clock::now();
                    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
                        std::chrono::milliseconds(2), std::max<std::chrono::steady_clock::duration>(left, {})));
                }
                pending = std::move(next);
            }
            return true;
        }
    };

    explicit Client(Options options) : s_(std::make_unique<Shared>()) { s_->opt = std::move(options); }

    std::unique_ptr<Shared> s_;
};

}  // namespace redis
TALLY_END_NAMESPACE
