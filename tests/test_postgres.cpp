// HyperLogLog <-> PostgreSQL `hll` and TDigest <-> `tdigest`, against a live
// PostgreSQL 15 with the postgresql-hll and tdigest extensions, started by
// tests/postgres_server.hpp (initdb in a temporary directory, a Unix socket
// there, the unprivileged postgres user when run as root). Where no server is
// installed the cases skip with one line, unless CI=true or
// TALLY_REQUIRE_POSTGRES=1: then they fail.
#include <tally/sketch/distinct/hyperloglog.hpp>
#include <tally/sketch/quantiles/tdigest.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "catch.hpp"
#include "postgres_server.hpp"
#include "test_support.hpp"

using tally::HyperLogLog;
using tally::PostgresHllOptions;
using tally::TDigest;

namespace {

// One server per test process, started on first use.
tally_test::PostgresServer* server() {
    static std::unique_ptr<tally_test::PostgresServer> s;
    static std::string failure;
    if (!s && failure.empty()) {
        try {
            s = std::make_unique<tally_test::PostgresServer>();
        } catch (const std::exception& e) {
            failure = e.what();
        }
    }
    if (!s) FAIL("PostgreSQL did not start: " << failure);
    return s.get();
}

// False (with one line) where the cases cannot run here and need not.
bool have_postgres() {
    const std::string bin = tally_test::postgres_bin_dir();
    const std::string missing = bin.empty() ? "" : tally_test::postgres_missing_extensions(bin);
    if (!bin.empty() && missing.empty()) return true;
    const std::string what = bin.empty() ? std::string("PostgreSQL 15 (initdb, postgres) not found")
                                         : "the PostgreSQL extensions " + missing + " are not installed in " + bin;
    if (tally_test::postgres_required())
        FAIL(what << ", and CI / TALLY_REQUIRE_POSTGRES=1 require them (scripts/deps.sh installs postgresql-15, "
                     "postgresql-15-hll, postgresql-15-tdigest, libpq-dev)");
    WARN("skipped: " << what << " (TALLY_POSTGRES_BIN names another bin directory)");
    return false;
}

std::string as_param(const std::vector<std::byte>& b) {
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// bytea/hll text output "\x0a1b..." -> bytes.
std::vector<std::byte> from_hex(const std::string& s) {
    REQUIRE(s.rfind("\\x", 0) == 0);
    std::vector<std::byte> out;
    for (std::size_t i = 2; i + 1 < s.size(); i += 2)
        out.push_back(static_cast<std::byte>(std::stoi(s.substr(i, 2), nullptr, 16)));
    return out;
}

// Items of one set: x * mul + off for x in [0, n).
struct ItemSet {
    std::int64_t n;
    int log2m;
    int regwidth;
    std::int64_t mul;
    std::int64_t off;
};

std::string series_sql(const ItemSet& s) {
    return "generate_series(0::bigint, " + std::to_string(s.n - 1) + ") g, LATERAL (SELECT g * " +
           std::to_string(s.mul) + " + (" + std::to_string(s.off) + ") AS x) v";
}

HyperLogLog tally_sketch(const ItemSet& s) {
    HyperLogLog h = HyperLogLog::postgres_compatible(s.log2m, s.regwidth);
    for (std::int64_t x = 0; x < s.n; ++x) h.add(x * s.mul + s.off);
    return h;
}

// [lo, hi] rank interval of v in sorted data: F(v-) and F(v).
double rank_error(const std::vector<double>& sorted, double v, double q) {
    const auto n = static_cast<double>(sorted.size());
    const double lo = static_cast<double>(std::lower_bound(sorted.begin(), sorted.end(), v) - sorted.begin()) / n;
    const double hi = static_cast<double>(std::upper_bound(sorted.begin(), sorted.end(), v) - sorted.begin()) / n;
    return q < lo ? lo - q : q > hi ? q - hi : 0.0;
}

// The documented bound of TDigest's rank error at q (compression 100).
double documented_bound(double q) { return (q < 0.01 || q > 0.99) ? 0.0005 : 0.005; }

const std::vector<double> probes = {0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999};

std::string probes_sql() {
    std::string s = "'{";
    for (std::size_t i = 0; i < probes.size(); ++i) {
        if (i) s += ',';
        s += std::to_string(probes[i]);
    }
    s += "}'::float8[]";
    return s;
}

// "{1.5,2,3}" -> doubles.
std::vector<double> parse_array(const std::string& text) {
    std::vector<double> out;
    std::size_t i = 1;
    while (i < text.size() && text[i] != '}') {
        std::size_t end = text.find_first_of(",}", i);
        out.push_back(std::stod(text.substr(i, end - i)));
        i = end + (text[end] == ',' ? 1 : 0);
    }
    return out;
}

std::string float_array(const std::vector<double>& xs) {
    std::string s = "{";
    for (std::size_t i = 0; i < xs.size(); ++i) {
        if (i) s += ',';
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.17g", xs[i]);
        s += buf;
    }
    return s + "}";
}

enum class Data { uniform, lognormal, lognormal_ms, thirty_values, half_constant };

std::vector<double> make_data(Data kind, std::size_t n, std::uint64_t seed) {
    tally::test::Rng rng(seed);
    std::vector<double> xs;
    xs.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        const double u = rng.uniform();
        const double z = std::sqrt(-2 * std::log(1 - u)) * std::cos(6.283185307179586 * rng.uniform());
        switch (kind) {
            case Data::uniform: xs.push_back(u); break;
            case Data::lognormal: xs.push_back(20 * std::exp(0.8 * z)); break;
            case Data::lognormal_ms: xs.push_back(std::round(20 * std::exp(0.8 * z))); break;
            case Data::thirty_values: xs.push_back(static_cast<double>(1 + rng.below(30))); break;
            case Data::half_constant: xs.push_back(u < 0.5 ? 7.0 : 100 * rng.uniform()); break;
        }
    }
    return xs;
}

// Largest share of the data at one value (0 for continuous data).
double largest_point_mass(std::vector<double> sorted) {
    std::size_t best = 1, run = 1;
    for (std::size_t i = 1; i < sorted.size(); ++i) {
        run = sorted[i] == sorted[i - 1] ? run + 1 : 1;
        best = std::max(best, run);
    }
    return best == 1 ? 0.0 : static_cast<double>(best) / static_cast<double>(sorted.size());
}

}  // namespace

TEST_CASE("postgres hll: 20 item sets are register-identical with hll_add_agg(hll_hash_bigint(x))", "[postgres]") {
    if (!have_postgres()) return;
    tally_test::PgConnection c(server()->conninfo());
    // n from 0 to 10^6, log2m 10..14, regwidth 4..6; the default cutoffs make
    // the small ones EXPLICIT in SQL (160 hashes at log2m 11, regwidth 5).
    const std::vector<ItemSet> sets = {
        {0, 11, 5, 1, 0},           {1, 10, 4, 1, 42},          {2, 12, 6, 3, -7},
        {10, 13, 5, 1, 1},          {100, 14, 4, 7, -1000},     {160, 11, 5, 1, 1},
        {161, 11, 5, 1, 1},         {500, 10, 6, 11, 5},        {1000, 12, 4, 1, 0},
        {2000, 13, 6, 13, -99999},  {5000, 14, 5, 1, 1},        {10'000, 10, 5, 17, 3},
        {30'000, 11, 4, 1, -15000}, {100'000, 12, 5, 19, 0},    {200'000, 13, 4, 1, 7},
        {300'000, 14, 6, 23, 1},    {500'000, 10, 4, 1, 0},     {700'000, 11, 6, 29, -5},
        {1'000'000, 12, 5, 1, 1},   {1'000'000, 14, 4, 31, 12345}};
    REQUIRE(sets.size() == 20);
    int explicit_in_sql = 0, sparse_or_full = 0;
    for (const ItemSet& s : sets) {
        INFO("n " << s.n << " log2m " << s.log2m << " regwidth " << s.regwidth);
        const HyperLogLog h = tally_sketch(s);
        const std::string l = std::to_string(s.log2m), w = std::to_string(s.regwidth);
        // SQL A: the extension's default cutoffs; SQL B: explicit off (expthresh 0).
        const auto sql = c.exec("SELECT hll_add_agg(hll_hash_bigint(x), " + l + ", " + w + ")::text, hll_add_agg(hll_hash_bigint(x), " +
                                l + ", " + w + ", 0, 1)::text FROM " + series_sql(s));
        if (s.n == 0) {  // an aggregate over no rows is NULL: compare with the empty value instead
            CHECK(sql.is_null(0, 0));
            const auto e = c.exec("SELECT hll_empty(" + l + ", " + w + ")::text");
            CHECK(h.to_postgres() == from_hex(e.at(0)));
            CHECK(HyperLogLog::from_postgres(from_hex(e.at(0))) == h);
            continue;
        }
        const auto sql_default = from_hex(sql.at(0, 0));
        const auto sql_no_explicit = from_hex(sql.at(0, 1));
        // from_postgres of every SQL value equals tally's registers.
        CHECK(HyperLogLog::from_postgres(sql_default) == h);
        CHECK(HyperLogLog::from_postgres(sql_no_explicit) == h);
        // Byte-identical where both sides write registers.
        const auto mine_no_explicit = h.to_postgres(PostgresHllOptions{0, true, -1});
        CHECK(mine_no_explicit == sql_no_explicit);
        // hll_cardinality of tally's bytes equals that of the SQL value.
        const auto mine = h.to_postgres();
        const auto card = c.exec_params(
            "SELECT hll_cardinality($1::bytea::hll), hll_cardinality($2::bytea::hll), hll_cardinality($3::bytea::hll), "
            "hll_type($3::bytea::hll)",
            {as_param(mine), as_param(sql_no_explicit), as_param(sql_default)}, {true, true, true});
        CHECK(card.at(0, 0) == card.at(0, 1));
        if (card.at(0, 3) == "2") {
            // EXPLICIT in SQL: its cardinality is the exact count of hashes.
            ++explicit_in_sql;
            CHECK(std::stoll(card.at(0, 2)) == s.n);
        } else {
            ++sparse_or_full;
            CHECK(card.at(0, 0) == card.at(0, 2));
        }
    }
    CHECK(explicit_in_sql >= 4);  // the small sets really went through EXPLICIT
    CHECK(sparse_or_full >= 12);
}

TEST_CASE("postgres hll: hll_union_agg over tally-written and SQL-built rows is the union of the items", "[postgres]") {
    if (!have_postgres()) return;
    tally_test::PgConnection c(server()->conninfo());
    c.exec("CREATE TEMP TABLE daily (day int, users hll)");
    HyperLogLog all = HyperLogLog::postgres_compatible();
    std::vector<bool> seen(200'000, false);  // the exact union
    // Days 0..3 counted in-process, days 4..7 in SQL; ranges overlap, sizes
    // span EXPLICIT, SPARSE and FULL on the SQL side.
    const std::int64_t sizes[8] = {50, 3000, 40'000, 120, 80, 700, 25'000, 150'000};
    for (int day = 0; day < 8; ++day) {
        const std::int64_t first = day * 1000, last = first + sizes[day] - 1;
        for (std::int64_t u = first; u <= last; ++u) {
            all.add(u);
            seen[static_cast<std::size_t>(u)] = true;
        }
        if (day < 4) {
            HyperLogLog h = HyperLogLog::postgres_compatible();
            for (std::int64_t u = first; u <= last; ++u) h.add(u);
            c.exec_params("INSERT INTO daily VALUES ($1, $2::bytea::hll)", {std::to_string(day), as_param(h.to_postgres())},
                          {false, true});
        } else {
            c.exec("INSERT INTO daily SELECT " + std::to_string(day) + ", hll_add_agg(hll_hash_bigint(u)) FROM generate_series(" +
                   std::to_string(first) + "::bigint, " + std::to_string(last) + ") u");
        }
    }
    const auto r = c.exec("SELECT hll_union_agg(users)::text, hll_cardinality(hll_union_agg(users)), "
                          "(SELECT hll_cardinality(hll_union_agg(users)) FROM daily WHERE day IN (1, 6)) FROM daily");
    const auto union_bytes = from_hex(r.at(0, 0));
    CHECK(HyperLogLog::from_postgres(union_bytes) == all);
    CHECK(union_bytes == all.to_postgres());
    const auto card = c.exec_params("SELECT hll_cardinality($1::bytea::hll)", {as_param(all.to_postgres())}, {true});
    CHECK(card.at(0) == r.at(0, 1));
    // Two rows, one from each side, through the || operator too.
    HyperLogLog pair = HyperLogLog::postgres_compatible();
    for (int day : {1, 6})
        for (std::int64_t u = day * 1000; u < day * 1000 + sizes[day]; ++u) pair.add(u);
    const auto pr = c.exec("SELECT (SELECT users FROM daily WHERE day = 1) || (SELECT users FROM daily WHERE day = 6)");
    CHECK(HyperLogLog::from_postgres(from_hex(pr.at(0))) == pair);
    const auto pc = c.exec_params("SELECT hll_cardinality($1::bytea::hll)", {as_param(pair.to_postgres())}, {true});
    CHECK(pc.at(0) == r.at(0, 2));
    // And the extension's estimate of the union is near the exact count.
    const auto exact = static_cast<double>(std::count(seen.begin(), seen.end(), true));
    CHECK(std::abs(std::stod(r.at(0, 1)) / exact - 1) < 3 * 1.04 / std::sqrt(2048.0));
}

TEST_CASE("postgres hll: the server reads tally's values at every log2m and regwidth and writes them back unchanged",
          "[postgres]") {
    if (!have_postgres()) return;
    tally_test::PgConnection c(server()->conninfo());
    int checked = 0;
    for (int log2m = 4; log2m <= 17; ++log2m) {
        for (int w = 1; w <= 7; ++w) {
            for (const std::int64_t n : {std::int64_t{3}, std::int64_t{1} << (log2m - 2), std::int64_t{4} << log2m}) {
                INFO("log2m " << log2m << " regwidth " << w << " n " << n);
                HyperLogLog h = HyperLogLog::postgres_compatible(log2m, w);
                for (std::int64_t x = 0; x < n; ++x) h.add(x);
                const auto mine = h.to_postgres(PostgresHllOptions{0, true, -1});
                // hll_union with the empty value unpacks and re-packs: same bytes back.
                const auto r = c.exec_params("SELECT hll_union($1::bytea::hll, hll_empty(" + std::to_string(log2m) + ", " +
                                                 std::to_string(w) + ", 0, 1))::text, hll_log2m($1::bytea::hll), "
                                                 "hll_regwidth($1::bytea::hll)",
                                             {as_param(mine)}, {true});
                CHECK(from_hex(r.at(0, 0)) == mine);
                CHECK(r.at(0, 1) == std::to_string(log2m));
                CHECK(r.at(0, 2) == std::to_string(w));
                ++checked;
            }
        }
    }
    CHECK(checked == 14 * 7 * 3);
}

TEST_CASE("postgres tdigest: tdigest_percentile of tally's text agrees with tally within the bound", "[postgres]") {
    if (!have_postgres()) return;
    tally_test::PgConnection c(server()->conninfo());
    const std::size_t n = 100'000;
    struct Case {
        Data kind;
        const char* name;
    };
    for (const Case k : {Case{Data::uniform, "uniform"}, Case{Data::lognormal, "lognormal"},
                         Case{Data::lognormal_ms, "lognormal rounded to 1 ms"}, Case{Data::thirty_values, "30 values"},
                         Case{Data::half_constant, "half one constant"}}) {
        INFO(k.name);
        std::vector<double> xs = make_data(k.kind, n, 0x7d16e57 + static_cast<std::uint64_t>(k.kind));
        TDigest d(100);
        for (const double x : xs) d.add(x);
        std::sort(xs.begin(), xs.end());
        const double mass = largest_point_mass(xs);
        // The extension re-compacts a digest to its own scale before it
        // answers. With header compression 10 x 100 it keeps tally's
        // centroids; with the digest's own 100 it merges them further.
        const std::string fine = d.to_postgres(1000);
        const std::string plain = d.to_postgres();
        const auto r = c.exec_params("SELECT tdigest_percentile($1::tdigest, " + probes_sql() +
                                         "), tdigest_percentile($2::tdigest, " + probes_sql() + "), $2::tdigest::text",
                                     {fine, plain});
        const std::vector<double> pg = parse_array(r.at(0, 0));
        const std::vector<double> pg_plain = parse_array(r.at(0, 1));
        REQUIRE(pg.size() == probes.size());
        REQUIRE(pg_plain.size() == probes.size());
        // The server stores the text as written: it prints the same centroids back.
        TDigest echoed = TDigest::from_postgres(r.at(0, 2));
        CHECK(echoed.total() == d.total());
        CHECK(echoed.centroids().size() == d.centroids().size());
        for (std::size_t i = 0; i < probes.size(); ++i) {
            const double q = probes[i];
            INFO("q " << q << " server " << pg[i] << " (header 100: " << pg_plain[i] << ") tally " << d.quantile(q));
            CHECK(rank_error(xs, d.quantile(q), q) <= documented_bound(q));
            CHECK(rank_error(xs, echoed.quantile(q), q) <= documented_bound(q));
            // On continuous data (mass 0) the server answers within tally's
            // bound. It interpolates between centroid means and has no point
            // masses, so on tied data it may answer between two data values,
            // up to one point mass away in rank (docs/postgres.md).
            CHECK(rank_error(xs, pg[i], q) <= documented_bound(q) + mass);
            // With the digest's own compression in the header: within three
            // times the bound (measured at most 1.1% mid-range at 10^6 lognormal values).
            CHECK(rank_error(xs, pg_plain[i], q) <= 3 * documented_bound(q) + mass);
        }
    }
}

TEST_CASE("postgres tdigest: the tdigest aggregate merges tally-written and SQL-built digests within the bound",
          "[postgres]") {
    if (!have_postgres()) return;
    tally_test::PgConnection c(server()->conninfo());
    c.exec("CREATE TEMP TABLE latency (part int, d tdigest)");
    std::vector<double> all;
    // Everything at header compression 1000 (10 x the digests' 100): the
    // server's state takes it from the first row; tally merges the parts as
    // the server holds them.
    TDigest merged(1000);
    for (int part = 0; part < 8; ++part) {
        // Parts of different scale, so the merge matters: lognormal latencies.
        std::vector<double> xs = make_data(Data::lognormal, 20'000, 0xabc0 + static_cast<std::uint64_t>(part));
        for (double& x : xs) x *= 1 + 0.25 * part;
        all.insert(all.end(), xs.begin(), xs.end());
        if (part % 2 == 0) {
            TDigest d(100);
            for (const double x : xs) d.add(x);
            merged.merge(TDigest::from_postgres(d.to_postgres(1000)));
            c.exec_params("INSERT INTO latency VALUES ($1, $2::tdigest)", {std::to_string(part), d.to_postgres(1000)});
        } else {
            c.exec_params("INSERT INTO latency SELECT $1, tdigest(v, 1000) FROM unnest($2::float8[]) v",
                          {std::to_string(part), float_array(xs)});
            const auto t = c.exec("SELECT d::text FROM latency WHERE part = " + std::to_string(part));
            merged.merge(TDigest::from_postgres(t.at(0)));
        }
    }
    std::sort(all.begin(), all.end());
    const auto r = c.exec("SELECT tdigest_percentile(d, " + probes_sql() + "), tdigest(d)::text FROM latency");
    const std::vector<double> pg = parse_array(r.at(0, 0));
    REQUIRE(pg.size() == probes.size());
    const TDigest server_merged = TDigest::from_postgres(r.at(0, 1));
    CHECK(server_merged.total() == static_cast<double>(all.size()));
    CHECK(merged.total() == static_cast<double>(all.size()));
    for (std::size_t i = 0; i < probes.size(); ++i) {
        const double q = probes[i];
        INFO("q " << q << " server " << pg[i] << " tally " << merged.quantile(q));
        CHECK(rank_error(all, pg[i], q) <= documented_bound(q));
        CHECK(rank_error(all, merged.quantile(q), q) <= documented_bound(q));
        CHECK(rank_error(all, server_merged.quantile(q), q) <= documented_bound(q));
    }
}

#ifdef TALLY_EXAMPLE_POSTGRES_ROLLUP
TEST_CASE("postgres example: postgres_rollup runs against the live server and checks its answers", "[postgres][example]") {
    if (!have_postgres()) return;
    const std::string cmd = std::string("TALLY_POSTGRES_CONNINFO='") + server()->conninfo() + "' '" +
                            TALLY_EXAMPLE_POSTGRES_ROLLUP + "' > " + server()->dir() + "/example.log 2>&1";
    const int status = std::system(cmd.c_str());
    INFO("output in " << server()->dir() << "/example.log");
    CHECK(status == 0);
}
#endif
