// tests/redis_server.hpp: a real redis-server for tests and benchmarks, on a
// free 127.0.0.1 port in a temporary directory, no persistence. It can be
// stopped (SIGSTOP), continued, killed and restarted on the same port. Every
// wait is bounded in time and in iterations; the child dies with the test
// (PR_SET_PDEATHSIG) and the destructor always reaps it.
//
// Skipping: where no redis-server binary exists, redis_server_binary()
// returns empty and the caller skips with one line; where in_ci() holds it
// fails instead.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace tally_test {

/// Path of redis-server (PATH, then /usr/bin, /usr/sbin, /usr/local/bin), or "".
inline std::string redis_server_binary() {
    std::vector<std::string> dirs;
    if (const char* path = std::getenv("PATH")) {
        std::string_view rest(path);
        while (!rest.empty()) {
            const auto colon = rest.find(':');
            dirs.emplace_back(rest.substr(0, colon));
            if (colon == std::string_view::npos) break;
            rest.remove_prefix(colon + 1);
        }
    }
    for (const char* d : {"/usr/bin", "/usr/sbin", "/usr/local/bin"}) dirs.emplace_back(d);
    for (const auto& d : dirs) {
        if (d.empty()) continue;
        const std::string candidate = d + "/redis-server";
        if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    return {};
}

/// True where a missing redis-server is a failure rather than a skip: CI=true
/// (set by CI services) or TALLY_REQUIRE_REDIS=1 (set by scripts/deps.sh,
/// which installs redis-server).
inline bool in_ci() {
    for (const char* name : {"CI", "TALLY_REQUIRE_REDIS"}) {
        const char* v = std::getenv(name);
        if (v != nullptr && (std::string_view(v) == "true" || std::string_view(v) == "1")) return true;
    }
    return false;
}

/// A free TCP port on 127.0.0.1 (bound once, then released).
inline int free_loopback_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw std::runtime_error("socket() failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        ::close(fd);
        throw std::runtime_error("bind/getsockname failed");
    }
    const int port = ntohs(addr.sin_port);
    ::close(fd);
    return port;
}

/// A port p on 127.0.0.1 with p and p + 10000 (its cluster bus) both free,
/// in [20000, 55535).
inline int free_cluster_port() {
    static unsigned state = static_cast<unsigned>(::getpid()) * 2654435761u;
    auto bindable = [](int port) {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) return false;
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = htons(static_cast<std::uint16_t>(port));
        const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
        ::close(fd);
        return ok;
    };
    for (int attempt = 0; attempt < 200; ++attempt) {
        state = state * 1103515245u + 12345u;
        const int port = 20000 + static_cast<int>((state >> 8) % 35535u);
        if (bindable(port) && bindable(port + 10000)) return port;
    }
    throw std::runtime_error("no free port pair (p, p + 10000) on 127.0.0.1");
}

/// Path of redis-cli (same search as redis_server_binary), or "".
inline std::string redis_cli_binary() {
    const std::string server = redis_server_binary();
    std::vector<std::string> dirs;
    if (!server.empty()) dirs.push_back(server.substr(0, server.rfind('/')));
    for (const char* d : {"/usr/bin", "/usr/local/bin"}) dirs.emplace_back(d);
    for (const auto& d : dirs)
        if (::access((d + "/redis-cli").c_str(), X_OK) == 0) return d + "/redis-cli";
    return {};
}

/// Sends one inline command to 127.0.0.1:port and returns the raw reply
/// bytes, each read waiting at most timeout_us (a bulk reply is read to its end).
inline std::string redis_raw(int port, const std::string& inline_command, long timeout_us = 500'000) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return {};
    timeval tv{};
    tv.tv_usec = timeout_us;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    std::string out;
    const std::string line = inline_command + "\r\n";
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        ::send(fd, line.data(), line.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(line.size())) {
        char buf[4096];
        for (int i = 0; i < 64; ++i) {
            const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n <= 0) break;
            out.append(buf, static_cast<std::size_t>(n));
            const auto eol = out.find("\r\n");
            if (eol == std::string::npos) continue;
            if (out[0] != '$') break;
            const long len = std::strtol(out.c_str() + 1, nullptr, 10);
            if (len < 0 || out.size() >= eol + 2 + static_cast<std::size_t>(len) + 2) break;
        }
    }
    ::close(fd);
    return out;
}

/// One PING over a fresh connection with a 200 ms receive timeout.
inline bool redis_pings(int port) { return redis_raw(port, "PING", 200'000) == "+PONG\r\n"; }

/// Owns a redis-server child process and its temporary directory.
class RedisServer {
  public:
    /// pick_port chooses the port of each start attempt.
    explicit RedisServer(std::string binary, std::vector<std::string> extra_args = {},
                         int (*pick_port)() = free_loopback_port)
        : binary_(std::move(binary)), extra_(std::move(extra_args)) {
        char tmpl[] = "/tmp/tally-redis-XXXXXX";
        if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
        dir_ = tmpl;
        // A port can be taken between our probe and the server's bind: try a few.
        for (int attempt = 0; attempt < 5; ++attempt) {
            port_ = pick_port();
            if (try_start()) return;
        }
        cleanup();
        throw std::runtime_error("redis-server did not start; see its log in " + dir_);
    }
    RedisServer(const RedisServer&) = delete;
    RedisServer& operator=(const RedisServer&) = delete;
    ~RedisServer() { cleanup(); }

    [[nodiscard]] int port() const noexcept { return port_; }
    [[nodiscard]] const std::string& dir() const noexcept { return dir_; }
    [[nodiscard]] std::string unix_socket() const { return dir_ + "/redis.sock"; }
    [[nodiscard]] bool running() const noexcept { return pid_ > 0; }
    /// The server's process id (-1 when not running).
    [[nodiscard]] pid_t pid() const noexcept { return pid_; }

    void pause() { signal(SIGSTOP); }   ///< SIGSTOP: connections stay open, nothing answers
    void resume() { signal(SIGCONT); }  ///< SIGCONT
    /// SIGKILL and reap (no graceful shutdown).
    void kill() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        int status = 0;
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
    }
    /// Start again on the same port (after kill()); throws if it cannot.
    void restart() {
        kill();
        for (int attempt = 0; attempt < 50; ++attempt) {  // the port may linger briefly
            if (try_start()) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        throw std::runtime_error("redis-server did not restart on port " + std::to_string(port_));
    }

  private:
    void signal(int sig) {
        if (pid_ > 0) ::kill(pid_, sig);
    }
    bool try_start() {
        const std::string port = std::to_string(port_);
        const std::string log = dir_ + "/redis.log";
        const std::string sock = unix_socket();
        std::vector<std::string> args = {binary_,     "--port",       port,          "--bind",        "127.0.0.1",
                                         "--save",    "",             "--appendonly", "no",           "--daemonize",
                                         "no",        "--dir",        dir_,          "--unixsocket", sock,
                                         "--unixsocketperm", "700"};
        for (const auto& a : extra_) args.push_back(a);
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        pid_ = ::fork();
        if (pid_ < 0) throw std::runtime_error("fork failed");
        if (pid_ == 0) {
#if defined(__linux__)
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test
#endif
            std::FILE* f = std::freopen(log.c_str(), "a", stdout);
            (void)f;
            ::dup2(STDOUT_FILENO, STDERR_FILENO);
            ::execv(binary_.c_str(), argv.data());
            std::_Exit(127);
        }
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        for (int i = 0; i < 1000 && std::chrono::steady_clock::now() < deadline; ++i) {
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                return false;  // exited (port taken?)
            }
            if (redis_pings(port_)) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        kill();
        return false;
    }
    void cleanup() {
        if (pid_ > 0) {
            ::kill(pid_, SIGCONT);
            ::kill(pid_, SIGTERM);
            int status = 0;
            bool reaped = false;
            for (int i = 0; i < 200 && !reaped; ++i) {
                reaped = ::waitpid(pid_, &status, WNOHANG) == pid_;
                if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            if (!reaped) kill();
            pid_ = -1;
        }
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }

    std::string binary_;
    std::vector<std::string> extra_;
    std::string dir_;
    int port_ = 0;
    pid_t pid_ = -1;
};

/// A Redis Cluster of `masters` redis-server processes (no replicas) on
/// 127.0.0.1, joined with redis-cli --cluster create, ready when every node
/// reports cluster_state:ok. A node may be killed and restarted on its port
/// (its nodes.conf survives, so it rejoins with its slots, empty).
/// cluster-require-full-coverage is off: the nodes keep serving their slots
/// while another is down.
class RedisCluster {
  public:
    RedisCluster(const std::string& server_binary, const std::string& cli_binary, int masters = 3) {
        const std::vector<std::string> args = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                               "--cluster-node-timeout", "60000",
                                               "--cluster-require-full-coverage", "no"};
        for (int i = 0; i < masters; ++i)
            nodes_.push_back(std::make_unique<RedisServer>(server_binary, args, free_cluster_port));
        std::vector<std::string> cmd = {cli_binary, "--cluster", "create"};
        for (const auto& n : nodes_) cmd.push_back("127.0.0.1:" + std::to_string(n->port()));
        for (const char* a : {"--cluster-replicas", "0", "--cluster-yes"}) cmd.emplace_back(a);
        run(cmd, nodes_[0]->dir() + "/cluster-create.log");
        wait_ok();
    }

    [[nodiscard]] std::size_t size() const noexcept { return nodes_.size(); }
    [[nodiscard]] RedisServer& node(std::size_t i) { return *nodes_.at(i); }
    [[nodiscard]] int port(std::size_t i) const { return nodes_.at(i)->port(); }
    /// "127.0.0.1:port" of every node (seeds for Client::connect_cluster).
    [[nodiscard]] std::vector<std::string> seeds() const {
        std::vector<std::string> out;
        for (const auto& n : nodes_) out.push_back("127.0.0.1:" + std::to_string(n->port()));
        return out;
    }

    /// Waits (at most 20 s, 400 polls) until every running node says
    /// cluster_state:ok; throws otherwise.
    void wait_ok() {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        for (int i = 0; i < 400 && std::chrono::steady_clock::now() < deadline; ++i) {
            bool ok = true;
            for (const auto& n : nodes_)
                if (n->running() && redis_raw(n->port(), "CLUSTER INFO").find("cluster_state:ok") == std::string::npos)
                    ok = false;
            if (ok) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        throw std::runtime_error("the Redis Cluster did not reach cluster_state:ok within 20 s; logs in " +
                                 nodes_[0]->dir());
    }

  private:
    // Runs a command to completion (at most 30 s), output to `log`.
    static void run(std::vector<std::string> cmd, const std::string& log) {
        std::vector<char*> argv;
        for (auto& a : cmd) argv.push_back(a.data());
        argv.push_back(nullptr);
        const pid_t pid = ::fork();
        if (pid < 0) throw std::runtime_error("fork failed");
        if (pid == 0) {
#if defined(__linux__)
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
            std::FILE* f = std::freopen(log.c_str(), "a", stdout);
            (void)f;
            ::dup2(STDOUT_FILENO, STDERR_FILENO);
            ::execv(argv[0], argv.data());
            std::_Exit(127);
        }
        int status = 0;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        for (int i = 0; i < 3000; ++i) {
            if (::waitpid(pid, &status, WNOHANG) == pid) {
                if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
                throw std::runtime_error("redis-cli --cluster create failed; see " + log);
            }
            if (std::chrono::steady_clock::now() >= deadline) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        throw std::runtime_error("redis-cli --cluster create did not finish within 30 s; see " + log);
    }

    std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace tally_test
