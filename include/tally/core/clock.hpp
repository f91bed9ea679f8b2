// tally/core/clock.hpp: monotonic nanosecond clocks.
//
// Every time-dependent call in tally takes `std::uint64_t now_ns` explicitly;
// a Clock is only where a caller gets that number. Read it once per request
// and pass the same value on.
#pragma once

#include "../detail/abi.hpp"

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstdint>

#if defined(__linux__) || defined(__APPLE__)
#include <time.h>
#endif

TALLY_BEGIN_NAMESPACE

/// A source of monotonic time in integer nanoseconds.
template <class C>
concept Clock = requires {
    { C::now_ns() } -> std::same_as<std::uint64_t>;
};

/// std::chrono::steady_clock in nanoseconds. Thread-safe. Precise, but several
/// times dearer to read than CoarseClock (docs/benchmarks.md).
struct SteadyClock {
    [[nodiscard]] static std::uint64_t now_ns() noexcept {
        return static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::steady_clock::now().time_since_epoch())
                .count());
    }
};

/// A cheaper monotonic clock with tick-sized resolution (1-4 ms on Linux).
/// CLOCK_MONOTONIC_COARSE on Linux, CLOCK_UPTIME_RAW_APPROX on Apple, else
/// steady_clock. Thread-safe. Good enough for windows of seconds; not for
/// sub-millisecond buckets.
struct CoarseClock {
    [[nodiscard]] static std::uint64_t now_ns() noexcept {
#if defined(__linux__) && defined(CLOCK_MONOTONIC_COARSE)
        timespec ts;
        clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
        return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
               static_cast<std::uint64_t>(ts.tv_nsec);
#elif defined(__APPLE__) && defined(CLOCK_UPTIME_RAW_APPROX)
        return clock_gettime_nsec_np(CLOCK_UPTIME_RAW_APPROX);
#else
        return SteadyClock::now_ns();
#endif
    }
};

/// A clock the test sets by hand. The Tag separates independent clocks:
/// `ManualClock<struct MyTest>`. Thread-safe (one relaxed atomic per Tag).
template <class Tag = void>
struct ManualClock {
    [[nodiscard]] static std::uint64_t now_ns() noexcept { return time_.load(std::memory_order_relaxed); }
    static void set(std::uint64_t t) noexcept { time_.store(t, std::memory_order_relaxed); }
    static void advance(std::uint64_t dt) noexcept { time_.fetch_add(dt, std::memory_order_relaxed); }

  private:
    static inline std::atomic<std::uint64_t> time_{0};
};

static_assert(Clock<SteadyClock> && Clock<CoarseClock> && Clock<ManualClock<>>);

TALLY_END_NAMESPACE
