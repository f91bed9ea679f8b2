#include <tally/sketch/top_k.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "catch.hpp"
#include "merge_laws.hpp"
#include "test_support.hpp"

using tally::TopK;
using tally::test::big;
using tally::test::Rng;

using tally::test::message_of;
using tally::test::Zipf;

namespace {


template <class T>
using Truth = std::unordered_map<T, std::uint64_t>;

// Checks every documented guarantee of `s` against the exact counts.
template <class T>
void check_guarantee(const TopK<T>& s, const Truth<T>& truth) {
    std::uint64_t n = 0;
    for (const auto& [key, f] : truth) n += f;
    REQUIRE(s.total() == n);
    const std::uint64_t floor = s.floor();
    CHECK(floor * s.k() <= n);  // F <= N / k
    const auto top = s.top();
    CHECK(top.size() == s.size());
    CHECK(top.size() <= s.k());
    std::size_t bad_order = 0, bad_entry = 0;
    for (std::size_t i = 0; i < top.size(); ++i) {
        const auto& e = top[i];
        if (i > 0) bad_order += top[i - 1].count < e.count;
        const auto it = truth.find(e.item);
        const std::uint64_t f = it == truth.end() ? 0 : it->second;
        bad_entry += !(e.lower_bound() <= f && f <= e.count && e.error <= floor && e.error <= e.count);
        bad_entry += !s.contains(e.item) || s.estimate(e.item) != e.count || s.lower_bound(e.item) != e.lower_bound();
    }
    CHECK(bad_order == 0);
    CHECK(bad_entry == 0);
    std::size_t under = 0, over = 0, missing = 0, missing_heavy = 0;
    for (const auto& [key, f] : truth) {
        under += s.estimate(key) < f;
        over += s.lower_bound(key) > f;
        missing += f > floor && !s.contains(key);
        missing_heavy += f * s.k() > n && !s.contains(key);
    }
    CHECK(under == 0);
    CHECK(over == 0);
    CHECK(missing == 0);
    CHECK(missing_heavy == 0);
}

template <class T>
std::size_t heavy_count(const Truth<T>& truth, std::size_t k) {
    std::uint64_t n = 0;
    for (const auto& [key, f] : truth) n += f;
    std::size_t h = 0;
    for (const auto& [key, f] : truth) h += f * k > n;
    return h;
}

// Summaries that could describe the same stream: same k and N, and for every
// item either side monitors, the two intervals [lower, upper] intersect (both
// contain the truth). This is what a regrouped merge guarantees; see the
// associativity test below for why bytes may differ.
struct Consistent {
    template <class T>
    bool operator()(const TopK<T>& x, const TopK<T>& y) const {
        if (x.k() != y.k() || x.total() != y.total()) return false;
        for (const auto* p : {&x, &y}) {
            const auto& other = p == &x ? y : x;
            for (const auto& e : p->top())
                if (e.lower_bound() > other.estimate(e.item) || other.lower_bound(e.item) > e.count) return false;
        }
        return true;
    }
};


std::vector<std::byte> to_bytes(std::initializer_list<int> v) {
    std::vector<std::byte> out;
    for (const int b : v) out.push_back(static_cast<std::byte>(b));
    return out;
}

void put_u64(std::vector<std::byte>& b, std::size_t at, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) b[at + static_cast<std::size_t>(i)] = static_cast<std::byte>(v >> (8 * i));
}

}  // namespace

TEST_CASE("TopK on Zipf streams holds every item above N/k, within its error bounds", "[top_k][big]") {
    const std::size_t k = GENERATE(10, 100, 1000);
    const double s = GENERATE(0.8, 1.1, 1.5);
    INFO("k " << k << ", zipf s " << s);
    Zipf z(100'000, s);
    Rng rng(k * 31 + static_cast<std::uint64_t>(s * 10));
    TopK<std::uint64_t> top(k);
    Truth<std::uint64_t> truth;
    const std::size_t n = big(400'000, 60'000);
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t x = z(rng) * 0x9e3779b97f4a7c15ull;  // spread keys over 64 bits
        const std::uint64_t w = i % 16 == 0 ? 1 + rng.below(10) : 1;
        top.add(x, w);
        truth[x] += w;
    }
    // the test exercises the N/k guarantee (Zipf 0.8 has no item above N/10)
    if (k >= 100 || s > 1.0) REQUIRE(heavy_count(truth, k) > 0);
    CHECK(top.size() == k);
    CHECK(top.floor() > 0);  // and evictions happened
    check_guarantee(top, truth);
}

TEST_CASE("TopK with string items, looked up as string, string_view and literal", "[top_k]") {
    Zipf z(5000, 1.2);
    Rng rng(9);
    TopK<std::string> top(50);
    Truth<std::string> truth;
    for (int i = 0; i < 50'000; ++i) {
        const std::string key = "/api/v1/item/" + std::to_string(z(rng));
        if (i % 3 == 0) {
            top.add(std::string_view(key));
        } else if (i % 3 == 1) {
            top.add(key.c_str());
        } else {
            top.add(key);
        }
        ++truth[key];
    }
    check_guarantee(top, truth);
    const auto best = top.top(3);
    REQUIRE(best.size() == 3);
    CHECK(best[0].item == "/api/v1/item/0");
    CHECK(top.estimate("/api/v1/item/0") == best[0].count);
    CHECK(top.estimate(std::string("/api/v1/item/0")) == best[0].count);
    CHECK(top.contains(std::string_view("/api/v1/item/0")));
    CHECK_FALSE(top.contains("never seen"));
    CHECK(top.estimate("never seen") == top.floor());
    CHECK(top.lower_bound("never seen") == 0);
}

TEST_CASE("TopK is exact while it holds every distinct item", "[top_k]") {
    TopK<int> top(10);
    for (int i = 0; i < 10; ++i) top.add(i, static_cast<std::uint64_t>(i + 1));
    top.add(3, 100);
    top.add(7, 0);  // no-op
    CHECK(top.size() == 10);
    CHECK(top.floor() == 0);
    CHECK(top.total() == 155);
    const auto all = top.top();
    REQUIRE(all.size() == 10);
    CHECK(all[0].item == 3);
    CHECK(all[0].count == 104);
    CHECK(all[1].item == 9);
    for (const auto& e : all) CHECK(e.error == 0);
    CHECK(top.estimate(42) == 0);
    CHECK(top.top(4).size() == 4);
    CHECK(top.top(0).empty());
}

TEST_CASE("TopK: Space-Saving eviction takes the minimum and inherits its count as error", "[top_k]") {
    TopK<int> top(2);
    top.add(1, 5);
    top.add(2, 3);
    top.add(3);  // evicts 2 (count 3): 3 gets count 4, error 3
    CHECK_FALSE(top.contains(2));
    CHECK(top.estimate(3) == 4);
    CHECK(top.lower_bound(3) == 1);
    CHECK(top.floor() == 3);
    CHECK(top.estimate(2) == 3);  // unmonitored: bounded by the floor
    top.add(4, 10);               // evicts 3 (count 4)
    CHECK(top.estimate(4) == 14);
    CHECK(top.lower_bound(4) == 10);
    CHECK(top.floor() == 4);
    CHECK(top.total() == 19);
}

TEST_CASE("TopK merge: items cut by truncation stay bounded by the new floor", "[top_k]") {
    // Two full summaries without evictions (floors 0) and disjoint items:
    // the union has four items of 100, only two survive, so the floor must
    // rise to the third-largest upper bound (100), or the dropped items'
    // frequencies would exceed every bound the summary states.
    TopK<int> a(2), b(2);
    a.add(1, 100);
    a.add(2, 100);
    b.add(3, 100);
    b.add(4, 100);
    const auto m = tally::merged(a, b);
    CHECK(m.size() == 2);
    CHECK(m.floor() == 100);
    CHECK(m.total() == 400);
    for (int x = 1; x <= 4; ++x) {
        INFO("item " << x);
        CHECK(m.estimate(x) >= 100);
        CHECK(m.lower_bound(x) <= 100);
    }
    // a kept item absent from the other side inherits that side's floor as error
    TopK<int> c(2);
    c.add(1, 10);
    c.add(5, 1);
    c.add(6, 1);  // evicts 5 (or 6): floor 1
    const auto mc = tally::merged(a, c);
    CHECK(mc.estimate(1) == 110);
    CHECK(mc.lower_bound(1) == 110);
    CHECK(mc.estimate(2) == 101);  // 100 + floor of c
    CHECK(mc.lower_bound(2) == 100);
    check_guarantee(mc, Truth<int>{{1, 110}, {2, 100}, {5, 1}, {6, 1}});
}

TEST_CASE("TopK under adversarial streams", "[top_k][big]") {
    SECTION("all distinct, then a late heavy hitter") {
        TopK<std::uint64_t> top(64);
        Truth<std::uint64_t> truth;
        const std::size_t n = big(200'000, 40'000);
        for (std::uint64_t i = 0; i < n; ++i) top.add(i), ++truth[i];
        for (std::uint64_t i = 0; i < n / 32; ++i) top.add(~0ull), ++truth[~0ull];  // f = N/33 > N/64
        check_guarantee(top, truth);
        CHECK(top.contains(~0ull));
    }
    SECTION("rotating working set: heavy items change every phase") {
        TopK<std::uint32_t> top(20);
        Truth<std::uint32_t> truth;
        Rng rng(4);
        for (std::uint32_t phase = 0; phase < 40; ++phase)
            for (int i = 0; i < 2000; ++i) {
                const auto x = static_cast<std::uint32_t>(rng.below(4) == 0 ? 1000 * phase + rng.below(10)
                                                                            : 1'000'000 + rng.below(100'000));
                top.add(x);
                ++truth[x];
            }
        check_guarantee(top, truth);
    }
    SECTION("the index stays consistent through many evictions") {
        TopK<std::uint64_t> top(33);
        Rng rng(5);
        for (int i = 0; i < 100'000; ++i) top.add(rng.below(500) * 0x10000000ull);
        std::size_t found = 0;
        for (std::uint64_t x = 0; x < 500; ++x) found += top.contains(x * 0x10000000ull);
        CHECK(found == 33);
        for (const auto& e : top.top()) CHECK(top.contains(e.item));
    }
}

TEST_CASE("TopK floating-point items: one item per value, NaNs as one", "[top_k]") {
    TopK<double> top(4);
    top.add(0.0);
    top.add(-0.0);
    top.add(std::nan(""));
    top.add(-std::nan("1"));
    top.add(1.5, 3);
    CHECK(top.size() == 3);
    CHECK(top.estimate(0.0) == 2);
    CHECK(top.estimate(std::numeric_limits<double>::quiet_NaN()) == 2);
    const auto bytes = top.serialize();
    const auto back = TopK<double>::deserialize(bytes);
    CHECK(back.serialize() == bytes);
    CHECK(back.estimate(-0.0) == 2);
    CHECK(back.estimate(std::nan("")) == 2);
    CHECK(back.estimate(1.5) == 3);
}

TEST_CASE("TopK merges of unequal streams keep the guarantee over the union", "[top_k][big]") {
    const std::size_t k = GENERATE(16, 200);
    INFO("k " << k);
    // shards with different lengths, distributions and key ranges; one stays
    // below k distinct items (not full)
    std::vector<TopK<std::uint64_t>> shards;
    std::vector<Truth<std::uint64_t>> shard_truth;
    Truth<std::uint64_t> truth;
    Rng rng(77);
    const double skew[] = {0.7, 1.0, 1.3, 1.6, 0.9, 1.2, 2.0, 1.1};
    for (int sh = 0; sh < 8; ++sh) {
        Zipf z(50'000, skew[sh]);
        TopK<std::uint64_t> s(k);
        Truth<std::uint64_t> t;
        const std::size_t n = sh == 6 ? 5 : big(20'000, 5'000) * static_cast<std::size_t>(1 + sh % 3);
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint64_t x = (sh % 2 == 0 ? z(rng) : 40'000 - z(rng) % 40'000) + (sh == 7 ? 1'000'000 : 0);
            s.add(x);
            ++t[x];
            ++truth[x];
        }
        check_guarantee(s, t);
        shards.push_back(std::move(s));
        shard_truth.push_back(std::move(t));
    }
    SECTION("sequential") {
        check_guarantee(tally::merge_all(shards), truth);
    }
    SECTION("as a tree, and with the empty summary mixed in") {
        std::vector<TopK<std::uint64_t>> level = shards;
        level.insert(level.begin() + 3, TopK<std::uint64_t>(k));
        while (level.size() > 1) {
            std::vector<TopK<std::uint64_t>> next;
            for (std::size_t i = 0; i + 1 < level.size(); i += 2) next.push_back(tally::merged(level[i], level[i + 1]));
            if (level.size() % 2 == 1) next.push_back(level.back());
            level = std::move(next);
        }
        check_guarantee(level[0], truth);
    }
    SECTION("merged into a summary that keeps streaming") {
        auto m = tally::merged(shards[0], shards[1]);
        Truth<std::uint64_t> t = shard_truth[0];
        for (const auto& [key, f] : shard_truth[1]) t[key] += f;
        for (std::uint64_t i = 0; i < 3000; ++i) m.add(i % 300 + 7'000'000), ++t[i % 300 + 7'000'000];
        m.add(5, 1000);
        t[5] += 1000;
        check_guarantee(m, t);
        m.merge(m);  // self-merge doubles the stream
        for (auto& [key, f] : t) f *= 2;
        check_guarantee(m, t);
    }
}

TEST_CASE("TopK merge laws", "[top_k]") {
    const std::size_t k = 20;
    auto build = [&](std::uint64_t seed, std::size_t n, double s, std::uint64_t offset) {
        TopK<std::string> t(k);
        Zipf z(400, s);
        Rng rng(seed);
        for (std::size_t i = 0; i < n; ++i) {
            std::string key = std::to_string(z(rng) + offset);  // not "k" + ...: g++ 12's false -Wrestrict
            key.insert(0, 1, 'k');
            t.add(key);
        }
        return t;
    };
    const TopK<std::string> empty(k);
    const auto a = build(1, 3000, 1.1, 0);
    const auto b = build(2, 1000, 0.8, 50);
    const auto c = build(3, 10, 1.0, 300);  // not full
    // laws up to "answers consistent with one stream"
    tally::test::check_merge_laws(empty, a, b, c, Consistent{});
    // and exactly, where they hold exactly
    CHECK(tally::merged(a, b).serialize() == tally::merged(b, a).serialize());
    CHECK(tally::merged(a, c).serialize() == tally::merged(c, a).serialize());
    CHECK(tally::merged(a, empty).serialize() == a.serialize());
    CHECK(tally::merged(empty, a).serialize() == a.serialize());
    CHECK(tally::merged(c, empty).serialize() == c.serialize());
}

TEST_CASE("TopK merge is not exactly associative, but every grouping keeps the guarantee", "[top_k]") {
    // k = 1; x wins the tie in (a + b) because of its smaller hash.
    int x = 1, y = 2;
    if (tally::Hasher<int>{}(x) > tally::Hasher<int>{}(y)) std::swap(x, y);
    TopK<int> a(1), b(1), c(1);
    a.add(x, 2);
    b.add(y, 2);
    c.add(y, 2);
    const auto left = tally::merged(tally::merged(a, b), c);   // y: count 4, error 2
    const auto right = tally::merged(a, tally::merged(b, c));  // y: count 4, error 0
    CHECK(left.serialize() != right.serialize());
    CHECK(left.estimate(y) == 4);
    CHECK(left.lower_bound(y) == 2);
    CHECK(right.lower_bound(y) == 4);
    CHECK(Consistent{}(left, right));
    const Truth<int> truth{{x, 2}, {y, 4}};
    check_guarantee(left, truth);
    check_guarantee(right, truth);
}

TEST_CASE("TopK rejects bad parameters and incompatible merges", "[top_k]") {
    CHECK(message_of([] { TopK<int>(0); }) == "tally::TopK: k 0 is out of range [1, 268435456]");
    CHECK(message_of([] { TopK<int>(std::size_t{1} << 29); }) ==
          "tally::TopK: k 536870912 is out of range [1, 268435456]");
    TopK<int> target(5);
    target.add(3, 7);
    tally::test::check_incompatible_merge(target, TopK<int>(6));
    CHECK(message_of([&] { target.merge(TopK<int>(6)); }) == "tally::TopK::merge: k mismatch (5 vs 6)");
}

TEST_CASE("TopK serialization: golden bytes, round trips, bad bytes", "[top_k][serialize]") {
    SECTION("golden: integers") {
        TopK<std::uint32_t> top(3);
        top.add(7u, 3);
        top.add(9u);
        const auto golden = to_bytes({'T', 'A', 'L', 'Y', 4, 1, 0, 0,  // header
                                      1,   4,   0,   0,                // kind unsigned, 4 bytes, reserved
                                      3,   0,   0,   0, 0, 0, 0, 0,    // k
                                      4,   0,   0,   0, 0, 0, 0, 0,    // total
                                      0,   0,   0,   0, 0, 0, 0, 0,    // floor
                                      2,   0,   0,   0, 0, 0, 0, 0,    // n
                                      7,   0,   0,   0,                // item 7
                                      3,   0,   0,   0, 0, 0, 0, 0,    // count
                                      0,   0,   0,   0, 0, 0, 0, 0,    // error
                                      9,   0,   0,   0,                // item 9
                                      1,   0,   0,   0, 0, 0, 0, 0,    // count
                                      0,   0,   0,   0, 0, 0, 0, 0});  // error
        CHECK(top.serialize() == golden);
        CHECK(TopK<std::uint32_t>::deserialize(golden).serialize() == golden);
        CHECK_THROWS_AS(TopK<std::int32_t>::deserialize(golden), tally::FormatError);
        CHECK_THROWS_AS(TopK<std::uint64_t>::deserialize(golden), tally::FormatError);
        CHECK_THROWS_AS(TopK<std::string>::deserialize(golden), tally::FormatError);
    }
    SECTION("golden: strings, after an eviction") {
        TopK<std::string> top(2);
        top.add("ab", 2);
        top.add("c");
        top.add("d");  // evicts "c" (count 1): "d" gets count 2, error 1; floor 1
        const auto golden = to_bytes({'T', 'A', 'L', 'Y', 4, 1, 0, 0,  // header
                                      4,   0,   0,   0,                // kind string
                                      2,   0,   0,   0, 0, 0, 0, 0,    // k
                                      4,   0,   0,   0, 0, 0, 0, 0,    // total
                                      1,   0,   0,   0, 0, 0, 0, 0,    // floor
                                      2,   0,   0,   0, 0, 0, 0, 0,    // n
                                      2,   0,   0,   0, 'a', 'b',      // "ab"
                                      2,   0,   0,   0, 0, 0, 0, 0,    // count
                                      0,   0,   0,   0, 0, 0, 0, 0,    // error
                                      1,   0,   0,   0, 'd',           // "d"
                                      2,   0,   0,   0, 0, 0, 0, 0,    // count
                                      1,   0,   0,   0, 0, 0, 0, 0});  // error
        CHECK(top.serialize() == golden);
        const auto back = TopK<std::string>::deserialize(golden);
        CHECK(back.estimate("d") == 2);
        CHECK(back.lower_bound("d") == 1);
        CHECK(back.floor() == 1);
        CHECK(back.estimate("c") == 1);
        tally::test::check_truncations_throw<TopK<std::string>>(golden);
    }
    SECTION("round trips keep answering and streaming alike") {
        TopK<std::int64_t> top(30);
        Rng rng(8);
        Zipf z(1000, 1.0);
        for (int i = 0; i < 20'000; ++i) top.add(static_cast<std::int64_t>(z(rng)) - 500);
        auto back = TopK<std::int64_t>::deserialize(top.serialize());
        CHECK(back.serialize() == top.serialize());
        // the eviction order depends on contents only, so both continue alike
        TopK<std::int64_t> live = top;
        for (int i = 0; i < 5000; ++i) {
            const auto x = static_cast<std::int64_t>(z(rng)) - 500;
            live.add(x);
            back.add(x);
        }
        CHECK(back.serialize() == live.serialize());
        tally::test::check_truncations_throw<TopK<std::int64_t>>(top.serialize());
        tally::test::check_corruptions_safe<TopK<std::int64_t>>(top.serialize(), 1);
        TopK<std::string> st(8);
        for (int i = 0; i < 300; ++i) st.add(std::string(static_cast<std::size_t>(i % 13), 'x'));
        tally::test::check_corruptions_safe<TopK<std::string>>(st.serialize(), 2);
    }
    SECTION("bytes that break an invariant are refused") {
        TopK<std::uint32_t> top(2);
        top.add(7u, 3);
        top.add(9u);
        top.add(8u);  // evicts 9: 8 -> count 2, error 1, floor 1
        const auto good = top.serialize();
        REQUIRE_NOTHROW(TopK<std::uint32_t>::deserialize(good));
        // layout: 44 header+params; entry 0 = item@44 count@48 error@56; entry 1 = item@64 count@68 error@76
        auto expect = [&](std::vector<std::byte> bad, const std::string& msg) {
            CHECK(message_of<tally::FormatError>([&] { (void)TopK<std::uint32_t>::deserialize(bad); }) == msg);
        };
        auto bad = good;
        put_u64(bad, 76, 3);
        expect(bad, "tally: TopK: entry error exceeds its count");
        bad = good;
        put_u64(bad, 56, 2);
        expect(bad, "tally: TopK: entry error exceeds the floor");
        bad = good;
        put_u64(bad, 28, 3);
        expect(bad, "tally: TopK: entry count below the floor");
        bad = good;
        put_u64(bad, 20, 4);
        expect(bad, "tally: TopK: counts sum to more than total");
        bad = good;
        bad[64] = std::byte{7};
        expect(bad, "tally: TopK: duplicate item");
        bad = good;
        put_u64(bad, 12, 3);  // k 3 with 2 entries: not full, so the floor must be 0
        expect(bad, "tally: TopK: nonzero floor in a summary that is not full");
        bad = good;
        put_u64(bad, 12, 0);
        expect(bad, "tally: TopK: k out of range [1, 2^28]");
        bad = good;
        put_u64(bad, 36, 3);
        expect(bad, "tally: TopK entry count 3 exceeds the maximum 2");
    }
    SECTION("a huge k on the wire allocates nothing up front") {
        TopK<std::uint32_t> empty(TopK<std::uint32_t>::max_k);
        const auto bytes = empty.serialize();
        const auto back = TopK<std::uint32_t>::deserialize(bytes);
        CHECK(back.k() == TopK<std::uint32_t>::max_k);
        CHECK(back.memory_bytes() < 4096);
    }
}
