// tally/limit/detail/concurrency_core.hpp: the machinery behind
// ConcurrencyLimiter and PartitionedConcurrencyLimiter (limit/concurrency.hpp).
//
// One 64-bit word holds what an acquire reads, and a second word on the same
// cache line says which fold finished last:
//
//   word_  bits 0..23 in flight | bit 24 locked | bits 25..30 epoch | 32..63 limit
//   done_  bits 25..30 the epoch of the last finished fold | 32..63 its limit
//
// A word locked by an epoch that done_ reports finished is free, with done_'s
// limit ("settled"); whoever next changes the word writes the settled value.
//
// acquire  one compare-exchange: count + 1 while count < the settled limit.
// ignore   one fetch_sub.
// success / dropped  one compare-exchange that decrements and, when the
//   settled word is free, locks it with the next epoch; the holder applies
//   its sample, drains the queue, and publishes the new limit with its epoch
//   in done_: a plain store, which is also the unlock. So an uncontended
//   permit costs two read-modify-writes in all (against a mutex's four).
//   A releaser that finds a holder active pushes its sample onto a bounded
//   lock-free queue (Vyukov's MPMC ring) and decrements. After publishing,
//   the holder looks once more at the queue and folds what came meanwhile; a
//   sample pushed at the very instant of the unlock can be left for the next
//   fold (the next success or drop, or algorithm()), never lost. An acquire
//   never waits: it only retries its compare-exchange when the word changed.
//   A releaser that finds the queue full (the holder was descheduled while
//   64 others finished) yields until there is room or the lock is free.
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

// What an acquire saw: the in-flight count after its increment (0: refused)
// and the limit it was checked against.
struct ConcurrencyGrant {
    int inflight;
    int limit;
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

    // Consumer only: the next slot to pop.
    [[nodiscard]] std::uint64_t head() const noexcept { return head_; }
    // Slots claimed by producers so far.
    [[nodiscard]] std::uint64_t tail() const noexcept { return tail_.load(std::memory_order_acquire); }

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
    static constexpr std::uint64_t count_mask = (std::uint64_t{1} << 24) - 1;
    static constexpr std::uint64_t locked = std::uint64_t{1} << 24;
    static constexpr unsigned epoch_shift = 25;
    static constexpr std::uint64_t epoch_mask = std::uint64_t{63} << epoch_shift;
    static constexpr int max_limit = static_cast<int>(count_mask);

    ConcurrencyCore(Algorithm a, WaitOrder order) : alg_(std::move(a)), order_(order) {
        word_.store(static_cast<std::uint64_t>(clamp(alg_.limit())) << 32, std::memory_order_relaxed);
        done_.store(0, std::memory_order_relaxed);
    }

    // The in-flight count after the increment (0 when at the limit), and
    // the limit it was checked against.
    ConcurrencyGrant try_acquire(std::memory_order load_order = std::memory_order_acquire) noexcept {
        std::uint64_t w = word_.load(load_order);
        for (;;) {
            const std::uint64_t v = settled(w);
            const std::uint64_t count = v & count_mask;
            const auto limit = static_cast<int>(v >> 32);
            if (count >= (v >> 32)) return {0, limit};
            if (word_.compare_exchange_weak(w, v + 1, std::memory_order_acq_rel, std::memory_order_acquire))
                return {static_cast<int>(count + 1), limit};
        }
    }
    // Past the limit (a partition's guaranteed share); count_mask bounds it.
    ConcurrencyGrant add_unchecked() noexcept {
        std::uint64_t w = word_.load(std::memory_order_acquire);
        for (;;) {
            const std::uint64_t v = settled(w);
            const auto limit = static_cast<int>(v >> 32);
            if ((v & count_mask) == count_mask) return {0, limit};
            if (word_.compare_exchange_weak(w, v + 1, std::memory_order_acq_rel, std::memory_order_acquire))
                return {static_cast<int>((v & count_mask) + 1), limit};
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
            std::uint64_t w = word_.load(std::memory_order_acquire);
            for (;;) {
                const std::uint64_t v = settled(w);
                if (!(v & locked)) {
                    // Decrement and take the lock in one step.
                    const std::uint64_t mine = ((v - 1) & ~epoch_mask) | locked | next_epoch(v);
                    if (word_.compare_exchange_weak(w, mine, std::memory_order_seq_cst, std::memory_order_acquire)) {
                        fold(queued ? nullptr : &s, mine);
                        break;
                    }
                } else if (!queued) {
                    // A full queue means the holder was descheduled: this
                    // release (never an acquire) waits for room or the lock.
                    if (ring_.push(s))
                        queued = true;
                    else
                        std::this_thread::yield();
                    w = word_.load(std::memory_order_acquire);
                } else if (word_.compare_exchange_weak(w, w - 1, std::memory_order_seq_cst,
                                                       std::memory_order_acquire)) {
                    break;  // the holder, or the next one, applies it
                }
            }
            wake_one();
        }
    }

    [[nodiscard]] int limit() const noexcept {
        return static_cast<int>(settled(word_.load(std::memory_order_acquire)) >> 32);
    }
    [[nodiscard]] int inflight() const noexcept {
        return static_cast<int>(word_.load(std::memory_order_relaxed) & count_mask);
    }

    // A copy of the algorithm, taken under the lock (queued samples applied).
    [[nodiscard]] Algorithm algorithm() noexcept {
        std::uint64_t mine;
        while (!try_lock(mine)) std::this_thread::yield();
        drain();
        Algorithm copy = alg_;
        finish(mine);
        return copy;
    }

    // Wait for a permit until deadline_ns (SteadyClock); inflight 0 when it
    // timed out.
    ConcurrencyGrant acquire_until(std::uint64_t deadline_ns) {
        if (const ConcurrencyGrant g = try_acquire(); g.inflight) return g;
        Waiter me;
        std::unique_lock<std::mutex> lk(mutex_);
        waiting_.push_back(&me);
        waiters_.fetch_add(1, std::memory_order_seq_cst);
        ConcurrencyGrant got = try_acquire(std::memory_order_seq_cst);
        while (!got.inflight) {
            const std::uint64_t now = SteadyClock::now_ns();
            if (now >= deadline_ns) break;
            const auto wait_ns = std::min<std::uint64_t>(deadline_ns - now, std::uint64_t{1} << 62);
            me.cv.wait_for(lk, std::chrono::nanoseconds(static_cast<std::int64_t>(wait_ns)));
            // Only the waiter a release picked tries, so the order holds even
            // across spurious wake-ups.
            if (me.notified) {
                got = try_acquire(std::memory_order_seq_cst);
                if (!got.inflight) me.notified = false;
            }
        }
        waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &me));
        waiters_.fetch_sub(1, std::memory_order_relaxed);
        // A wake-up this waiter did not use, or room a raised limit left,
        // goes to the next waiter.
        if ((!got.inflight && me.notified) || (got.inflight && inflight() < limit())) notify_locked();
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

    // The word as it stands once a finished holder's release is counted: a
    // word locked by an epoch that done_ reports finished is free, with the
    // limit that holder published.
    [[nodiscard]] std::uint64_t settled(std::uint64_t w) const noexcept {
        if (!(w & locked)) return w;
        const std::uint64_t d = done_.load(std::memory_order_acquire);
        if ((d & epoch_mask) != (w & epoch_mask)) return w;
        return (w & (count_mask | epoch_mask)) | (d & ~std::uint64_t{0xffffffff});
    }
    [[nodiscard]] static std::uint64_t next_epoch(std::uint64_t v) noexcept {
        return (v + (std::uint64_t{1} << epoch_shift)) & epoch_mask;
    }
    // Takes the lock without changing the count; false if a holder is active.
    bool try_lock(std::uint64_t& mine) noexcept {
        std::uint64_t w = word_.load(std::memory_order_acquire);
        for (;;) {
            const std::uint64_t v = settled(w);
            if (v & locked) return false;
            mine = (v & ~epoch_mask) | locked | next_epoch(v);
            if (word_.compare_exchange_weak(w, mine, std::memory_order_seq_cst, std::memory_order_acquire)) return true;
        }
    }
    // The holder of epoch `mine`: apply, drain, publish.
    void fold(const ConcurrencySample* own, std::uint64_t mine) noexcept {
        if (own) apply(*own);
        drain();
        finish(mine);
    }
    // Publishing the limit with the holder's epoch releases the lock: one
    // plain store, no read-modify-write. A sample queued after the drain is
    // picked up by its own releaser when it sees the lock free, by the check
    // below, or else by the next fold.
    void finish(std::uint64_t mine) noexcept {
        for (int round = 0;; ++round) {
            const std::uint64_t head = ring_.head();
            done_.store((static_cast<std::uint64_t>(clamp(alg_.limit())) << 32) | (mine & epoch_mask),
                        std::memory_order_release);
            if (round == 1 || ring_.tail() == head || !try_lock(mine)) return;
            drain();
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

    // done_ shares word_'s line: a fold writes both, an acquire after a
    // fold reads both.
    alignas(false_sharing_size) std::atomic<std::uint64_t> word_{0};
    std::atomic<std::uint64_t> done_{0};
    alignas(false_sharing_size) Algorithm alg_;
    SampleRing ring_;
    alignas(false_sharing_size) std::atomic<int> waiters_{0};
    WaitOrder order_;
    std::mutex mutex_;
    std::deque<Waiter*> waiting_;
};

}  // namespace detail
TALLY_END_NAMESPACE
