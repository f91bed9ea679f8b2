// Shared helpers for tally's tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <tally/detail/primitives.hpp>
#include <tally/limit/decision.hpp>

namespace tally::test {

/// The bytes of the file at `path` (fixtures: golden images written by a
/// reference implementation); std::runtime_error when it cannot be read, so
/// a missing fixture fails the test instead of passing it with no bytes.
inline std::vector<std::byte> read_file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in.good()) throw std::runtime_error("cannot read fixture " + path);
    const std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> out(chars.size());
    if (!chars.empty()) std::memcpy(out.data(), chars.data(), chars.size());
    return out;
}

/// Size of a big statistical test: `full` in optimized builds, `small` in
/// sanitizer and emulator builds (TALLY_SMALL_TESTS). Tests that use it are
/// tagged [big]; their assertions must hold at both sizes.
constexpr std::size_t big(std::size_t full, std::size_t small) noexcept {
#if defined(TALLY_SMALL_TESTS) && TALLY_SMALL_TESTS
    (void)full;
    return small;
#else
    (void)small;
    return full;
#endif
}

inline constexpr bool small_tests =
#if defined(TALLY_SMALL_TESTS) && TALLY_SMALL_TESTS
    true;
#else
    false;
#endif

/// A tiny deterministic generator for tests (SplitMix64): fixed seeds, same
/// sequence on every platform, unlike std::uniform_int_distribution.
class Rng {
  public:
    explicit constexpr Rng(std::uint64_t seed) noexcept : state_(seed) {}
    constexpr std::uint64_t next() noexcept {
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    /// Uniform in [0, n), n > 0 (Lemire's multiply-shift; bias < n / 2^64).
    std::uint64_t below(std::uint64_t n) noexcept {
        return static_cast<std::uint64_t>((static_cast<detail::uint128>(next()) * n) >> 64);
    }
    /// Uniform in [0, 1).
    double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
    std::uint64_t operator()() noexcept { return next(); }
    using result_type = std::uint64_t;
    static constexpr std::uint64_t min() noexcept { return 0; }
    static constexpr std::uint64_t max() noexcept { return ~std::uint64_t{0}; }

  private:
    std::uint64_t state_;
};

/// Zipf(s) over ranks 0..n-1 by inverse CDF: exact, deterministic with Rng.
class Zipf {
  public:
    Zipf(std::size_t n, double s) : cdf_(n) {
        double acc = 0;
        for (std::size_t i = 0; i < n; ++i) cdf_[i] = acc += 1.0 / std::pow(static_cast<double>(i + 1), s);
    }
    std::uint64_t operator()(Rng& rng) const {
        const double u = rng.uniform() * cdf_.back();
        return static_cast<std::uint64_t>(std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
    }

  private:
    std::vector<double> cdf_;
};

/// The what() of the `Exception` that `f()` throws, or "(no exception)".
/// Any other exception propagates, so the test fails on the wrong type too.
/// Prefer CHECK_THROWS_WITH (plus CHECK_THROWS_AS for the type) in new tests.
template <class Exception = std::invalid_argument, class F>
std::string message_of(F&& f) {
    try {
        f();
    } catch (const Exception& e) {
        return e.what();
    }
    return "(no exception)";
}

/// Bytes from a list of byte values (golden frames written out in a test).
inline std::vector<std::byte> to_bytes(std::initializer_list<int> v) {
    std::vector<std::byte> out;
    out.reserve(v.size());
    for (const int b : v) out.push_back(static_cast<std::byte>(b));
    return out;
}
inline std::vector<std::byte> to_bytes(const std::vector<std::uint8_t>& v) {
    std::vector<std::byte> out;
    out.reserve(v.size());
    for (const std::uint8_t b : v) out.push_back(static_cast<std::byte>(b));
    return out;
}

/// `s` after add(s, i) for every i in [0, n), in order.
template <class S, class Add>
S filled(S s, std::uint64_t n, Add&& add) {
    for (std::uint64_t i = 0; i < n; ++i) add(s, i);
    return s;
}

/// A Decision on one line, for test messages.
inline std::string show(const Decision& d) {
    return std::string(d.allowed ? "allowed" : "denied") + " remaining " + std::to_string(d.remaining) + " retry " +
           std::to_string(d.retry_after_ns) + " reset " + std::to_string(d.reset_after_ns) +
           (d.degraded ? " DEGRADED" : "");
}

}  // namespace tally::test
