// tally/core/detail/spin_lock.hpp: the spin lock of the keyed limiters'
// shards and of redis::LeasedLimiter's per-key leases.
#pragma once

#include "../../detail/abi.hpp"

#include <atomic>
#include <thread>

#include "simd.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

/// Test-and-test-and-set spinlock for the keyed tables and the leased Redis
/// limiter: their critical sections are ~20 ns, far shorter than a futex
/// round trip; it yields the CPU after a short spin so
/// oversubscribed machines still make progress. BasicLockable.
class SpinLock {
  public:
    void lock() noexcept {
        for (;;) {
            if (!locked_.exchange(true, std::memory_order_acquire)) return;
            unsigned spins = 0;
            while (locked_.load(std::memory_order_relaxed)) {
                if (++spins < 64) {
                    relax();
                } else {
                    std::this_thread::yield();
                    spins = 0;
                }
            }
        }
    }
    void unlock() noexcept { locked_.store(false, std::memory_order_release); }

  private:
    static void relax() noexcept { cpu_relax(); }
    std::atomic<bool> locked_{false};
};

}  // namespace detail
TALLY_END_NAMESPACE
