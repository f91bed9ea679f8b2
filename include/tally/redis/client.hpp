// tally/redis/client.hpp: tally::redis::Client, the hiredis adapter (the only
// file of tally that includes a third-party header). Works with hiredis 0.14
// (Debian 12) and 1.x.
#pragma once

#include "../detail/abi.hpp"

#include <hiredis/hiredis.h>

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
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
#include "../detail/throw.hpp"
#include "cluster.hpp"
#include "options.hpp"
#include "protocol.hpp"

TALLY_BEGIN_NAMESPACE
namespace redis {

/// Client: a small pool of non-blocking hiredis connections to one Redis (or
/// Valkey, Dragonfly) server, over TCP or a unix socket, or to each master of
/// a Redis Cluster; the limiters take either kind.
///
/// - One deadline per call: every public call computes now + command_timeout
///   at entry and gives each connect, write, read, script reload, redirect
///   and wait for a free connection only the time left (the socket is polled
///   before each read and write, so a server that trickles bytes cannot
///   stretch a call). At the deadline the call fails (the limiters answer
///   with their fail mode). Never throws on I/O, never hangs.
/// - No queueing: up to Options::pool_size connections per server; a thread
///   takes an idle one or opens one, and when all are busy waits only until
///   its own deadline. A failed or timed-out write or read closes that
///   connection (no half-sent command or unread reply is ever reused).
/// - Scripts are loaded once per server (SCRIPT LOAD, pipelined before the
///   calls that need them) and called by SHA1 (EVALSHA); NOSCRIPT (SCRIPT
///   FLUSH, a restart, a failover) reloads and repeats those calls once.
/// - Lost state (single server): every script call counts up a sentinel key
///   without TTL, <key_prefix>!sentinel (INCR), and the Client remembers the
///   highest count it has seen. A count not above it (the key gone after a
///   restart without persistence or FLUSHALL, or behind after a restore or a
///   failover to a replica that missed writes) is a loss: the script writes
///   "lost at t" (<key_prefix>!lost, no TTL), and for one time to full
///   replenishment after t keys that come back missing start spent.
///   lost_state_events() counts the detections. Cluster: not guarded (see
///   docs/redis.md).
/// - Eviction: each new connection reads CONFIG GET maxmemory-policy;
///   evicting() is true while the server's policy can evict keys with a TTL,
///   and limiters refuse it (see Options::allow_evicting_server). Where
///   CONFIG is disabled, last_error() says so and the Client proceeds.
/// - run() sends a whole batch pipelined: one round trip per server for any
///   number of calls.
/// - Cluster (connect_cluster): the slot map comes from CLUSTER SLOTS; each
///   call goes to the master of its keys' slot (CRC16, hash tags), a batch is
///   split per node, written to all nodes before any reply is read, and
///   reassembled in order. MOVED updates the slot and refreshes the map, ASK
///   retries on the target after ASKING; TRYAGAIN and CLUSTERDOWN are retried
///   with backoff (1, 2, 4 ... 16 ms); all until the call's deadline. A node
///   that fails answers its calls with an error reply (the limiters' fail
///   mode); the others keep working. The keys of one call share a slot.
/// - SIGPIPE from a vanished peer is discarded, never delivered.
///
/// Thread safety: every member is thread-safe; round trips of different
/// threads run in parallel on separate connections.
///
///   auto client = tally::redis::Client::connect("127.0.0.1", 6379);
///   tally::redis::GcraLimiter per_key(client, tally::Quota::per_second(100));
///   if (!per_key.try_acquire("api-key:42")) reply_429();
class Client {
  public:
    /// TCP. Connects now (at most connect_timeout); when that fails the
    /// Client is still usable and connects on its next call (connected() and
    /// last_error() tell).
    static Client connect(std::string host, int port, Options options = {}) {
        Client c(std::move(options));
        c.s_->add_node(std::move(host), port);
        c.s_->warm(0);
        return c;
    }
    /// Unix-domain socket.
    static Client connect_unix(std::string path, Options options = {}) {
        Client c(std::move(options));
        c.s_->add_node(std::move(path), -1);
        c.s_->warm(0);
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
            for (const std::size_t m : masters) c.s_->warm(m);  // open every master now
        }
        return c;
    }

    Client(Client&&) noexcept = default;
    Client& operator=(Client&&) noexcept = default;
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
        std::lock_guard<std::mutex> lock(s_->mu);
        return s_->error;
    }
    /// Round trips made so far (a pipelined batch counts once per server).
    [[nodiscard]] std::uint64_t round_trips() const noexcept { return s_->trips.load(std::memory_order_relaxed); }
    /// Losses of state detected through the sentinel (restart without
    /// persistence, FLUSHALL, a lossy failover) since the Client was made.
    [[nodiscard]] std::uint64_t lost_state_events() const noexcept { return s_->lost.load(std::memory_order_relaxed); }
    /// The maxmemory-policy the last new connection read ("" when unknown:
    /// not connected yet, or CONFIG disabled).
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
        for (const std::size_t i : due) {
            Node& n = s_->node(i);
            std::string why;
            if (auto c = s_->acquire(n, d, why)) s_->release(n, std::move(c));
        }
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
    /// key ...), or of slot 0 when there is none.
    std::optional<Reply> command(std::initializer_list<std::string_view> args) {
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
    using Clock = std::chrono::steady_clock;
    using Deadline = Clock::time_point;

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

    static Reply error_reply(std::string text) {
        Reply r;
        r.type = Reply::Type::error;
        r.str = std::move(text);
        return r;
    }

    // Milliseconds left before `deadline`, rounded up (0: passed).
    static int ms_left(Deadline deadline) noexcept {
        const auto left = deadline - Clock::now();
        if (left <= Clock::duration::zero()) return 0;
        const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
        return static_cast<int>(std::min<long long>(ms, 1'000'000));
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

    // One non-blocking connection; every operation polls with the time left
    // and closes the connection when it fails or runs out of time.
    struct Conn {
        std::unique_ptr<redisContext, ContextDeleter> ctx;
        std::string error;

        bool alive() const noexcept { return ctx != nullptr; }
        bool fail(std::string why) {
            error = std::move(why);
            ctx.reset();
            return false;
        }
        bool wait(short events, Deadline deadline, const std::string& where, const char* doing) {
            for (;;) {
                const int left = ms_left(deadline);
                if (left == 0) return fail(std::string("timed out ") + doing + " " + where);
                pollfd p{ctx->fd, events, 0};
                const int r = ::poll(&p, 1, left);
                if (r > 0) return true;
                if (r < 0 && errno != EINTR) return fail(std::string("poll failed ") + doing + " " + where);
            }
        }
        bool open(const std::string& host, int port, std::chrono::milliseconds connect_timeout, Deadline deadline,
                  const std::string& where) {
            ctx.reset();
            redisContext* c =
                port < 0 ? redisConnectUnixNonBlock(host.c_str()) : redisConnectNonBlock(host.c_str(), port);
            if (c == nullptr) return fail("cannot allocate a hiredis context");
            ctx.reset(c);
            if (c->err != 0) return fail("connect to " + where + " failed: " + c->errstr);
            const Deadline d = std::min(deadline, Clock::now() + connect_timeout);
            if (!wait(POLLOUT, d, where, "connecting to")) return false;
            int err = 0;
            socklen_t len = sizeof err;
            if (::getsockopt(ctx->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
            if (err != 0) return fail("connect to " + where + " failed: " + std::strerror(err));
            return true;
        }
        bool append(std::span<const std::string_view> args, const std::string& where) {
            constexpr std::size_t small = 16;
            std::array<const char*, small> a{};
            std::array<std::size_t, small> l{};
            std::vector<const char*> av;
            std::vector<std::size_t> lv;
            const char** argv = a.data();
            std::size_t* len = l.data();
            if (args.size() > small) {
                av.resize(args.size());
                lv.resize(args.size());
                argv = av.data();
                len = lv.data();
            }
            for (std::size_t i = 0; i < args.size(); ++i) {
                argv[i] = args[i].data();
                len[i] = args[i].size();
            }
            if (redisAppendCommandArgv(ctx.get(), static_cast<int>(args.size()), argv, len) != REDIS_OK)
                return fail("hiredis could not format a command for " + where + ": " + ctx->errstr);
            return true;
        }
        // Writes everything appended, polling with the time left.
        bool flush(Deadline deadline, const std::string& where) {
            SigpipeGuard guard;
            for (;;) {
                int done = 0;
                if (redisBufferWrite(ctx.get(), &done) != REDIS_OK)
                    return fail("write to " + where + " failed: " + ctx->errstr);
                if (done != 0) return true;
                if (!wait(POLLOUT, deadline, where, "writing to")) return false;
            }
        }
        // The next reply, polling with the time left before each read.
        bool read(Deadline deadline, const std::string& where, Reply& out) {
            for (;;) {
                void* raw = nullptr;
                if (redisGetReplyFromReader(ctx.get(), &raw) != REDIS_OK)
                    return fail("bad reply from " + where + ": " + ctx->errstr);
                if (raw != nullptr) {
                    std::unique_ptr<redisReply, void (*)(void*)> r(static_cast<redisReply*>(raw), freeReplyObject);
                    out = convert(r.get());
                    return true;
                }
                if (!wait(POLLIN, deadline, where, "waiting for a reply from")) return false;
                if (redisBufferRead(ctx.get()) != REDIS_OK)
                    return fail("read from " + where + " failed: " + (ctx->errstr[0] != 0 ? ctx->errstr : "closed"));
            }
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
    };

    // What a Client remembers of a server's sentinel: the highest count.
    struct Seen {
        long long count = 0;
    };

    // One server: its connection pool and what the Client knows of it.
    struct Node {
        std::string host;
        int port = 0;
        std::string where;
        std::vector<std::unique_ptr<Conn>> idle;  // under Shared::mu
        std::size_t open = 0;                     // idle + in use
        std::condition_variable cv;
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
        std::vector<std::size_t> idx;
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
        std::atomic<std::uint64_t> trips{0}, lost{0};
        std::atomic<int> evicting_nodes{0};
        std::string error;
        std::vector<std::unique_ptr<Node>> nodes;  // [0] alone when not a cluster
        bool cluster = false;
        std::vector<std::uint16_t> owner;  // slot -> index in nodes (cluster)
        bool stale = true;
        Clock::time_point refreshed{};

        void note(std::string why) {
            std::lock_guard<std::mutex> lock(mu);
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
            n->host = std::move(host);
            n->port = port;
            nodes.push_back(std::move(n));
            return nodes.size() - 1;
        }
        std::size_t node_index(std::string_view host, int port) {  // under mu
            for (std::size_t i = 0; i < nodes.size(); ++i)
                if (nodes[i]->host == host && nodes[i]->port == port) return i;
            if (nodes.size() >= none) return none;
            return add_node_locked(std::string(host), port);
        }

        // Opens one connection to node i now, within connect_timeout (plus
        // command_timeout for the policy read), and keeps it idle.
        void warm(std::size_t i) {
            Node& n = node(i);
            const Deadline d = Clock::now() + opt.connect_timeout + opt.command_timeout;
            std::string why;
            auto c = acquire(n, d, why, opt.connect_timeout);
            if (!c) {
                note(why);
                return;
            }
            release(n, std::move(c));
        }

        // Reads maxmemory-policy on a new connection (or a recheck).
        bool check_policy(Node& n, Conn& c, Deadline d) {
            const std::string_view args[3] = {"CONFIG", "GET", "maxmemory-policy"};
            Reply r;
            if (!c.append(args, n.where) || !c.flush(d, n.where) || !c.read(d, n.where, r)) return false;
            trips.fetch_add(1, std::memory_order_relaxed);
            std::lock_guard<std::mutex> lock(mu);
            n.checked = Clock::now();
            const bool was = n.evicting;
            if (r.type == Reply::Type::array && r.elements.size() == 2 && r.elements[1].type == Reply::Type::string) {
                n.policy = r.elements[1].str;
                n.evicting = n.policy.rfind("volatile-", 0) == 0 || n.policy.rfind("allkeys-", 0) == 0;
            } else {
                n.policy.clear();
                n.evicting = false;
                error = "CONFIG GET maxmemory-policy on " + n.where + " was refused (" +
                        (r.type == Reply::Type::error ? r.str : std::string("no value")) +
                        "): the eviction policy is not checked; make sure it is noeviction";
            }
            if (was != n.evicting) evicting_nodes.fetch_add(n.evicting ? 1 : -1, std::memory_order_relaxed);
            return true;
        }

        // An idle connection of n, a new one (pool not full), or one freed
        // before the deadline; null with `why` otherwise.
        std::unique_ptr<Conn> acquire(Node& n, Deadline d, std::string& why,
                                      std::chrono::milliseconds connect_timeout = std::chrono::milliseconds::max()) {
            std::unique_lock<std::mutex> lock(mu);
            for (;;) {
                if (!n.idle.empty()) {
                    auto c = std::move(n.idle.back());
                    n.idle.pop_back();
                    const bool recheck = n.evicting && Clock::now() - n.checked >= std::chrono::seconds(1);
                    lock.unlock();
                    if (recheck && !check_policy(n, *c, d)) {
                        why = c->error;
                        lock.lock();
                        --n.open;
                        n.cv.notify_one();
                        return nullptr;
                    }
                    return c;
                }
                if (n.open < pool) {
                    ++n.open;
                    lock.unlock();
                    auto c = std::make_unique<Conn>();
                    const auto ct = std::min(connect_timeout, opt.connect_timeout);
                    if (c->open(n.host, n.port, ct, d, n.where) && check_policy(n, *c, d)) return c;
                    why = c->error;
                    lock.lock();
                    --n.open;
                    n.cv.notify_one();
                    return nullptr;
                }
                if (n.cv.wait_until(lock, d) == std::cv_status::timeout && n.idle.empty() && n.open >= pool) {
                    why = "all " + std::to_string(pool) + " connections to " + n.where +
                          " stayed busy until the deadline";
                    return nullptr;
                }
            }
        }
        void release(Node& n, std::unique_ptr<Conn> c) {
            std::lock_guard<std::mutex> lock(mu);
            if (c && c->alive())
                n.idle.push_back(std::move(c));
            else
                --n.open;
            n.cv.notify_one();
        }

        // Appends items[g.idx...] (each after ASKING when asking) to g.conn,
        // after the SCRIPT LOADs the node lacks, and writes them.
        bool send(Group& g, std::span<const Item> items, Deadline d) {
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
                if (sha[s].empty()) {  // the first load of the process: learn the SHA1
                    if (!load_now(n, c, static_cast<protocol::Script>(s), d)) return false;
                    sha[s] = sha_of(static_cast<protocol::Script>(s));
                } else if (need[s]) {
                    const std::string_view args[3] = {"SCRIPT", "LOAD",
                                                      protocol::script_source(static_cast<protocol::Script>(s))};
                    if (!c.append(args, n.where)) return false;
                    g.loads.push_back(static_cast<protocol::Script>(s));
                }
            }
            const bool guard = !cluster;
            const std::string cnt = std::to_string(seen.count);
            std::vector<std::string_view> argv;
            for (const std::size_t i : g.idx) {
                if (g.asking) {
                    const std::string_view a[1] = {"ASKING"};
                    if (!c.append(a, n.where)) return false;
                }
                const Item& it = items[i];
                if (it.call == nullptr) {
                    if (!c.append(it.raw, n.where)) return false;
                    continue;
                }
                const protocol::Call& call = *it.call;
                const std::size_t nk = std::min(call.num_keys, call.args.size());
                const std::string nks = std::to_string(nk + (guard ? 2 : 0));
                argv.clear();
                argv.reserve(call.args.size() + 7);
                argv.emplace_back("EVALSHA");
                argv.emplace_back(sha[static_cast<std::size_t>(call.script)]);
                argv.emplace_back(nks);
                for (std::size_t k = 0; k < nk; ++k) argv.emplace_back(call.args[k]);
                if (guard) {
                    argv.emplace_back(sentinel);
                    argv.emplace_back(lost_key);
                }
                for (std::size_t k = nk; k < call.args.size(); ++k) argv.emplace_back(call.args[k]);
                argv.emplace_back(guard ? std::string_view("1") : std::string_view("0"));
                argv.emplace_back(guard ? std::string_view(cnt) : std::string_view("0"));
                if (!c.append(argv, n.where)) return false;
            }
            g.sent = c.flush(d, n.where);
            return g.sent;
        }
        bool load_now(Node& n, Conn& c, protocol::Script s, Deadline d) {
            const std::string_view args[3] = {"SCRIPT", "LOAD", protocol::script_source(s)};
            Reply r;
            if (!c.append(args, n.where) || !c.flush(d, n.where) || !c.read(d, n.where, r)) return false;
            trips.fetch_add(1, std::memory_order_relaxed);
            if (r.type != Reply::Type::string || r.str.size() != 40)
                return c.fail("SCRIPT LOAD failed on " + n.where + ": " + r.str);
            {
                Shas& t = shas();
                std::lock_guard<std::mutex> lock(t.mu);
                t.sha[static_cast<std::size_t>(s)] = r.str;
            }
            std::lock_guard<std::mutex> lock(mu);
            n.loaded[static_cast<std::size_t>(s)] = true;
            return true;
        }
        // The script replies end with the sentinel's count and a flag "this
        // call detected a loss": strip and remember them.
        void take_suffix(Node& n, Reply& r) {
            if (r.type != Reply::Type::array) return;
            auto& e = r.elements;
            if (e.size() < 2 || !protocol::detail::int_in(e[e.size() - 2], 0, (1LL << 53) - 1) ||
                !protocol::detail::int_in(e[e.size() - 1], 0, 1)) {
                r = error_reply("tally: malformed reply to a script (sentinel)");
                return;
            }
            const long long cnt = e[e.size() - 2].integer;
            const bool detected = e[e.size() - 1].integer == 1;
            e.resize(e.size() - 2);
            if (cluster) return;
            std::lock_guard<std::mutex> lock(mu);
            // After a loss the count starts again: take the new one as is.
            n.seen.count = detected ? cnt : std::max(n.seen.count, cnt);
            if (detected) {
                lost.fetch_add(1, std::memory_order_relaxed);
                error = "state lost on " + n.where +
                        " (restart without persistence, FLUSHALL or a lossy failover): keys that come back missing "
                        "start spent for one time to full replenishment";
            }
        }
        // Reads the replies of send() into replies[g.idx...]; NOSCRIPT: the
        // script did not run, reload it and repeat those calls once.
        bool receive(Group& g, std::span<const Item> items, Deadline d, std::vector<Reply>& replies,
                     bool again = false) {
            Node& n = node(g.node);
            Conn& c = *g.conn;
            Reply r;
            for (const protocol::Script s : g.loads) {
                if (!c.read(d, n.where, r)) return false;
                if (r.type != Reply::Type::string || r.str != sha_of(s))
                    return c.fail("SCRIPT LOAD failed on " + n.where + ": " + r.str);
                std::lock_guard<std::mutex> lock(mu);
                n.loaded[static_cast<std::size_t>(s)] = true;
            }
            std::vector<std::size_t> retry;
            for (const std::size_t i : g.idx) {
                if (g.asking && !c.read(d, n.where, r)) return false;  // the ASKING reply
                if (!c.read(d, n.where, r)) return false;
                if (items[i].call != nullptr) {
                    if (r.type == Reply::Type::error && r.str.rfind("NOSCRIPT", 0) == 0 && !again) {
                        retry.push_back(i);
                        std::lock_guard<std::mutex> lock(mu);
                        n.loaded[static_cast<std::size_t>(items[i].call->script)] = false;
                    } else {
                        take_suffix(n, r);
                    }
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
                note(std::move(why));
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
                if (!g.conn) continue;
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
                        error = why[k];
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
