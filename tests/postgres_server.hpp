// tests/postgres_server.hpp: a real PostgreSQL 15 for tests and examples.
// initdb in a fresh temporary directory, then `postgres` listening only on a
// Unix socket in that directory (no TCP port, so parallel servers never
// collide), fsync off. When the tests run as root the server runs as the
// unprivileged `postgres` user (PostgreSQL refuses root): the directory is
// chowned to it and each child drops to it with setgid/setuid before exec.
// CREATE EXTENSION hll, tdigest. Every wait is bounded in time and in
// iterations; the server dies with the test (PR_SET_PDEATHSIG) and the
// destructor stops it (fast shutdown, then SIGKILL) and removes the directory.
//
// Skipping: where no PostgreSQL binaries are found (postgres_bin_dir() returns
// "") or the hll and tdigest extensions are not installed for them
// (postgres_missing_extensions), the caller skips with one line, unless
// postgres_required() (CI=true or TALLY_REQUIRE_POSTGRES=1, set by
// scripts/deps.sh): then it fails.
//
// Needs libpq (libpq-fe.h); only the PostgreSQL tests and examples include it.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include <libpq-fe.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace tally_test {

/// True where a missing server or libpq is a failure rather than a skip:
/// CI=true or TALLY_REQUIRE_POSTGRES=1.
inline bool postgres_required() {
    for (const char* name : {"CI", "TALLY_REQUIRE_POSTGRES"}) {
        const char* v = std::getenv(name);
        if (v != nullptr && (std::string_view(v) == "true" || std::string_view(v) == "1")) return true;
    }
    return false;
}

/// Directory holding initdb and postgres (version 15): $TALLY_POSTGRES_BIN,
/// Debian's /usr/lib/postgresql/15/bin, Homebrew's postgresql@15; else "".
inline std::string postgres_bin_dir() {
    std::vector<std::string> dirs;
    if (const char* env = std::getenv("TALLY_POSTGRES_BIN")) dirs.emplace_back(env);
    for (const char* d : {"/usr/lib/postgresql/15/bin", "/opt/homebrew/opt/postgresql@15/bin",
                          "/usr/local/opt/postgresql@15/bin"})
        dirs.emplace_back(d);
    for (const auto& d : dirs)
        if (!d.empty() && ::access((d + "/initdb").c_str(), X_OK) == 0 && ::access((d + "/postgres").c_str(), X_OK) == 0)
            return d;
    return {};
}

/// The extensions this harness creates, missing from the server at `bin_dir`
/// (their .control files in `pg_config --sharedir`/extension); "" when all
/// are there or pg_config cannot say.
inline std::string postgres_missing_extensions(const std::string& bin_dir) {
    const std::string cmd = "'" + bin_dir + "/pg_config' --sharedir 2>/dev/null";
    std::FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return {};
    char buf[4096] = {};
    const bool got = std::fgets(buf, sizeof buf, p) != nullptr;
    ::pclose(p);
    if (!got) return {};
    std::string share(buf);
    while (!share.empty() && (share.back() == '\n' || share.back() == '\r')) share.pop_back();
    std::string missing;
    for (const char* ext : {"hll", "tdigest"})
        if (::access((share + "/extension/" + ext + ".control").c_str(), R_OK) != 0)
            missing += std::string(missing.empty() ? "" : ", ") + ext;
    return missing;
}

/// An open libpq connection; throws std::runtime_error on any failed command.
class PgConnection {
  public:
    explicit PgConnection(const std::string& conninfo) : conn_(PQconnectdb(conninfo.c_str())) {
        if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
            const std::string why = conn_ ? PQerrorMessage(conn_) : "out of memory";
            PQfinish(conn_);
            throw std::runtime_error("connect to PostgreSQL failed: " + why);
        }
    }
    PgConnection(const PgConnection&) = delete;
    PgConnection& operator=(const PgConnection&) = delete;
    ~PgConnection() { PQfinish(conn_); }
    [[nodiscard]] PGconn* get() const noexcept { return conn_; }

    /// A query result: rows of values (text, or bytes for binary results).
    struct Result {
        std::vector<std::vector<std::string>> rows;
        std::vector<std::vector<bool>> nulls;
        [[nodiscard]] const std::string& at(std::size_t row, std::size_t col = 0) const { return rows.at(row).at(col); }
        [[nodiscard]] bool is_null(std::size_t row, std::size_t col = 0) const { return nulls.at(row).at(col); }
        [[nodiscard]] std::size_t size() const noexcept { return rows.size(); }
    };

    /// Runs one or more statements without parameters (text results).
    Result exec(const std::string& sql) { return take(PQexec(conn_, sql.c_str()), sql); }

    /// Runs one statement with parameters; a parameter marked binary is sent
    /// as raw bytes (for bytea), others as text. binary_result asks for the
    /// results in binary (raw bytes of a bytea).
    Result exec_params(const std::string& sql, const std::vector<std::string>& params,
                       const std::vector<bool>& binary = {}, bool binary_result = false) {
        std::vector<const char*> values;
        std::vector<int> lengths;
        std::vector<int> formats;
        for (std::size_t i = 0; i < params.size(); ++i) {
            values.push_back(params[i].data());
            lengths.push_back(static_cast<int>(params[i].size()));
            formats.push_back(i < binary.size() && binary[i] ? 1 : 0);
        }
        return take(PQexecParams(conn_, sql.c_str(), static_cast<int>(params.size()), nullptr, values.data(),
                                 lengths.data(), formats.data(), binary_result ? 1 : 0),
                    sql);
    }

  private:
    static Result take(PGresult* res, const std::string& sql) {
        const ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
            const std::string why = res ? PQresultErrorMessage(res) : "no result";
            PQclear(res);
            throw std::runtime_error("PostgreSQL: " + why + " in: " + sql.substr(0, 300));
        }
        Result out;
        const int rows = PQntuples(res);
        const int cols = PQnfields(res);
        for (int r = 0; r < rows; ++r) {
            std::vector<std::string> row;
            std::vector<bool> nulls;
            for (int c = 0; c < cols; ++c) {
                row.emplace_back(PQgetvalue(res, r, c), static_cast<std::size_t>(PQgetlength(res, r, c)));
                nulls.push_back(PQgetisnull(res, r, c) != 0);
            }
            out.rows.push_back(std::move(row));
            out.nulls.push_back(std::move(nulls));
        }
        PQclear(res);
        return out;
    }

    PGconn* conn_;
};

/// Owns an initdb'd data directory and a running postgres child process.
class PostgresServer {
  public:
    static constexpr int port = 5432;  ///< names the socket file only: no TCP listener

    /// Throws std::runtime_error (with the log's tail) if initdb or the server fails.
    explicit PostgresServer(std::string bin_dir = postgres_bin_dir()) : bin_(std::move(bin_dir)) {
        if (bin_.empty()) throw std::runtime_error("no PostgreSQL 15 binaries (initdb, postgres) found");
        char tmpl[] = "/tmp/tally-pg-XXXXXX";
        if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
        dir_ = tmpl;
        try {
            resolve_user();
            if (::chmod(dir_.c_str(), 0700) != 0 || (as_other_user_ && ::chown(dir_.c_str(), uid_, gid_) != 0))
                throw std::runtime_error("cannot hand " + dir_ + " to the postgres user");
            run_to_end({bin_ + "/initdb", "-D", data_dir(), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                        "--locale=C", "--no-sync", "--no-instructions"},
                       dir_ + "/initdb.log", std::chrono::seconds(60));
            start();
            PgConnection c(conninfo());
            c.exec("CREATE EXTENSION hll; CREATE EXTENSION tdigest;");
        } catch (...) {
            stop();
            keep_or_remove();
            throw;
        }
    }
    PostgresServer(const PostgresServer&) = delete;
    PostgresServer& operator=(const PostgresServer&) = delete;
    ~PostgresServer() {
        stop();
        keep_or_remove();
    }

    /// libpq connection string for the server's Unix socket.
    [[nodiscard]] std::string conninfo() const {
        return "host=" + dir_ + " port=" + std::to_string(port) + " dbname=postgres user=postgres connect_timeout=10";
    }
    [[nodiscard]] const std::string& dir() const noexcept { return dir_; }
    [[nodiscard]] pid_t pid() const noexcept { return pid_; }

  private:
    [[nodiscard]] std::string data_dir() const { return dir_ + "/data"; }

    void resolve_user() {
        if (::geteuid() != 0) return;
        const passwd* pw = ::getpwnam("postgres");
        if (pw == nullptr) throw std::runtime_error("running as root but no `postgres` user exists");
        uid_ = pw->pw_uid;
        gid_ = pw->pw_gid;
        as_other_user_ = true;
    }

    // fork + (drop to postgres) + exec, output appended to `log`.
    pid_t spawn(std::vector<std::string> args, const std::string& log) const {
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        const pid_t pid = ::fork();
        if (pid < 0) throw std::runtime_error("fork failed");
        if (pid == 0) {
            const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
            if (fd >= 0) {
                ::dup2(fd, STDOUT_FILENO);
                ::dup2(fd, STDERR_FILENO);
                ::close(fd);
            }
            if (as_other_user_) {
                if (::setgroups(0, nullptr) != 0 || ::setgid(gid_) != 0 || ::setuid(uid_) != 0) std::_Exit(126);
            }
#if defined(__linux__)
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // after setuid, which clears it: never outlive the test
#endif
            if (::chdir(dir_.c_str()) != 0) std::_Exit(126);
            ::execv(argv[0], argv.data());
            std::_Exit(127);
        }
        if (as_other_user_) (void)::chown(log.c_str(), uid_, gid_);
        return pid;
    }

    void run_to_end(std::vector<std::string> args, const std::string& log, std::chrono::seconds limit) const {
        const std::string what = args[0];
        const pid_t pid = spawn(std::move(args), log);
        const auto deadline = std::chrono::steady_clock::now() + limit;
        int status = 0;
        for (long i = 0; i < limit.count() * 200; ++i) {
            if (::waitpid(pid, &status, WNOHANG) == pid) {
                if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
                throw std::runtime_error(what + " failed (status " + std::to_string(status) + "): " + tail(log));
            }
            if (std::chrono::steady_clock::now() >= deadline) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        throw std::runtime_error(what + " did not finish within " + std::to_string(limit.count()) + " s");
    }

    void start() {
        const std::string log = dir_ + "/postgres.log";
        pid_ = spawn({bin_ + "/postgres", "-D", data_dir(), "-k", dir_, "-p", std::to_string(port), "-c",
                      "listen_addresses=", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c",
                      "full_page_writes=off", "-c", "max_connections=20", "-c", "shared_buffers=32MB"},
                     log);
        const std::string info = conninfo();
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        for (int i = 0; i < 3000 && std::chrono::steady_clock::now() < deadline; ++i) {
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                throw std::runtime_error("postgres exited during startup: " + tail(log));
            }
            if (PQping(info.c_str()) == PQPING_OK) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        throw std::runtime_error("postgres did not accept connections within 30 s: " + tail(log));
    }

    // Fast shutdown (SIGINT), at most 10 s, then SIGKILL; always reaped.
    void stop() noexcept {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGINT);
        int status = 0;
        bool reaped = false;
        for (int i = 0; i < 1000 && !reaped; ++i) {
            reaped = ::waitpid(pid_, &status, WNOHANG) == pid_;
            if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        if (!reaped) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, &status, 0);
        }
        pid_ = -1;
    }

    void keep_or_remove() noexcept {
        if (const char* keep = std::getenv("TALLY_KEEP_POSTGRES_DIR"); keep != nullptr && *keep == '1') return;
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }

    static std::string tail(const std::string& path) {
        std::ifstream in(path);
        std::stringstream ss;
        ss << in.rdbuf();
        const std::string s = ss.str();
        return s.size() > 2000 ? s.substr(s.size() - 2000) : s;
    }

    std::string bin_;
    std::string dir_;
    bool as_other_user_ = false;
    uid_t uid_ = 0;
    gid_t gid_ = 0;
    pid_t pid_ = -1;
};

}  // namespace tally_test
