#include <tally/tally.hpp>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "catch.hpp"
#include "test_support.hpp"

TEST_CASE("platform constants", "[platform]") {
    static_assert(tally::cache_line_size >= 16);
    static_assert((tally::cache_line_size & (tally::cache_line_size - 1)) == 0);
    static_assert(tally::false_sharing_size >= tally::cache_line_size);
#if defined(TALLY_CACHE_LINE_SIZE)
    static_assert(tally::cache_line_size == TALLY_CACHE_LINE_SIZE);
#elif defined(__APPLE__) && defined(__aarch64__)
    static_assert(tally::cache_line_size == 128);
#else
    static_assert(tally::cache_line_size == 64);
#endif
#if defined(__x86_64__)
    static_assert(tally::false_sharing_size == 128);
#endif
    int x = 0;
    tally::prefetch_read(&x);
    tally::prefetch_write(nullptr);  // must not fault
    CHECK(x == 0);
}

TEST_CASE("version macros agree", "[version]") {
    STATIC_REQUIRE(TALLY_VERSION_MAJOR == 0);
    STATIC_REQUIRE(TALLY_VERSION == TALLY_VERSION_MAJOR * 10000 + TALLY_VERSION_MINOR * 100 + TALLY_VERSION_PATCH);
}

TEST_CASE("clocks are monotonic and ManualClock is settable", "[clock]") {
    static_assert(tally::Clock<tally::SteadyClock>);
    static_assert(tally::Clock<tally::CoarseClock>);
    static_assert(tally::Clock<tally::ManualClock<struct A>>);
    const auto s1 = tally::SteadyClock::now_ns();
    const auto s2 = tally::SteadyClock::now_ns();
    CHECK(s2 >= s1);
    CHECK(s1 > 0);
    const auto c1 = tally::CoarseClock::now_ns();
    const auto c2 = tally::CoarseClock::now_ns();
    CHECK(c2 >= c1);
    CHECK(c1 > 0);

    using M1 = tally::ManualClock<struct Tag1>;
    using M2 = tally::ManualClock<struct Tag2>;
    M1::set(1000);
    M2::set(5);
    M1::advance(500);
    CHECK(M1::now_ns() == 1500);
    CHECK(M2::now_ns() == 5);
}

TEST_CASE("merge_all refuses an empty range", "[summary]") {
    struct Sum {
        std::uint64_t v = 0;
        Sum& merge(const Sum& o) { v += o.v; return *this; }
        bool mergeable_with(const Sum&) const { return true; }
        std::vector<std::byte> serialize() const { return {}; }
        static Sum deserialize(std::span<const std::byte>) { return {}; }
    };
    static_assert(tally::MergeableSummary<Sum>);
    std::vector<Sum> none;
    CHECK_THROWS_AS(tally::merge_all(none), std::invalid_argument);
    std::vector<Sum> three{{1}, {2}, {4}};
    CHECK(tally::merge_all(three).v == 7);
    CHECK(tally::merged(Sum{3}, Sum{5}).v == 8);
}
