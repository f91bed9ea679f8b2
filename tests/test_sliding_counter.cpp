// Tests for tally/window/sliding_counter.hpp.
#include <tally/window/sliding_counter.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.hpp"
#include "merge_laws.hpp"
#include "test_support.hpp"

using tally::SlidingCounter;
using tally::SlidingOptions;
using tally::test::Rng;
using u16 = std::uint16_t;
using u32 = std::uint32_t;
using u64 = std::uint64_t;
using u128 = tally::detail::uint128;

namespace {

constexpr SlidingOptions plain{.running_total = false, .pow2_buckets = false};
constexpr SlidingOptions total{.running_total = true, .pow2_buckets = false};
constexpr SlidingOptions plain_pow2{.running_total = false, .pow2_buckets = true};
constexpr SlidingOptions total_pow2{.running_total = true, .pow2_buckets = true};

// The textbook ring written out literally (vector ring, % n, O(n) sum),
// plus the two rules it leaves open: ring-total saturation at `max`
// (newest counts win) and allow() charging a too-old admitted request to the
// newest bucket. Estimates are returned as exact parts.
struct Reference {
    std::vector<u64> slots;
    u64 bucket;
    u64 newest = 0;
    u64 max;

    Reference(std::size_t n, u64 b, u64 max_count) : slots(n, 0), bucket(b), max(max_count) {}

    void advance(u64 b) {
        if (b > newest) {
            const u64 n = slots.size();
            for (u64 i = 1; i <= std::min(b - newest, n); ++i) slots[(newest + i) % n] = 0;
            newest = b;
        }
    }
    // Oldest-first view and back, for the saturation rule.
    std::vector<u64> view() const {
        const u64 n = slots.size();
        std::vector<u64> v(n);
        for (u64 k = 0; k < n; ++k) v[k] = slots[(newest + 1 + k) % n];
        return v;
    }
    void put(const std::vector<u64>& v) {
        const u64 n = slots.size();
        for (u64 k = 0; k < n; ++k) slots[(newest + 1 + k) % n] = v[k];
    }
    void add_bucket(u64 b, u64 count) {
        const u64 n = slots.size();
        if (newest - b >= n) return;
        std::vector<u64> v = view();
        v[n - 1 - (newest - b)] += count;
        // newest wins: clamp prefix sums counted from the newest bucket
        u64 acc = 0;
        for (std::size_t i = n; i-- > 0;) {
            const u64 take = std::min(v[i], max - acc);
            v[i] = take;
            acc += take;
        }
        put(v);
    }
    void add(u64 now, u64 count) {
        const u64 b = now / bucket;
        advance(b);
        add_bucket(b, count);
    }
    tally::SlidingEstimate read(u64 now) {
        const u64 b = std::max(now / bucket, newest);
        advance(b);
        const u64 n = slots.size();
        const u64 elapsed = now / bucket >= b ? now % bucket : 0;
        const u64 oldest = slots[(b + 1) % n];
        u64 sum = 0;
        for (const u64 s : slots) sum += s;
        return {sum - oldest, oldest, bucket - elapsed, bucket};
    }
    bool allow(u64 now, u64 limit, u64 cost) {
        const auto e = read(now);
        // exact: rest + oldest*kept/b + cost <= limit  <=>  (rest+cost)*b + oldest*kept <= limit*b
        // (the test keeps every value below 2^40 so these products fit)
        const bool ok = u128(e.rest + cost) * bucket + u128(e.oldest) * e.kept_ns <= u128(limit) * bucket;
        if (ok) {
            u64 b = now / bucket;
            if (newest - b >= slots.size()) b = newest;
            add_bucket(b, std::min(cost, max));
        }
        return ok;
    }
};

template <class C>
void require_same_reading(const tally::SlidingEstimate& a, const tally::SlidingEstimate& b) {
    REQUIRE(a.rest == b.rest);
    REQUIRE(a.oldest == b.oldest);
    REQUIRE(a.kept_ns == b.kept_ns);
    REQUIRE(a.bucket_ns == b.bucket_ns);
}

template <class C>
std::vector<u64> counts_of(const C& c) {
    const auto a = c.counts();
    return std::vector<u64>(a.begin(), a.end());
}

// A random stream op: mostly forward steps, some late events, some events
// older than the ring, some idle gaps longer than the window.
struct Stream {
    Rng rng;
    u64 bucket;
    u64 window;
    u64 now;
    Stream(u64 seed, u64 b, u64 w) : rng(seed), bucket(b), window(w), now(1000 * b + rng.below(b)) {}
    // time of the next event; `late` tells whether it is behind `now`
    u64 next_time() {
        const u64 r = rng.below(100);
        if (r < 70) {
            now += rng.below(bucket / 2 + 2);
            return now;
        }
        if (r < 85) return now - std::min(now, rng.below(window + bucket));  // late, often still in the ring
        if (r < 92) return now - std::min(now, window + bucket + rng.below(4 * window + 1));  // too old
        if (r < 97) {
            now += window + rng.below(3 * window + 1);  // idle longer than the window
            return now;
        }
        now += rng.below(3 * bucket);  // a few buckets
        return now;
    }
};

}  // namespace

TEST_CASE("reference example: exact weighting, classic two buckets, late and too-old events", "[sliding_counter]") {
    // Exact weighting: 4 buckets of 10 ns, 8 events in each.
    {
        SlidingCounter<u64, 4> c(10);
        for (u64 t : {5, 15, 25, 35}) c.add(t, 8);
        CHECK(c.estimate(35) == 24.0 + 8.0 * 0.5);
        CHECK(c.estimate(40) == 24.0);
        CHECK(c.estimate(1'000) == 0.0);
    }
    // Two buckets = previous + current. Limit 10 per 1000 ns.
    {
        SlidingCounter<u64, 2> l(1000);
        for (int i = 0; i < 10; ++i) CHECK(l.allow(999, 10));
        CHECK_FALSE(l.allow(1000, 10));
        CHECK(l.allow(1500, 10));
        for (int i = 0; i < 4; ++i) CHECK(l.allow(1500, 10));
        CHECK_FALSE(l.allow(1500, 10));
    }
    // Late event goes to its own bucket; too-old event is dropped.
    {
        SlidingCounter<u64, 3> c(10);
        c.add(25, 1);
        c.add(15, 1);
        c.add(5, 1);
        CHECK(c.estimate(25) == 1.0 + 1.0 + 0.5);
        c.add(35, 1);
        c.add(5, 1);
        CHECK(c.estimate(35) == 1.0 + 1.0 + 0.5);
    }
}

TEMPLATE_TEST_CASE("reference example holds for every slot type and option", "[sliding_counter]",
                   (SlidingCounter<u16, 4, plain>), (SlidingCounter<u32, 4, total>), (SlidingCounter<u64, 4, plain>),
                   (SlidingCounter<u32, 4>)) {
    TestType c(10);
    for (u64 t : {5, 15, 25, 35}) c.add(t, 8);
    CHECK(c.estimate(35) == 28.0);
    CHECK(c.read(35).floor() == 28);
    CHECK(c.estimate(40) == 24.0);
    CHECK(c.estimate(1'000) == 0.0);
    CHECK(c.window_ns() == 30);
    CHECK(c.bucket_ns() == 10);
}

TEST_CASE("pow2 variants reproduce the reference numbers", "[sliding_counter]") {
    SlidingCounter<u32, 2, total_pow2> l(1024);
    for (int i = 0; i < 10; ++i) CHECK(l.allow(1023, 10));
    CHECK_FALSE(l.allow(1024, 10));
    CHECK(l.allow(1536, 10));  // previous bucket weighs 0.5 -> 5
    for (int i = 0; i < 4; ++i) CHECK(l.allow(1536, 10));
    CHECK_FALSE(l.allow(1536, 10));
    // the brace form of DESIGN.md (g++ only; clang 14 cannot parse a braced template argument)
#if defined(__GNUC__) && !defined(__clang__)
    SlidingCounter<u32, 61, {.pow2_buckets = true}> m(1024);
    CHECK(m.window_ns() == 60 * 1024);
#endif
    SlidingCounter<u32, 61, SlidingOptions{.pow2_buckets = true}> n(1u << 30);
    CHECK(n.window_ns() == 60ull << 30);
}

TEST_CASE("memory promise: State sizes", "[sliding_counter]") {
    // The promise of the header: the 14-slot configuration, default options
    // (running total on), is exactly one 64-byte line.
    STATIC_REQUIRE(sizeof(SlidingCounter<u32, 14>::State) == 64);
    STATIC_REQUIRE(sizeof(SlidingCounter<u32, 14, plain>::State) == 64);
    STATIC_REQUIRE(sizeof(SlidingCounter<u32, 14, total_pow2>::State) == 64);
    // The table: largest Slots per slot type for 64 and 128 bytes.
    STATIC_REQUIRE(sizeof(SlidingCounter<u16, 28>::State) == 64);
    STATIC_REQUIRE(sizeof(SlidingCounter<u16, 29>::State) > 64);
    STATIC_REQUIRE(sizeof(SlidingCounter<u16, 60>::State) == 128);
    STATIC_REQUIRE(sizeof(SlidingCounter<u16, 61>::State) > 128);
    STATIC_REQUIRE(sizeof(SlidingCounter<u32, 15>::State) > 64);
    STATIC_REQUIRE(sizeof(SlidingCounter<u32, 30>::State) == 128);
    STATIC_REQUIRE(sizeof(SlidingCounter<u32, 31>::State) > 128);
    STATIC_REQUIRE(sizeof(SlidingCounter<u64, 7>::State) == 64);
    STATIC_REQUIRE(sizeof(SlidingCounter<u64, 8>::State) > 64);
    STATIC_REQUIRE(sizeof(SlidingCounter<u64, 15>::State) == 128);
    STATIC_REQUIRE(sizeof(SlidingCounter<u64, 16>::State) > 128);
    STATIC_REQUIRE(sizeof(SlidingCounter<u32, 61>::State) == 256);
    STATIC_REQUIRE(sizeof(SlidingCounter<u16, 2>::State) == 16);
    STATIC_REQUIRE(std::is_trivially_copyable_v<SlidingCounter<u32, 14>::State>);
    // the policy adds 16 bytes
    STATIC_REQUIRE(sizeof(SlidingCounter<u32, 14>) == 64 + 16);
    STATIC_REQUIRE(tally::MergeableSummary<SlidingCounter<u32, 14>>);
    STATIC_REQUIRE(tally::SummaryObservers<SlidingCounter<u32, 14>>);
    STATIC_REQUIRE(tally::SummaryObservers<SlidingCounter<u16, 3, plain_pow2>>);
}

TEST_CASE("construction errors name the parameter, value and range", "[sliding_counter]") {
    CHECK_THROWS_WITH((SlidingCounter<u32, 8>(0)),
                      "tally::SlidingCounter::SlidingCounter: bucket_ns 0 is out of range [1, 2635249153387078802]");
    CHECK_THROWS_WITH((SlidingCounter<u32, 2>(0)),
                      "tally::SlidingCounter::SlidingCounter: bucket_ns 0 is out of range [1, 18446744073709551615]");
    CHECK_THROWS_WITH((SlidingCounter<u32, 8, total_pow2>(1000)),
                      "tally::SlidingCounter::SlidingCounter: bucket_ns 1000 is not a power of two (pow2_buckets "
                      "requires one, e.g. 512 or 1024)");
    CHECK_THROWS_WITH((SlidingCounter<u32, 8, plain_pow2>(0)),
                      "tally::SlidingCounter::SlidingCounter: bucket_ns 0 is out of range [1, 2635249153387078802]");
    CHECK_THROWS_WITH((SlidingCounter<u32, 61>(~u64{0} / 60 + 1)),
                      "tally::SlidingCounter::SlidingCounter: bucket_ns 307445734561825861 is out of range [1, "
                      "307445734561825860]");
    CHECK_NOTHROW((SlidingCounter<u32, 61>(~u64{0} / 60)));
    CHECK_NOTHROW((SlidingCounter<u32, 2, total_pow2>(u64{1} << 63)));
    CHECK_THROWS_WITH((SlidingCounter<u32, 2, total_pow2>((u64{1} << 63) + 1)),
                      "tally::SlidingCounter::SlidingCounter: bucket_ns 9223372036854775809 is not a power of two "
                      "(pow2_buckets requires one, e.g. 9223372036854775808 or 9223372036854775808)");
    CHECK_THROWS_AS((SlidingCounter<u32, 8>(0)), std::invalid_argument);
}

// Every configuration against the literal reference ring (plus its two documented
// rules): identical exact readings, identical decisions, identical counts.
template <class C>
void check_against_reference(u64 bucket, u64 seed, std::size_t ops) {
    C c(bucket);
    Reference ref(C::slot_count, bucket, C::max_count);
    Stream st(seed, bucket, c.window_ns());
    Rng rng(seed ^ 0x5151);
    const u64 limit_scale = std::min<u64>(C::max_count, 64);
    for (std::size_t i = 0; i < ops; ++i) {
        const u64 t = st.next_time();
        const u64 op = rng.below(10);
        INFO("seed " << seed << " op " << i << " t " << t << " kind " << op);
        if (op < 4) {
            const u64 count = 1 + rng.below(std::min<u64>(C::max_count, 5));
            c.add(t, static_cast<typename C::slot_type>(count));
            ref.add(t, count);
        } else if (op < 9) {
            const u64 limit = rng.below(limit_scale * 2 + 1);
            const u64 cost = rng.below(4);
            REQUIRE(c.allow(t, limit, cost) == ref.allow(t, limit, cost));
        } else {
            require_same_reading<C>(c.read(t), ref.read(t));
        }
        REQUIRE(c.newest_bucket() == ref.newest);
        REQUIRE(counts_of(c) == ref.view());
    }
}

TEST_CASE("every configuration matches the literal reference ring on random streams", "[sliding_counter][big]") {
    const std::size_t ops = tally::test::big(4000, 600);
    for (u64 seed = 1; seed <= 6; ++seed) {
        check_against_reference<SlidingCounter<u32, 2, plain>>(1000, seed, ops);
        check_against_reference<SlidingCounter<u32, 2, total>>(1000, seed, ops);
        check_against_reference<SlidingCounter<u32, 3, total>>(7, seed, ops);
        check_against_reference<SlidingCounter<u32, 8, total_pow2>>(1024, seed, ops);
        check_against_reference<SlidingCounter<u64, 8, plain_pow2>>(64, seed, ops);
        check_against_reference<SlidingCounter<u32, 14>>(333, seed, ops);
        check_against_reference<SlidingCounter<u16, 61, total>>(1000, seed, ops);
        check_against_reference<SlidingCounter<u32, 64, total_pow2>>(16, seed, ops);
        check_against_reference<SlidingCounter<u16, 5, plain>>(3, seed, ops);
        check_against_reference<SlidingCounter<u16, 5, total>>(1, seed, ops);
    }
}

TEST_CASE("u16 saturation against the reference, heavy counts", "[sliding_counter]") {
    for (u64 seed = 11; seed <= 14; ++seed) {
        SlidingCounter<u16, 4, total> a(100);
        SlidingCounter<u16, 4, plain> b(100);
        Reference ref(4, 100, 65535);
        Rng rng(seed);
        u64 now = 0;
        for (int i = 0; i < 3000; ++i) {
            now += rng.below(60);
            const u64 t = now - std::min(now, rng.below(250));
            const u64 count = rng.below(40000);
            a.add(t, static_cast<u16>(count));
            b.add(t, static_cast<u16>(count));
            ref.add(t, count);
            REQUIRE(counts_of(a) == ref.view());
            REQUIRE(counts_of(b) == ref.view());
            u64 sum = 0;
            for (u64 x : ref.view()) sum += x;
            REQUIRE(sum <= 65535);
        }
    }
}

TEST_CASE("u16 saturation: the ring total saturates, newest counts win", "[sliding_counter]") {
    SlidingCounter<u16, 3> c(10);
    c.add(5, 60000);  // bucket 0
    c.add(15, 5000);  // bucket 1
    CHECK(c.counts() == std::array<u16, 3>{0, 60000, 5000});
    c.add(25, 10000);  // bucket 2: 9465 over -> taken from bucket 0
    CHECK(c.counts() == std::array<u16, 3>{50535, 5000, 10000});
    c.add(25, 65535);  // everything older gives way
    CHECK(c.counts() == std::array<u16, 3>{0, 0, 65535});
    c.add(15, 7);  // late event into a full ring: the older side gives way, nothing is older
    CHECK(c.counts() == std::array<u16, 3>{0, 0, 65535});
    CHECK(c.estimate(25) == 65535.0);
    // allow with a cost beyond the slot range saturates the charge
    SlidingCounter<u16, 2> d(10);
    CHECK(d.allow(5, ~u64{0}, 100000));
    CHECK(d.counts() == std::array<u16, 2>{0, 65535});
    CHECK_FALSE(d.allow(5, 65535, 1));
    CHECK(d.allow(5, 65536, 1));  // saturated: the charge is lost, documented
    CHECK(d.estimate(5) == 65535.0);
}

TEST_CASE("decisions equal the exact rational formula; double formula where it is exact", "[sliding_counter][big]") {
    // pow2 widths and small counts make the textbook double expression exact,
    // so its decision rule must agree with ours bit for bit.
    const std::size_t ops = tally::test::big(20000, 3000);
    Rng rng(77);
    SlidingCounter<u32, 8, total_pow2> c(256);
    u64 now = 0;
    for (std::size_t i = 0; i < ops; ++i) {
        now += rng.below(40);
        const u64 limit = rng.below(300), cost = rng.below(5);
        const auto e = c.read(now);
        const double est = e.value();
        const bool seed_rule = est + static_cast<double>(cost) <= static_cast<double>(limit);
        const bool exact = u128(e.rest + cost) * e.bucket_ns + u128(e.oldest) * e.kept_ns <= u128(limit) * e.bucket_ns;
        REQUIRE(seed_rule == exact);
        REQUIRE(c.allow(now, limit, cost) == exact);
    }
    // Non-pow2 widths: the double expression 3 * (2/3.) may round; the
    // decision follows the exact rational value: 3 events in the oldest
    // bucket weighted 2/3 is exactly 2.
    SlidingCounter<u64, 2> d(3);
    d.add(0, 3);
    CHECK(d.read(4).floor() == 2);
    CHECK(d.read(4).ceil() == 2);
    CHECK(d.allow(4, 3, 1));  // 2 + 1 <= 3 exactly
    CHECK_FALSE(d.allow(4, 3, 1));
}

TEST_CASE("huge arguments: no overflow, exact answers", "[sliding_counter]") {
    constexpr u64 M = ~u64{0};
    SlidingCounter<u64, 2> c(M);  // one bucket spans all of time
    c.add(0, M - 1);
    auto e = c.read(M - 1);  // still bucket 0
    CHECK(e.rest == M - 1);
    CHECK(e.oldest == 0);
    CHECK(c.allow(M - 1, M, 1));
    CHECK_FALSE(c.allow(M - 1, M, 1));
    CHECK_FALSE(c.allow(M - 1, M, M));
    CHECK(c.allow(M - 1, M, 0));  // cost 0 at estimate == limit admits, charges nothing
    CHECK(c.read(M - 1).rest == M);
    // time M: bucket 1, the old bucket weighs (M - 0) / M = 1 (elapsed 0)
    e = c.read(M);
    CHECK(e.oldest == M);
    CHECK(e.kept_ns == M);
    CHECK_FALSE(c.allow(M, M, 1));
    CHECK(c.allow(M, M, 0));
    // u64 slots: merge saturates instead of wrapping
    SlidingCounter<u64, 2> a(10), b(10);
    a.add(5, M - 3);
    b.add(5, 10);
    a.merge(b);
    CHECK(a.counts() == std::array<u64, 2>{0, M});
    CHECK(a.read(5).floor() == M);
    CHECK(a.read(5).ceil() == M);
}

TEST_CASE("cost > limit, limit == 0, cost == 0", "[sliding_counter]") {
    SlidingCounter<u32, 4> c(10);
    const auto before = c.state();
    CHECK_FALSE(c.allow(5, 3, 4));  // never, even on an empty window
    CHECK(c.state() == before);
    CHECK_FALSE(c.allow(5, 0, 1));
    CHECK(c.allow(5, 0, 0));  // empty window is within a zero limit
    CHECK(c.state() == before);
    c.add(5, 1);
    CHECK_FALSE(c.allow(5, 0, 0));
    CHECK(c.allow(5, 1, 0));
    CHECK_FALSE(c.allow(5, ~u64{0}, ~u64{0}));
    CHECK(c.allow(5, ~u64{0}, ~u64{0} - 1));
    CHECK(c.estimate(5) == static_cast<double>(c.max_count));  // saturated u32 ring
}

TEST_CASE("time going backwards never moves newest back and never admits for free", "[sliding_counter]") {
    SlidingCounter<u32, 4> c(10);
    c.add(1000, 2);  // bucket 100
    CHECK(c.newest_bucket() == 100);
    c.add(995, 1);  // bucket 99: late, still in the ring
    CHECK(c.newest_bucket() == 100);
    CHECK(c.counts() == std::array<u32, 4>{0, 0, 1, 2});
    c.add(960, 1);  // bucket 96: left the ring -> dropped
    CHECK(c.counts() == std::array<u32, 4>{0, 0, 1, 2});
    // reading behind newest: evaluated at the start of bucket 100 (elapsed 0)
    const auto e = c.read(3);
    CHECK(c.newest_bucket() == 100);
    CHECK(e.kept_ns == 10);
    CHECK(e.rest == 3);
    // a stuck clock far behind: allow() charges the newest bucket, so exactly
    // limit - 3 requests pass, then none
    int admitted = 0;
    for (int i = 0; i < 20; ++i) admitted += c.allow(3, 10) ? 1 : 0;
    CHECK(admitted == 7);
    CHECK(c.counts() == std::array<u32, 4>{0, 0, 1, 9});
    // add() keeps the textbook drop for too-old observations
    c.add(0, 5);
    CHECK(c.counts() == std::array<u32, 4>{0, 0, 1, 9});
    // a late admitted request still in the ring is charged to its own bucket
    CHECK(c.allow(985, 100));
    CHECK(c.counts() == std::array<u32, 4>{0, 1, 1, 9});
}

TEST_CASE("idle gaps zero at most Slots slots and fully reset", "[sliding_counter]") {
    SlidingCounter<u32, 8, total> c(10);
    for (u64 t = 0; t < 80; t += 3) c.add(t, 1);
    c.add(~u64{0} - 5, 1);  // a gap of ~2^60 buckets: O(Slots), not O(gap)
    CHECK(c.newest_bucket() == (~u64{0} - 5) / 10);
    CHECK(c.estimate(~u64{0}) == 1.0);
    auto cnt = c.counts();
    CHECK(cnt[7] == 1);
    CHECK(std::count(cnt.begin(), cnt.end(), 0u) == 7);
}

TEST_CASE("oracle: |estimate - exact sliding-log count| <= oldest bucket count", "[sliding_counter][big]") {
    const std::size_t ops = tally::test::big(5000, 800);
    auto run = [&](auto counter, u64 seed) {
        using C = decltype(counter);
        const u64 b = counter.bucket_ns(), W = counter.window_ns();
        std::vector<std::pair<u64, u64>> log;  // (time, count) of every event the ring can still hold
        Stream st(seed, b, W);
        Rng rng(seed * 31 + 7);
        u64 newest_time = 0, last_q = 0;
        for (std::size_t i = 0; i < ops; ++i) {
            const u64 t = st.next_time();
            const u64 count = 1 + rng.below(3);
            counter.add(t, static_cast<typename C::slot_type>(count));
            newest_time = std::max(newest_time, t);
            log.emplace_back(t, count);
            // query at or after the newest event and every earlier query (the
            // bound is for reads not behind the ring), sometimes a later bucket
            newest_time = std::max(newest_time, last_q);
            const u64 q = newest_time + (rng.below(4) == 0 ? rng.below(2 * b) : 0);
            last_q = q;
            const auto e = counter.read(q);
            u64 truth = 0, in_rest = 0, in_oldest = 0;
            const u64 B = q / b;
            for (const auto& [time, n] : log) {
                if (time <= q && time + W > q) truth += n;  // time in (q - W, q]
                const u64 bt = time / b;
                if (bt <= B && B - bt < C::slot_count - 1) in_rest += n;
                if (bt + (C::slot_count - 1) == B) in_oldest += n;
            }
            INFO("seed " << seed << " op " << i << " q " << q);
            REQUIRE(e.rest == in_rest);  // bucket counts are exact
            REQUIRE(e.oldest == in_oldest);
            const double est = e.value();
            REQUIRE(std::abs(est - static_cast<double>(truth)) <= static_cast<double>(e.oldest) + 1e-9);
            if (log.size() > 512)  // forget events no window can reach again
                std::erase_if(log, [&](const auto& ev) { return ev.first / b + C::slot_count <= B; });
        }
    };
    for (u64 seed = 100; seed < 106; ++seed) {
        run(SlidingCounter<u32, 2>(1000), seed);
        run(SlidingCounter<u32, 8, total_pow2>(64), seed);
        run(SlidingCounter<u32, 61, plain>(17), seed);
        run(SlidingCounter<u64, 14>(5), seed);
    }
}

TEST_CASE("running total on and off agree exactly; pow2 agrees with division", "[sliding_counter][big]") {
    const std::size_t ops = tally::test::big(20000, 3000);
    for (u64 seed = 1; seed <= 4; ++seed) {
        SlidingCounter<u32, 61, total> a(1024);
        SlidingCounter<u32, 61, plain> b(1024);
        SlidingCounter<u32, 61, total_pow2> c(1024);
        SlidingCounter<u32, 61, plain_pow2> d(1024);
        Stream st(seed, 1024, a.window_ns());
        Rng rng(seed + 99);
        for (std::size_t i = 0; i < ops; ++i) {
            const u64 t = st.next_time();
            if (rng.below(2) == 0) {
                const u32 n = static_cast<u32>(1 + rng.below(9));
                a.add(t, n), b.add(t, n), c.add(t, n), d.add(t, n);
            } else {
                const u64 limit = rng.below(600), cost = rng.below(3);
                const bool x = a.allow(t, limit, cost);
                REQUIRE(b.allow(t, limit, cost) == x);
                REQUIRE(c.allow(t, limit, cost) == x);
                REQUIRE(d.allow(t, limit, cost) == x);
            }
            const double e = a.estimate(t);
            REQUIRE(b.estimate(t) == e);
            REQUIRE(c.estimate(t) == e);
            REQUIRE(d.estimate(t) == e);
            const auto bytes = a.serialize();
            REQUIRE(b.serialize() == bytes);
            REQUIRE(c.serialize() == bytes);
            REQUIRE(d.serialize() == bytes);
        }
    }
}

TEST_CASE("State primitives: external states, is_fresh, retry_after_ns, drain_ns", "[sliding_counter]") {
    using C = SlidingCounter<u32, 4, total>;
    const C policy(10);
    C::State s{};
    CHECK(s == C::State{});
    CHECK(policy.is_fresh(s, 0));
    policy.add(s, 15, 3);
    CHECK(policy.read(s, 15).rest == 3);
    CHECK(policy.counts(s) == std::array<u32, 4>{0, 0, 0, 3});
    CHECK_FALSE(policy.is_fresh(s, 15));
    CHECK_FALSE(policy.is_fresh(s, 45));  // bucket 1 is the oldest of bucket 4
    CHECK(policy.is_fresh(s, 50));
    CHECK_FALSE(policy.is_fresh(s, 5));  // behind newest: not like a fresh state
    // a key's state is independent of the policy's own state
    CHECK(policy.counts() == std::array<u32, 4>{});
    CHECK(policy.allow(s, 15, 4));
    CHECK_FALSE(policy.allow(s, 15, 4));
    CHECK_FALSE(policy.would_allow(s, 15, 4));
    policy.charge(s, 0, 1);  // bucket 0 is still in the ring of bucket 1
    CHECK(policy.counts(s) == std::array<u32, 4>{0, 0, 1, 4});

    // retry_after_ns and drain_ns against brute force over every ns
    Rng rng(5);
    for (int trial = 0; trial < 300; ++trial) {
        C::State k{};
        u64 now = 100 + rng.below(50);
        for (int i = 0; i < 6; ++i) {
            now += rng.below(12);
            policy.add(k, now, static_cast<u32>(rng.below(4)));
        }
        const u64 q = now - rng.below(30);  // sometimes behind newest
        const u64 limit = rng.below(12), cost = rng.below(3);
        const u64 w = policy.retry_after_ns(k, q, limit, cost);
        u64 brute = ~u64{0};
        for (u64 dt = 0; dt < 80; ++dt) {
            C::State copy = k;
            if (policy.would_allow(copy, q + dt, limit, cost)) {
                brute = dt;
                break;
            }
        }
        INFO("trial " << trial);
        CHECK(w == brute);
        const u64 dr = policy.drain_ns(k, q);
        u64 brute_dr = ~u64{0};
        for (u64 dt = 0; dt < 80; ++dt) {
            C::State copy = k;
            if (policy.read(copy, q + dt).value() == 0.0) {
                brute_dr = dt;
                break;
            }
        }
        CHECK(dr == brute_dr);
        // is_empty is exact: it holds iff the ring read at q has nothing in it, and q is not behind
        C::State copy = k;
        const bool fresh_like = q / 10 >= k.newest && policy.read(copy, q).rest == 0 && policy.read(copy, q).oldest == 0;
        CHECK(policy.is_fresh(k, q) == fresh_like);
    }
    CHECK(policy.retry_after_ns(s, 15, 3, 4) == ~u64{0});
}

TEST_CASE("merge aligns by absolute bucket index (per-thread rings)", "[sliding_counter]") {
    // Two threads each see a monotone stream; merging their rings equals one
    // ring that saw every event.
    for (u64 seed = 1; seed <= 20; ++seed) {
        Rng rng(seed);
        SlidingCounter<u32, 8, total> t1(100), t2(100), all(100);
        std::vector<std::pair<u64, u32>> ev;
        u64 a = 0, b = 0;
        for (int i = 0; i < 200; ++i) {
            const u32 n = static_cast<u32>(1 + rng.below(3));
            if (rng.below(2)) {
                a += rng.below(60);
                t1.add(a, n);
                ev.emplace_back(a, n);
            } else {
                b += rng.below(60);
                t2.add(b, n);
                ev.emplace_back(b, n);
            }
        }
        std::stable_sort(ev.begin(), ev.end(), [](auto& x, auto& y) { return x.first < y.first; });
        for (auto& [t, n] : ev) all.add(t, n);
        auto m = tally::merged(t1, t2);
        CHECK(m.serialize() == all.serialize());
        const u64 end = std::max(a, b) + 37;
        CHECK(m.estimate(end) == all.estimate(end));
    }
}

TEST_CASE("merge laws, incompatible merge, bad bytes", "[sliding_counter]") {
    using C = SlidingCounter<u32, 8, total>;
    C empty(100), a(100), b(100), c(100);
    Rng rng(9);
    for (int i = 0; i < 50; ++i) a.add(1000 + rng.below(900), 1 + static_cast<u32>(rng.below(5)));
    for (int i = 0; i < 50; ++i) b.add(1500 + rng.below(900), 1 + static_cast<u32>(rng.below(5)));
    for (int i = 0; i < 50; ++i) c.add(200 + rng.below(9000), 1);
    tally::test::check_merge_laws(empty, a, b, c);
    // saturating merges stay commutative and associative (newest counts win)
    using S = SlidingCounter<u16, 3, plain>;
    S e16(10), x(10), y(10), z(10);
    x.add(5, 40000), x.add(15, 30000);
    y.add(15, 20000), y.add(25, 30000);
    z.add(25, 50000), z.add(35, 1);
    tally::test::check_merge_laws(e16, x, y, z);
    tally::test::check_incompatible_merge(a, C(200));
    C t(100);
    CHECK_THROWS_WITH(t.merge(C(64)), "tally::SlidingCounter::merge: bucket widths differ (100 ns vs 64 ns)");
    CHECK_THROWS_AS(t.merge(C(64)), std::invalid_argument);
    const auto bytes = a.serialize();
    tally::test::check_truncations_throw<C>(bytes);
    tally::test::check_corruptions_safe<C>(bytes, 1234);
    tally::test::check_corruptions_safe<S>(merged(x, y).serialize(), 99);
    // deserialized counters answer alike
    C back = C::deserialize(bytes);
    CHECK(back.estimate(2500) == C(a).estimate(2500));
    // bytes move between running-total variants
    CHECK(SlidingCounter<u32, 8, plain>::deserialize(bytes).serialize() == bytes);
}

TEST_CASE("golden bytes and specific format errors", "[sliding_counter]") {
    SlidingCounter<u16, 3> c(10);
    c.add(25, 2);
    c.add(15, 1);
    const std::vector<std::byte> got = c.serialize();
    const unsigned char want[] = {
        'T', 'A', 'L', 'Y', 1, 1, 0, 0,       // header: family 1, version 1
        2,                                    // slot width
        3, 0, 0, 0,                           // Slots
        10, 0, 0, 0, 0, 0, 0, 0,              // bucket_ns
        2, 0, 0, 0, 0, 0, 0, 0,               // newest bucket
        0, 0, 1, 0, 2, 0,                     // counts: bucket 0, 1, 2
    };
    REQUIRE(got.size() == sizeof(want));
    for (std::size_t i = 0; i < sizeof(want); ++i) {
        INFO("byte " << i);
        CHECK(got[i] == static_cast<std::byte>(want[i]));
    }
    using C = SlidingCounter<u16, 3>;
    auto bad = [&](std::size_t at, unsigned char v) {
        std::vector<std::byte> b = got;
        b[at] = static_cast<std::byte>(v);
        return b;
    };
    CHECK_THROWS_WITH(C::deserialize(bad(8, 4)),
                      "tally::SlidingCounter::deserialize: slot width 4 bytes where 2 was expected");
    CHECK_THROWS_AS(C::deserialize(bad(8, 4)), tally::FormatError);
    CHECK_THROWS_WITH(C::deserialize(bad(9, 4)), "tally::SlidingCounter::deserialize: 4 slots where 3 were expected");
    CHECK_THROWS_WITH(C::deserialize(bad(13, 0)),
                      "tally::SlidingCounter::deserialize: bucket_ns 0 is out of range [1, 9223372036854775807]");
    // newest 0 with counts in buckets -1 and -2
    CHECK_THROWS_WITH(C::deserialize(bad(21, 0)), "tally::SlidingCounter::deserialize: count for a bucket before index 0");
    auto over = got;
    over[29] = std::byte{0xff}, over[30] = std::byte{0xff};  // 65535 + 1 + 2
    CHECK_THROWS_WITH(C::deserialize(over), "tally::SlidingCounter::deserialize: ring total exceeds the slot maximum");
    CHECK_THROWS_AS(C::deserialize(over), tally::FormatError);
    CHECK_THROWS_WITH((SlidingCounter<u16, 3, total_pow2>::deserialize(bad(13, 6))),
                      "tally::SlidingCounter::deserialize: bucket_ns is not a power of two");
    CHECK_THROWS_AS((SlidingCounter<u16, 3, total_pow2>::deserialize(got)), tally::FormatError);
    CHECK_THROWS_AS((SlidingCounter<u32, 3>::deserialize(got)), tally::FormatError);
    CHECK_NOTHROW(C::deserialize(got));
}

TEST_CASE("summary observers: total, empty, memory_bytes, clear", "[sliding_counter]") {
    SlidingCounter<u32, 4, total> c(10);
    CHECK(c.empty());
    CHECK(c.total() == 0);
    CHECK(c.memory_bytes() == sizeof(c));
    c.add(5, 3);
    c.add(15, 4);
    CHECK_FALSE(c.empty());
    CHECK(c.total() == 7);
    // total() does not advance: the ring still holds 7 until a read at a later time expires buckets
    CHECK(c.estimate(45) == 2.0);  // bucket 1 (4 events) is the oldest, half inside
    CHECK(c.total() == 4);
    c.add(1000, 1);  // far ahead: the ring is cleared and holds only this event
    CHECK(c.total() == 1);
    c.clear();
    CHECK(c.empty());
    CHECK(c.newest_bucket() == 0);
    CHECK(c.bucket_ns() == 10);
    CHECK(c.state() == decltype(c)::State{});
}
