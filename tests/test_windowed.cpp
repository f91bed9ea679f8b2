// Tests for tally/window/windowed.hpp.
#include <tally/window/windowed.hpp>

#include <tally/sketch/membership/bloom_filter.hpp>
#include <tally/sketch/frequency/count_min.hpp>
#include <tally/sketch/distinct/hyperloglog.hpp>
#include <tally/sketch/sampling/reservoir.hpp>
#include <tally/sketch/quantiles/tdigest.hpp>
#include <tally/sketch/frequency/top_k.hpp>
#include <tally/sketch/sampling/weighted_reservoir.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "catch.hpp"
#include "merge_laws.hpp"
#include "test_support.hpp"

using tally::Windowed;
using tally::test::Rng;
using u64 = std::uint64_t;

namespace {

// An exact counter that counts its merges and copies: the oracle for the
// window's bookkeeping and the meter for the query-cost claim.
struct Counting {
    u64 n = 0;
    static inline u64 merges = 0;
    static inline u64 copies = 0;

    Counting() = default;
    Counting(const Counting& o) : n(o.n) { ++copies; }
    Counting& operator=(const Counting& o) {
        n = o.n;
        ++copies;
        return *this;
    }
    void add(u64 w = 1) noexcept { n += w; }
    bool empty() const noexcept { return n == 0; }
    bool mergeable_with(const Counting&) const noexcept { return true; }
    Counting& merge(const Counting& o) {
        ++merges;
        n += o.n;
        return *this;
    }
    std::vector<std::byte> serialize() const {
        tally::ByteWriter w;
        w.u64(n);
        return w.take();
    }
    static Counting deserialize(std::span<const std::byte> b) {
        tally::ByteReader r(b);
        Counting c;
        c.n = r.u64();
        r.expect_end();
        return c;
    }
};
static_assert(tally::MergeableSummary<Counting>);

static_assert(tally::MergeableSummary<Windowed<tally::HyperLogLog, 8>>);
static_assert(tally::MergeableSummary<Windowed<tally::TDigest, 61>>);
static_assert(tally::MergeableSummary<Windowed<tally::CountMin<>, 8>>);
static_assert(tally::MergeableSummary<Windowed<tally::TopK<std::string>, 8>>);
static_assert(tally::MergeableSummary<Windowed<tally::BloomFilter<>, 8>>);
static_assert(tally::MergeableSummary<Windowed<tally::Reservoir<u64>, 8>>);
static_assert(tally::MergeableSummary<Windowed<Counting, 2>>);
// Samplers get a generator per bucket; deterministic summaries are copied.
static_assert(Windowed<tally::Reservoir<u64>, 8>::reseeds_buckets);
static_assert(Windowed<tally::WeightedReservoir<u64>, 8>::reseeds_buckets);
static_assert(!Windowed<tally::TopK<u64>, 8>::reseeds_buckets);
static_assert(!Windowed<tally::CountMin<>, 8>::reseeds_buckets);
static_assert(!Windowed<tally::HyperLogLog, 8>::reseeds_buckets);

constexpr u64 W = 1000;  // bucket width used throughout

// The exact event log: which events the ring accepts (same rules as the
// window: newest never moves back, an event older than Slots buckets is
// dropped) and which accepted events lie in the span of view(now).
template <std::size_t Slots>
struct Log {
    struct Event {
        u64 t;
        u64 item;
    };
    std::vector<Event> accepted;
    u64 newest = 0;
    u64 dropped = 0;

    void add(u64 t, u64 item) {
        const u64 b = t / W;
        newest = std::max(newest, b);
        if (newest - b >= Slots)
            ++dropped;
        else
            accepted.push_back({t, item});
    }
    std::vector<u64> span(u64 now) {
        newest = std::max(newest, now / W);
        std::vector<u64> out;
        for (const Event& e : accepted)
            if (e.t / W + (Slots - 1) >= newest) out.push_back(e.item);
        return out;
    }
};

// A random stream: mostly in-order events, idle gaps of up to 2*Slots
// buckets, late events within the ring and too-old ones; a view now and then.
// check(view, span_items) is called at each query.
template <std::size_t Slots, class S, class Item, class Check>
void run_stream(Windowed<S, Slots>& w, u64 seed, std::size_t steps, Item&& item_of, Check&& check,
                int query_every = 7) {
    Rng rng(seed);
    Log<Slots> log;
    u64 now = 0;
    u64 serial = 0;
    std::size_t queries = 0;
    for (std::size_t i = 0; i < steps; ++i) {
        const u64 r = rng.below(1000);
        if (r < 4) {
            now += W * (1 + rng.below(2 * Slots));  // idle gap
        } else if (r < 300) {
            now += rng.below(W / 3);
        }
        u64 t = now;
        const u64 kind = rng.below(100);
        if (kind < 10) {
            const u64 back = rng.below(W * (Slots + 2));  // late, sometimes too old
            t = now >= back ? now - back : 0;
        }
        const u64 id = serial++;
        item_of(w, t, id);
        log.add(t, id);
        if (rng.below(static_cast<u64>(query_every)) == 0) {
            const u64 q = rng.below(4) == 0 && now >= W ? now - rng.below(W) : now;  // sometimes behind
            const std::vector<u64> span = log.span(q);
            check(w.view(q), span);
            ++queries;
        }
    }
    CHECK(w.dropped() == log.dropped);
    CHECK(w.newest_bucket() == log.newest);
    CHECK(queries > steps / static_cast<std::size_t>(2 * query_every));
    CHECK(log.dropped > 0);
}

u64 key_of(u64 id) { return id * 0x9e3779b97f4a7c15ull >> 40; }  // ids -> many distinct keys
u64 hot_key_of(u64 id) {                                              // Zipf-like keys for TopK
    const u64 h = id * 0x2545F4914F6CDD1Dull;
    return (h >> 60) < 8 ? (h >> 60) : (h >> 20) % 5000;
}
// The stream weight, whichever name the summary gives it (total(), or the
// older seen() / count()).
template <class S>
double total_of(const S& s) {
    if constexpr (requires { s.total(); })
        return static_cast<double>(s.total());
    else if constexpr (requires { s.items_seen(); })
        return static_cast<double>(s.items_seen());
    else
        return static_cast<double>(s.count());
}

double value_of(u64 id) { return std::exp(static_cast<double>((id * 0x9e3779b97f4a7c15ull) >> 11) * 0x1.0p-53 * 8.0); }

}  // namespace

TEST_CASE("Windowed: constructor validates bucket_ns and the prototype", "[windowed]") {
    using WH = Windowed<tally::HyperLogLog, 8>;
    CHECK_THROWS_WITH(WH(0, tally::HyperLogLog(12)),
                      "tally::Windowed::Windowed: bucket_ns 0 is out of range [1, 2635249153387078802]");
    CHECK_THROWS_WITH((Windowed<Counting, 2>(0, Counting{})),
                      "tally::Windowed::Windowed: bucket_ns 0 is out of range [1, 18446744073709551615]");
    tally::HyperLogLog used(12);
    used.add(1);
    CHECK_THROWS_WITH(WH(10, used),
                      "tally::Windowed::Windowed: prototype is not empty (pass a summary with no events)");
    CHECK_NOTHROW(WH(WH::max_bucket_ns, tally::HyperLogLog(12)));
    CHECK(WH(10, tally::HyperLogLog(12)).window_ns() == 70);
}

TEST_CASE("Windowed: exact counts over random streams (the window's bookkeeping)", "[windowed]") {
    auto run = [](auto tag, u64 seed) {
        constexpr std::size_t Slots = decltype(tag)::value;
        Windowed<Counting, Slots> w(W, Counting{});
        run_stream(
            w, seed, tally::test::big(40000, 8000), [](auto& win, u64 t, u64) { win.add(t); },
            [](const Counting& v, const std::vector<u64>& span) { REQUIRE(v.n == span.size()); }, 3);
    };
    run(std::integral_constant<std::size_t, 2>{}, 1);
    run(std::integral_constant<std::size_t, 3>{}, 2);
    run(std::integral_constant<std::size_t, 8>{}, 3);
    run(std::integral_constant<std::size_t, 61>{}, 4);
}

TEST_CASE("Windowed: the span is bucket-aligned: [(B - Slots + 1) * w, (B + 1) * w)", "[windowed]") {
    Windowed<Counting, 4> w(10, Counting{});
    w.add(29);  // bucket 2
    w.add(30);  // bucket 3
    w.add(59);  // bucket 5
    CHECK(w.view(59).n == 3);  // buckets 2..5
    CHECK(w.view(60).n == 2);  // buckets 3..6: bucket 2 left
    CHECK(w.view(20).n == 2);  // behind: read as of newest (6), never back
    w.add(25);                 // bucket 2, older than the ring: dropped
    CHECK(w.dropped() == 1);
    w.add(31);  // late, bucket 3 still in the ring
    CHECK(w.view(69).n == 3);
    CHECK(w.view(90).n == 0);  // idle gap: everything left
    CHECK(w.empty());
}

TEST_CASE("Windowed<HyperLogLog>: view equals the sketch of the span, register for register", "[windowed]") {
    Windowed<tally::HyperLogLog, 8> w(W, tally::HyperLogLog(10));
    run_stream(
        w, 11, tally::test::big(30000, 6000), [](auto& win, u64 t, u64 id) { win.add(t, key_of(id)); },
        [](const tally::HyperLogLog& v, const std::vector<u64>& span) {
            tally::HyperLogLog ref(10);
            for (u64 id : span) ref.add(key_of(id));
            REQUIRE(std::ranges::equal(v.registers(), ref.registers()));
        });
}

TEST_CASE("Windowed<CountMin>: view equals the sketch of the span, counter for counter", "[windowed]") {
    Windowed<tally::CountMin<>, 8> w(W, tally::CountMin<>(64, 4));
    run_stream(
        w, 12, tally::test::big(30000, 6000), [](auto& win, u64 t, u64 id) { win.add(t, hot_key_of(id), 1 + id % 3); },
        [](const tally::CountMin<>& v, const std::vector<u64>& span) {
            tally::CountMin<> ref(64, 4);
            for (u64 id : span) ref.add(hot_key_of(id), 1 + id % 3);
            REQUIRE(v.serialize() == ref.serialize());
        });
}

TEST_CASE("Windowed<BloomFilter>: view equals the filter of the span, bit for bit", "[windowed]") {
    Windowed<tally::BloomFilter<>, 8> w(W, tally::BloomFilter<>(2000, 0.01));
    run_stream(
        w, 13, tally::test::big(20000, 4000), [](auto& win, u64 t, u64 id) { win.add(t, key_of(id)); },
        [](const tally::BloomFilter<>& v, const std::vector<u64>& span) {
            tally::BloomFilter<> ref(2000, 0.01);
            for (u64 id : span) ref.add(key_of(id));
            REQUIRE(v.serialize() == ref.serialize());
            for (u64 id : span) REQUIRE(v.contains(key_of(id)));  // no false negatives in the span
        });
}

TEST_CASE("Windowed<TDigest>: count, min, max exact; quantiles within the digest's rank error", "[windowed]") {
    Windowed<tally::TDigest, 8> w(W, tally::TDigest(100));
    double worst = 0;
    run_stream(
        w, 14, tally::test::big(60000, 8000), [](auto& win, u64 t, u64 id) { win.add(t, value_of(id)); },
        [&](const tally::TDigest& v, const std::vector<u64>& span) {
            REQUIRE(total_of(v) == static_cast<double>(span.size()));
            if (span.empty()) return;
            std::vector<double> xs;
            for (u64 id : span) xs.push_back(value_of(id));
            std::sort(xs.begin(), xs.end());
            REQUIRE(v.min() == xs.front());
            REQUIRE(v.max() == xs.back());
            if (xs.size() < 200) return;
            const double n = static_cast<double>(xs.size());
            for (double q : {0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99}) {
                const double x = v.quantile(q);
                const double lo = static_cast<double>(std::lower_bound(xs.begin(), xs.end(), x) - xs.begin()) / n;
                const double hi = static_cast<double>(std::upper_bound(xs.begin(), xs.end(), x) - xs.begin()) / n;
                const double err = q < lo ? lo - q : (q > hi ? q - hi : 0.0);
                worst = std::max(worst, err);
                REQUIRE(err <= 0.01);
            }
        },
        25);
    INFO("worst rank error " << worst);
    CHECK(worst < 0.01);
}

TEST_CASE("Windowed<TopK>: Space-Saving bounds hold for every item of the span", "[windowed]") {
    constexpr std::size_t k = 32;
    Windowed<tally::TopK<u64>, 8> w(W, tally::TopK<u64>(k));
    run_stream(
        w, 15, tally::test::big(30000, 6000), [](auto& win, u64 t, u64 id) { win.add(t, hot_key_of(id)); },
        [](const tally::TopK<u64>& v, const std::vector<u64>& span) {
            std::unordered_map<u64, u64> f;
            for (u64 id : span) ++f[hot_key_of(id)];
            const u64 n = span.size();
            REQUIRE(v.total() == n);
            REQUIRE(v.estimate(u64{1} << 60) * k <= n);  // an item never added: bound <= N / k
            for (const auto& [key, c] : f) {
                REQUIRE(v.lower_bound(key) <= c);
                REQUIRE(v.estimate(key) >= c);
                REQUIRE((v.estimate(key) - c) * k <= n);  // error <= N / k
                if (c * k > n) REQUIRE(v.contains(key));  // heavy hitters are monitored
            }
        });
}

TEST_CASE("Windowed<Reservoir>: the sample is drawn from the span, of size min(k, n)", "[windowed]") {
    Windowed<tally::Reservoir<u64>, 8> w(W, tally::Reservoir<u64>(16, 99));
    run_stream(
        w, 16, tally::test::big(30000, 6000), [](auto& win, u64 t, u64 id) { win.add(t, id); },
        [](const tally::Reservoir<u64>& v, const std::vector<u64>& span) {
            REQUIRE(total_of(v) == static_cast<double>(span.size()));
            REQUIRE(v.size() == std::min<std::size_t>(16, span.size()));
            const std::set<u64> in(span.begin(), span.end());
            std::set<u64> seen;
            for (u64 id : v.sample()) {
                REQUIRE(in.count(id) == 1);
                REQUIRE(seen.insert(id).second);
            }
        });
}

namespace {

// Windowed<Reservoir> over n events spread over `buckets` buckets (some late),
// many independent prototypes: how often each event is sampled, and how often
// two events at the same position of two buckets are sampled together.
struct SampleStats {
    std::vector<u64> hits;
    u64 same_pos = 0, cross_pairs = 0;
};

// m events per bucket in `buckets` buckets; `naive` builds the buckets as
// plain copies of one prototype (what Windowed must not do).
SampleStats sample_stats(bool naive, std::size_t trials, std::size_t k, std::size_t m, std::size_t buckets) {
    SampleStats st;
    st.hits.assign(m * buckets, 0);
    for (std::size_t trial = 0; trial < trials; ++trial) {
        const tally::Reservoir<u64> proto(k, 1000 + trial);
        std::vector<u64> sample;
        if (naive) {
            std::vector<tally::Reservoir<u64>> bs(buckets, proto);
            for (std::size_t b = 0; b < buckets; ++b)
                for (std::size_t i = 0; i < m; ++i) bs[b].add(b * m + i);
            tally::Reservoir<u64> all = proto;
            for (auto& b : bs) all.merge(b);
            sample.assign(all.sample().begin(), all.sample().end());
        } else {
            Windowed<tally::Reservoir<u64>, 8> w(W, proto);
            // The last two events of every bucket arrive late, after all buckets.
            for (std::size_t b = 0; b < buckets; ++b)
                for (std::size_t i = 0; i + 2 < m; ++i) w.add(b * W + i, b * m + i);
            for (std::size_t b = 0; b < buckets; ++b)
                for (std::size_t i = m - 2; i < m; ++i) w.add(b * W + i, b * m + i);
            const auto& v = w.view((buckets - 1) * W + W / 2);
            sample.assign(v.sample().begin(), v.sample().end());
        }
        for (u64 id : sample) ++st.hits[id];
        for (u64 a : sample)
            for (u64 b : sample)
                if (a / m < b / m) {
                    ++st.cross_pairs;
                    if (a % m == b % m) ++st.same_pos;
                }
    }
    return st;
}

}  // namespace

TEST_CASE("Windowed<Reservoir>: uniform over the window; shared generators would not be", "[windowed][big]") {
    const std::size_t trials = tally::test::big(6000, 1500);
    constexpr std::size_t k = 4, m = 20, buckets = 4;
    for (bool naive : {false, true}) {
        const SampleStats st = sample_stats(naive, trials, k, m, buckets);
        // Inclusion: each of the 40 events with probability k / 40, 5 sigma.
        const double p = static_cast<double>(k) / (m * buckets);
        const double mean = p * static_cast<double>(trials);
        const double sd = std::sqrt(mean * (1 - p));
        u64 worst = 0;
        for (u64 h : st.hits) worst = std::max<u64>(worst, static_cast<u64>(std::fabs(static_cast<double>(h) - mean)));
        // Pairs from two buckets: same in-bucket position with probability 1/m.
        const double ratio = static_cast<double>(st.same_pos) / static_cast<double>(st.cross_pairs);
        INFO((naive ? "naive copies" : "Windowed") << ": same-position ratio " << ratio << ", worst inclusion deviation "
                                                   << worst << " (sd " << sd << ")");
        if (!naive) {
            CHECK(static_cast<double>(worst) <= 5 * sd);
            CHECK(std::fabs(ratio - 1.0 / m) < 0.03);
        } else {
            CHECK(std::fabs(ratio - 1.0 / m) > 0.1);  // the negative control fails the law
        }
    }
}

TEST_CASE("Windowed: a query costs at most one merge; a roll O(1) merges amortized", "[windowed]") {
    auto run = [](auto tag, int adds_per_view, u64 step) {
        constexpr std::size_t Slots = decltype(tag)::value;
        Windowed<Counting, Slots> w(W, Counting{});
        u64 views = 0, rolls = 0, max_view_merges = 0;
        const u64 m0 = Counting::merges;
        u64 t = 0;
        for (int round = 0; round < 20000; ++round) {
            for (int a = 0; a < adds_per_view; ++a) {
                t += step;
                if (t / W != (t - step) / W) ++rolls;
                w.add(t);
            }
            const u64 before = Counting::merges;
            REQUIRE(w.view(t).n > 0);
            const u64 second = Counting::merges;
            (void)w.view(t);  // cached: no merge
            REQUIRE(Counting::merges == second);
            max_view_merges = std::max(max_view_merges, second - before);
            ++views;
        }
        const u64 merges = Counting::merges - m0;
        INFO("Slots " << Slots << ": " << merges << " merges for " << views << " views and " << rolls << " rolls");
        // Two-Stacks: <= 1 per view, <= 3 per roll amortized (+ one block's start-up).
        CHECK(merges <= views + 3 * rolls + Slots);
        // The naive window merges Slots - 1 buckets per view.
        CHECK(merges * 4 < views * (Slots - 1));
        return max_view_merges;
    };
    run(std::integral_constant<std::size_t, 61>{}, 1, W / 16);
    run(std::integral_constant<std::size_t, 61>{}, 8, W / 16);
    run(std::integral_constant<std::size_t, 8>{}, 1, W / 16);
    run(std::integral_constant<std::size_t, 8>{}, 64, W / 1024);
}

TEST_CASE("Windowed: a late event costs adds, not merges", "[windowed]") {
    Windowed<Counting, 61> w(W, Counting{});
    for (u64 b = 0; b < 200; ++b) w.add(b * W);
    REQUIRE(w.view(199 * W).n == 61);
    const u64 before = Counting::merges;
    for (int i = 0; i < 1000; ++i) {
        w.add(150 * W + static_cast<u64>(i) % (40 * W));  // late, inside the ring
        REQUIRE(w.view(199 * W).n == 62 + static_cast<u64>(i));
    }
    CHECK(Counting::merges - before <= 1000 + 2);  // the view's merge with the current bucket
}

TEST_CASE("Windowed: an S::merge that throws leaves the window valid", "[windowed]") {
    // Two buckets whose t-digest weights cannot be summed: the view's merge refuses.
    Windowed<tally::TDigest, 4> w(W, tally::TDigest(100));
    w.add(0, 1.0, 1e308);
    w.add(W, 2.0, 1e308);
    CHECK_THROWS_AS((void)w.view(W), std::invalid_argument);
    CHECK_THROWS_AS((void)w.view(2 * W), std::invalid_argument);
    w.add(2 * W, 3.0);
    CHECK(total_of(w.view(4 * W)) == 1e308 + 1);  // bucket 0 left: buckets 1..4
    // A late event the bucket takes but an aggregate cannot: kept, and reported by the view.
    Windowed<tally::TDigest, 4> v(W, tally::TDigest(100));
    v.add(0, 1.0, 1e308);
    v.add(2 * W, 5.0);
    CHECK(total_of(v.view(2 * W)) == 1e308 + 1);
    v.add(W, 3.0, 1e308);  // bucket 1 alone holds it fine; the prefix aggregate overflows
    CHECK_THROWS_AS((void)v.view(2 * W), std::invalid_argument);
    CHECK(total_of(v.view(4 * W)) == 1e308);  // buckets 1..4: the late event is there
    // Merging windows whose buckets overflow: invalid_argument, then still usable.
    Windowed<tally::TDigest, 4> a(W, tally::TDigest(100)), b(W, tally::TDigest(100));
    a.add(W, 1.0, 1e308);
    b.add(W, 1.0, 1e308);
    CHECK_THROWS_AS(a.merge(b), std::invalid_argument);
    CHECK(total_of(a.view(W)) == 1e308);
}

TEST_CASE("Windowed: merge laws", "[windowed]") {
    auto fill = [](auto& w, u64 seed, u64 start, std::size_t n) {
        Rng rng(seed);
        for (std::size_t i = 0; i < n; ++i) w.add(start + rng.below(12 * W), key_of(rng.next()));
        return w;
    };
    SECTION("HyperLogLog") {
        using WH = Windowed<tally::HyperLogLog, 8>;
        const WH empty(W, tally::HyperLogLog(10));
        WH a = empty, b = empty, c = empty;
        fill(a, 1, 0, 400);
        fill(b, 2, 3 * W, 400);
        fill(c, 3, 9 * W, 400);
        tally::test::check_merge_laws(empty, a, b, c);
        tally::test::check_incompatible_merge(a, WH(W + 1, tally::HyperLogLog(10)));
        tally::test::check_incompatible_merge(a, WH(W, tally::HyperLogLog(11)));
        CHECK_THROWS_WITH(a.merge(WH(W + 1, tally::HyperLogLog(10))),
                          "tally::Windowed::merge: bucket widths differ (1000 ns vs 1001 ns)");
        CHECK_THROWS_WITH(a.merge(WH(W, tally::HyperLogLog(11))),
                          "tally::Windowed::merge: the summaries' parameters differ (S::mergeable_with is false)");
        WH self = a;
        self.merge(self);
        WH twice = a;
        twice.merge(WH(a));
        CHECK(self.serialize() == twice.serialize());
    }
    SECTION("CountMin and BloomFilter") {
        using WC = Windowed<tally::CountMin<>, 8>;
        const WC ec(W, tally::CountMin<>(32, 3));
        WC a = ec, b = ec, c = ec;
        tally::test::check_merge_laws(ec, fill(a, 4, 0, 300), fill(b, 5, 5 * W, 300), fill(c, 6, 2 * W, 300));
        using WB = Windowed<tally::BloomFilter<>, 8>;
        const WB eb(W, tally::BloomFilter<>(500, 0.01));
        WB x = eb, y = eb, z = eb;
        tally::test::check_merge_laws(eb, fill(x, 7, 0, 300), fill(y, 8, 5 * W, 300), fill(z, 9, 2 * W, 300));
    }
    SECTION("Counting: merged per-thread windows count exactly the union's span") {
        Windowed<Counting, 8> a(W, Counting{}), b(W, Counting{});
        Log<8> la, lb, all;
        Rng rng(10);
        u64 ta = 0, tb = 0;
        for (int i = 0; i < 3000; ++i) {
            ta += rng.below(W / 4);
            tb += rng.below(W / 3);
            a.add(ta);
            la.add(ta, 0);
            b.add(tb);
            lb.add(tb, 0);
            if (i % 97 == 0) {
                Windowed<Counting, 8> m = a;
                m.merge(b);
                const u64 now = std::max(ta, tb);
                Log<8> u;  // union of what each side accepted, windowed at the later newest
                u.accepted = la.accepted;
                u.accepted.insert(u.accepted.end(), lb.accepted.begin(), lb.accepted.end());
                u.newest = std::max(la.newest, lb.newest);
                REQUIRE(m.view(now).n == u.span(now).size());
            }
        }
    }
}

namespace {

template <class WS>
void check_round_trip(const WS& w, u64 now) {
    const auto bytes = w.serialize();
    WS back = WS::deserialize(std::span<const std::byte>(bytes));
    CHECK(back.serialize() == bytes);
    WS orig = w;
    CHECK(orig.view(now).serialize() == back.view(now).serialize());
    CHECK(back.dropped() == w.dropped());
    CHECK(back.newest_bucket() == w.newest_bucket());
}

// 600 events at random times (one in ten late), each through add(w, t, value).
template <class WS, class Add>
WS filled(WS w, Add&& add) {
    Rng rng(77);
    u64 t = 5 * W;
    return tally::test::filled(std::move(w), 600, [&](WS& x, u64) {
        t += rng.below(W / 20);
        add(x, rng.below(10) == 0 ? t - rng.below(10 * W) : t, rng.next());
    });
}

}  // namespace

TEST_CASE("Windowed: serialization round trips for all six sketches", "[windowed]") {
    const u64 now = 40 * W;
    auto hll = filled(Windowed<tally::HyperLogLog, 8>(W, tally::HyperLogLog(12)),
                      [](auto& w, u64 t, u64 x) { w.add(t, x); });
    auto cm = filled(Windowed<tally::CountMin<>, 8>(W, tally::CountMin<>(64, 4)),
                     [](auto& w, u64 t, u64 x) { w.add(t, x % 50); });
    auto bf = filled(Windowed<tally::BloomFilter<>, 8>(W, tally::BloomFilter<>(300, 0.01)),
                     [](auto& w, u64 t, u64 x) { w.add(t, x); });
    auto td = filled(Windowed<tally::TDigest, 8>(W, tally::TDigest(50)),
                     [](auto& w, u64 t, u64 x) { w.add(t, static_cast<double>(x % 1000)); });
    auto tk = filled(Windowed<tally::TopK<u64>, 8>(W, tally::TopK<u64>(8)),
                     [](auto& w, u64 t, u64 x) { w.add(t, x % 20); });
    auto rs = filled(Windowed<tally::Reservoir<u64>, 8>(W, tally::Reservoir<u64>(5, 3)),
                     [](auto& w, u64 t, u64 x) { w.add(t, x); });
    check_round_trip(hll, now);
    check_round_trip(cm, now);
    check_round_trip(bf, now);
    check_round_trip(td, now);
    check_round_trip(tk, now);
    check_round_trip(rs, now);
    // A deserialized reservoir window continues exactly as the original.
    auto rs2 = decltype(rs)::deserialize(rs.serialize());
    for (u64 i = 0; i < 100; ++i) {
        rs.add(now + i * 37, i);
        rs2.add(now + i * 37, i);
    }
    CHECK(rs.serialize() == rs2.serialize());
    CHECK(rs.view(now + 5000).serialize() == rs2.view(now + 5000).serialize());
}

TEST_CASE("Windowed: hostile bytes raise FormatError", "[windowed]") {
    using WH = Windowed<tally::HyperLogLog, 4>;
    WH w(W, tally::HyperLogLog(8));
    for (u64 i = 0; i < 50; ++i) w.add(3 * W + i * 40, i);
    const auto good = w.serialize();
    tally::test::check_truncations_throw<WH>(good);
    tally::test::check_corruptions_safe<WH>(good, 5);
    tally::test::check_corruptions_safe<Windowed<tally::Reservoir<u64>, 3>>(
        filled(Windowed<tally::Reservoir<u64>, 3>(W, tally::Reservoir<u64>(3, 1)), [](auto& x, u64 t, u64 v) {
            x.add(t, v);
        }).serialize(),
        6);
    tally::test::check_corruptions_safe<Windowed<tally::TDigest, 3>>(
        filled(Windowed<tally::TDigest, 3>(W, tally::TDigest(20)), [](auto& x, u64 t, u64 v) {
            x.add(t, static_cast<double>(v % 100));
        }).serialize(),
        7);

    auto patch = [&](std::size_t off, std::initializer_list<unsigned> bytes) {
        auto b = good;
        std::size_t i = off;
        for (unsigned v : bytes) b[i++] = static_cast<std::byte>(v);
        return b;
    };
    auto parse = [](const std::vector<std::byte>& b) { return WH::deserialize(std::span<const std::byte>(b)); };
    CHECK_THROWS_WITH(parse(patch(8, {5})), "tally::Windowed: 5 slots where 4 were expected");
    CHECK_THROWS_WITH(parse(patch(12, {0, 0, 0, 0, 0, 0, 0, 0})), "tally: Windowed: bucket_ns out of range");
    CHECK_THROWS_WITH(parse(patch(20, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})),
                      "tally: Windowed: newest bucket lies beyond 2^64 - 1 ns");
    // prototype length far beyond the input: refused before any allocation
    CHECK_THROWS_WITH(parse(patch(36, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})),
                      "tally: Windowed: nested summary longer than the bytes that remain");
    // the nested prototype is checked by its own family
    CHECK_THROWS_AS(parse(patch(44 + 4, {3})), tally::FormatError);

    // Crafted bodies.
    auto frame = [](std::uint32_t slots, u64 bucket, u64 newest) {
        tally::ByteWriter b;
        b.header(tally::detail::windowed_family, 1);
        b.u32(slots);
        b.u64(bucket);
        b.u64(newest);
        b.u64(0);
        return b;
    };
    auto nest = [](tally::ByteWriter& b, const std::vector<std::byte>& s) {
        b.u64(s.size());
        b.bytes(s);
    };
    tally::HyperLogLog full(8);
    full.add(1);
    {
        auto b = frame(4, W, 10);
        nest(b, full.serialize());
        CHECK_THROWS_WITH(parse(b.take()), "tally: Windowed: prototype holds events");
    }
    {
        auto b = frame(4, W, 10);
        nest(b, tally::HyperLogLog(8).serialize());
        b.u8(2);
        CHECK_THROWS_WITH(parse(b.take()), "tally: Windowed: bucket flag is neither 0 nor 1");
    }
    {
        auto b = frame(4, W, 10);
        nest(b, tally::HyperLogLog(8).serialize());
        b.u8(1);
        nest(b, tally::HyperLogLog(9).serialize());
        CHECK_THROWS_WITH(parse(b.take()), "tally: Windowed: a bucket's parameters differ from the prototype's");
    }
    {
        auto b = frame(4, W, 1);  // oldest two buckets would be -2 and -1
        nest(b, tally::HyperLogLog(8).serialize());
        b.u8(1);
        nest(b, full.serialize());
        CHECK_THROWS_WITH(parse(b.take()), "tally: Windowed: events in a bucket before index 0");
    }
    {
        auto b = frame(4, W, 10);
        nest(b, tally::HyperLogLog(8).serialize());
        for (int i = 0; i < 4; ++i) b.u8(0);
        const auto ok = b.take();
        CHECK_NOTHROW(parse(ok));
        auto longer = ok;
        longer.push_back(std::byte{0});
        CHECK_THROWS_WITH(parse(longer), "tally: 1 trailing bytes");
    }
    {
        auto b = frame(4, W, 10);
        b.u64(3);  // prototype of 3 bytes: its own frame check fails
        b.u8(0);
        b.u8(0);
        b.u8(0);
        CHECK_THROWS_AS(parse(b.take()), tally::FormatError);
    }
}

TEST_CASE("Windowed: clear, empty and memory", "[windowed]") {
    Windowed<tally::HyperLogLog, 8> w(W, tally::HyperLogLog(12));
    CHECK(w.empty());
    const std::size_t idle = w.memory_bytes();
    for (u64 i = 0; i < 5000; ++i) w.add(i * 7, i);
    CHECK(!w.empty());
    CHECK(w.view(5000 * 7).estimate() > 0);
    // The buckets hold their items (HyperLogLog is sparse while small, so
    // less than 8 dense register arrays); at most 2 * 8 + 3 summaries in all.
    CHECK(w.memory_bytes() > idle + 8 * 600);
    CHECK(w.memory_bytes() <= (2 * 8 + 3) * 3 * 4096);
    const u64 newest = w.newest_bucket();
    w.clear();
    CHECK(w.empty());
    CHECK(w.newest_bucket() == newest);
    CHECK(w.view(5000 * 7).estimate() == 0);
    CHECK(w.dropped() == 0);
}
