// AdaptiveThrottle: the SRE book's formula at given counts, exactly; the
// draws against the probability (with a negative control); the window.
#include <tally/limit/adaptive_throttle.hpp>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "catch.hpp"

namespace {
constexpr std::uint64_t second = 1'000'000'000;

// A throttle holding r requests and a accepts, all at t (one bucket: exact).
tally::AdaptiveThrottle with_counts(int r, int a, double k = 2.0, std::uint64_t t = 1000 * second) {
    tally::AdaptiveThrottle th({.window_ns = 60 * second, .k = k, .seed = 1});
    for (int i = 0; i < a; ++i) th.on_accept(t);
    for (int i = 0; i < r; ++i) (void)th.allow(t);
    return th;
}
}  // namespace

TEST_CASE("AdaptiveThrottle: p = max(0, (requests - K accepts) / (requests + 1)) at given counts",
          "[adaptive_throttle]") {
    const std::uint64_t t = 1000 * second;
    struct Case {
        int r, a;
        double k;
        double p;
    };
    for (const Case c : {Case{0, 0, 2, 0.0}, Case{100, 100, 2, 0.0}, Case{100, 50, 2, 0.0},
                         Case{100, 40, 2, 20.0 / 101}, Case{100, 0, 2, 100.0 / 101}, Case{1000, 100, 2, 800.0 / 1001},
                         Case{1000, 100, 1.5, 850.0 / 1001}, Case{10, 3, 3, 1.0 / 11}, Case{7, 0, 2, 7.0 / 8}}) {
        auto th = with_counts(c.r, c.a, c.k, t);
        INFO("requests " << c.r << " accepts " << c.a << " k " << c.k);
        CHECK(th.requests(t) == c.r);
        CHECK(th.accepts(t) == c.a);
        CHECK(th.reject_probability(t) == (c.r - c.k * c.a) / (c.r + 1) * (c.p > 0 ? 1 : 0));
        CHECK(th.reject_probability(t) == Approx(c.p).margin(1e-15));
    }
}

TEST_CASE("AdaptiveThrottle: rejections follow p; a healthy backend is never throttled", "[adaptive_throttle]") {
    const std::uint64_t t = 1000 * second;
    // Frozen counts: a large history, so 10,000 more requests move p little.
    auto th = with_counts(200'000, 50'000, 2.0, t);
    const double p0 = th.reject_probability(t);
    CHECK(p0 == Approx(100'000.0 / 200'001));
    int rejected = 0;
    const int n = 10'000;
    for (int i = 0; i < n; ++i) rejected += th.allow(t) ? 0 : 1;
    const double p1 = th.reject_probability(t);
    // Binomial: within 5 sigma of n * p (p between p0 and p1).
    const double lo = n * p0 - 5 * std::sqrt(n * p0 * (1 - p0));
    const double hi = n * p1 + 5 * std::sqrt(n * p1 * (1 - p1));
    CHECK(rejected >= lo);
    CHECK(rejected <= hi);
    // Negative control: every request accepted, nothing is rejected.
    tally::AdaptiveThrottle healthy({.seed = 3});
    int healthy_rejected = 0;
    for (int i = 0; i < n; ++i) {
        const std::uint64_t now = t + static_cast<std::uint64_t>(i) * 1'000'000;
        if (healthy.allow(now))
            healthy.on_accept(now);
        else
            ++healthy_rejected;
    }
    CHECK(healthy_rejected == 0);
    // Same seed, same decisions.
    auto a = with_counts(1000, 100, 2.0, t), b = with_counts(1000, 100, 2.0, t);
    for (int i = 0; i < 1000; ++i) REQUIRE(a.allow(t) == b.allow(t));
}

TEST_CASE("AdaptiveThrottle: counts leave with the window; the backend's recovery ends the throttling",
          "[adaptive_throttle]") {
    const std::uint64_t t = 1000 * second;
    auto th = with_counts(1000, 0, 2.0, t);
    CHECK(th.reject_probability(t) > 0.99);
    CHECK(th.reject_probability(t + 61 * second) == 0.0);  // window 60 s, bucket 1 s: all gone
    CHECK(th.requests(t + 61 * second) == 0.0);
}

TEST_CASE("AdaptiveThrottle: bad options throw naming the parameter", "[adaptive_throttle]") {
    auto message = [](auto make) -> std::string {
        try {
            make();
        } catch (const std::invalid_argument& e) {
            return e.what();
        }
        return "no exception";
    };
    CHECK(message([] { tally::AdaptiveThrottle({.k = 0.5}); }).find("k 0.5") != std::string::npos);
    CHECK(message([] { tally::AdaptiveThrottle({.window_ns = 10}); }).find("window_ns 10") != std::string::npos);
    CHECK(tally::AdaptiveThrottle().options().k == 2.0);
}
