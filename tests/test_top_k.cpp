#include <tally/sketch/frequency/top_k.hpp>
#include <tally/sketch/frequency/detail/top_k_group.hpp>
#include <tally/sketch/frequency/detail/top_k_string.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <tally/core/summary.hpp>

#include "catch.hpp"
#include "merge_laws.hpp"
#include "test_support.hpp"

using tally::TopK;
using tally::test::big;
using tally::test::to_bytes;
using tally::test::Rng;

using tally::test::Zipf;

// Items whose hashes collide on purpose: `hashes` distinct hashes in all
// (0: a single one), so items pile up in one home group, share its tag, and
// spill over into the groups after it.
struct Clash {
    std::uint32_t v;
    std::uint32_t hashes;
    bool operator==(const Clash& o) const noexcept { return v == o.v; }
};

namespace tally {
template <>
struct Hasher<Clash> {
    std::uint64_t operator()(const Clash& c) const noexcept {
        return c.hashes == 0 ? 0x5555555555555555ull : detail::mix64(c.v % c.hashes);
    }
};
}  // namespace tally

template <>
struct std::hash<Clash> {
    std::size_t operator()(const Clash& c) const noexcept { return c.v; }
};

namespace {


template <class T>
using Truth = std::unordered_map<T, std::uint64_t>;

// Checks every documented guarantee of `s` against the exact counts.
template <class T>
void check_guarantee(const TopK<T>& s, const Truth<T>& truth) {
    std::uint64_t n = 0;
    for (const auto& [key, f] : truth) n += f;
    REQUIRE(s.total() == n);
    const std::uint64_t floor = s.error_bound();
    CHECK(floor * s.k() <= n);  // D <= N / k
    const auto top = s.top();
    CHECK(top.size() == s.size());
    CHECK(top.size() <= s.counters());
    std::uint64_t held = 0;
    for (const auto& e : top) held += e.lower_bound();
    CHECK(floor * s.k() <= n - held);  // D <= (N - held counts) / k
    std::size_t bad_order = 0, bad_entry = 0;
    for (std::size_t i = 0; i < top.size(); ++i) {
        const auto& e = top[i];
        if (i > 0) bad_order += top[i - 1].count < e.count;
        const auto it = truth.find(e.item);
        const std::uint64_t f = it == truth.end() ? 0 : it->second;
        bad_entry += !(e.lower_bound() <= f && f <= e.count && e.error == floor && e.error <= e.count);
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
    REQUIRE(top.k() >= k);
    Truth<std::uint64_t> truth;
    const std::size_t n = big(400'000, 60'000);
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t x = z(rng) * 0x9e3779b97f4a7c15ull;  // spread keys over 64 bits
        const std::uint64_t w = i % 16 == 0 ? 1 + rng.below(10) : 1;
        top.add(x, w);
        truth[x] += w;
    }
    if (k >= 100 || s > 1.0) REQUIRE(heavy_count(truth, top.k()) > 0);
    // purges happened (in the full-size run; the small one may fit k = 1000)
    CHECK((top.error_bound() > 0 || (tally::test::small_tests && truth.size() <= top.counters())));
    check_guarantee(top, truth);
}

TEST_CASE("TopK sizes: TopK(k), with_counters, with_memory", "[top_k]") {
    CHECK(TopK<int>(1).k() == 6);  // the smallest table: 16 slots, 14 counters
    CHECK(TopK<int>(1).counters() == 14);
    CHECK(TopK<int>(100).k() == 192);
    CHECK(TopK<int>(100).counters() == 448);
    CHECK(TopK<int>(193).k() == 384);
    CHECK(TopK<int>::with_counters(448).counters() == 448);
    CHECK(TopK<int>::with_counters(449).counters() == 896);
    CHECK(TopK<std::uint64_t>::with_memory(9000).counters() == 448);  // 512 slots of 16 bytes
    CHECK(TopK<std::uint64_t>::with_memory(9000).k() == 192);
    CHECK(TopK<std::uint64_t>(100).memory_bytes() < 200);  // nothing allocated before the first add
}

TEST_CASE("TopK honours its memory budget", "[top_k][big]") {
    const std::size_t budget = GENERATE(std::size_t{4096}, std::size_t{9000}, std::size_t{70'000});
    INFO("budget " << budget);
    auto top = TopK<std::uint64_t>::with_memory(budget);
    Rng rng(3);
    Zipf z(1'000'000, 1.0);
    std::size_t over = 0, peak = 0;
    for (int i = 0; i < static_cast<int>(big(300'000, 50'000)); ++i) {
        top.add(i % 7 == 0 ? rng.next() : z(rng));
        if (i % 97 == 0) peak = std::max(peak, top.memory_bytes()), over += top.memory_bytes() > budget;
    }
    CHECK(over == 0);
    CHECK(peak <= budget);
    CHECK(peak * 2 > budget);  // and uses a fair share of it
    // strings: the table within the budget, plus at most 4x the most string
    // bytes held at once, plus 64
    if (budget > 9000) return;
    auto st = TopK<std::string>::with_memory(budget);
    std::size_t st_over = 0, peak_held = 0;
    for (int i = 0; i < static_cast<int>(big(20'000, 5'000)); ++i) {
        st.add("key:" + std::to_string(z(rng)) + std::string(rng.below(40), 'x'));
        std::size_t held = 0;
        for (const auto& e : st.top()) held += e.item.size();
        peak_held = std::max(peak_held, held);
        st_over += st.memory_bytes() > budget + 4 * peak_held + 64;
    }
    CHECK(st_over == 0);
}

TEST_CASE("TopK<std::string>: strings up to 16 bytes held as wyhash's words", "[top_k]") {
    Rng rng(21);
    for (std::size_t len = 0; len <= tally::detail::top_k_inline_max; ++len) {
        for (int trial = 0; trial < 50; ++trial) {
            std::string s(len, '\0');
            for (auto& c : s) c = static_cast<char>(trial < 2 ? (trial == 0 ? 0 : 0xff) : rng.below(256));
            const auto key = tally::detail::top_k_string_key(s);
            for (const std::uint64_t seed : {std::uint64_t{0}, std::uint64_t{7}, rng.next()}) {
                INFO("len " << len << " seed " << seed);
                CHECK(tally::detail::top_k_short_hash(key.a, key.b, key.len, tally::detail::top_k_wy_seed(seed)) ==
                      tally::hash64(s.data(), s.size(), seed));
            }
            char back[tally::detail::top_k_inline_max] = {};
            tally::detail::top_k_string_bytes(key.a, key.b, key.len, back);
            CHECK(std::string(back, len) == s);
        }
    }
    // A run of one byte, 4..16 long, has the same two words at every length:
    // only the length tells them apart. Pairs whose tags collide, in a table of
    // one group, meet in the same compare.
    int pairs = 0;
    for (int c = 0; c < 256 && pairs < 20; ++c) {
        for (std::size_t l1 = 4; l1 <= 16; ++l1) {
            for (std::size_t l2 = l1 + 1; l2 <= 16; ++l2) {
                const std::string x(l1, static_cast<char>(c)), y(l2, static_cast<char>(c));
                if (tally::detail::top_k_tag(tally::hash64(x)) != tally::detail::top_k_tag(tally::hash64(y))) continue;
                ++pairs;
                auto one_group = TopK<std::string>::with_counters(14);
                one_group.add(x, 5);
                one_group.add(y, 3);
                one_group.add(std::string_view(y), 1);
                CHECK(one_group.lower_bound(x) == 5);
                CHECK(one_group.lower_bound(y) == 4);
                CHECK(one_group.size() == 2);
            }
        }
    }
    CHECK(pairs >= 20);
    // every string of 0..20 bytes differing from a base in one byte (or only in
    // length, or by NUL bytes) is its own item, short or long
    TopK<std::string> top(4096);
    Truth<std::string> truth;
    std::vector<std::string> keys = {"", std::string(1, '\0'), std::string(2, '\0'), std::string(17, '\0')};
    for (std::size_t len = 1; len <= 20; ++len) {
        const std::string base = std::string("abcdefghijklmnopqrst").substr(0, len);
        keys.push_back(base);
        for (std::size_t at = 0; at < len; ++at) {
            std::string v = base;
            v[at] = 'Z';
            keys.push_back(v);
            v[at] = '\0';
            keys.push_back(v);
        }
    }
    for (std::size_t i = 0; i < keys.size(); ++i) {
        if (truth.count(keys[i]) != 0) continue;
        top.add(keys[i], i + 1);
        truth[keys[i]] = i + 1;
    }
    REQUIRE(top.error_bound() == 0);
    REQUIRE(top.size() == truth.size());
    for (const auto& [item, f] : truth) CHECK(top.lower_bound(item) == f);
    for (const auto& e : top.top()) CHECK(truth.at(e.item) == e.count);
    const auto back = TopK<std::string>::deserialize(top.serialize());
    for (const auto& [item, f] : truth) CHECK(back.lower_bound(item) == f);
    CHECK(back.serialize() == top.serialize());
    // a summary with another seed places them elsewhere and merges them as the same items
    TopK<std::string> other(4096, tally::Seed{12345});
    for (const auto& [item, f] : truth) other.add(item, f);
    top.merge(other);
    for (const auto& [item, f] : truth) CHECK(top.lower_bound(item) == 2 * f);
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
    top.add("", 3);  // the empty string is an item like any other
    truth[""] += 3;
    check_guarantee(top, truth);
    const auto best = top.top(3);
    REQUIRE(best.size() == 3);
    CHECK(best[0].item == "/api/v1/item/0");
    CHECK(top.estimate("/api/v1/item/0") == best[0].count);
    CHECK(top.estimate(std::string("/api/v1/item/0")) == best[0].count);
    CHECK(top.contains(std::string_view("/api/v1/item/0")));
    CHECK_FALSE(top.contains("never seen"));
    CHECK(top.estimate("never seen") == top.error_bound());
    CHECK(top.lower_bound("never seen") == 0);
}

TEST_CASE("TopK is exact while it holds every distinct item", "[top_k]") {
    TopK<int> top(10);
    for (int i = 0; i < 10; ++i) top.add(i, static_cast<std::uint64_t>(i + 1));
    top.add(3, 100);
    top.add(7, 0);  // no-op
    CHECK(top.size() == 10);
    CHECK(top.error_bound() == 0);
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

TEST_CASE("TopK purge subtracts the (3L/8)-th largest count and frees what reaches zero", "[top_k]") {
    auto top = TopK<int>::with_counters(14);  // 16 slots, 14 counters, k = 6
    REQUIRE(top.counters() == 14);
    for (int i = 1; i <= 14; ++i) top.add(i, static_cast<std::uint64_t>(i));
    CHECK(top.error_bound() == 0);
    CHECK(top.size() == 14);  // 7/8 of the table held without a purge
    top.add(15);  // full: the 6th largest count is 9; 10..14 survive with 1..5
    CHECK(top.error_bound() == 9);
    CHECK(top.size() == 6);
    for (int i = 1; i <= 9; ++i) CHECK_FALSE(top.contains(i));
    CHECK(top.lower_bound(14) == 5);
    CHECK(top.estimate(14) == 14);
    CHECK(top.lower_bound(15) == 1);
    CHECK(top.estimate(15) == 10);
    CHECK(top.estimate(3) == 9);  // not held: bounded by D
    CHECK(top.total() == 106);
    // large counts take the radix path of the selection
    auto big_counts = TopK<int>::with_counters(14);
    for (int i = 1; i <= 14; ++i) big_counts.add(i, 1000 + static_cast<std::uint64_t>(i) * 300);
    big_counts.add(99, 5);
    CHECK(big_counts.error_bound() == 1000 + 9 * 300);
    CHECK(big_counts.lower_bound(14) == 5 * 300);
    CHECK(big_counts.lower_bound(99) == 5);
}

TEST_CASE("TopK under adversarial streams", "[top_k][big]") {
    SECTION("all distinct, then a late heavy hitter") {
        TopK<std::uint64_t> top(64);
        Truth<std::uint64_t> truth;
        const std::size_t n = big(200'000, 40'000);
        for (std::uint64_t i = 0; i < n; ++i) top.add(i), ++truth[i];
        const std::uint64_t heavy = n / (top.k() - 1);  // f > (N + f) / k
        for (std::uint64_t i = 0; i < heavy; ++i) top.add(~0ull), ++truth[~0ull];
        check_guarantee(top, truth);
        CHECK(top.contains(~0ull));
    }
    SECTION("all distinct with weights: every add purges") {
        auto top = TopK<std::uint32_t>::with_counters(14);
        Truth<std::uint32_t> truth;
        Rng rng(11);
        for (std::uint32_t i = 0; i < 20'000; ++i) {
            const std::uint64_t w = 1 + rng.below(i % 2 ? 1'000'000 : 3);
            top.add(i, w);
            truth[i] += w;
        }
        check_guarantee(top, truth);
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
    SECTION("keys that share their low hash bits keep the table consistent") {
        TopK<std::uint64_t> top(33);
        Rng rng(5);
        Truth<std::uint64_t> truth;
        for (int i = 0; i < 100'000; ++i) {
            const std::uint64_t x = rng.below(500) * 0x10000000ull;
            top.add(x);
            ++truth[x];
        }
        check_guarantee(top, truth);
        for (const auto& e : top.top()) CHECK(top.contains(e.item));
    }
    SECTION("saturating counts") {
        TopK<int> top(1);
        top.add(1, ~0ull - 5);
        top.add(1, 100);
        CHECK(top.total() == ~0ull);
        CHECK(top.estimate(1) == ~0ull);
    }
}

TEST_CASE("TopK tag groups: SSE2 and the portable path give the same exact masks", "[top_k]") {
    using tally::detail::TopKTag;
    Rng rng(21);
    for (int round = 0; round < 4000; ++round) {
        // tags drawn from a few values so that matches and empties are frequent
        TopKTag tags[16];
        for (auto& t : tags)
            t = rng.below(4) == 0 ? tally::detail::top_k_empty_tag : TopKTag(rng.below(round % 2 ? 4 : 128));
        const auto want_tag = TopKTag(rng.below(round % 2 ? 4 : 128));
        std::uint32_t match = 0, empty = 0;
        for (std::uint32_t j = 0; j < 16; ++j) {
            match |= static_cast<std::uint32_t>(tags[j] == want_tag) << j;
            empty |= static_cast<std::uint32_t>(tags[j] == tally::detail::top_k_empty_tag) << j;
        }
        const auto swar = tally::detail::TopKGroupSwar::load(tags);
        const auto group = tally::detail::TopKGroup::load(tags);
        REQUIRE(swar.match(want_tag) == match);
        REQUIRE(swar.empty() == empty);
        REQUIRE(group.match(want_tag) == match);
        REQUIRE(group.empty() == empty);
        const auto keep = static_cast<std::uint32_t>(rng.below(1u << 16));
        TopKTag a[16], b[16];
        std::copy(tags, tags + 16, a);
        std::copy(tags, tags + 16, b);
        tally::detail::TopKGroupSwar::keep_only(a, keep);
        tally::detail::TopKGroup::keep_only(b, keep);
        for (std::uint32_t j = 0; j < 16; ++j) {
            const TopKTag want = (keep >> j) & 1u ? tags[j] : tally::detail::top_k_empty_tag;
            REQUIRE(a[j] == want);
            REQUIRE(b[j] == want);
        }
        std::size_t bits = 0;
        for (std::uint32_t j = 0; j < 16; ++j) bits += (keep >> j) & 1u;
        REQUIRE(tally::detail::popcount16(keep) == bits);
    }
}

TEST_CASE("TopK with colliding hashes: long probe paths through full groups, purges re-place them", "[top_k]") {
    // 0: every item has the same hash; 1..7: that many hashes (a few home groups,
    // each item sharing its tag with a seventh of the others)
    const std::uint32_t hashes = GENERATE(0u, 1u, 3u, 7u);
    INFO("distinct hashes " << hashes);
    const std::size_t k = GENERATE(std::size_t{6}, std::size_t{100});
    TopK<Clash> top(k);
    Truth<Clash> truth;
    Rng rng(hashes * 10 + k);
    Zipf z(3000, 1.1);
    for (int i = 0; i < 30'000; ++i) {
        const Clash x{static_cast<std::uint32_t>(rng.below(5) == 0 ? rng.below(1u << 30) : z(rng)), hashes};
        const std::uint64_t w = i % 50 == 0 ? 1 + rng.below(20) : 1;
        top.add(x, w);
        truth[x] += w;
    }
    CHECK(top.error_bound() > 0);  // purges ran
    check_guarantee(top, truth);
    // merging two such summaries (the other side's items placed one by one)
    TopK<Clash> other(k);
    for (int i = 0; i < 5000; ++i) {
        const Clash x{static_cast<std::uint32_t>(z(rng)), hashes};
        other.add(x);
        ++truth[x];
    }
    top.merge(other);
    check_guarantee(top, truth);
}

TEST_CASE("TopK with a seed: same answers, other layout, the seed travels", "[top_k]") {
    const tally::Seed seed{0x1234567};
    TopK<std::uint64_t> a(50), b(50, seed);
    TopK<std::string> sa(50), sb(50, tally::Seed::random());
    Truth<std::uint64_t> truth;
    Rng rng(6);
    Zipf z(10'000, 1.1);
    for (int i = 0; i < 50'000; ++i) {
        const std::uint64_t x = z(rng);
        a.add(x), b.add(x), ++truth[x];
        sa.add(std::to_string(x)), sb.add(std::to_string(x));
    }
    check_guarantee(a, truth);
    check_guarantee(b, truth);
    CHECK(b.seed() == seed);
    // the same state: purges depend on counts only, never on the layout
    CHECK(a.error_bound() == b.error_bound());
    CHECK(sa.error_bound() == sb.error_bound());
    for (const auto& e : a.top()) CHECK(b.lower_bound(e.item) == e.lower_bound());
    const auto back = TopK<std::uint64_t>::deserialize(b.serialize());
    CHECK(back.seed() == seed);
    CHECK(back.serialize() == b.serialize());
    // merging across seeds rehashes the other side's items
    auto m = tally::merged(a, b);
    Truth<std::uint64_t> twice = truth;
    for (auto& [key, f] : twice) f *= 2;
    check_guarantee(m, twice);
}

TEST_CASE("TopK clear forgets the stream, keeps the sizes", "[top_k]") {
    TopK<std::string> top(10, tally::Seed{9});
    for (int i = 0; i < 1000; ++i) top.add(std::to_string(i % 37));
    top.clear();
    CHECK(top.empty());
    CHECK(top.size() == 0);
    CHECK(top.total() == 0);
    CHECK(top.error_bound() == 0);
    CHECK_FALSE(top.contains("1"));
    CHECK(top.serialize() == TopK<std::string>(10, tally::Seed{9}).serialize());
    top.add("x", 2);
    CHECK(top.estimate("x") == 2);
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

TEST_CASE("TopK merge: items cut by truncation stay bounded by the new error bound", "[top_k]") {
    // a holds 14 items of 100..113, b 14 other items of 50: the union has 28
    // counts, the 15th largest is 50, so b's items go and D rises to 50.
    auto a = TopK<int>::with_counters(14), b = TopK<int>::with_counters(14);
    Truth<int> truth;
    for (int i = 0; i < 14; ++i) a.add(i, 100 + static_cast<std::uint64_t>(i)), truth[i] = 100 + i;
    for (int i = 14; i < 28; ++i) b.add(i, 50), truth[i] = 50;
    const auto m = tally::merged(a, b);
    CHECK(m.size() == 14);
    CHECK(m.error_bound() == 50);
    CHECK(m.total() == a.total() + b.total());
    CHECK(m.lower_bound(0) == 50);
    CHECK(m.estimate(0) == 100);
    CHECK(m.estimate(20) == 50);
    check_guarantee(m, truth);
    // a kept item absent from the other side: its count there is 0, its error the other's D
    auto c = TopK<int>::with_counters(14);
    for (int i = 100; i < 115; ++i) c.add(i, 2);  // 15 items: purges, D = 2
    c.add(0, 10);
    REQUIRE(c.error_bound() == 2);
    // union: 0 -> 110, 1..13 -> 101..113, 114 -> 2: 15 items, so the 15th largest (2) goes
    const auto mc = tally::merged(a, c);
    CHECK(mc.error_bound() == 4);
    CHECK(mc.lower_bound(0) == 108);
    CHECK(mc.estimate(0) == 112);
    CHECK(mc.lower_bound(1) == 99);
    CHECK(mc.estimate(1) == 103);
    CHECK_FALSE(mc.contains(114));
}

TEST_CASE("TopK merges of 16 unequal shards keep the guarantee over the union", "[top_k][big]") {
    const std::size_t k = GENERATE(16, 200);
    INFO("k " << k);
    std::vector<TopK<std::uint64_t>> shards;
    std::vector<Truth<std::uint64_t>> shard_truth;
    Truth<std::uint64_t> truth;
    Rng rng(77);
    const double skew[] = {0.7, 1.0, 1.3, 1.6, 0.9, 1.2, 2.0, 1.1};
    for (int sh = 0; sh < 16; ++sh) {
        Zipf z(50'000, skew[sh % 8]);
        TopK<std::uint64_t> s(k, tally::Seed{static_cast<std::uint64_t>(sh % 3)});
        Truth<std::uint64_t> t;
        const std::size_t n = sh == 6 ? 5 : big(10'000, 3'000) * static_cast<std::size_t>(1 + sh % 3);
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint64_t x = (sh % 2 == 0 ? z(rng) : 40'000 - z(rng) % 40'000) + (sh == 7 ? 1'000'000 : 0);
            const std::uint64_t w = sh % 4 == 3 ? 1 + rng.below(5) : 1;
            s.add(x, w);
            t[x] += w;
            truth[x] += w;
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
    auto build = [](std::uint64_t seed, std::size_t n, double s, std::uint64_t offset) {
        TopK<std::string> t(20);
        Zipf z(400, s);
        Rng rng(seed);
        for (std::size_t i = 0; i < n; ++i) {
            std::string key = std::to_string(z(rng) + offset);  // not "k" + ...: g++ 12's false -Wrestrict
            key.insert(0, 1, 'k');
            t.add(key);
        }
        return t;
    };
    const TopK<std::string> empty(20);
    const auto a = build(1, 3000, 1.1, 0);
    const auto b = build(2, 1000, 0.8, 50);
    const auto c = build(3, 10, 1.0, 300);  // few items: no purge
    REQUIRE(a.error_bound() > 0);
    // laws up to "answers consistent with one stream" (which items survive a
    // purge depends on the grouping, so associativity is not exact)
    tally::test::check_merge_laws(empty, a, b, c, Consistent{});
    // and exactly, where they hold exactly
    CHECK(tally::merged(a, b).serialize() == tally::merged(b, a).serialize());
    CHECK(tally::merged(a, c).serialize() == tally::merged(c, a).serialize());
    CHECK(tally::merged(a, empty).serialize() == a.serialize());
    CHECK(tally::merged(empty, a).serialize() == a.serialize());
    CHECK(tally::merged(c, empty).serialize() == c.serialize());
    STATIC_REQUIRE(tally::MergeableSummary<TopK<std::uint64_t>>);
}

TEST_CASE("TopK rejects bad parameters and incompatible merges", "[top_k]") {
    CHECK_THROWS_WITH(TopK<int>(0), "tally::TopK::TopK: k 0 is out of range [1, 268435456]");
    CHECK_THROWS_WITH(TopK<int>(std::size_t{1} << 29), "tally::TopK::TopK: k 536870912 is out of range [1, 268435456]");
    CHECK_THROWS_WITH(TopK<int>::with_counters(0),
                      "tally::TopK::with_counters: counters 0 is out of range [1, 939524096]");
    CHECK_THROWS_WITH(TopK<std::uint64_t>::with_memory(100),
                      "tally::TopK::with_memory: bytes 100 is out of range [" +
                          std::to_string(TopK<std::uint64_t>::with_counters(1).memory_bytes() + 16 * (16 + 1)) + ", " +
                          std::to_string(std::numeric_limits<std::size_t>::max()) + "]");
    TopK<int> target(5);
    target.add(3, 7);
    tally::test::check_incompatible_merge(target, TopK<int>(7));
    CHECK_THROWS_WITH(target.merge(TopK<int>(7)),
                      "tally::TopK::merge: counters 14 does not match the other summary's counters 28");
}

TEST_CASE("TopK serialization: golden bytes, round trips, bad bytes", "[top_k][serialize]") {
    SECTION("golden: version 3") {
        auto top = TopK<std::uint32_t>::with_counters(14);
        top.add(7u, 3);
        top.add(9u);
        const auto golden = to_bytes({'T', 'A', 'L', 'Y', 4, 3, 0, 0,  // header, version 3
                                      1,   4,   4,   0,                // kind unsigned, 4 bytes, 2^4 slots, reserved
                                      6,   0,   0,   0, 0, 0, 0, 0,    // k
                                      0,   0,   0,   0, 0, 0, 0, 0,    // seed
                                      4,   0,   0,   0, 0, 0, 0, 0,    // total
                                      0,   0,   0,   0, 0, 0, 0, 0,    // error bound D
                                      2,   0,   0,   0, 0, 0, 0, 0,    // n
                                      7,   0,   0,   0,                // item 7
                                      3,   0,   0,   0, 0, 0, 0, 0,    // count
                                      9,   0,   0,   0,                // item 9
                                      1,   0,   0,   0, 0, 0, 0, 0});  // count
        CHECK(top.serialize() == golden);
        CHECK(TopK<std::uint32_t>::deserialize(golden).serialize() == golden);
        CHECK_THROWS_AS(TopK<std::int32_t>::deserialize(golden), tally::FormatError);
        CHECK_THROWS_AS(TopK<std::uint64_t>::deserialize(golden), tally::FormatError);
        CHECK_THROWS_AS(TopK<std::string>::deserialize(golden), tally::FormatError);
        tally::test::check_truncations_throw<TopK<std::uint32_t>>(golden);
        // version 2 (tables filled to 3L/4) has the same layout: it reads, and writes back as version 3
        auto v2 = golden;
        v2[5] = std::byte{2};
        const auto old = TopK<std::uint32_t>::deserialize(v2);
        CHECK(old.k() == 6);
        CHECK(old.total() == 4);
        CHECK(old.lower_bound(7u) == 3);
        CHECK(old.estimate(9u) == 1);
        CHECK(old.serialize() == golden);
        tally::test::check_truncations_throw<TopK<std::uint32_t>>(v2);
        // a version 2 table of 16 slots held at most 12 entries, a version 3 table 14
        put_u64(v2, 44, 13);
        CHECK_THROWS_WITH(TopK<std::uint32_t>::deserialize(v2), "tally: TopK entry count 13 exceeds the maximum 12");
        auto v3 = golden;
        put_u64(v3, 44, 13);  // within the version 3 limit: refused only for the missing entries
        CHECK_THROWS_AS(TopK<std::uint32_t>::deserialize(v3), tally::FormatError);
        put_u64(v3, 44, 15);
        CHECK_THROWS_WITH(TopK<std::uint32_t>::deserialize(v3), "tally: TopK entry count 15 exceeds the maximum 14");
    }
    SECTION("old format (version 1, Space-Saving) still reads") {
        const auto v1 = to_bytes({'T', 'A', 'L', 'Y', 4, 1, 0, 0,  // header
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
        const auto old = TopK<std::uint32_t>::deserialize(v1);
        CHECK(old.k() == 3);
        CHECK(old.total() == 4);
        CHECK(old.error_bound() == 0);
        CHECK(old.estimate(7u) == 3);
        CHECK(old.lower_bound(7u) == 3);
        CHECK(old.estimate(9u) == 1);
        CHECK(old.estimate(8u) == 0);
        tally::test::check_truncations_throw<TopK<std::uint32_t>>(v1);
        // strings, after an eviction: "ab" 2 (error 0), "d" 2 (error 1), floor 1
        const auto v1s = to_bytes({'T', 'A', 'L', 'Y', 4, 1, 0, 0,  // header
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
        auto olds = TopK<std::string>::deserialize(v1s);
        CHECK(olds.k() == 2);
        check_guarantee(olds, Truth<std::string>{{"ab", 2}, {"c", 1}, {"d", 1}});
        CHECK(olds.estimate("ab") == 2);
        CHECK(olds.lower_bound("ab") == 1);
        CHECK(olds.estimate("c") == 1);
        // it keeps streaming and merging like any other summary
        olds.add("ab", 10);
        check_guarantee(olds, Truth<std::string>{{"ab", 12}, {"c", 1}, {"d", 1}});
        const auto again = TopK<std::string>::deserialize(olds.serialize());
        CHECK(again.serialize() == olds.serialize());
        // the old invariants are still enforced
        auto bad = v1;
        put_u64(bad, 56, 1);  // error of 7 above the floor
        CHECK_THROWS_WITH(TopK<std::uint32_t>::deserialize(bad), "tally: TopK: entry error exceeds the floor");
        bad = v1;
        put_u64(bad, 20, 3);
        CHECK_THROWS_WITH(TopK<std::uint32_t>::deserialize(bad), "tally: TopK: counts sum to more than total");
    }
    SECTION("round trips keep answering and streaming alike") {
        TopK<std::int64_t> top(30, tally::Seed{77});
        Rng rng(8);
        Zipf z(1000, 1.0);
        for (int i = 0; i < 20'000; ++i) top.add(static_cast<std::int64_t>(z(rng)) - 500);
        auto back = TopK<std::int64_t>::deserialize(top.serialize());
        CHECK(back.serialize() == top.serialize());
        // purges depend on counts only, so both continue alike
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
        auto top = TopK<std::uint32_t>::with_counters(14);
        for (std::uint32_t i = 1; i <= 14; ++i) top.add(i, i);
        top.add(15u);  // D = 9; held 10..14 as 1..5, 15 as 1
        const auto good = top.serialize();
        REQUIRE_NOTHROW(TopK<std::uint32_t>::deserialize(good));
        // layout: 52 bytes of header and parameters, then 12-byte entries (item, count)
        auto bad = good;
        put_u64(bad, 56, 0);
        CHECK_THROWS_WITH(TopK<std::uint32_t>::deserialize(bad), "tally: TopK: entry count is zero");
        bad = good;
        put_u64(bad, 36, 16);  // D 16 > (106 - 16) / 6
        CHECK_THROWS_WITH(TopK<std::uint32_t>::deserialize(bad), "tally: TopK: error bound exceeds (total - counts) / k");
        bad = good;
        put_u64(bad, 28, 10);
        CHECK_THROWS_WITH(TopK<std::uint32_t>::deserialize(bad), "tally: TopK: counts sum to more than total");
        bad = good;
        bad[64] = bad[52];
        CHECK_THROWS_WITH(TopK<std::uint32_t>::deserialize(bad), "tally: TopK: duplicate item");
        bad = good;
        put_u64(bad, 12, 7);
        CHECK_THROWS_WITH(TopK<std::uint32_t>::deserialize(bad), "tally: TopK: k out of range [1, 3/8 of the table]");
        bad = good;
        bad[10] = std::byte{31};
        CHECK_THROWS_WITH(TopK<std::uint32_t>::deserialize(bad), "tally: TopK: table size out of range [2^4, 2^30]");
        bad = good;
        bad[11] = std::byte{1};
        CHECK_THROWS_WITH(TopK<std::uint32_t>::deserialize(bad), "tally: TopK: reserved byte is not zero");
        bad = good;
        put_u64(bad, 44, 15);
        CHECK_THROWS_WITH(TopK<std::uint32_t>::deserialize(bad), "tally: TopK entry count 15 exceeds the maximum 14");
    }
    SECTION("a huge table on the wire allocates nothing up front") {
        TopK<std::uint32_t> empty(TopK<std::uint32_t>::max_k);
        const auto bytes = empty.serialize();
        const auto back = TopK<std::uint32_t>::deserialize(bytes);
        CHECK(back.k() == empty.k());
        CHECK(back.memory_bytes() < 4096);
    }
}
