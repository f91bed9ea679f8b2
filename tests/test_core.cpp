#include <tally/tally.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
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
    CHECK_THROWS_WITH(tally::merge_all(none), "tally::merge_all: range is empty (need at least one summary)");
    std::vector<Sum> three{{1}, {2}, {4}};
    CHECK(tally::merge_all(three).v == 7);
    CHECK(tally::merged(Sum{3}, Sum{5}).v == 8);
}

namespace {
struct Observed {
    std::uint64_t total() const noexcept { return 0; }
    bool empty() const noexcept { return true; }
    std::size_t memory_bytes() const noexcept { return sizeof(*this); }
    void clear() noexcept {}
};
struct RealWeighted : Observed {
    double total() const noexcept { return 0.5; }
};
struct CountNotTotal {  // the old spelling: count() instead of total()
    std::uint64_t count() const noexcept { return 0; }
    bool empty() const noexcept { return true; }
    std::size_t memory_bytes() const noexcept { return 0; }
    void clear() noexcept {}
};
struct IntMemory : Observed {
    int memory_bytes() const noexcept { return 0; }
};
struct ConstClearOnly {
    std::uint64_t total() const noexcept { return 0; }
    bool empty() const noexcept { return true; }
    std::size_t memory_bytes() const noexcept { return 0; }
};
}  // namespace

TEST_CASE("SummaryObservers pins total, empty, memory_bytes and clear", "[summary]") {
    STATIC_REQUIRE(tally::SummaryObservers<Observed>);
    STATIC_REQUIRE(tally::SummaryObservers<RealWeighted>);
    STATIC_REQUIRE_FALSE(tally::SummaryObservers<CountNotTotal>);
    STATIC_REQUIRE_FALSE(tally::SummaryObservers<IntMemory>);
    STATIC_REQUIRE_FALSE(tally::SummaryObservers<ConstClearOnly>);
}

TEST_CASE("check_range: one message format for every out-of-range parameter", "[primitives]") {
    using tally::detail::Bounds;
    using tally::detail::check_range;
    CHECK_NOTHROW(check_range("tally::X::f", "k", 1, 1, 10));
    CHECK_NOTHROW(check_range("tally::X::f", "k", 10, 1, 10));
    CHECK_THROWS_WITH(check_range("tally::X::f", "k", 0, 1, 10), "tally::X::f: k 0 is out of range [1, 10]");
    CHECK_THROWS_WITH(check_range("tally::X::f", "k", 11, 1, 10), "tally::X::f: k 11 is out of range [1, 10]");
    CHECK_THROWS_AS(check_range("tally::X::f", "k", 11, 1, 10), std::invalid_argument);
    // open ends are exclusive and written with parentheses
    CHECK_THROWS_WITH(check_range("tally::X::f", "fpp", 0.0, 0.0, 1.0, Bounds::open),
                      "tally::X::f: fpp 0 is out of range (0, 1)");
    CHECK_THROWS_WITH(check_range("tally::X::f", "fpp", 1.0, 0.0, 1.0, Bounds::open),
                      "tally::X::f: fpp 1 is out of range (0, 1)");
    CHECK_NOTHROW(check_range("tally::X::f", "fpp", 0.5, 0.0, 1.0, Bounds::open));
    CHECK_THROWS_WITH(check_range("tally::X::f", "q", 0.0, 0.0, 1.0, Bounds::left_open),
                      "tally::X::f: q 0 is out of range (0, 1]");
    CHECK_NOTHROW(check_range("tally::X::f", "q", 1.0, 0.0, 1.0, Bounds::left_open));
    CHECK_THROWS_WITH(check_range("tally::X::f", "q", 1.0, 0.0, 1.0, Bounds::right_open),
                      "tally::X::f: q 1 is out of range [0, 1)");
    CHECK_NOTHROW(check_range("tally::X::f", "q", 0.0, 0.0, 1.0, Bounds::right_open));
    // NaN is never in range
    CHECK_THROWS_WITH(check_range("tally::X::f", "x", std::nan(""), -1.0, 1.0),
                      Catch::Matchers::StartsWith("tally::X::f: x ") &&
                          Catch::Matchers::EndsWith(" is out of range [-1, 1]"));
    // doubles print in the shortest form that reads back exactly
    CHECK(tally::detail::format_number(0.1) == "0.1");
    CHECK(tally::detail::format_number(1e-300) == "1e-300");
    CHECK(tally::detail::format_number(0.30000000000000004) == "0.30000000000000004");
    CHECK(tally::detail::format_number(std::uint64_t{18446744073709551615ull}) == "18446744073709551615");
    CHECK(tally::detail::format_number(-5) == "-5");
    CHECK(tally::detail::format_number(true) == "true");
}

TEST_CASE("join_message: text and integers of every sign and width, in order", "[primitives]") {
    using tally::detail::join_message;
    const std::string who = "tally::X::f";
    CHECK(join_message({who, ": k ", std::uint16_t{7}, " is out of range [8, ", 65535, "]"}) ==
          "tally::X::f: k 7 is out of range [8, 65535]");
    CHECK(join_message({std::int64_t{-5}, " ", std::uint8_t{255}, " ", 0}) == "-5 255 0");
    CHECK(join_message({std::numeric_limits<std::int64_t>::min()}) == "-9223372036854775808");
    CHECK(join_message({std::numeric_limits<std::uint64_t>::max()}) == "18446744073709551615");
    CHECK_THROWS_AS(tally::detail::throw_format_error_of({"bad ", 1}), tally::FormatError);
    CHECK_THROWS_WITH(tally::detail::throw_format_error_of({"bad ", 1}), "bad 1");
}

TEST_CASE("saturating arithmetic and the 128-bit type", "[primitives]") {
    using tally::detail::sat_add;
    using tally::detail::sat_mul;
    constexpr std::uint64_t max64 = ~std::uint64_t{0};
    STATIC_REQUIRE(sat_add<std::uint64_t>(max64 - 1, 1) == max64);
    STATIC_REQUIRE(sat_add<std::uint64_t>(max64, 1) == max64);
    STATIC_REQUIRE(sat_add<std::uint32_t>(4000000000u, 4000000000u) == 4294967295u);
    STATIC_REQUIRE(sat_add<std::uint16_t>(1, 2) == 3);
    STATIC_REQUIRE(sat_mul<std::uint64_t>(std::uint64_t{1} << 32, std::uint64_t{1} << 32) == max64);
    STATIC_REQUIRE(sat_mul<std::uint64_t>(std::uint64_t{1} << 31, std::uint64_t{1} << 32) == std::uint64_t{1} << 63);
    STATIC_REQUIRE(sat_mul<std::uint8_t>(16, 16) == 255);
    STATIC_REQUIRE(sizeof(tally::detail::uint128) == 16);
    const tally::detail::uint128 p = static_cast<tally::detail::uint128>(max64) * max64;
    CHECK(static_cast<std::uint64_t>(p >> 64) == max64 - 1);
    CHECK(static_cast<std::uint64_t>(p) == 1);
}

namespace {
struct UserKey {
    int id;
};
}  // namespace

// A user specialisation in plain `namespace tally`, as users write it: it must
// reach the sketches, whose names live in the ABI namespace.
namespace tally {
template <>
struct Hasher<UserKey> {
    std::uint64_t operator()(const UserKey& k) const noexcept { return detail::mix64(static_cast<std::uint64_t>(k.id)); }
};
}  // namespace tally

TEST_CASE("public names live in the ABI namespace; user specialisations still apply", "[abi]") {
    STATIC_REQUIRE(std::is_same_v<tally::Gcra, tally::TALLY_ABI_NAMESPACE::Gcra>);
    STATIC_REQUIRE(std::is_same_v<tally::detail::uint128, tally::TALLY_ABI_NAMESPACE::detail::uint128>);
    STATIC_REQUIRE(tally::cache_line_size == TALLY_DETAIL_CACHE_LINE_SIZE);
    STATIC_REQUIRE(tally::Hashable<UserKey>);
    CHECK(tally::hash_of(UserKey{7}) == tally::detail::mix64(7));
    tally::HyperLogLog h(10);
    h.add(UserKey{1});
    h.add(UserKey{1});
    h.add(UserKey{2});
    CHECK(h.estimate() == Catch::Approx(2.0).epsilon(0.01));
}
