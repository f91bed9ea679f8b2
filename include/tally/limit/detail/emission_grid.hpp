// tally/limit/detail/emission_grid.hpp: AtomicEmission, the one-word cell
// behind AtomicGcra and AtomicTokenBucket, over the public EmissionGrid
// (limit/emission_grid.hpp).
#pragma once

#include "../../detail/abi.hpp"

#include <atomic>
#include <cstdint>
#include <limits>
#include <thread>

#include "../../core/platform.hpp"
#include "../../detail/primitives.hpp"
#include "../decision.hpp"
#include "../emission_grid.hpp"
#include "../quota.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

/// The shared state of AtomicGcra and AtomicTokenBucket: one word `word_`
/// holding the theoretical-arrival index, updated by compare-and-swap, and
/// the policy (grid, quota) that set_quota may replace while other threads
/// acquire.
///
/// Why acquirers never apply one quota to a state made under another: the
/// word only ever grows (an admission writes a larger index, a quota change
/// writes word + 1 and records the offset between word and index for the new
/// grid), so a CAS that succeeds proves that no quota change happened since
/// the word was read. The policy fields are read under a sequence counter
/// (`seq_`, odd while a change is in progress), so a torn read is retried,
/// and a change publishes its fields before the word of the new quota. The
/// fields are atomics stored with release and loaded with acquire (plain
/// moves on x86-64), so a reader that sees a new field sees the odd count.
class AtomicEmission {
  public:
    explicit AtomicEmission(const Quota& q) noexcept { publish(EmissionGrid(q), q, 0, 0); }

    Decision try_acquire(std::uint64_t now, std::uint64_t cost) noexcept {
        for (;;) {
            std::uint64_t w;
            const Policy p = read(w);
            std::uint64_t next;
            const std::uint64_t tat = w - p.offset;
            const Decision d = p.grid.gcra(tat, now, cost, next, p.top);
            if (next == tat) return d;
            if (word_.compare_exchange_strong(w, next + p.offset, std::memory_order_relaxed,
                                              std::memory_order_relaxed))
                return d;
        }
    }

    void set_quota(const Quota& q, std::uint64_t now) noexcept {
        const EmissionGrid g(q);
        // Writers exclude each other by making seq_ odd; acquirers wait meanwhile.
        std::uint64_t s = seq_.load(std::memory_order_relaxed);
        for (;;) {
            if ((s & 1) != 0) {
                std::this_thread::yield();
                s = seq_.load(std::memory_order_relaxed);
            } else if (seq_.compare_exchange_weak(s, s + 1, std::memory_order_acquire, std::memory_order_relaxed)) {
                break;
            }
        }
        const Policy old = fields();
        std::uint64_t w = word_.load(std::memory_order_relaxed);
        for (;;) {
            const std::uint64_t tat = g.rebase(w - old.offset, old.grid, now);
            // At the very end of the clock the word cannot grow: nothing can
            // be admitted there under either quota, so no acquirer's CAS can
            // succeed on the old reading.
            const std::uint64_t w2 = w < std::numeric_limits<std::uint64_t>::max() ? w + 1 : w;
            publish(g, q, tat, w2);
            if (word_.compare_exchange_strong(w, w2, std::memory_order_release, std::memory_order_relaxed)) break;
        }
        seq_.store(s + 2, std::memory_order_release);
    }

    [[nodiscard]] Quota quota() const noexcept {
        constexpr auto a = std::memory_order_acquire;
        for (;;) {
            const std::uint64_t s1 = seq_.load(a);
            if ((s1 & 1) != 0) {
                std::this_thread::yield();
                continue;
            }
            const Quota q{limit_.load(a), window_.load(a), burst_.load(a)};
            if (seq_.load(std::memory_order_relaxed) == s1) return q;
        }
    }
    /// The theoretical-arrival index on the current quota's grid.
    [[nodiscard]] std::uint64_t index() const noexcept {
        std::uint64_t w;
        const Policy p = read(w);
        return w - p.offset;
    }
    /// Units available at now (a snapshot).
    [[nodiscard]] std::uint64_t tokens(std::uint64_t now) const noexcept {
        std::uint64_t w;
        const Policy p = read(w);
        const std::uint64_t tat = w - p.offset, n = p.grid.index(now);
        const std::uint64_t debt = tat > n ? tat - n : 0;
        return debt >= p.grid.cap ? 0 : p.grid.cap - debt;
    }

  private:
    // What an acquirer needs: the grid, word - index (mod 2^64) and the
    // highest index whose word still fits in 64 bits.
    struct Policy {
        EmissionGrid grid;
        std::uint64_t offset;
        std::uint64_t top;
    };

    // A consistent (policy, word) pair: the word read after an even count,
    // the fields unchanged until the count is read again.
    Policy read(std::uint64_t& w) const noexcept {
        for (;;) {
            const std::uint64_t s1 = seq_.load(std::memory_order_acquire);
            if ((s1 & 1) != 0) {
                std::this_thread::yield();
                continue;
            }
            w = word_.load(std::memory_order_acquire);
            const Policy p = fields();
            if (seq_.load(std::memory_order_relaxed) == s1) return p;
        }
    }

    // Acquire loads pair with publish()'s release stores: a reader that sees
    // any field of a change in progress then sees the odd count.
    Policy fields() const noexcept {
        constexpr auto r = std::memory_order_acquire;
        Policy p;
        p.grid.num = num_.load(r);
        p.grid.den = den_.load(r);
        p.grid.cap = cap_.load(r);
        p.grid.fast_t = fast_t_.load(r);
        p.grid.fast_k = fast_k_.load(r);
        p.offset = offset_.load(r);
        p.top = top_.load(r);
        return p;
    }

    // The new era maps index `base_index` to word `base_word`.
    void publish(const EmissionGrid& g, const Quota& q, std::uint64_t base_index, std::uint64_t base_word) noexcept {
        constexpr auto r = std::memory_order_release;
        constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
        const std::uint64_t a = max - base_index, b = max - base_word;
        num_.store(g.num, r);
        den_.store(g.den, r);
        cap_.store(g.cap, r);
        fast_t_.store(g.fast_t, r);
        fast_k_.store(g.fast_k, r);
        offset_.store(base_word - base_index, r);
        top_.store(base_index + (a < b ? a : b), r);
        limit_.store(q.limit, r);
        window_.store(q.window_ns, r);
        burst_.store(q.burst, r);
    }

    std::atomic<std::uint64_t> word_{0};
    std::atomic<std::uint64_t> seq_{0};
    std::atomic<std::uint64_t> num_{1}, den_{1}, cap_{1}, fast_t_{0}, fast_k_{0}, offset_{0}, top_{0};
    std::atomic<std::uint64_t> limit_{1}, window_{1}, burst_{0};
};

}  // namespace detail

TALLY_END_NAMESPACE
