// tests/redis_proxy.hpp: a loopback TCP proxy between a Client and a
// redis-server that injects faults into the server's replies: delay each
// chunk, trickle one byte per interval, swallow them, cut a connection in
// the middle of a reply, or send one reply twice. One thread, poll() with a 2 ms tick, 127.0.0.1
// only; the destructor stops and joins it (every wait is bounded).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tally_test {

class FaultProxy {
  public:
    enum class Mode {
        pass,       ///< forward as is
        delay,      ///< hold each reply chunk for `interval`
        trickle,    ///< one byte of the replies per `interval`
        swallow,    ///< forward requests, drop the replies
        cut_reply,  ///< forward half of the next reply chunk, then close
        duplicate,  ///< forward the next reply chunk twice (the copy `interval` later), then pass
    };

    explicit FaultProxy(int upstream_port) : upstream_(upstream_port) {
        listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
        if (listen_ < 0) throw std::runtime_error("proxy: socket() failed");
        const int one = 1;
        ::setsockopt(listen_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_, 64) != 0 ||
            ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
            ::close(listen_);
            throw std::runtime_error("proxy: bind/listen failed");
        }
        port_ = ntohs(a.sin_port);
        nonblock(listen_);
        thread_ = std::thread([this] { loop(); });
    }
    FaultProxy(const FaultProxy&) = delete;
    FaultProxy& operator=(const FaultProxy&) = delete;
    ~FaultProxy() {
        stop_.store(true);
        thread_.join();
        for (auto& p : pairs_) close_pair(p);
        ::close(listen_);
    }

    [[nodiscard]] int port() const noexcept { return port_; }
    void set(Mode m, std::chrono::milliseconds interval = std::chrono::milliseconds(0)) {
        std::lock_guard<std::mutex> lock(mu_);
        mode_ = m;
        interval_ = interval;
    }
    /// Connections accepted so far.
    [[nodiscard]] int accepted() const noexcept { return accepted_.load(); }
    /// Copies of reply chunks written to the client so far (Mode::duplicate):
    /// counted once the copy's last byte is in the client's socket.
    [[nodiscard]] int duplicated() const noexcept { return duplicated_.load(); }
    /// Waits until duplicated() reaches `n`, at most `bound`; true if it did.
    bool wait_duplicated(int n, std::chrono::milliseconds bound) const {
        const auto deadline = Clock::now() + bound;
        for (long i = 0; duplicated() < n; ++i) {
            if (Clock::now() >= deadline || i > bound.count() * 10) return false;
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        return true;
    }

  private:
    using Clock = std::chrono::steady_clock;
    struct Chunk {
        Clock::time_point ready;
        std::string bytes;
        bool copy = false;  // Mode::duplicate's second sending
    };
    struct Pair {
        int c = -1, s = -1;
        std::string to_server;
        std::deque<Chunk> to_client;
        Clock::time_point last_ready{};
        bool close_after_flush = false;
    };

    static void nonblock(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }
    static void close_pair(Pair& p) {
        if (p.c >= 0) ::close(p.c);
        if (p.s >= 0) ::close(p.s);
        p.c = p.s = -1;
    }
    int dial() const {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) return -1;
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(static_cast<std::uint16_t>(upstream_));
        if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            ::close(fd);
            return -1;
        }
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        nonblock(fd);
        return fd;
    }

    void loop() {
        char buf[65536];
        while (!stop_.load()) {
            Mode mode;
            std::chrono::milliseconds interval;
            {
                std::lock_guard<std::mutex> lock(mu_);
                mode = mode_;
                interval = interval_;
            }
            std::vector<pollfd> fds;
            fds.push_back({listen_, POLLIN, 0});
            for (const auto& p : pairs_) {
                fds.push_back({p.c, static_cast<short>(POLLIN), 0});
                fds.push_back({p.s, static_cast<short>(POLLIN | (p.to_server.empty() ? 0 : POLLOUT)), 0});
            }
            ::poll(fds.data(), fds.size(), 2);
            const auto now = Clock::now();
            if ((fds[0].revents & POLLIN) != 0) {
                for (int k = 0; k < 16; ++k) {
                    const int c = ::accept(listen_, nullptr, nullptr);
                    if (c < 0) break;
                    const int s = dial();
                    if (s < 0) {
                        ::close(c);
                        continue;
                    }
                    nonblock(c);
                    const int one = 1;
                    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    Pair p;
                    p.c = c;
                    p.s = s;
                    pairs_.push_back(std::move(p));
                    accepted_.fetch_add(1);
                }
            }
            for (std::size_t i = 0; i < pairs_.size() && 1 + 2 * i + 1 < fds.size(); ++i) {
                Pair& p = pairs_[i];
                const short cr = fds[1 + 2 * i].revents, sr = fds[2 + 2 * i].revents;
                if ((cr & (POLLIN | POLLHUP | POLLERR)) != 0) {
                    const ssize_t n = ::recv(p.c, buf, sizeof buf, 0);
                    if (n <= 0) {
                        close_pair(p);
                        continue;
                    }
                    p.to_server.append(buf, static_cast<std::size_t>(n));
                }
                if (!p.to_server.empty()) {
                    const ssize_t n = ::send(p.s, p.to_server.data(), p.to_server.size(), MSG_NOSIGNAL);
                    if (n > 0) p.to_server.erase(0, static_cast<std::size_t>(n));
                }
                if ((sr & (POLLIN | POLLHUP | POLLERR)) != 0) {
                    const ssize_t n = ::recv(p.s, buf, sizeof buf, 0);
                    if (n <= 0) {
                        close_pair(p);
                        continue;
                    }
                    std::string chunk(buf, static_cast<std::size_t>(n));
                    switch (mode) {
                        case Mode::pass:
                            p.to_client.push_back({now, std::move(chunk)});
                            break;
                        case Mode::delay:
                            p.to_client.push_back({now + interval, std::move(chunk)});
                            break;
                        case Mode::trickle:
                            for (const char ch : chunk) {
                                p.last_ready = std::max(p.last_ready, now) + interval;
                                p.to_client.push_back({p.last_ready, std::string(1, ch)});
                            }
                            break;
                        case Mode::swallow:
                            break;
                        case Mode::duplicate: {
                            p.to_client.push_back({now, chunk});
                            p.to_client.push_back({now + interval, std::move(chunk), true});
                            std::lock_guard<std::mutex> lock(mu_);
                            mode_ = mode = Mode::pass;
                            break;
                        }
                        case Mode::cut_reply:
                            chunk.resize(std::max<std::size_t>(1, chunk.size() / 2));
                            p.to_client.push_back({now, std::move(chunk)});
                            p.close_after_flush = true;
                            break;
                    }
                }
                while (!p.to_client.empty() && p.to_client.front().ready <= now) {
                    std::string& b = p.to_client.front().bytes;
                    const ssize_t n = ::send(p.c, b.data(), b.size(), MSG_NOSIGNAL);
                    if (n <= 0) break;
                    b.erase(0, static_cast<std::size_t>(n));
                    if (!b.empty()) break;
                    if (p.to_client.front().copy) duplicated_.fetch_add(1);
                    p.to_client.pop_front();
                }
                if (p.close_after_flush && p.to_client.empty()) close_pair(p);
            }
            pairs_.erase(std::remove_if(pairs_.begin(), pairs_.end(), [](const Pair& p) { return p.c < 0; }),
                         pairs_.end());
        }
    }

    int upstream_;
    int listen_ = -1;
    int port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<int> accepted_{0};
    std::mutex mu_;
    Mode mode_ = Mode::pass;
    std::atomic<int> duplicated_{0};
    std::chrono::milliseconds interval_{0};
    std::vector<Pair> pairs_;
    std::thread thread_;
};

}  // namespace tally_test
