// tally/limit/adaptive_throttle.hpp: client-side adaptive throttling, as the
// Google SRE book describes it ("Handling Overload").
#pragma once

#include "../detail/abi.hpp"

#include <cstdint>
#include <string>

#include "../detail/throw.hpp"
#include "../window/sliding_counter.hpp"

TALLY_BEGIN_NAMESPACE

/// AdaptiveThrottle::Options.
struct AdaptiveThrottleOptions {
    std::uint64_t window_ns = 120'000'000'000;  ///< the book's two minutes
    double k = 2.0;                             ///< accepts multiplier; lower sheds sooner
    std::uint64_t seed = 0;                     ///< seeds the rejection draws
};

/// AdaptiveThrottle: a client that sheds its own requests once the backend
/// rejects many of them, so rejected work costs the backend nothing (Beyer
/// et al., "Site Reliability Engineering", O'Reilly 2016, ch. 21). Over a
/// sliding window it counts requests (every call to allow, admitted or not)
/// and accepts (on_accept: the backend served it), and rejects locally with
/// probability
///     p = max(0, (requests - k * accepts) / (requests + 1)),
/// drawn from a seeded splitmix64. Counts are SlidingCounter estimates
/// (60 buckets; the oldest weighted by the part still inside the window).
/// With the backend healthy, requests ~ accepts and p = 0; when it accepts
/// only a fraction a < 1/k of requests, p tends to 1 - k a.
/// Memory: about 0.5 KiB. Thread safety: none (one per thread, or a lock).
///
///   tally::AdaptiveThrottle throttle({.seed = 7});
///   if (!throttle.allow(now_ns)) return fail_fast();
///   if (call_backend() != overloaded) throttle.on_accept(now_ns);
class AdaptiveThrottle {
  public:
    using Options = AdaptiveThrottleOptions;

    explicit AdaptiveThrottle(Options o = {})
        : o_(check(o)), requests_(o.window_ns / 60), accepts_(o.window_ns / 60), rng_(o.seed) {}

    /// Counts a request and decides whether to send it (true) or reject it
    /// locally (false).
    bool allow(std::uint64_t now_ns) noexcept {
        const double p = reject_probability(now_ns);
        requests_.add(now_ns);
        if (p <= 0) return true;
        return uniform() >= p;
    }
    /// The backend accepted a request.
    void on_accept(std::uint64_t now_ns) noexcept { accepts_.add(now_ns); }

    /// max(0, (requests - k * accepts) / (requests + 1)) at now_ns.
    [[nodiscard]] double reject_probability(std::uint64_t now_ns) noexcept {
        const double r = requests_.estimate(now_ns);
        const double a = accepts_.estimate(now_ns);
        const double p = (r - o_.k * a) / (r + 1);
        return p > 0 ? p : 0;
    }
    [[nodiscard]] double requests(std::uint64_t now_ns) noexcept { return requests_.estimate(now_ns); }
    [[nodiscard]] double accepts(std::uint64_t now_ns) noexcept { return accepts_.estimate(now_ns); }
    [[nodiscard]] const Options& options() const noexcept { return o_; }

  private:
    static Options check(const Options& o) {
        const char* who = "tally::AdaptiveThrottle::AdaptiveThrottle: ";
        if (o.window_ns < 60)
            detail::throw_invalid_argument(std::string(who) + "window_ns " + std::to_string(o.window_ns) +
                                           " is outside [60, 2^64 - 1]");
        if (!(o.k >= 1.0) || o.k > 1e9)
            detail::throw_invalid_argument(std::string(who) + "k " + std::to_string(o.k) + " is outside [1, 1e9]");
        return o;
    }
    double uniform() noexcept {
        std::uint64_t z = (rng_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        return static_cast<double>(z >> 11) * 0x1.0p-53;
    }

    Options o_;
    SlidingCounter<std::uint32_t, 61> requests_;
    SlidingCounter<std::uint32_t, 61> accepts_;
    std::uint64_t rng_;
};

TALLY_END_NAMESPACE
