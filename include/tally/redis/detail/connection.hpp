// tally/redis/detail/connection.hpp: one non-blocking hiredis connection,
// opened on a numeric address the Client resolved beforehand, and the
// background name resolution itself. Private to tally::redis::Client.
#pragma once

#include "../../detail/abi.hpp"

#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "../protocol.hpp"

TALLY_BEGIN_NAMESPACE
namespace redis::detail {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// Milliseconds left before `deadline`, rounded up (0: passed).
inline int ms_left(Deadline deadline) noexcept {
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) return 0;
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
    return static_cast<int>(std::min<long long>(ms, 1'000'000));
}

// Blocks SIGPIPE in this thread while a write runs; drops one that the
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

// A socket address a connection can be opened on without a resolver.
struct Address {
    sockaddr_storage storage{};
    socklen_t len = 0;
};

// The address itself when `host` is numeric (IPv4, IPv6) or a unix-socket
// path (port < 0); false when it is a name that needs resolving.
inline bool numeric_address(const std::string& host, int port, Address& out) {
    out = Address{};
    if (port < 0) {
        sockaddr_un un{};
        if (host.size() >= sizeof un.sun_path) return false;
        un.sun_family = AF_UNIX;
        std::memcpy(un.sun_path, host.data(), host.size());
        std::memcpy(&out.storage, &un, sizeof un);
        out.len = static_cast<socklen_t>(sizeof un);
        return true;
    }
    sockaddr_in v4{};
    if (::inet_pton(AF_INET, host.c_str(), &v4.sin_addr) == 1) {
        v4.sin_family = AF_INET;
        v4.sin_port = htons(static_cast<std::uint16_t>(port));
        std::memcpy(&out.storage, &v4, sizeof v4);
        out.len = static_cast<socklen_t>(sizeof v4);
        return true;
    }
    sockaddr_in6 v6{};
    std::string h = host;
    if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
    if (::inet_pton(AF_INET6, h.c_str(), &v6.sin6_addr) == 1) {
        v6.sin6_family = AF_INET6;
        v6.sin6_port = htons(static_cast<std::uint16_t>(port));
        std::memcpy(&out.storage, &v6, sizeof v6);
        out.len = static_cast<socklen_t>(sizeof v6);
        return true;
    }
    return false;
}

// One getaddrinfo of a name, run on a thread of its own: a resolver may take
// seconds (a dead nameserver, search-domain expansion) and cannot be
// cancelled, so nobody waits on it past their own deadline. The thread
// holds the only other reference and lets go when it finishes.
struct Resolution {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::vector<Address> found;
    std::string error;
    Clock::time_point started = Clock::now();

    // Waits until done or the deadline; true when done.
    bool wait_until(Deadline d) {
        std::unique_lock<std::mutex> lock(mu);
        return cv.wait_until(lock, d, [&] { return done; });
    }
};

inline std::shared_ptr<Resolution> resolve_in_background(std::string host, int port) {
    auto r = std::make_shared<Resolution>();
    auto job = [r, host = std::move(host), port]() noexcept {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_NUMERICSERV;
        addrinfo* list = nullptr;
        const std::string service = std::to_string(port);
        const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
        std::vector<Address> found;
        std::string error;
        if (rc != 0) {
            error = "cannot resolve " + host + ": " + ::gai_strerror(rc);
        } else {
            for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
                if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) || a->ai_addrlen > sizeof(sockaddr_storage))
                    continue;
                Address addr;
                std::memcpy(&addr.storage, a->ai_addr, a->ai_addrlen);
                addr.len = static_cast<socklen_t>(a->ai_addrlen);
                found.push_back(addr);
            }
            ::freeaddrinfo(list);
            if (found.empty()) error = "cannot resolve " + host + ": no IPv4 or IPv6 address";
        }
        std::lock_guard<std::mutex> lock(r->mu);
        r->found = std::move(found);
        r->error = std::move(error);
        r->done = true;
        r->cv.notify_all();
    };
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
    try {
        std::thread(std::move(job)).detach();
    } catch (...) {  // no thread to spare: this attempt fails, the next retries
        std::lock_guard<std::mutex> lock(r->mu);
        r->error = "cannot start a thread to resolve " + host;
        r->done = true;
    }
#else
    std::thread(std::move(job)).detach();
#endif
    return r;
}

struct ContextDeleter {
    void operator()(redisContext* c) const noexcept { redisFree(c); }
};

// One connection. Every operation polls with the time left. An I/O or
// protocol failure closes it; a read that runs out of time keeps it open
// with the replies it still owes counted, so the Client may drain it.
struct Conn {
    std::unique_ptr<redisContext, ContextDeleter> ctx;
    std::string error;
    std::size_t owed = 0;   // replies the server owes for commands appended
    bool unsent = false;    // appended bytes not yet all written
    bool timed_out = false;
    bool fence = false;     // its last reply carried no token: the next use reads back an ECHO first

    bool alive() const noexcept { return ctx != nullptr; }
    bool fail(std::string why) {
        error = std::move(why);
        ctx.reset();
        return false;
    }
    bool wait(short events, Deadline deadline, const std::string& where, const char* doing) {
        for (;;) {
            const int left = ms_left(deadline);
            if (left == 0) {
                error = std::string("timed out ") + doing + " " + where;
                timed_out = true;
                return false;
            }
            pollfd p{ctx->fd, events, 0};
            const int r = ::poll(&p, 1, left);
            if (r > 0) return true;
            if (r < 0 && errno != EINTR) return fail(std::string("poll failed ") + doing + " " + where);
        }
    }
    // A non-blocking TCP or unix-socket connect to a resolved address.
    bool open(const Address& a, Deadline deadline, const std::string& where) {
        ctx.reset();
        owed = 0;
        unsent = timed_out = fence = false;
        const int family = a.storage.ss_family;
        const int fd = ::socket(family, SOCK_STREAM, 0);  // flags set apart: Apple lacks SOCK_NONBLOCK
        if (fd < 0) {
            error = "connect to " + where + " failed: socket: " + std::strerror(errno);
            return false;
        }
        if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK) != 0 ||
            ::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
            error = "connect to " + where + " failed: fcntl: " + std::strerror(errno);
            ::close(fd);
            return false;
        }
        if (family != AF_UNIX) {
            const int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        if (::connect(fd, reinterpret_cast<const sockaddr*>(&a.storage), a.len) != 0 && errno != EINPROGRESS) {
            error = "connect to " + where + " failed: " + std::strerror(errno);
            ::close(fd);
            return false;
        }
        redisContext* c = redisConnectFd(fd);
        if (c == nullptr) {
            ::close(fd);
            error = "cannot allocate a hiredis context";
            return false;
        }
        c->flags &= ~REDIS_BLOCK;  // we poll; a would-block read is not an error
        ctx.reset(c);
        if (!wait(POLLOUT, deadline, where, "connecting to")) return fail(error);
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
        ++owed;
        unsent = true;
        return true;
    }
    // Writes everything appended. A write cut short cannot be resumed by
    // anyone else, so running out of time here closes the connection.
    bool flush(Deadline deadline, const std::string& where) {
        SigpipeGuard guard;
        for (;;) {
            int done = 0;
            if (redisBufferWrite(ctx.get(), &done) != REDIS_OK)
                return fail("write to " + where + " failed: " + ctx->errstr);
            if (done != 0) {
                unsent = false;
                return true;
            }
            if (!wait(POLLOUT, deadline, where, "writing to")) return alive() ? fail(error) : false;
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
                if (owed == 0) return fail("a reply from " + where + " that no command asked for");
                --owed;
                out = convert(r.get());
                return true;
            }
            if (!wait(POLLIN, deadline, where, "waiting for a reply from")) return false;
            if (redisBufferRead(ctx.get()) != REDIS_OK)
                return fail("read from " + where + " failed: " + (ctx->errstr[0] != 0 ? ctx->errstr : "closed"));
        }
    }
    // True when the connection owes nothing and holds nothing: every reply
    // read, no byte left in hiredis's reader, none waiting in the socket,
    // and the peer has not closed it. Only such a connection is reused, so
    // a stray or duplicated reply can never be read as another call's.
    bool in_step() const noexcept {
        if (!alive() || owed != 0 || unsent || timed_out) return false;
        const redisReader* r = ctx->reader;
        if (r == nullptr || r->pos < r->len) return false;
        char byte = 0;
        const ssize_t n = ::recv(ctx->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
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

// Commands that change the state of the one connection they run on (its
// database, user, protocol, transaction, subscription or reply mode): a
// pooled connection must stay interchangeable, so Client::command refuses
// them. Upper-case names; CLIENT is refused for the listed subcommands.
inline bool changes_connection_state(std::string_view cmd, std::string_view sub) {
    auto upper = [](std::string_view s) {
        std::string u(s);
        for (char& ch : u)
            if (ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 'a' + 'A');
        return u;
    };
    const std::string c = upper(cmd);
    static constexpr std::string_view refused[] = {
        "AUTH",     "SELECT",      "HELLO",       "MULTI",      "EXEC",   "DISCARD",  "WATCH",
        "UNWATCH",  "SUBSCRIBE",   "PSUBSCRIBE",  "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE",
        "SUNSUBSCRIBE", "MONITOR", "RESET",       "QUIT",       "READONLY", "READWRITE", "ASKING",
        "SYNC",     "PSYNC",       "REPLCONF"};
    for (const auto r : refused)
        if (c == r) return true;
    if (c == "CLIENT") {
        const std::string s = upper(sub);
        static constexpr std::string_view client_refused[] = {"REPLY",    "TRACKING", "CACHING", "NO-EVICT",
                                                              "NO-TOUCH", "SETNAME",  "SETINFO"};
        for (const auto r : client_refused)
            if (s == r) return true;
    }
    return false;
}

}  // namespace redis::detail
TALLY_END_NAMESPACE
