// Concurrency-limit algorithms against Netflix concurrency-limits (the Java
// reference, tests/fixtures/concurrency/, written by NetflixTrajectories.java
// there): the same limit after every sample of 10,000 random sequences of
// 2,000 samples, default options and three non-default sets per algorithm.
// The sequences are drawn here by the same splitmix64 the Java driver uses;
// the fixture holds one FNV-1a hash per sequence (all twelve trajectories),
// one per algorithm and option set (all sequences), and the full
// trajectories of two sequences. Then the limiters, single-threaded (thread
// tests: test_concurrency_concurrent.cpp).
#include <tally/limit/concurrency.hpp>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "catch.hpp"
#include "test_support.hpp"

namespace {

std::string fixture_dir() {
    const std::string f = __FILE__;
    return f.substr(0, f.find_last_of("/\\") + 1) + "fixtures/concurrency/";
}

constexpr int sequences = 10000;
constexpr int samples = 2000;

// The Java driver's generator, draw for draw.
struct SeqRng {
    std::uint64_t s;
    explicit SeqRng(std::uint64_t seq) : s(0x243F6A8885A308D3ULL ^ (seq * 0x9E3779B97F4A7C15ULL)) {}
    std::uint64_t next() {
        std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }
    std::uint64_t below(std::uint64_t n) { return next() % n; }
    std::uint64_t rtt() {
        std::uint64_t lo = 1000;
        for (std::uint64_t e = below(7); e > 0; --e) lo *= 10;
        return lo + below(9 * lo);
    }
};

struct Sample {
    std::uint64_t start, rtt;
    int inflight;
    bool dropped;
};

std::vector<Sample> sequence(std::uint64_t seq) {
    SeqRng g(seq);
    const int mode = static_cast<int>(seq % 2);
    const std::uint64_t drop_pct = g.below(31);
    std::uint64_t base = g.rtt();
    std::uint64_t start = 0;
    std::vector<Sample> out(samples);
    for (int i = 0; i < samples; ++i) {
        Sample& s = out[static_cast<std::size_t>(i)];
        start += g.below(1'000'000) + 1;
        s.start = start;
        if (mode == 0) {
            s.rtt = g.rtt();
        } else {
            const std::uint64_t r = g.below(100);
            if (r < 5)
                s.rtt = std::min<std::uint64_t>(10'000'000'000ULL, base * 10 + g.below(base));
            else if (r < 10)
                s.rtt = g.rtt();
            else
                s.rtt = base + g.below(base / 2 + 1);
            if (i % 500 == 499) base = g.rtt();
        }
        s.inflight = static_cast<int>(g.below(1001));
        s.dropped = g.below(100) < drop_pct;
    }
    return out;
}

// The option sets of NetflixTrajectories.make, in the same order.
tally::Aimd make_aimd(int opt) {
    switch (opt) {
        case 1:
            return tally::Aimd({.initial_limit = 10,
                                .min_limit = 1,
                                .max_limit = 1000,
                                .backoff_ratio = 0.5,
                                .timeout_ns = 100'000'000});
        case 2:
            return tally::Aimd({.initial_limit = 100,
                                .min_limit = 50,
                                .max_limit = 150,
                                .backoff_ratio = 0.75,
                                .timeout_ns = 1'000'000'000});
        case 3:
            return tally::Aimd({.initial_limit = 500,
                                .min_limit = 5,
                                .max_limit = 500,
                                .backoff_ratio = 0.99,
                                .timeout_ns = 20'000'000});
        default:
            return tally::Aimd();
    }
}
tally::Vegas make_vegas(int opt) {
    tally::Vegas::Options o;
    o.probe_multiplier = 1'000'000'000;
    if (opt == 1) o.initial_limit = 10, o.max_concurrency = 100, o.smoothing = 0.5;
    if (opt == 2) {
        o.initial_limit = 200, o.max_concurrency = 2000, o.smoothing = 0.25;
        o.alpha = [](int) { return 5; };
        o.beta = [](int) { return 12; };
    }
    if (opt == 3) o.initial_limit = 50, o.max_concurrency = 500, o.smoothing = 0.9;
    return tally::Vegas(o);
}
tally::Gradient2 make_gradient2(int opt) {
    switch (opt) {
        case 1:
            return tally::Gradient2({50, 10, 500, 0.5, 8, 2.0, 100});
        case 2:
            return tally::Gradient2({20, 1, 1000, 1.0, 2, 1.0, 10});
        case 3:
            return tally::Gradient2({300, 100, 300, 0.05, 16, 3.0, 2000});
        default:
            return tally::Gradient2();
    }
}

constexpr std::uint64_t fnv_offset = 0xcbf29ce484222325ULL;
std::uint64_t fnv(std::uint64_t h, int v) {
    for (int k = 0; k < 4; ++k) {
        h ^= (static_cast<std::uint32_t>(v) >> (8 * k)) & 0xffu;
        h *= 0x100000001b3ULL;
    }
    return h;
}

const char* const families[] = {"aimd", "vegas", "gradient2"};

template <class F>
void each_trajectory(const std::vector<Sample>& seq, F&& f) {
    for (int fam = 0; fam < 3; ++fam)
        for (int opt = 0; opt < 4; ++opt) {
            std::vector<int> limits;
            limits.reserve(seq.size());
            auto run = [&](auto alg) {
                for (const Sample& s : seq) {
                    const int l = alg.on_sample(s.start, s.rtt, s.inflight, s.dropped);
                    REQUIRE(l == alg.limit());
                    limits.push_back(l);
                }
            };
            if (fam == 0) run(make_aimd(opt));
            if (fam == 1) run(make_vegas(opt));
            if (fam == 2) run(make_gradient2(opt));
            f(fam, opt, limits);
        }
}

struct Fixture {
    std::map<std::string, std::uint64_t> totals;  // "aimd 0" -> hash
    std::vector<std::uint64_t> per_sequence;
};

Fixture read_fixture() {
    std::ifstream in(fixture_dir() + "hashes.txt");
    REQUIRE(in.good());
    Fixture f;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#' || line.rfind("sequences", 0) == 0) continue;
        if (line.rfind("total ", 0) == 0) {
            std::istringstream is(line.substr(6));
            std::string fam, hex;
            int opt;
            is >> fam >> opt >> hex;
            f.totals[fam + " " + std::to_string(opt)] = std::stoull(hex, nullptr, 16);
        } else {
            f.per_sequence.push_back(std::stoull(line, nullptr, 16));
        }
    }
    return f;
}

}  // namespace

TEST_CASE("Aimd, Vegas, Gradient2: Netflix's full trajectories of two sequences, limit by limit",
          "[concurrency][java]") {
    std::ifstream in(fixture_dir() + "trajectories.txt");
    REQUIRE(in.good());
    std::map<std::string, std::vector<int>> want;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        const auto colon = line.find(':');
        std::istringstream is(line.substr(colon + 1));
        std::vector<int> v;
        for (int x; is >> x;) v.push_back(x);
        want[line.substr(0, colon)] = v;
    }
    REQUIRE(want.size() == 24);
    for (int seq = 0; seq < 2; ++seq) {
        each_trajectory(sequence(static_cast<std::uint64_t>(seq)), [&](int fam, int opt, const std::vector<int>& got) {
            const std::string key = std::string(families[fam]) + " " + std::to_string(opt) + " " + std::to_string(seq);
            INFO(key);
            const std::vector<int>& w = want.at(key);
            REQUIRE(w.size() == got.size());
            for (std::size_t i = 0; i < w.size(); ++i) {
                INFO("sample " << i);
                REQUIRE(got[i] == w[i]);
            }
        });
    }
}

TEST_CASE("Aimd, Vegas, Gradient2: the same limit as Netflix after every sample of 10,000 sequences",
          "[concurrency][java][big]") {
    const Fixture f = read_fixture();
    REQUIRE(f.per_sequence.size() == sequences);
    REQUIRE(f.totals.size() == 12);
    const int n = static_cast<int>(tally::test::big(sequences, 300));
    std::map<std::string, std::uint64_t> totals;
    int mismatches = 0;
    for (int seq = 0; seq < n; ++seq) {
        std::uint64_t h = fnv_offset;
        each_trajectory(sequence(static_cast<std::uint64_t>(seq)), [&](int fam, int opt, const std::vector<int>& got) {
            auto [it, fresh] = totals.try_emplace(std::string(families[fam]) + " " + std::to_string(opt), fnv_offset);
            for (int l : got) {
                h = fnv(h, l);
                it->second = fnv(it->second, l);
            }
        });
        if (h != f.per_sequence[static_cast<std::size_t>(seq)]) {
            if (++mismatches <= 5) UNSCOPED_INFO("sequence " << seq << " differs from Netflix's");
        }
    }
    CHECK(mismatches == 0);
    if (n == sequences) {
        for (const auto& [key, hash] : f.totals) {
            INFO(key);
            CHECK(totals.at(key) == hash);
        }
    }
}

TEST_CASE("the sizes the docs state", "[concurrency]") {
    STATIC_REQUIRE(sizeof(tally::Aimd) == 40);
    STATIC_REQUIRE(sizeof(tally::Vegas) == 112);
    STATIC_REQUIRE(sizeof(tally::Gradient2) == 96);
    STATIC_REQUIRE(sizeof(tally::ConcurrencyLimiter<tally::Gradient2>) <= 3072);
    STATIC_REQUIRE(sizeof(tally::ConcurrencyLimiter<tally::Gradient2>::Permit) == 32);
}

TEST_CASE("Netflix's integer log10 and Java's casts", "[concurrency]") {
    using tally::detail::log10_root_int;
    CHECK(log10_root_int(0) == 1);
    CHECK(log10_root_int(1) == 1);
    CHECK(log10_root_int(99) == 1);
    CHECK(log10_root_int(100) == 2);
    CHECK(log10_root_int(999) == 2);
    CHECK(log10_root_int(1000) == 3);
    CHECK(log10_root_int(999'999'999) == 8);
    CHECK(log10_root_int(1'000'000'000) == 9);
    CHECK(log10_root_int(2'147'483'647) == 9);
    int power = 100;
    for (int k = 2; k <= 9; ++k) {  // both sides of every power of ten
        INFO("10^" << k);
        CHECK(log10_root_int(power - 1) == k - 1);
        CHECK(log10_root_int(power) == k);
        if (k < 9) power *= 10;
    }
    using tally::detail::java_d2i;
    CHECK(java_d2i(std::nan("")) == 0);
    CHECK(java_d2i(1e300) == 2147483647);
    CHECK(java_d2i(-1e300) == -2147483647 - 1);
    CHECK(java_d2i(-2.9) == -2);
    CHECK(java_d2i(2.9) == 2);
    CHECK(std::isnan(tally::detail::java_max(0.5, std::nan(""))));
    CHECK(std::isnan(tally::detail::java_min(std::nan(""), 1.0)));
    CHECK(!std::signbit(tally::detail::java_max(-0.0, 0.0)));
    CHECK(std::signbit(tally::detail::java_min(0.0, -0.0)));
}

TEST_CASE("Options default to Netflix's builders; bad ones throw naming the parameter", "[concurrency]") {
    const tally::Aimd::Options a;
    CHECK(a.initial_limit == 20);
    CHECK(a.min_limit == 20);
    CHECK(a.max_limit == 200);
    CHECK(a.backoff_ratio == 0.9);
    CHECK(a.timeout_ns == 5'000'000'000ULL);
    const tally::Vegas::Options v;
    CHECK(v.initial_limit == 20);
    CHECK(v.max_concurrency == 1000);
    CHECK(v.smoothing == 1.0);
    CHECK(v.probe_multiplier == 30);
    CHECK(v.alpha(20) == 3);
    CHECK(v.beta(500) == 12);
    CHECK(v.threshold(5000) == 3);
    CHECK(v.increase(150.5) == 152.5);
    CHECK(v.decrease(20.0) == 19.0);
    const tally::Gradient2::Options g;
    CHECK(g.initial_limit == 20);
    CHECK(g.min_limit == 20);
    CHECK(g.max_concurrency == 200);
    CHECK(g.smoothing == 0.2);
    CHECK(g.queue_size == 4);
    CHECK(g.rtt_tolerance == 1.5);
    CHECK(g.long_window == 600);
    CHECK(tally::Aimd().limit() == 20);
    CHECK(tally::Vegas().limit() == 20);
    CHECK(tally::Gradient2().limit() == 20);

    auto throws_with = [](auto make, const std::string& needle) {
        try {
            make();
        } catch (const std::invalid_argument& e) {
            INFO(e.what());
            CHECK(std::string(e.what()).find(needle) != std::string::npos);
            return;
        }
        FAIL("no std::invalid_argument for " << needle);
    };
    throws_with([] { tally::Aimd({.backoff_ratio = 1.0}); }, "backoff_ratio 1.0");
    throws_with([] { tally::Aimd({.backoff_ratio = 0.4}); }, "[0.5, 1)");
    throws_with([] { tally::Aimd({.timeout_ns = 0}); }, "timeout_ns 0");
    throws_with([] { tally::Aimd({.min_limit = 300}); }, "min_limit 300");
    throws_with([] { tally::Vegas({.initial_limit = 0}); }, "initial_limit 0");
    throws_with([] { tally::Vegas({.smoothing = 1.5}); }, "smoothing 1.5");
    throws_with([] { tally::Vegas({.probe_multiplier = 0}); }, "probe_multiplier 0");
    throws_with([] { tally::Vegas({.alpha = nullptr}); }, "non-null");
    throws_with([] { tally::Gradient2({.rtt_tolerance = 0.9}); }, "rtt_tolerance 0.9");
    throws_with([] { tally::Gradient2({.long_window = 0}); }, "long_window 0");
    throws_with([] { tally::Gradient2({.min_limit = 201}); }, "min_limit 201");
    throws_with([] { tally::FixedConcurrency({.limit = -1}); }, "limit -1");
    throws_with([] { tally::PartitionedConcurrencyLimiter<tally::FixedConcurrency>({0.9, 0.2}); }, "above 1");
    throws_with([] { tally::PartitionedConcurrencyLimiter<tally::FixedConcurrency>({0.5, -0.1}); }, "shares[1]");
}

TEST_CASE("Aimd: the rule at hand-picked samples", "[concurrency]") {
    tally::Aimd a({.initial_limit = 30, .min_limit = 10, .max_limit = 32, .backoff_ratio = 0.5, .timeout_ns = 100});
    CHECK(a.on_sample(0, 50, 14, false) == 30);  // 14 * 2 < 30: app-limited, no growth
    CHECK(a.on_sample(0, 50, 15, false) == 31);
    CHECK(a.on_sample(0, 100, 16, false) == 32);    // rtt == timeout is not a timeout
    CHECK(a.on_sample(0, 50, 1000, false) == 32);   // max_limit
    CHECK(a.on_sample(0, 101, 1000, false) == 16);  // timeout: halved
    CHECK(a.on_sample(0, 1, 0, true) == 10);        // drop: (int)(16 * 0.5) = 8, min_limit 10
}

TEST_CASE("Vegas: probing follows probe_seed and lands within [0.5, 1) x multiplier x limit samples", "[concurrency]") {
    for (std::uint64_t seed = 1; seed <= 50; ++seed) {
        tally::Vegas v({.initial_limit = 10, .max_concurrency = 10, .probe_multiplier = 3, .probe_seed = seed});
        // Each first sample sets the no-load RTT; every later sample has a
        // larger RTT, so only a probe can set the no-load RTT to it.
        std::uint64_t rtt = 1000;
        v.on_sample(0, rtt, 10, false);
        int probes = 0;
        for (int i = 0; i < 2000; ++i) {
            const double jitter = v.probe_jitter();
            REQUIRE(jitter >= 0.5);
            REQUIRE(jitter < 1.0);
            const double when = jitter * 3 * v.estimated_limit();
            const int count = v.probe_count() + 1;  // this sample's count
            rtt += 7;
            v.on_sample(0, rtt, 10, false);
            if (v.rtt_noload_ns() == rtt) {
                // The probe comes on the first sample whose count reaches `when`.
                CHECK(static_cast<double>(count) >= when);
                CHECK(static_cast<double>(count - 1) < when);
                CHECK(v.probe_count() == 0);
                ++probes;
            } else {
                CHECK(static_cast<double>(count) < when);
            }
        }
        CHECK(probes > 2000 / 30);
        CHECK(probes <= 2000 / 15 + 1);
    }
    // Same seed, same trajectory; another seed, other probe times.
    auto run = [](std::uint64_t seed) {
        tally::Vegas v({.probe_multiplier = 2, .probe_seed = seed});
        SeqRng g(seed + 100);
        std::vector<int> out;
        for (int i = 0; i < 3000; ++i)
            out.push_back(v.on_sample(0, g.rtt(), static_cast<int>(g.below(100)), g.below(10) == 0));
        return std::pair(out, v.probe_jitter());
    };
    CHECK(run(7) == run(7));
    CHECK(run(7).second != run(8).second);
}

TEST_CASE("Vegas ignores a zero RTT (Java throws)", "[concurrency]") {
    tally::Vegas v;
    v.on_sample(0, 1000, 10, false);
    const auto before = v.probe_count();
    CHECK(v.on_sample(0, 0, 10, false) == 20);
    CHECK(v.on_sample(0, std::uint64_t{1} << 63, 10, false) == 20);
    CHECK(v.probe_count() == before);
}

TEST_CASE("ConcurrencyLimiter: permits, verdicts, release on destruction", "[concurrency]") {
    tally::ConcurrencyLimiter<tally::FixedConcurrency> lim(tally::FixedConcurrency({.limit = 3}));
    CHECK(lim.limit() == 3);
    {
        auto a = lim.try_acquire(1);
        auto b = lim.try_acquire(2);
        auto c = lim.try_acquire(3);
        REQUIRE(a);
        REQUIRE(b);
        REQUIRE(c);
        CHECK(c.inflight_at_start() == 3);
        CHECK(c.limit_at_start() == 3);
        CHECK(c.start_ns() == 3);
        CHECK(lim.inflight() == 3);
        auto d = lim.try_acquire(4);
        CHECK(!d);
        d.success(5);  // no-op on an empty permit
        CHECK(lim.inflight() == 3);
        a.success(10);
        CHECK(lim.inflight() == 2);
        a.success(11);  // a verdict counts once
        CHECK(lim.inflight() == 2);
        auto moved = std::move(b);
        CHECK(!b);  // NOLINT(bugprone-use-after-move): a moved-from permit is empty
        CHECK(lim.inflight() == 2);
        moved.ignore();
        CHECK(lim.inflight() == 1);
    }  // c destroyed without a verdict: ignored, released
    CHECK(lim.inflight() == 0);
    auto e = lim.try_acquire(0);
    auto f = lim.try_acquire(0);
    e = std::move(f);  // e's old permit released by the assignment
    CHECK(lim.inflight() == 1);
}

TEST_CASE("ConcurrencyLimiter: samples reach the algorithm exactly as on_sample would see them", "[concurrency]") {
    tally::ConcurrencyLimiter<tally::Gradient2> lim;
    tally::Gradient2 oracle;
    SeqRng g(5);
    std::vector<tally::ConcurrencyLimiter<tally::Gradient2>::Permit> held;
    std::uint64_t now = 1'000'000;
    for (int i = 0; i < 20000; ++i) {
        now += g.below(1000);
        if (g.below(2) == 0) {
            auto p = lim.try_acquire(now);
            if (p)
                held.push_back(std::move(p));
            else
                CHECK(lim.inflight() >= lim.limit());
        } else if (!held.empty()) {
            const std::size_t k = g.below(held.size());
            auto p = std::move(held[k]);
            held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
            const std::uint64_t end = now + g.below(5'000'000);
            const std::uint64_t verdict = g.below(10);
            if (verdict == 0) {
                p.ignore();
            } else {
                oracle.on_sample(p.start_ns(), end - p.start_ns(), p.inflight_at_start(), verdict == 1);
                verdict == 1 ? p.dropped(end) : p.success(end);
            }
        }
        REQUIRE(lim.limit() == oracle.limit());
        REQUIRE(lim.inflight() == static_cast<int>(held.size()));
    }
    CHECK(lim.algorithm().estimated_limit() == oracle.estimated_limit());
}

TEST_CASE("ConcurrencyLimiter: a lowered limit admits nobody until enough permits return", "[concurrency]") {
    tally::ConcurrencyLimiter<tally::Aimd> lim(
        tally::Aimd({.initial_limit = 10, .min_limit = 1, .backoff_ratio = 0.5}));
    std::vector<tally::ConcurrencyLimiter<tally::Aimd>::Permit> held;
    for (int i = 0; i < 10; ++i) held.push_back(lim.try_acquire(0));
    CHECK(!lim.try_acquire(0));
    held.back().dropped(1);  // limit 10 -> 5, 9 in flight
    held.pop_back();
    CHECK(lim.limit() == 5);
    CHECK(held.front().limit_at_start() == 10);
    CHECK(!lim.try_acquire(1));
    while (held.size() > 4) {
        held.back().ignore();
        held.pop_back();
    }
    const auto p = lim.try_acquire(2);
    REQUIRE(p);
    CHECK(p.inflight_at_start() == 5);
    CHECK(p.limit_at_start() == 5);
}

TEST_CASE("PartitionedConcurrencyLimiter: each partition keeps its share, borrowing only within the limit",
          "[concurrency]") {
    tally::PartitionedConcurrencyLimiter<tally::FixedConcurrency> lim({0.9, 0.1},
                                                                      tally::FixedConcurrency({.limit = 20}));
    CHECK(lim.share_limit(0) == 18);
    CHECK(lim.share_limit(1) == 2);
    using Permit = tally::PartitionedConcurrencyLimiter<tally::FixedConcurrency>::Permit;
    std::vector<Permit> batch, live;
    // Batch borrows the whole idle limit...
    for (Permit p; (p = lim.try_acquire(1, 0));) batch.push_back(std::move(p));
    CHECK(batch.size() == 20);
    CHECK(lim.inflight() == 20);
    // ...and live still gets its 18, never more.
    for (Permit p; (p = lim.try_acquire(0, 0));) live.push_back(std::move(p));
    CHECK(live.size() == 18);
    CHECK(lim.inflight(0) == 18);
    CHECK(lim.inflight(1) == 20);
    // Batch, over its share and the total over the limit, gets nothing, even
    // after some of its own come back, until the total is below the limit.
    batch.resize(10);
    CHECK(lim.inflight() == 28);
    CHECK(!lim.try_acquire(1, 0));
    batch.clear();
    CHECK(lim.inflight() == 18);
    CHECK(lim.try_acquire(1, 0));  // borrowing: total 18 < 20
    live.clear();
    CHECK(lim.inflight() == 0);
    CHECK(!lim.try_acquire(2, 0));  // no such partition
}

TEST_CASE("PartitionedConcurrencyLimiter: shares follow the adaptive limit", "[concurrency]") {
    tally::PartitionedConcurrencyLimiter<tally::Aimd> lim(
        {0.75, 0.25}, tally::Aimd({.initial_limit = 40, .min_limit = 4, .backoff_ratio = 0.5}));
    CHECK(lim.share_limit(1) == 10);
    lim.try_acquire(0, 0).dropped(1);
    CHECK(lim.limit() == 20);
    CHECK(lim.share_limit(0) == 15);
    CHECK(lim.share_limit(1) == 5);
    CHECK(lim.inflight(0) == 0);
}

TEST_CASE("acquire_until: waits not past its deadline, wakes on release, oldest or newest first", "[concurrency]") {
    using Lim = tally::ConcurrencyLimiter<tally::FixedConcurrency>;
    {
        Lim lim(tally::FixedConcurrency({.limit = 1}));
        auto held = lim.try_acquire(0);
        const std::uint64_t t0 = tally::SteadyClock::now_ns();
        CHECK(!lim.acquire_until(t0));  // already past
        const std::uint64_t deadline = t0 + 2'000'000;
        CHECK(!lim.acquire_until(deadline));
        CHECK(tally::SteadyClock::now_ns() >= deadline);
        CHECK(lim.waiters() == 0);
        held.ignore();
        CHECK(lim.acquire_for(1'000'000'000));
    }
    for (auto order : {tally::WaitOrder::fifo, tally::WaitOrder::lifo}) {
        Lim lim(tally::FixedConcurrency({.limit = 1}), order);
        auto held = lim.try_acquire(0);
        std::vector<int> got_order;
        std::mutex m;
        std::vector<std::thread> threads;
        for (int i = 0; i < 3; ++i) {
            threads.emplace_back([&, i] {
                auto p = lim.acquire_for(60'000'000'000ULL);
                REQUIRE(p);
                {
                    std::lock_guard<std::mutex> lk(m);
                    got_order.push_back(i);
                }
                p.success(tally::SteadyClock::now_ns());
            });
            while (lim.waiters() != i + 1) std::this_thread::yield();  // registered in order
        }
        held.success(1);
        for (auto& t : threads) t.join();
        const std::vector<int> want =
            order == tally::WaitOrder::fifo ? std::vector<int>{0, 1, 2} : std::vector<int>{2, 1, 0};
        CHECK(got_order == want);
    }
}
