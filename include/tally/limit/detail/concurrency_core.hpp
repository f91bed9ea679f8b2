// tally/limit/detail/concurrency_core.hpp: the machinery behind
// ConcurrencyLimiter and PartitionedConcurrencyLimiter (limit/concurrency.hpp).
//
// One 64-bit word holds everything an acquire reads:
//
//   bits 0..29   permits in flight
//   bit  30      locked: one releaser is folding samples into the algorithm
//   bit  31      pending: a sample was queued while the lock was held
//   bits 32..63  the limit in force
//
// acquire  one compare-exchange: count + 1 while count < limit.
// ignore   one fetch_sub.
// success / dropped  one compare-exchange that both decrements and, when the
//   word is unlocked, takes the lock; the holder applies its sample, drains
//   the queue, and unlocks with one more compare-exchange that publishes the
//   new limit. A releaser that finds the word locked pushes its sample onto a
//   bounded lock-free queue (Vyukov's MPMC ring) and sets `pending` in the
//   same compare-exchange as its decrement, so the holder cannot unlock
//   without seeing it; if the holder unlocked first, the compare-exchange
//   fails, the releaser sees the word unlocked and drains the queue itself.
//   An acquire never waits: it only retries its compare-exchange when the
//   word changed. A releaser that finds the queue full (the holder was
//   descheduled while 64 others finished) yields until there is room or the
//   lock is free: no sample is ever lost, and only releases can wait.
//
// Waiting (acquire_until) registers in a mutex-guarded list of waiters, each
// with its own condition variable; a release reads the waiter count (one
// load) and wakes one waiter, the oldest (fifo) or newest (lifo).
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <mutex>
#include <thread>

#include "../../core/clock.hpp"
#include "../../core/platform.hpp"

TALLY_BEGIN_NAMESPACE

/// Which waiter a released permit wakes: the oldest (Netflix's
/// BlockingLimiter) or the newest (LifoBlockingLimiter: under overload the
/// newest caller is the one most likely still to want the answer).
enum class WaitOrder { fifo, lifo };

namespace detail {

struct ConcurrencySample {
    std::uint64_t start_ns;
    std::uint64_t rtt_ns;
    int inflight;
    bool dropped;
};

template <class A>
concept IgnoresSamples = requires {
    requires A::ignores_samples;
};

// Vyukov's bounded MPMC queue, used with many producers and one consumer (the
// lock holder, so head_ is plain).
class SampleRing {
  public:
    static constexpr std::size_t size = 64;

    SampleRing() noexcept {
        for (std::size_t i = 0; i < size; ++i) slots_[i].seq.store(i, std::memory_order_relaxed);
    }

    bool push(const ConcurrencySample& s) noexcept {
        std::uint64_t pos = tail_.load(std::memory_order_relaxed);
        for (;;) {
            Slot& slot = slots_[pos & (size - 1)];
            const std::uint64_t seq = slot.seq.load(std::memory_order_acquire);
            const auto dif = static_cast<std::int64_t>(seq - pos);
            if (dif == 0) {
                if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
                    slot.sample = s;
                    slot.seq.store(pos + 1, std::memory_order_release);
                    return true;
                }
            } else if (dif < 0) {
                return false;
            } else {
                pos = tail_.load(std::memory_order_relaxed);
            }
        }
    }

    // Consumer only.
    bool pop(ConcurrencySample& out) noexcept {
        Slot& slot = slots_[head_ & (size - 1)];
        if (slot.seq.load(std::memory_order_acquire) != head_ + 1) return false;
        out = slot.sample;
        slot.seq.store(head_ + size, std::memory_order_release);
        ++head_;
        return true;
    }

  private:
    struct Slot {
        std::atomic<std::uint64_t> seq;
        ConcurrencySample sample;
    };
    Slot slots_[size];
    alignas(false_sharing_size) std::atomic<std::uint64_t> tail_{0};
    std::uint64_t head_ = 0;
};

template <class Algorithm>
class ConcurrencyCore {
  public:
    static constexpr std::uint64_t count_mask = (std::uint64_t{1} << 30) - 1;
    static constexpr std::uint64_t locked = std::uint64_t{1} << 30;
    static constexpr std::uint64_t pending = std::uint64_t{1} << 31;
    static constexpr int max_limit = static_cast<int>(count_mask);

    ConcurrencyCore(Algorithm a, WaitOrder order) : alg_(std::move(a)), order_(order) {
        word_.store(static_cast<std::uint64_t>(clamp(alg_.limit())) << 32, std::memory_order_relaxed);
    }

    // The in-flight count after the increment, or 0 when at the limit.
    int try_acquire(std::memory_order load_order = std::memory_order_relaxed) noexcept {
        std::uint64_t w = word_.load(load_order);
        for (;;) {
            const std::uint64_t count = w & count_mask;
            if (count >= (w >> 32)) return 0;
            if (word_.compare_exchange_weak(w, w + 1, std::memory_order_acquire, std::memory_order_relaxed))
                return static_cast<int>(count + 1);
        }
    }
    // Past the limit (a partition's guaranteed share); count_mask bounds it.
    int add_unchecked() noexcept {
        std::uint64_t w = word_.load(std::memory_order_relaxed);
        for (;;) {
            if ((w & count_mask) == count_mask) return 0;
            if (word_.compare_exchange_weak(w, w + 1, std::memory_order_acquire, std::memory_order_relaxed))
                return static_cast<int>((w & count_mask) + 1);
        }
    }

    void release_ignore() noexcept {
        word_.fetch_sub(1, std::memory_order_seq_cst);
        wake_one();
    }

    void release_sample(const ConcurrencySample& s) noexcept {
        if constexpr (IgnoresSamples<Algorithm>) {
            release_ignore();
        } else {
            bool queued = false;
            std::uint64_t w = word_.load(std::memory_order_relaxed);
            for (;;) {
                if (!(w & locked)) {
                    if (word_.compare_exchange_weak(w, (w - 1) | locked, std::memory_order_seq_cst,
                                                    std::memory_order_relaxed)) {
                        hold(queued ? nullptr : &s);
                        break;
                    }
                } else if (!queued) {
                    // A full queue means the holder was descheduled: this
                    // release (never an acquire) waits for room or the lock.
                    if (ring_.push(s))
                        queued = true;
                    else
                        std::this_thread::yield();
                    w = word_.load(std::memory_order_relaxed);
                } else if (word_.compare_exchange_weak(w, (w - 1) | pending, std::memory_order_seq_cst,
                                                       std::memory_order_relaxed)) {
                    break;
                }
            }
            wake_one();
        }
    }

    [[nodiscard]] int limit() const noexcept { return static_cast<int>(word_.load(std::memory_order_relaxed) >> 32); }
    [[nodiscard]] int inflight() const noexcept {
        return static_cast<int>(word_.load(std::memory_order_relaxed) & count_mask);
    }

    // A copy of the algorithm, taken under the lock (queued samples applied).
    [[nodiscard]] Algorithm algorithm() noexcept {
        std::uint64_t w = word_.load(std::memory_order_relaxed);
        for (;;) {
            if (w & locked) {
                std::this_thread::yield();
                w = word_.load(std::memory_order_relaxed);
            } else if (word_.compare_exchange_weak(w, w | locked, std::memory_order_acquire,
                                                   std::memory_order_relaxed)) {
                break;
            }
        }
        drain();
        Algorithm copy = alg_;
        unlock();
        return copy;
    }

    // Wait for a permit until deadline_ns (SteadyClock); 0 when it timed out.
    int acquire_until(std::uint64_t deadline_ns) {
        if (const int n = try_acquire()) return n;
        Waiter me;
        std::unique_lock<std::mutex> lk(mutex_);
        waiting_.push_back(&me);
        waiters_.fetch_add(1, std::memory_order_seq_cst);
        int got = try_acquire(std::memory_order_seq_cst);
        while (!got) {
            const std::uint64_t now = SteadyClock::now_ns();
            if (now >= deadline_ns) break;
            const auto wait_ns = std::min<std::uint64_t>(deadline_ns - now, std::uint64_t{1} << 62);
            me.cv.wait_for(lk, std::chrono::nanoseconds(static_cast<std::int64_t>(wait_ns)));
            // Only the waiter a release picked tries, so the order holds even
            // across spurious wake-ups.
            if (me.notified) {
                got = try_acquire(std::memory_order_seq_cst);
                if (!got) me.notified = false;
            }
        }
        waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &me));
        waiters_.fetch_sub(1, std::memory_order_relaxed);
        // A wake-up this waiter did not use, or room a raised limit left,
        // goes to the next waiter.
        if ((!got && me.notified) || (got && inflight() < limit())) notify_locked();
        return got;
    }
    [[nodiscard]] int waiters() const noexcept { return waiters_.load(std::memory_order_relaxed); }

  private:
    struct Waiter {
        std::condition_variable cv;
        bool notified = false;
    };

    static int clamp(int limit) noexcept { return std::clamp(limit, 0, max_limit); }

    void apply(const ConcurrencySample& s) noexcept {
        // A clock too coarse to see the call take time reads 0; the
        // algorithms divide by the RTT.
        alg_.on_sample(s.start_ns, s.rtt_ns == 0 ? 1 : s.rtt_ns, s.inflight, s.dropped);
    }
    void drain() noexcept {
        ConcurrencySample s;
        while (ring_.pop(s)) apply(s);
    }
    void hold(const ConcurrencySample* own) noexcept {
        if (own) apply(*own);
        drain();
        unlock();
    }
    // Publish the limit and unlock; samples queued meanwhile are drained first.
    void unlock() noexcept {
        std::uint64_t w = word_.load(std::memory_order_relaxed);
        for (;;) {
            if (w & pending) {
                if (word_.compare_exchange_weak(w, w & ~pending, std::memory_order_acquire, std::memory_order_relaxed))
                    drain();
                continue;
            }
            const std::uint64_t next = (w & count_mask) | (static_cast<std::uint64_t>(clamp(alg_.limit())) << 32);
            if (word_.compare_exchange_weak(w, next, std::memory_order_seq_cst, std::memory_order_relaxed)) return;
        }
    }

    void wake_one() noexcept {
        if (waiters_.load(std::memory_order_seq_cst) == 0) return;
        std::lock_guard<std::mutex> lk(mutex_);
        notify_locked();
    }
    void notify_locked() noexcept {
        if (order_ == WaitOrder::lifo) {
            for (auto it = waiting_.rbegin(); it != waiting_.rend(); ++it)
                if (!(*it)->notified) return notify(**it);
        } else {
            for (Waiter* w : waiting_)
                if (!w->notified) return notify(*w);
        }
    }
    static void notify(Waiter& w) noexcept {
        w.notified = true;
        w.cv.notify_one();
    }

    alignas(false_sharing_size) std::atomic<std::uint64_t> word_{0};
    alignas(false_sharing_size) Algorithm alg_;
    SampleRing ring_;
    alignas(false_sharing_size) std::atomic<int> waiters_{0};
    WaitOrder order_;
    std::mutex mutex_;
    std::deque<Waiter*> waiting_;
};

}  // namespace detail
TALLY_END_NAMESPACE
