// Every summary answers the same observers (total, empty, memory_bytes, clear)
// and is a MergeableSummary: pinned at compile time, then checked for meaning.
// One name per idea: each summary's vocabulary is one block of STATIC_REQUIREs
// below ("one name per idea"); a new summary adds its own block.
#include <tally/tally.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "catch.hpp"

namespace {

template <class S>
void check_observers(S s, auto&& add_one) {
    STATIC_REQUIRE(tally::SummaryObservers<S>);
    STATIC_REQUIRE(tally::MergeableSummary<S>);
    CHECK(s.empty());
    CHECK(s.total() == 0);
    CHECK(s.memory_bytes() >= sizeof(S));
    add_one(s);
    CHECK_FALSE(s.empty());
    CHECK(s.total() > 0);
    const S fresh_copy_before_clear = s;
    s.clear();
    CHECK(s.empty());
    CHECK(s.total() == 0);
    CHECK(s.mergeable_with(fresh_copy_before_clear));  // clear keeps the parameters
}

// The ideas, one name each.
template <class S, class... Item>  // point query: estimate(item), or estimate() for a whole-stream count
concept Estimates = requires(const S& s, const Item&... x) { s.estimate(x...); };
template <class S>  // add an item by its 64-bit Hasher hash
concept AddsHash = requires(S& s, std::uint64_t h) { s.add_hash(h); };
template <class S, class... Args>  // checked add: false (nothing changed) when the item is refused
concept TriesAdd = requires(S& s, Args... a) { { s.try_add(a...) } -> std::same_as<bool>; };
template <class S, class Item>  // a batch of items, faster than one add each
concept AddsRange = requires(S& s, const std::vector<Item>& v) { s.add_range(v); };
template <class S>  // the additive error bound of its estimates
concept BoundsError = requires(const S& s) { s.error_bound(); };
template <class S>  // per-slot counts (cells, buckets)
concept HasCounts = requires(const S& s) { s.counts(); };
// Retired names: none of them may come back.
template <class S>
concept RetiredNames = requires(const S& s) { s.seen(); } || requires(const S& s) { s.total_weight(); } ||
                       requires(const S& s) { s.floor(); } || requires(const S& s) { s.approximate_count(); } ||
                       requires(const S& s) { s.counters(); } || requires(const S& s) { s.count(); };
template <class S>
concept RetiredFloor = requires(const S& s) { s.floor(); };
template <class S>  // sampled or exact: true once answers are estimates
concept TellsEstimationMode = requires(const S& s) { { s.is_estimation_mode() } -> std::same_as<bool>; };
template <class S>  // how many hashes or items a sampling summary keeps
concept CountsRetained = requires(const S& s) { s.num_retained(); };
template <class S>  // confidence bounds of the estimate, in standard deviations
concept BoundsEstimate = requires(const S& s) { s.lower_bound(2); s.upper_bound(2); };
template <class S>  // the version of its own byte frame
concept VersionsFrame = requires { { S::format_version } -> std::convertible_to<int>; };
// Retired spellings of those ideas.
template <class S>
concept RetiredSamplingNames = requires(const S& s) { s.retained(); } || requires(const S& s) { s.estimation_mode(); } ||
                               requires { S::smallest_k; } || requires { S::largest_k; };
template <class S>
concept RetiredIsEmpty = requires(const S& c, const typename S::State& st) { c.is_empty(st, std::uint64_t{0}); };

}  // namespace

TEST_CASE("one name per idea", "[summary][vocabulary]") {
    using u64 = std::uint64_t;
    using HLL = tally::HyperLogLog;
    STATIC_REQUIRE((Estimates<HLL> && AddsHash<HLL> && !RetiredNames<HLL>));
    using CM = tally::CountMin<>;
    STATIC_REQUIRE((Estimates<CM, u64> && AddsHash<CM> && BoundsError<CM> && HasCounts<CM> && !RetiredNames<CM>));
    using Top = tally::TopK<u64>;  // TopK::counters() is the table's capacity, a number, not per-slot counts
    STATIC_REQUIRE((Estimates<Top, u64> && BoundsError<Top> && !RetiredFloor<Top>));
    using Bloom = tally::BloomFilter<>;
    STATIC_REQUIRE((Estimates<Bloom> && AddsHash<Bloom> && AddsRange<Bloom, u64> && !RetiredNames<Bloom>));
    STATIC_REQUIRE(!std::is_constructible_v<Bloom, std::size_t, double, std::uint64_t>);  // a seed is a tally::Seed
    using Res = tally::Reservoir<u64>;
    STATIC_REQUIRE((AddsRange<Res, u64> && !RetiredNames<Res>));
    using WRes = tally::WeightedReservoir<u64>;
    STATIC_REQUIRE((TriesAdd<WRes, u64, double> && !RetiredNames<WRes>));
    using TD = tally::TDigest;
    STATIC_REQUIRE((TriesAdd<TD, double> && TriesAdd<TD, double, double> && !RetiredNames<TD>));
    using SC = tally::SlidingCounter<std::uint32_t, 8>;
    STATIC_REQUIRE((HasCounts<SC> && !RetiredNames<SC>));
    STATIC_REQUIRE(!RetiredIsEmpty<SC>);
    using WTD = tally::Windowed<TD, 4>;
    STATIC_REQUIRE((TriesAdd<WTD, u64, double> && !TriesAdd<tally::Windowed<HLL, 4>, u64, u64>));
    using AoD = tally::ArrayOfDoublesSketch;  // a distinct count with values: estimate() and the column sums
    using Tup = tally::TupleSketch<double>;
    STATIC_REQUIRE((Estimates<AoD> && Estimates<Tup> && !AddsHash<AoD> && !RetiredNames<AoD> && !RetiredNames<Tup>));
    STATIC_REQUIRE((TellsEstimationMode<AoD> && CountsRetained<AoD> && BoundsEstimate<AoD> && !RetiredSamplingNames<AoD>));
    STATIC_REQUIRE((TellsEstimationMode<Tup> && CountsRetained<Tup> && BoundsEstimate<Tup> && !RetiredSamplingNames<Tup>));
    using Theta = tally::ThetaSketch;
    STATIC_REQUIRE((Estimates<Theta> && AddsHash<Theta> && TellsEstimationMode<Theta> && CountsRetained<Theta> &&
                    BoundsEstimate<Theta> && !RetiredNames<Theta> && !RetiredSamplingNames<Theta>));
    STATIC_REQUIRE((Theta::min_lg_k == 5 && Theta::max_lg_k == 26));
    using Kll = tally::KllSketch<double>;  // quantiles: no estimate(); rank and quantile instead
    STATIC_REQUIRE((!Estimates<Kll> && TellsEstimationMode<Kll> && CountsRetained<Kll> && !RetiredNames<Kll> &&
                    !RetiredSamplingNames<Kll>));
    STATIC_REQUIRE((Kll::min_k == 8 && Kll::max_k == 65535));
    using Ull = tally::UltraLogLog;
    STATIC_REQUIRE((Estimates<Ull> && AddsHash<Ull> && BoundsEstimate<Ull> && BoundsEstimate<HLL> && !RetiredNames<Ull> &&
                    !RetiredSamplingNames<Ull>));
    STATIC_REQUIRE((Ull::min_precision == 3 && HLL::min_precision == 4 && HLL::max_precision == 18));
    // every summary with a byte frame names its version format_version
    STATIC_REQUIRE((VersionsFrame<HLL> && VersionsFrame<Ull> && VersionsFrame<Theta> && VersionsFrame<Kll> &&
                    VersionsFrame<CM> && VersionsFrame<Top> && VersionsFrame<Bloom> && VersionsFrame<Res> &&
                    VersionsFrame<WRes> && VersionsFrame<TD>));

    // ...and each name means its idea.
    Bloom b(10'000, 0.01);
    std::vector<u64> keys(5000);
    for (u64 i = 0; i < keys.size(); ++i) keys[i] = i * 7919;
    b.add_range(keys);
    CHECK(b.total() == 5000);
    CHECK(b.estimate() == Catch::Approx(5000).epsilon(0.03));
    for (const u64 k : keys) REQUIRE(b.contains(k));
    CM cm(64, 4);
    cm.add(u64{1}, 5);
    u64 cells = 0;
    for (const auto c : cm.counts()) cells += c;
    CHECK(cells == 4 * 5);  // one cell per row took the count
    WRes wr(4, 1);
    CHECK_FALSE(wr.try_add(1, -1.0));
    CHECK_FALSE(wr.try_add(1, std::numeric_limits<double>::quiet_NaN()));
    CHECK(wr.empty());
    CHECK(wr.try_add(1, 2.0));
    CHECK(wr.items_seen() == 1);
    CHECK(wr.total() == 2.0);
    WTD w(1000, TD());
    CHECK_FALSE(w.try_add(1500, std::numeric_limits<double>::quiet_NaN()));
    CHECK(w.empty());
    CHECK(w.try_add(1500, 2.5));
    CHECK(w.try_add(1200, 3.5));     // same bucket
    CHECK(w.try_add(2500, 1.0));     // the next bucket
    CHECK(w.try_add(1700, 4.0));     // late, into a closed bucket
    CHECK_FALSE(w.try_add(1800, std::numeric_limits<double>::quiet_NaN()));  // late and refused: nothing changes
    CHECK(w.total() == 4);
    CHECK(w.view(2500).total() == 4);
    CHECK(w.view(2500).max() == 4.0);
    CHECK(w.try_add(10'500, 1.0));   // far ahead: the ring moves and takes it
    CHECK_FALSE(w.try_add(100, 1.0));  // older than the ring: dropped
    CHECK(w.dropped() == 1);
    Theta th(5);  // 2^5 nominal entries: estimation mode after a few dozen distinct items
    CHECK_FALSE(th.is_estimation_mode());
    for (u64 i = 0; i < 1000; ++i) th.add(i);
    CHECK(th.is_estimation_mode());
    CHECK(th.num_retained() >= 32);
    CHECK(th.num_retained() < 1000);
    CHECK(th.lower_bound(2) <= th.estimate());
    CHECK(th.upper_bound(2) >= th.estimate());
    Kll q(8);
    for (int i = 0; i < 8; ++i) q.add(i);
    CHECK_FALSE(q.is_estimation_mode());
    CHECK(q.num_retained() == 8);
    for (int i = 8; i < 100; ++i) q.add(i);
    CHECK(q.is_estimation_mode());
    CHECK(q.num_retained() < 100);
}

TEST_CASE("every summary answers total, empty, memory_bytes and clear alike", "[summary]") {
    check_observers(tally::HyperLogLog(12), [](auto& s) { s.add(std::uint64_t{42}); });
    check_observers(tally::CountMin<>(64, 4), [](auto& s) { s.add(std::uint64_t{42}); });
    check_observers(tally::CountMin<std::uint64_t>(64, 4), [](auto& s) { s.add(std::uint64_t{42}); });
    check_observers(tally::TopK<std::uint64_t>(8), [](auto& s) { s.add(std::uint64_t{42}); });
    check_observers(tally::TopK<std::string>(8), [](auto& s) { s.add(std::string("x")); });
    check_observers(tally::BloomFilter<>(1000, 0.01), [](auto& s) { s.add(std::uint64_t{42}); });
    check_observers(tally::Reservoir<std::uint64_t>(8, 1), [](auto& s) { s.add(std::uint64_t{42}); });
    check_observers(tally::WeightedReservoir<std::uint64_t>(8, 1), [](auto& s) { s.add(std::uint64_t{42}, 1.0); });
    check_observers(tally::TDigest(), [](auto& s) { s.add(1.5); });
    check_observers(tally::ThetaSketch(10), [](auto& s) { s.add(std::uint64_t{42}); });
    check_observers(tally::ArrayOfDoublesSketch(10, 2), [](auto& s) { s.add(std::uint64_t{42}, {1.0, 2.0}); });
    check_observers(tally::TupleSketch<double>(10), [](auto& s) { s.add(std::uint64_t{42}, 1.0); });
    check_observers(tally::KllSketch<double>(), [](auto& s) { s.add(1.5); });
    check_observers(tally::UltraLogLog(12), [](auto& s) { s.add(std::uint64_t{42}); });
    check_observers(tally::SlidingCounter<std::uint32_t, 8>(1000), [](auto& s) { s.add(5); });
    check_observers(tally::Windowed<tally::HyperLogLog, 8>(1000, tally::HyperLogLog(10)),
                    [](auto& s) { s.add(1500, std::uint64_t{42}); });
    check_observers(tally::Windowed<tally::TDigest, 4>(1000, tally::TDigest()), [](auto& s) { s.add(1500, 2.5); });
}

namespace {
// The limiters' ideas, one name each: allow(now) -> bool is "may this one
// go", try_acquire(now) the attempt whose result converts to bool, limit()
// how many may be in flight or pass; Netflix's Java spellings stay out.
template <class L>
concept Allows = requires(L& l, std::uint64_t now) { { l.allow(now) } -> std::same_as<bool>; };
template <class L>
concept TriesAcquire = requires(L& l, std::uint64_t now) { static_cast<bool>(l.try_acquire(now)); };
template <class L>
concept HasLimit = requires(const L& l) { { l.limit() } -> std::same_as<int>; };
template <class L>
concept JavaNames = requires(L& l) { l.acquire(); } || requires(const L& l) { l.getLimit(); } ||
                    requires(const L& l) { l.get_limit(); } || requires(L& l) { l.onSample(0, 0, 0, false); };
template <class P>
concept PermitVerdicts = requires(P& p, std::uint64_t now) {
    p.success(now);
    p.dropped(now);
    p.ignore();
} && !std::copy_constructible<P> && std::move_constructible<P>;
}  // namespace

TEST_CASE("concurrency limits share the limiters' names", "[summary][vocabulary]") {
    STATIC_REQUIRE((Allows<tally::Gcra> && TriesAcquire<tally::Gcra>));
    STATIC_REQUIRE((Allows<tally::AdaptiveThrottle> && !TriesAcquire<tally::AdaptiveThrottle>));
    using CL = tally::ConcurrencyLimiter<tally::Gradient2>;
    using PL = tally::PartitionedConcurrencyLimiter<tally::Vegas>;
    STATIC_REQUIRE((TriesAcquire<CL> && HasLimit<CL> && !JavaNames<CL> && PermitVerdicts<CL::Permit>));
    STATIC_REQUIRE((HasLimit<PL> && !JavaNames<PL> && PermitVerdicts<PL::Permit>));
    STATIC_REQUIRE((tally::ConcurrencyAlgorithm<tally::Aimd> && tally::ConcurrencyAlgorithm<tally::Vegas> &&
                    tally::ConcurrencyAlgorithm<tally::Gradient2> && tally::ConcurrencyAlgorithm<tally::FixedConcurrency>));
    STATIC_REQUIRE((HasLimit<tally::Aimd> && !JavaNames<tally::Aimd> && !JavaNames<tally::Gradient2>));
    STATIC_REQUIRE(!std::is_convertible_v<tally::Vegas::Options, tally::Vegas>);  // explicit X(Options)

    // ...and the names mean their ideas.
    CL lim(tally::Gradient2({.initial_limit = 1, .min_limit = 1}));
    CHECK(lim.limit() == 1);
    auto p = lim.try_acquire(0);
    CHECK(static_cast<bool>(p));
    CHECK_FALSE(static_cast<bool>(lim.try_acquire(0)));
    p.ignore();
    CHECK(lim.inflight() == 0);
    tally::AdaptiveThrottle th;
    CHECK(th.allow(0));
}

TEST_CASE("Windowed::total is the weight its ring holds", "[summary]") {
    tally::Windowed<tally::CountMin<>, 4> w(1000, tally::CountMin<>(64, 4));
    w.add(0, std::uint64_t{1}, 3u);
    w.add(1500, std::uint64_t{2}, 4u);
    CHECK(w.total() == 7);
    CHECK(w.view(1500).total() == 7);
    w.add(4100, std::uint64_t{3});  // bucket 4: bucket 0 leaves the 4-slot ring
    CHECK(w.total() == 5);
    CHECK(w.view(4100).total() == 5);
}
