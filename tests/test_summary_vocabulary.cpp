// Every summary answers the same observers (total, empty, memory_bytes, clear)
// and is a MergeableSummary: pinned at compile time, then checked for meaning.
#include <tally/tally.hpp>

#include <cstdint>
#include <string>

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

}  // namespace

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
    check_observers(tally::SlidingCounter<std::uint32_t, 8>(1000), [](auto& s) { s.add(5); });
    check_observers(tally::Windowed<tally::HyperLogLog, 8>(1000, tally::HyperLogLog(10)),
                    [](auto& s) { s.add(1500, std::uint64_t{42}); });
    check_observers(tally::Windowed<tally::TDigest, 4>(1000, tally::TDigest()), [](auto& s) { s.add(1500, 2.5); });
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
