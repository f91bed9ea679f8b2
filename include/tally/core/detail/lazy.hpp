// tally/core/detail/lazy.hpp: a part of a summary built on first use by const
// members that may run concurrently (a register array decoded from a list, a
// histogram after merges). A byte of state says ready, pending or busy; the
// first caller to find it pending builds the part, the others wait for it.
#pragma once

#include "../../detail/abi.hpp"

#include <atomic>
#include <cstdint>

#if defined(__unix__) || defined(__APPLE__)
#include <sched.h>
#else
#include <thread>
#endif

TALLY_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::uint8_t lazy_ready = 0;
inline constexpr std::uint8_t lazy_pending = 1;
inline constexpr std::uint8_t lazy_busy = 2;

/// Runs make() once for a pending state and marks it ready; returns when the
/// state is ready, whoever built it. make() must not throw.
template <class F>
inline void run_lazy(std::atomic<std::uint8_t>& state, F make) noexcept {
    for (;;) {
        std::uint8_t s = state.load(std::memory_order_acquire);
        if (s == lazy_ready) return;
        if (s == lazy_pending &&
            state.compare_exchange_weak(s, lazy_busy, std::memory_order_acquire, std::memory_order_relaxed)) {
            make();
            state.store(lazy_ready, std::memory_order_release);
            return;
        }
#if defined(__unix__) || defined(__APPLE__)
        sched_yield();  // the builder runs for microseconds: let it have the core
#else
        std::this_thread::yield();
#endif
    }
}

}  // namespace detail
TALLY_END_NAMESPACE
