// tally/limit/detail/concurrency_core.hpp: the machinery behind
// ConcurrencyLimiter and PartitionedConcurrencyLimiter (limit/concurrency.hpp).
//
// Three words on one cache line:
//
//   word_   bits 0..30 in flight | bits 32..63 folds started (mod 2^32)
//   done_   folds finished (mod 2^32)
//   limit_  the limit the last fold published
//
// The fold lock is free when every fold started has finished: word_'s high
// half equals done_. Taking it adds one to the high half, in the same
// read-modify-write that counts the permit back: a ticket, the fold number
// before the add, whose turn comes when done_ reaches it; releasing it is the
// holder's plain store of its number (ticket + 1) into done_.
//
// acquire  read limit_, then one compare-exchange: count + 1 while count <
//   the limit read, the one the last finished fold published. It never
//   waits for a fold in progress.
// ignore   one fetch_sub.
// success / dropped  a releaser that finds the lock free takes a ticket and
//   decrements in one fetch_add (no compare-exchange, so nothing to retry);
//   the holder applies its sample and publishes the new limit and then its
//   number in done_: plain stores, the second being the unlock. So an
//   uncontended permit costs two read-modify-writes in all (against a
//   mutex's four). Releasers that find the lock free at the same instant
//   take consecutive tickets: each folds in turn, the later ones waiting (a
//   short spin, then yielding) for the fold before theirs, one fold each.
//   A releaser that finds a holder active pushes its sample onto a bounded
//   lock-free queue (Vyukov's MPMC ring) and decrements. After publishing,
//   the holder looks once at the queue and, if anything is there, locks
//   again and folds it; a sample pushed at the very instant of that unlock
//   can be left for the next fold (the next success or drop, or
//   algorithm()), never lost. An acquire never waits: it only retries its
//   compare-exchange when the word changed. A releaser that finds the queue
//   full (the holder was descheduled while 64 others finished) yields until
//   there is room or the lock is free.
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
#include "../../core/detail/simd.hpp"
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
    static constexpr std::uint64_t count_mask = 0x7fffffff;
    static constexpr std::uint64_t fold_one = std::uint64_t{1} << 32;
    static constexpr int max_limit = static_cast<int>(count_mask);

    // first_fold: the fold numbers' starting value, for tests that cross
    // their wrap at 2^32 (at 10^8 folds a second that is every 43 s).
    ConcurrencyCore(Algorithm a, WaitOrder order, std::uint32_t first_fold = 0) : alg_(std::move(a)), order_(order) {
        word_.store(std::uint64_t{first_fold} << 32, std::memory_order_relaxed);
        done_.store(first_fold, std::memory_order_relaxed);
        limit_.store(clamp(alg_.limit()), std::memory_order_relaxed);
    }

    // The in-flight count after the increment (0 when at the limit), and
    // the limit it was checked against.
    ConcurrencyGrant try_acquire(std::memory_order load_order = std::memory_order_acquire) noexcept {
        std::uint64_t w = word_.load(load_order);
        for (;;) {
            const int limit = limit_.load(std::memory_order_acquire);
            const std::uint64_t count = w & count_mask;
            if (count >= static_cast<std::uint64_t>(limit)) return {0, limit};
            if (word_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire))
                return {static_cast<int>(count + 1), limit};
        }
    }
    // Past the limit (a partition's guaranteed share); count_mask bounds it.
    ConcurrencyGrant add_unchecked() noexcept {
        std::uint64_t w = word_.load(std::memory_order_acquire);
        for (;;) {
            const int limit = limit_.load(std::memory_order_acquire);
            if ((w & count_mask) == count_mask) return {0, limit};
            if (word_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire))
                return {static_cast<int>((w & count_mask) + 1), limit};
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
            std::uint64_t w = word_.load(std::memory_order_acquire);
            if (lock_free(w)) [[likely]] {
                const std::uint64_t before = word_.fetch_add(fold_one - 1, std::memory_order_seq_cst);
                await_turn(before);
                finish(before + fold_one - 1, apply(s));
                wake_one();
                return;
            }
            bool queued = false;
            for (;;) {
                if (lock_free(w)) {
                    // Decrement and take the lock in one step.
                    const std::uint64_t mine = w + fold_one - 1;
                    if (word_.compare_exchange_weak(w, mine, std::memory_order_seq_cst, std::memory_order_acquire)) {
                        // The limit the sample gave, not alg_.limit() read
                        // back: a store-to-load round trip less before the
                        // unlock.
                        finish(mine, queued ? drain() : apply(s));
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

    [[nodiscard]] int limit() const noexcept { return limit_.load(std::memory_order_acquire); }
    [[nodiscard]] int inflight() const noexcept {
        return static_cast<int>(word_.load(std::memory_order_relaxed) & count_mask);
    }

    // A copy of the algorithm, taken under the lock (queued samples applied).
    [[nodiscard]] Algorithm algorithm() noexcept {
        std::uint64_t mine;
        while (!try_lock(mine)) std::this_thread::yield();
        const int limit = drain();
        Algorithm copy = alg_;
        finish(mine, limit);
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

    // Each returns the algorithm's limit after it.
    int apply(const ConcurrencySample& s) noexcept {
        // A clock too coarse to see the call take time reads 0; the
        // algorithms divide by the RTT.
        return alg_.on_sample(s.start_ns, s.rtt_ns == 0 ? 1 : s.rtt_ns, s.inflight, s.dropped);
    }
    int drain() noexcept {
        ConcurrencySample s;
        while (ring_.pop(s)) apply(s);
        return alg_.limit();
    }

    // Whether every fold started by word w has finished. The numbers wrap;
    // a wrapped match on a stale w is harmless, as the compare-exchange that
    // would take the lock then fails.
    [[nodiscard]] bool lock_free(std::uint64_t w) const noexcept {
        return (w >> 32) == done_.load(std::memory_order_acquire);
    }
    // Returns once the ticket taken by the add that read `before` is up:
    // every fold numbered before it has finished.
    void await_turn(std::uint64_t before) noexcept {
        if (!lock_free(before)) [[unlikely]]
            await_turn_slow(before);
    }
    [[gnu::noinline]] void await_turn_slow(std::uint64_t before) noexcept {
        unsigned spins = 0;
        while (!lock_free(before)) {
            if (++spins < 64) {
                cpu_relax();
            } else {
                std::this_thread::yield();
                spins = 0;
            }
        }
    }
    // Takes the lock without changing the count; false if a holder is active.
    bool try_lock(std::uint64_t& mine) noexcept {
        std::uint64_t w = word_.load(std::memory_order_acquire);
        for (;;) {
            if (!lock_free(w)) return false;
            mine = w + fold_one;
            if (word_.compare_exchange_weak(w, mine, std::memory_order_seq_cst, std::memory_order_acquire)) return true;
        }
    }
    // The holder of fold `mine` publishes the limit, then unlocks: plain
    // stores, no read-modify-write. Samples queued meanwhile (or left by an
    // earlier unlock) are folded by a second, out-of-line round.
    void finish(std::uint64_t mine, int limit) noexcept {
        const std::uint64_t head = ring_.head();
        publish(mine, limit);
        if (ring_.tail() != head) [[unlikely]]
            refold();
    }
    void publish(std::uint64_t mine, int limit) noexcept {
        limit_.store(clamp(limit), std::memory_order_release);
        done_.store(mine >> 32, std::memory_order_release);
    }
    [[gnu::noinline]] void refold() noexcept {
        std::uint64_t mine;
        if (!try_lock(mine)) return;  // a holder is active: it looks at the queue when it finishes
        publish(mine, drain());
    }

    void wake_one() noexcept {
        if (waiters_.load(std::memory_order_seq_cst) != 0) [[unlikely]]
            wake_one_slow();
    }
    [[gnu::noinline]] void wake_one_slow() noexcept {
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

    // One line: a fold writes done_ and limit_, an acquire after it reads
    // limit_ and word_, a release word_ and done_.
    alignas(false_sharing_size) std::atomic<std::uint64_t> word_{0};
    std::atomic<std::uint64_t> done_{0};
    std::atomic<int> limit_{0};
    alignas(false_sharing_size) Algorithm alg_;
    SampleRing ring_;
    alignas(false_sharing_size) std::atomic<int> waiters_{0};
    WaitOrder order_;
    std::mutex mutex_;
    std::deque<Waiter*> waiting_;
};

}  // namespace detail
TALLY_END_NAMESPACE
