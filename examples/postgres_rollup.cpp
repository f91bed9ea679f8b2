// Per-minute sketches in PostgreSQL, rolled up in SQL: a service counts its
// users with a HyperLogLog and its latencies with a TDigest per minute,
// in-process, and writes one row per minute with libpq into a table whose
// columns are the `hll` (postgresql-hll) and `tdigest` extensions' types. One
// SQL query then answers "distinct users and p99 latency over the last 30
// days" by unioning rows, next to the rest of the data. The program checks
// both answers against the exact ones and exits 1 if they are off or if no
// server is reachable.
//
//   CREATE EXTENSION hll; CREATE EXTENSION tdigest;   -- once, as a superuser
//   TALLY_POSTGRES_CONNINFO='host=/tmp dbname=postgres' ./example_postgres_rollup
//
// (Without TALLY_POSTGRES_CONNINFO, libpq's defaults and PG* variables apply.)
// Build: link libpq (pkg-config --cflags --libs libpq).
#include <tally/sketch/distinct/hyperloglog.hpp>
#include <tally/sketch/quantiles/tdigest.hpp>

#include <libpq-fe.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_set>
#include <vector>

namespace {

// Runs one statement; prints the server's message and returns false on failure.
bool run(PGconn* conn, const char* sql) {
    PGresult* r = PQexec(conn, sql);
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok) std::fprintf(stderr, "postgres_rollup: %s failed: %s", sql, PQerrorMessage(conn));
    PQclear(r);
    return ok;
}

// A small deterministic generator (SplitMix64) so every run sees the same data.
struct Rng {
    std::uint64_t s;
    std::uint64_t next() {
        std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

}  // namespace

int main() {
    const char* info = std::getenv("TALLY_POSTGRES_CONNINFO");
    PGconn* conn = PQconnectdb(info ? info : "");
    if (PQstatus(conn) != CONNECTION_OK) {
        std::fprintf(stderr, "postgres_rollup: cannot reach PostgreSQL: %s", PQerrorMessage(conn));
        PQfinish(conn);
        return 1;
    }
    if (!run(conn, "SET client_min_messages TO warning") || !run(conn, "DROP TABLE IF EXISTS tally_minute_rollup") ||
        !run(conn, "CREATE TABLE tally_minute_rollup (minute timestamptz PRIMARY KEY, users hll NOT NULL, "
                   "latency tdigest NOT NULL)")) {
        PQfinish(conn);
        return 1;
    }

    // 36 days of traffic, one active minute in 15; the query covers the last 30 days.
    const int days = 36, window_days = 30, minutes_per_day = 24 * 60, step = 15;
    Rng rng{2026};
    std::unordered_set<std::int64_t> exact_users;  // the exact answers, for the check
    std::vector<double> exact_latencies;
    tally::HyperLogLog rolled_users = tally::HyperLogLog::postgres_compatible();  // the same roll-up in-process
    tally::TDigest rolled_latency(100);
    long window_rows = 0;

    PGresult* prep = PQprepare(conn, "insert_minute",
                               "INSERT INTO tally_minute_rollup VALUES "
                               "(timestamptz '2026-12-01 00:00:00+00' - make_interval(mins => $1::int), $2::bytea::hll, "
                               "$3::tdigest)",
                               3, nullptr);
    const bool prepared = PQresultStatus(prep) == PGRES_COMMAND_OK;
    PQclear(prep);
    if (!prepared || !run(conn, "BEGIN")) {
        std::fprintf(stderr, "postgres_rollup: %s", PQerrorMessage(conn));
        PQfinish(conn);
        return 1;
    }
    for (int minutes_ago = days * minutes_per_day; minutes_ago > 0; minutes_ago -= step) {
        // One minute of requests: users from a skewed population, lognormal latencies.
        tally::HyperLogLog users = tally::HyperLogLog::postgres_compatible();  // log2m 11, regwidth 5
        tally::TDigest latency(100);
        const int requests = 100 + static_cast<int>(rng.next() % 200);
        const bool in_window = minutes_ago < window_days * minutes_per_day;  // the query's "> now - 30 days"
        for (int i = 0; i < requests; ++i) {
            const double u = rng.uniform();
            const auto user = static_cast<std::int64_t>(u * u * 400'000);
            const double z = std::sqrt(-2 * std::log(1 - rng.uniform())) * std::cos(6.283185307179586 * rng.uniform());
            const double ms = 20 * std::exp(0.6 * z);
            users.add(user);  // what hll_hash_bigint(user) hashes
            latency.add(ms);
            if (in_window) {
                exact_users.insert(user);
                exact_latencies.push_back(ms);
            }
        }
        if (in_window) {
            ++window_rows;
            rolled_users.merge(users);
            rolled_latency.merge(latency);
        }
        const std::vector<std::byte> hll = users.to_postgres();
        // Header compression 1000 (10 x the digest's): the server re-compacts
        // to its own scale when it answers, and this keeps our resolution.
        const std::string digest = latency.to_postgres(1000);
        const std::string ago = std::to_string(minutes_ago);
        const char* values[3] = {ago.c_str(), reinterpret_cast<const char*>(hll.data()), digest.c_str()};
        const int lengths[3] = {0, static_cast<int>(hll.size()), 0};
        const int formats[3] = {0, 1, 0};  // the hll goes as raw bytes
        PGresult* r = PQexecPrepared(conn, "insert_minute", 3, values, lengths, formats, 0);
        const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
        if (!ok) {
            std::fprintf(stderr, "postgres_rollup: insert failed: %s", PQerrorMessage(conn));
            PQfinish(conn);
            return 1;
        }
    }
    if (!run(conn, "COMMIT")) {
        PQfinish(conn);
        return 1;
    }

    // The roll-up: one query over the last 30 days of minute rows.
    PGresult* q = PQexec(conn,
                         "SELECT hll_cardinality(hll_union_agg(users)), tdigest_percentile(latency, 0.99), count(*) "
                         "FROM tally_minute_rollup "
                         "WHERE minute > timestamptz '2026-12-01 00:00:00+00' - interval '30 days'");
    if (PQresultStatus(q) != PGRES_TUPLES_OK || PQntuples(q) != 1) {
        std::fprintf(stderr, "postgres_rollup: roll-up query failed: %s", PQerrorMessage(conn));
        PQclear(q);
        PQfinish(conn);
        return 1;
    }
    const double distinct = std::atof(PQgetvalue(q, 0, 0));
    const double p99 = std::atof(PQgetvalue(q, 0, 1));
    const long rows = std::atol(PQgetvalue(q, 0, 2));
    PQclear(q);
    run(conn, "DROP TABLE tally_minute_rollup");
    PQfinish(conn);

    std::sort(exact_latencies.begin(), exact_latencies.end());
    const double n = static_cast<double>(exact_latencies.size());
    const double p99_rank =
        static_cast<double>(std::upper_bound(exact_latencies.begin(), exact_latencies.end(), p99) - exact_latencies.begin()) / n;
    const double exact_p99 = exact_latencies[static_cast<std::size_t>(0.99 * n)];
    const double users_error = distinct / static_cast<double>(exact_users.size()) - 1;
    std::printf("last 30 days: %ld minute rows, %zu requests\n", rows, exact_latencies.size());
    std::printf("distinct users  SQL %.0f  in-process %.0f  exact %zu  (%+.2f%%)\n", distinct, rolled_users.estimate(),
                exact_users.size(), 100 * users_error);
    std::printf("p99 latency     SQL %.3f ms  in-process %.3f ms  exact %.3f ms  (rank %.4f)\n", p99,
                rolled_latency.quantile(0.99), exact_p99, p99_rank);

    // hll_cardinality's error at log2m 11 is about 1.04 / sqrt(2048) = 2.3%:
    // allow three of it; the p99 within the t-digest's rank bound (0.005 for q in
    // [0.01, 0.99]).
    const bool ok = std::abs(users_error) <= 3 * 1.04 / std::sqrt(2048.0) && std::abs(p99_rank - 0.99) <= 0.005 &&
                    rows == window_rows;
    if (!ok) std::fprintf(stderr, "postgres_rollup: the roll-up is off the exact answer\n");
    return ok ? 0 : 1;
}
