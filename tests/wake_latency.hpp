// tests/wake_latency.hpp: how late this machine wakes a sleeping thread,
// measured while a test runs, so a timing assertion can bound a call by its
// deadline plus what the scheduler was measured to add in that interval
// instead of by a guess. A background thread sleeps 1 ms at a time and
// records how much later than asked it woke; worst_between(a, b) is the
// worst lateness of the sleeps that overlap [a, b]. A call that waits in
// poll() until its deadline wakes the same way, so on a quiet machine the
// bound is the deadline plus a millisecond or two, and on a loaded one it
// grows by what the test saw, not by what someone expected.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

namespace tally_test {

class WakeLatency {
  public:
    using Clock = std::chrono::steady_clock;

    WakeLatency() : thread_([this] { run(); }) {}
    WakeLatency(const WakeLatency&) = delete;
    WakeLatency& operator=(const WakeLatency&) = delete;
    ~WakeLatency() {
        stop_.store(true);
        thread_.join();
    }

    /// Worst lateness of the probe's sleeps that overlap [from, to] (waits
    /// for the probe to pass `to` first, at most 200 ms).
    Clock::duration worst_between(Clock::time_point from, Clock::time_point to) {
        for (int i = 0; i < 200 && latest() < to; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::lock_guard<std::mutex> lock(mu_);
        Clock::duration worst{};
        for (const Sample& s : samples_)
            if (s.end >= from && s.start <= to) worst = std::max(worst, s.late);
        return worst;
    }
    /// Worst lateness seen since `from`.
    Clock::duration worst_since(Clock::time_point from) { return worst_between(from, Clock::now()); }

  private:
    struct Sample {
        Clock::time_point start, end;
        Clock::duration late;
    };
    Clock::time_point latest() {
        std::lock_guard<std::mutex> lock(mu_);
        return samples_.empty() ? Clock::time_point{} : samples_.back().end;
    }
    void run() {
        constexpr auto nap = std::chrono::milliseconds(1);
        while (!stop_.load()) {
            const auto start = Clock::now();
            std::this_thread::sleep_for(nap);
            const auto end = Clock::now();
            std::lock_guard<std::mutex> lock(mu_);
            if (samples_.size() >= kMaxSamples) samples_.erase(samples_.begin(), samples_.begin() + kMaxSamples / 2);
            samples_.push_back({start, end, std::max(Clock::duration{}, end - start - nap)});
        }
    }
    static constexpr std::size_t kMaxSamples = 1 << 16;
    std::atomic<bool> stop_{false};
    std::mutex mu_;
    std::vector<Sample> samples_;
    std::thread thread_;
};

}  // namespace tally_test
