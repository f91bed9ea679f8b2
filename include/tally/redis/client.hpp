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
#include <vector>

#include "options.hpp"
#include "protocol.hpp"

TALLY_BEGIN_NAMESPACE
namespace redis {

/// Client: one blocking hiredis connection to a Redis (or Valkey, Dragonfly)
/// server, over TCP or a unix socket, for the limiters.
///
/// - Failure never throws and never hangs: connect waits at most
///   connect_timeout, every read and write at most command_timeout. A failed
///   round trip closes the connection; the next call reconnects (waiting at
///   most min(connect_timeout, command_timeout)).
/// - Scripts are loaded once (SCRIPT LOAD) and called by SHA1 (EVALSHA); a
///   NOSCRIPT reply (after SCRIPT FLUSH, a restart or a failover) reloads
///   the script and repeats the calls that did not run, in the same call.
/// - run() sends a whole batch pipelined: one round trip for any number of
///   calls (two when a script has to be (re)loaded).
/// - SIGPIPE from a peer that went away is blocked for the writing thread
///   and discarded, never delivered to the process.
///
/// Thread safety: every member is thread-safe; calls on one Client are
/// serialised by an internal mutex (one connection). Use one Client per
/// thread for parallel round trips.
///
///   auto client = tally::redis::Client::connect("127.0.0.1", 6379);
///   tally::redis::GcraLimiter per_key(client, tally::Quota::per_second(100));
///   if (!per_key.try_acquire("api-key:42")) reply_429();
class Client {
  public:
    /// TCP. Connects now; when that fails the Client is still usable and
    /// reconnects on its next call (connected() and last_error() tell).
    static Client connect(std::string host, int port, Options options = {}) {
        Client c(std::move(options));
        c.s_->host = std::move(host);
        c.s_->port = port;
        std::lock_guard<std::mutex> lock(c.s_->mu);
        c.s_->reconnect(c.s_->opt.connect_timeout);
        return c;
    }
    /// Unix-domain socket.
    static Client connect_unix(std::string path, Options options = {}) {
        Client c(std::move(options));
        c.s_->host = std::move(path);
        c.s_->port = -1;
        std::lock_guard<std::mutex> lock(c.s_->mu);
        c.s_->reconnect(c.s_->opt.connect_timeout);
        return c;
    }

    Client(Client&&) noexcept = default;
    Client& operator=(Client&&) noexcept = default;
    ~Client() = default;

    [[nodiscard]] const Options& options() const noexcept { return s_->opt; }
    /// True while a connection is open (it may still turn out dead).
    [[nodiscard]] bool connected() const {
        std::lock_guard<std::mutex> lock(s_->mu);
        return s_->ctx != nullptr;
    }
    /// Why the last failed operation failed (empty if none did yet).
    [[nodiscard]] std::string last_error() const {
        std::lock_guard<std::mutex> lock(s_->mu);
        return s_->error;
    }
    /// Round trips made so far (pipelined batches count once).
    [[nodiscard]] std::uint64_t round_trips() const noexcept { return s_->trips.load(std::memory_order_relaxed); }

    /// Runs the calls pipelined and fills `replies` (one per call, a script
    /// error as Reply::Type::error). False, with last_error() set, when the
    /// transport failed: then no reply is trustworthy.
    bool run(std::span<const protocol::Call> calls, std::vector<Reply>& replies) {
        std::lock_guard<std::mutex> lock(s_->mu);
        return s_->run(calls, replies);
    }

    /// One plain command (administration, tests); nullopt on transport failure.
    std::optional<Reply> command(std::initializer_list<std::string_view> args) {
        std::lock_guard<std::mutex> lock(s_->mu);
        std::vector<std::string_view> v(args);
        std::vector<Reply> out;
        if (!s_->ensure() || !s_->send(std::span<const std::string_view>(v)) || !s_->receive(1, out)) return std::nullopt;
        return std::move(out[0]);
    }

  private:
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

    struct Shared {
        mutable std::mutex mu;
        Options opt;
        std::string host;
        int port = 0;
        std::unique_ptr<redisContext, ContextDeleter> ctx;
        std::array<std::string, protocol::script_count> sha;
        std::string error;
        std::atomic<std::uint64_t> trips{0};

        void drop(std::string why) {
            error = std::move(why);
            ctx.reset();
        }
        bool reconnect(std::chrono::milliseconds timeout) {
            ctx.reset();
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
            if (redisSetTimeout(c, to_timeval(opt.command_timeout)) != REDIS_OK) {
                drop(std::string("cannot set the command timeout on ") + where());
                return false;
            }
            return true;
        }
        std::string where() const { return port < 0 ? host : host + ":" + std::to_string(port); }
        bool ensure() {
            return ctx != nullptr || reconnect(std::min(opt.connect_timeout, opt.command_timeout));
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
            trips.fetch_add(1, std::memory_order_relaxed);
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
        bool send_call(const protocol::Call& c) {
            std::vector<std::string_view> argv;
            argv.reserve(c.args.size() + 3);
            const std::string nk = std::to_string(c.num_keys);
            argv.emplace_back("EVALSHA");
            argv.emplace_back(sha[static_cast<std::size_t>(c.script)]);
            argv.emplace_back(nk);
            for (const auto& a : c.args) argv.emplace_back(a);
            return send(argv);
        }
        bool run(std::span<const protocol::Call> calls, std::vector<Reply>& replies) {
            if (!ensure()) return false;
            for (const auto& c : calls)
                if (sha[static_cast<std::size_t>(c.script)].empty() && !load(c.script)) return false;
            for (const auto& c : calls)
                if (!send_call(c)) return false;
            if (!receive(calls.size(), replies)) return false;
            // NOSCRIPT: the script did not run. Reload and repeat those calls once.
            std::vector<std::size_t> again;
            for (std::size_t i = 0; i < replies.size(); ++i)
                if (replies[i].type == Reply::Type::error && replies[i].str.rfind("NOSCRIPT", 0) == 0) again.push_back(i);
            if (again.empty()) return true;
            std::array<bool, protocol::script_count> reloaded{};
            for (const std::size_t i : again) {
                const auto s = static_cast<std::size_t>(calls[i].script);
                if (!reloaded[s] && !load(calls[i].script)) return false;
                reloaded[s] = true;
            }
            for (const std::size_t i : again)
                if (!send_call(calls[i])) return false;
            std::vector<Reply> second;
            if (!receive(again.size(), second)) return false;
            for (std::size_t j = 0; j < again.size(); ++j) replies[again[j]] = std::move(second[j]);
            return true;
        }
    };

    explicit Client(Options options) : s_(std::make_unique<Shared>()) { s_->opt = std::move(options); }

    std::unique_ptr<Shared> s_;
};

}  // namespace redis
TALLY_END_NAMESPACE
