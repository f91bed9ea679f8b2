// tally/window/sliding_counter.hpp: a sliding-window counter as a ring of
// sub-buckets, O(1) per add/estimate/allow, exact integer decisions, mergeable.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/platform.hpp"
#include "../core/serialize.hpp"
#include "../detail/primitives.hpp"
#include "../detail/throw.hpp"

// Rare paths (ring roll, saturation) stay out of line so the inlined allow()
// keeps a small body and few registers.
#if defined(__GNUC__) || defined(__clang__)
#define TALLY_DETAIL_COLD __attribute__((noinline, cold))
#else
#define TALLY_DETAIL_COLD
#endif

TALLY_BEGIN_NAMESPACE

/// Options of SlidingCounter (a structural class type, so it can be a
/// template argument). Portable spelling:
/// `SlidingCounter<std::uint32_t, 61, SlidingOptions{.pow2_buckets = true}>`;
/// the bare `{.pow2_buckets = true}` form compiles with g++ 12 but not with
/// clang 14, which cannot parse a braced-init-list as a template argument.
struct SlidingOptions {
    /// Keep the ring's total so that estimate()/allow() are O(1) instead of
    /// summing Slots counters. It costs no memory (see "Memory" below).
    bool running_total = true;
    /// Bucket width must be a power of two; bucket index and elapsed time
    /// then take a shift and a mask instead of a 64-bit division.
    bool pow2_buckets = false;
    friend constexpr bool operator==(const SlidingOptions&, const SlidingOptions&) = default;
};

/// The exact windowed estimate at one instant, as returned by
/// SlidingCounter::read(): estimate = rest + oldest * kept_ns / bucket_ns,
/// a rational with denominator bucket_ns.
struct SlidingEstimate {
    std::uint64_t rest = 0;       ///< events in the Slots-1 newest buckets (fully inside the window)
    std::uint64_t oldest = 0;     ///< events in the oldest bucket (partly inside)
    std::uint64_t kept_ns = 1;    ///< part of the oldest bucket still inside, in [1, bucket_ns]
    std::uint64_t bucket_ns = 1;  ///< bucket width, > 0

    /// The estimate as a double, rest + oldest * (kept / bucket); exact
    /// whenever bucket_ns is a power of two and the counts are below 2^53.
    [[nodiscard]] double value() const noexcept {
        return static_cast<double>(rest) +
               static_cast<double>(oldest) * (static_cast<double>(kept_ns) / static_cast<double>(bucket_ns));
    }
    /// floor(estimate), exact.
    [[nodiscard]] std::uint64_t floor() const noexcept {
        return rest + static_cast<std::uint64_t>(wide(oldest) * kept_ns / bucket_ns);
    }
    /// ceil(estimate), exact.
    [[nodiscard]] std::uint64_t ceil() const noexcept {
        const wide num = wide(oldest) * kept_ns;
        return rest + static_cast<std::uint64_t>((num + bucket_ns - 1) / bucket_ns);
    }
    /// `estimate + cost <= limit` in exact rational arithmetic. Never true
    /// when cost > limit; with limit == 0 only cost == 0 on an empty window
    /// passes. No overflow for any arguments (128-bit products).
    [[nodiscard]] bool admits(std::uint64_t limit, std::uint64_t cost = 1) const noexcept {
        if (cost > limit) return false;
        const std::uint64_t room = limit - cost;
        if (rest > room) return false;
        // Fast path: even with the oldest bucket at full weight it fits.
        if (oldest <= room - rest) return true;
        // oldest * kept / bucket <= room - rest, multiplied out by bucket > 0;
        // both sides are below 2^128.
        return wide(oldest) * kept_ns <= wide(room - rest) * bucket_ns;
    }

  private:
    using wide = detail::uint128;
};

/// SlidingCounter: events in the sliding window (now - W, now], kept as a ring
/// of `Slots` sub-bucket counters `bucket_ns` wide; W = (Slots - 1) * bucket_ns.
///
/// Source: the sliding-window counter of Cloudflare's rate limiter (J. Desgats,
/// "How we built rate limiting capable of scaling to millions of domains",
/// 2017), whose "previous + current" pair is Slots = 2, generalised to a ring.
/// With B = now / bucket_ns and e = now mod bucket_ns:
///     estimate(now) = sum(count[B-Slots+2 .. B]) + count[B-Slots+1] * (bucket_ns - e) / bucket_ns
/// Guarantee: |estimate(now) - exact count in (now - W, now]| <= count[B-Slots+1]
/// (only where the oldest bucket's events fell is guessed). allow(now, limit,
/// cost) admits iff estimate(now) + cost <= limit in exact rational arithmetic
/// (128-bit products: no rounding, no overflow for any argument).
/// A late event lands in its own bucket while that bucket is in the ring; the
/// ring never moves back; counts saturate at max(Slot), newest counts first.
/// docs/sliding_counter.md has the full semantics, layouts and wire format.
///
/// Complexity: O(1) per call within a bucket, O(Slots) when the ring rolls to
/// a new bucket (O(Slots) per call without running_total).
/// Memory: State = round_up(Slots * sizeof(Slot), 8) + 8 bytes (64 bytes, one
/// x86 line, for <std::uint32_t, 14>); the counter adds 16 bytes of policy.
/// Thread safety: none; even reads advance the ring. The const State overloads
/// touch only the State passed in, so one const counter can be the policy for
/// many States used on many threads.
///
///     tally::SlidingCounter<std::uint32_t, 61> per_minute(1'000'000'000);  // 60 s window, 1 s buckets
///     if (per_minute.allow(now_ns, 100)) serve(); else reject();
///     double in_window = per_minute.estimate(now_ns);
template <class Slot = std::uint32_t, std::size_t Slots = 8, SlidingOptions Options = SlidingOptions{}>
class SlidingCounter {
    static_assert(std::same_as<Slot, std::uint16_t> || std::same_as<Slot, std::uint32_t> ||
                      std::same_as<Slot, std::uint64_t>,
                  "tally::SlidingCounter: Slot must be std::uint16_t, std::uint32_t or std::uint64_t");
    static_assert(Slots >= 2, "tally::SlidingCounter: Slots must be at least 2 (2 = previous + current)");
    static_assert(Slots <= (std::size_t{1} << 24), "tally::SlidingCounter: Slots must be at most 2^24");

  public:
    using slot_type = Slot;
    static constexpr std::size_t slot_count = Slots;
    static constexpr SlidingOptions options = Options;
    static constexpr Slot max_count = std::numeric_limits<Slot>::max();
    /// Largest bucket width whose window (Slots-1)*bucket_ns fits in 64 bits.
    static constexpr std::uint64_t max_bucket_ns = ~std::uint64_t{0} / (Slots - 1);

    /// Per-key state: the ring plus the absolute index of its newest bucket.
    /// Trivially copyable; `State{}` is an empty ring (as if never touched).
    /// This is what a keyed table stores per key; the SlidingCounter object is
    /// then only the policy (bucket width) and its const State primitives below
    /// operate on a State owned elsewhere. The layout of `slots` is internal
    /// (with running_total, the newest bucket's slot holds the ring total); use
    /// counts() to read per-bucket counts. Any bit pattern is safe to pass
    /// (no UB), but only States produced by these functions give meaningful answers.
    struct State {
        Slot slots[Slots];
        std::uint64_t newest;  ///< absolute index (now_ns / bucket_ns) of the newest bucket
        friend bool operator==(const State&, const State&) = default;
    };
    static_assert(std::is_trivially_copyable_v<State> && std::is_standard_layout_v<State>);

    /// bucket_ns: width of one bucket in ns, in [1, max_bucket_ns]; a power of
    /// two when Options.pow2_buckets. Throws std::invalid_argument otherwise.
    explicit SlidingCounter(std::uint64_t bucket_ns);

    // ---- Single-counter API (operates on the counter's own State) ---------

    /// Counts `count` events at now_ns (late events: see class comment).
    void add(std::uint64_t now_ns, Slot count = 1) noexcept { add(state_, now_ns, count); }
    /// Estimated events in (now - window, now]; advances the ring first.
    [[nodiscard]] double estimate(std::uint64_t now_ns) noexcept { return estimate(state_, now_ns); }
    /// Admits iff estimate(now) + cost <= limit (exact); if admitted, counts cost.
    bool allow(std::uint64_t now_ns, std::uint64_t limit, std::uint64_t cost = 1) noexcept {
        return allow(state_, now_ns, limit, cost);
    }
    /// The exact estimate at now as a rational (advances the ring first).
    [[nodiscard]] SlidingEstimate read(std::uint64_t now_ns) noexcept { return read(state_, now_ns); }

    [[nodiscard]] std::uint64_t window_ns() const noexcept { return (Slots - 1) * bucket_ns_; }
    [[nodiscard]] std::uint64_t bucket_ns() const noexcept { return bucket_ns_; }
    /// Absolute index of the newest bucket seen (0 for a fresh counter).
    [[nodiscard]] std::uint64_t newest_bucket() const noexcept { return state_.newest; }
    /// Per-bucket counts, oldest (newest_bucket() - Slots + 1) first; not advanced.
    [[nodiscard]] std::array<Slot, Slots> counts() const noexcept { return counts(state_); }
    [[nodiscard]] State& state() noexcept { return state_; }
    [[nodiscard]] const State& state() const noexcept { return state_; }

    // ---- Summary observers (as of the newest bucket seen; nothing advances) --

    /// Events held in the ring as of newest_bucket(): the window's count
    /// before any expiry that a later read would apply. O(Slots).
    [[nodiscard]] std::uint64_t total() const noexcept {
        std::uint64_t t = 0;
        for (const Slot c : counts(state_)) t += c;
        return t;
    }
    /// True iff the ring holds no events.
    [[nodiscard]] bool empty() const noexcept { return total() == 0; }
    /// Bytes this counter occupies (it allocates nothing).
    [[nodiscard]] std::size_t memory_bytes() const noexcept { return sizeof(*this); }
    /// Back to a fresh counter (State{}); the bucket width stays.
    void clear() noexcept { state_ = State{}; }

    // ---- State primitives (policy = this counter's bucket width) ----------
    // All noexcept, O(1) within a bucket, no UB for any argument. They never
    // touch the counter's own state_, so one const SlidingCounter can serve as
    // the policy for millions of States in a keyed table.

    /// add(): count `count` events at now_ns into `s` (a late event lands in
    /// its own bucket while that bucket is in the ring, else is dropped).
    void add(State& s, std::uint64_t now_ns, Slot count = 1) const noexcept {
        const std::uint64_t b = bucket_of(now_ns);
        advance(s, b);
        add_at(s, b, count);
    }

    /// charge(): like add(), but an event whose bucket already left the ring is
    /// counted in the newest bucket instead of dropped (what allow() does after
    /// admitting). cost above max(Slot) saturates.
    void charge(State& s, std::uint64_t now_ns, std::uint64_t cost) const noexcept {
        std::uint64_t b = bucket_of(now_ns);
        advance(s, b);
        if (s.newest - b >= Slots) b = s.newest;
        add_at(s, b, cost > max_count ? max_count : static_cast<Slot>(cost));
    }

    /// read(): advance `s` to now_ns, then return the exact estimate parts.
    [[nodiscard]] SlidingEstimate read(State& s, std::uint64_t now_ns) const noexcept {
        const std::uint64_t b = bucket_of(now_ns);
        advance(s, b);
        const std::uint64_t e = b < s.newest ? 0 : elapsed_of(now_ns, b);
        const std::size_t p = pos_of(s.newest);
        const Slot total = total_at(s, p);
        const Slot oldest = s.slots[next_pos(p)];
        return SlidingEstimate{static_cast<std::uint64_t>(static_cast<Slot>(total - oldest)), oldest,
                               bucket_ns_ - e, bucket_ns_};
    }

    /// estimate(): read(s, now).value().
    [[nodiscard]] double estimate(State& s, std::uint64_t now_ns) const noexcept { return read(s, now_ns).value(); }

    /// would_allow(): the decision allow() would take, without charging
    /// (still advances `s`, which changes nothing observable).
    [[nodiscard]] bool would_allow(State& s, std::uint64_t now_ns, std::uint64_t limit, std::uint64_t cost = 1) const noexcept {
        return read(s, now_ns).admits(limit, cost);
    }

    /// allow(): admit iff estimate(now) + cost <= limit exactly; if admitted,
    /// charge(s, now, cost). Denied requests change nothing but the roll.
    bool allow(State& s, std::uint64_t now_ns, std::uint64_t limit, std::uint64_t cost = 1) const noexcept {
        const SlidingEstimate est = read(s, now_ns);
        if (!est.admits(limit, cost)) return false;
        const std::uint64_t b = bucket_of(now_ns);
        const std::size_t p = pos_of(s.newest);
        const Slot total = static_cast<Slot>(est.rest + est.oldest);
        const Slot c = cost > max_count ? max_count : static_cast<Slot>(cost);
        // Common case: charge the newest bucket without saturating: one
        // increment (of the total with running_total, else of the newest slot).
        if (TALLY_LIKELY(b == s.newest && c <= static_cast<Slot>(max_count - total))) {
            s.slots[p] = static_cast<Slot>(s.slots[p] + c);
            return true;
        }
        add_at(s, s.newest - b >= Slots ? s.newest : b, c);
        return true;
    }

    /// is_fresh(): true iff `s` is indistinguishable from State{} for every
    /// operation at times >= now_ns (every count still in the window at now is
    /// zero, and now is not behind s.newest). A keyed table may then drop it;
    /// the same name and meaning as the limiters' is_fresh.
    [[nodiscard]] bool is_fresh(const State& s, std::uint64_t now_ns) const noexcept;

    /// Former name of is_fresh(); will be removed after one release.

    /// retry_after_ns(): the smallest w >= 0 such that allow(s, now + w, limit,
    /// cost) would admit if nothing else is counted meanwhile; 0 if it admits
    /// now; UINT64_MAX if never (cost > limit) or beyond 2^64 - 1. O(Slots).
    [[nodiscard]] std::uint64_t retry_after_ns(const State& s0, std::uint64_t now_ns, std::uint64_t limit,
                                 std::uint64_t cost = 1) const noexcept;

    /// drain_ns(): time from now_ns until the estimate reaches 0 if nothing else
    /// is counted (0 if it is 0 now). Saturates at UINT64_MAX. O(Slots).
    [[nodiscard]] std::uint64_t drain_ns(const State& s0, std::uint64_t now_ns) const noexcept;

    /// counts(): per-bucket counts of `s`, oldest (s.newest - Slots + 1) first,
    /// as of s.newest (not advanced). O(Slots).
    [[nodiscard]] static std::array<Slot, Slots> counts(const State& s) noexcept;

    /// The bucket index of a time under this policy.
    [[nodiscard]] std::uint64_t bucket_of(std::uint64_t now_ns) const noexcept {
        if constexpr (Options.pow2_buckets)
            return now_ns >> shift_;
        else
            return now_ns / bucket_ns_;
    }

    // ---- MergeableSummary -------------------------------------------------

    /// Same bucket width (Slot and Slots are part of the type).
    [[nodiscard]] bool mergeable_with(const SlidingCounter& other) const noexcept { return bucket_ns_ == other.bucket_ns_; }

    /// Adds `other`'s counts bucket by bucket, aligned by absolute bucket
    /// index; the result's newest is the later of the two (the lagging ring is
    /// advanced first, so its expired buckets drop). Saturates newest-first.
    /// Throws std::invalid_argument (target unchanged) on different widths.
    SlidingCounter& merge(const SlidingCounter& other);

    /// Wire format: family sliding_counter, version 1 (docs/wire-format.md).
    [[nodiscard]] std::vector<std::byte> serialize() const;

    /// Throws tally::FormatError on bytes serialize() cannot have produced for
    /// this Slot, Slots and Options.
    [[nodiscard]] static SlidingCounter deserialize(std::span<const std::byte> bytes);

  private:
    using wide = detail::uint128;

    [[noreturn]] static void fail(const char* what) {
        detail::throw_format_error(std::string("tally::SlidingCounter::deserialize: ") + what);
    }

    static std::size_t pos_of(std::uint64_t bucket) noexcept { return static_cast<std::size_t>(bucket % Slots); }
    static std::size_t next_pos(std::size_t p) noexcept { return p + 1 == Slots ? 0 : p + 1; }

    std::uint64_t elapsed_of(std::uint64_t now_ns, std::uint64_t bucket) const noexcept {
        if constexpr (Options.pow2_buckets)
            return now_ns & (bucket_ns_ - 1);
        else
            return now_ns - bucket * bucket_ns_;
    }

    // Sum of every slot in Slot arithmetic (wraps; exact while the ring
    // invariant total <= max(Slot) holds).
    static Slot wrap_sum(const State& s) noexcept {
        Slot acc = 0;
        for (std::size_t i = 0; i < Slots; ++i) acc = static_cast<Slot>(acc + s.slots[i]);
        return acc;
    }
    // Ring total; p = pos_of(s.newest).
    static Slot total_at(const State& s, std::size_t p) noexcept {
        if constexpr (Options.running_total) {
            return s.slots[p];
        } else {
            (void)p;
            return wrap_sum(s);
        }
    }
    static Slot newest_count(const State& s, std::size_t p) noexcept {
        if constexpr (Options.running_total) {
            const Slot total = s.slots[p];
            const Slot others = static_cast<Slot>(wrap_sum(s) - total);
            return static_cast<Slot>(total - others);
        } else {
            return s.slots[p];
        }
    }
    // Writes per-bucket counts (oldest first) into s's slots for s.newest.
    static void pack(State& s, const std::array<Slot, Slots>& c) noexcept {
        const std::size_t p = pos_of(s.newest);
        std::size_t q = p;
        Slot total = 0;
        for (std::size_t i = 0; i + 1 < Slots; ++i) {
            q = next_pos(q);
            s.slots[q] = c[i];
            total = static_cast<Slot>(total + c[i]);
        }
        total = static_cast<Slot>(total + c[Slots - 1]);
        s.slots[p] = Options.running_total ? total : c[Slots - 1];
    }

    // Moves the ring forward to bucket b (never backwards), zeroing at most
    // Slots slots that left the window.
    TALLY_ALWAYS_INLINE static void advance(State& s, std::uint64_t b) noexcept {
        if (TALLY_UNLIKELY(b > s.newest)) roll(s, b);
    }
    TALLY_DETAIL_COLD static void roll(State& s, std::uint64_t b) noexcept {
        const std::uint64_t d = b - s.newest;
        if (d >= Slots) {
            for (auto& x : s.slots) x = 0;
            s.newest = b;
            return;
        }
        const std::size_t p = pos_of(s.newest);
        std::size_t q = p;
        if constexpr (Options.running_total) {
            const Slot newest = newest_count(s, p);
            Slot total = s.slots[p];
            for (std::uint64_t k = 0; k < d; ++k) {
                q = next_pos(q);
                total = static_cast<Slot>(total - s.slots[q]);
                s.slots[q] = 0;
            }
            s.slots[p] = newest;
            s.slots[q] = total;
        } else {
            for (std::uint64_t k = 0; k < d; ++k) {
                q = next_pos(q);
                s.slots[q] = 0;
            }
        }
        s.newest = b;
    }

    // Counts c events into bucket b <= s.newest (ring already advanced); drops
    // them if b already left the ring.
    static void add_at(State& s, std::uint64_t b, Slot c) noexcept {
        const std::uint64_t age = s.newest - b;
        if (age >= Slots) return;
        const std::size_t p = pos_of(s.newest);
        const Slot total = total_at(s, p);
        if (TALLY_LIKELY(c <= static_cast<Slot>(max_count - total))) {
            if constexpr (Options.running_total) {
                s.slots[p] = static_cast<Slot>(total + c);
                if (age != 0) {
                    const std::size_t q = pos_of(b);
                    s.slots[q] = static_cast<Slot>(s.slots[q] + c);
                }
            } else {
                const std::size_t q = pos_of(b);
                s.slots[q] = static_cast<Slot>(s.slots[q] + c);
            }
            return;
        }
        add_saturating(s, static_cast<std::size_t>(Slots - 1 - age), c);
    }
    // The ring would exceed max(Slot): newest counts win, the excess is taken
    // from the oldest buckets first (then from the incoming count).
    TALLY_DETAIL_COLD static void add_saturating(State& s, std::size_t k, Slot c) noexcept {
        auto cnt = counts(s);
        std::uint64_t total = 0;
        for (const Slot x : cnt) total += x;
        std::uint64_t room = max_count - total;
        std::uint64_t excess = c - room;  // c > room here
        for (std::size_t i = 0; i < k && excess != 0; ++i) {
            const std::uint64_t take = std::min<std::uint64_t>(excess, cnt[i]);
            cnt[i] = static_cast<Slot>(cnt[i] - take);
            excess -= take;
            room += take;
        }
        cnt[k] = static_cast<Slot>(cnt[k] + std::min<std::uint64_t>(c, room));
        pack(s, cnt);
    }

    State state_;
    std::uint64_t bucket_ns_;
    unsigned shift_;
};

// ---- SlidingCounter: member definitions -------------------------------------

template <class Slot, std::size_t Slots, SlidingOptions Options>
inline SlidingCounter<Slot, Slots, Options>::SlidingCounter(std::uint64_t bucket_ns) : state_{}, bucket_ns_(bucket_ns), shift_(0) {
    detail::check_range("tally::SlidingCounter::SlidingCounter", "bucket_ns", bucket_ns, std::uint64_t{1},
                        max_bucket_ns);
    if constexpr (Options.pow2_buckets) {
        if (!std::has_single_bit(bucket_ns))
            detail::throw_invalid_argument("tally::SlidingCounter::SlidingCounter: bucket_ns " +
                                           std::to_string(bucket_ns) +
                                           " is not a power of two (pow2_buckets requires one, e.g. " +
                                           std::to_string(std::bit_floor(bucket_ns)) + " or " +
                                           std::to_string(bucket_ns > (max_bucket_ns >> 1)
                                                              ? std::bit_floor(bucket_ns)
                                                              : std::bit_ceil(bucket_ns)) +
                                           ")");
        shift_ = static_cast<unsigned>(std::countr_zero(bucket_ns));
    }
}

template <class Slot, std::size_t Slots, SlidingOptions Options>
inline auto SlidingCounter<Slot, Slots, Options>::is_fresh(const State& s, std::uint64_t now_ns) const noexcept -> bool {
    const std::uint64_t b = bucket_of(now_ns);
    if (b < s.newest) return false;
    const std::uint64_t d = b - s.newest;
    if (d >= Slots) return true;
    const auto c = counts(s);
    for (std::size_t i = static_cast<std::size_t>(d); i < Slots; ++i)
        if (c[i] != 0) return false;
    return true;
}

template <class Slot, std::size_t Slots, SlidingOptions Options>
inline auto SlidingCounter<Slot, Slots, Options>::retry_after_ns(const State& s0, std::uint64_t now_ns, std::uint64_t limit, std::uint64_t cost) const noexcept -> std::uint64_t {
    constexpr std::uint64_t never = ~std::uint64_t{0};
    if (cost > limit) return never;
    const std::uint64_t room = limit - cost;
    State s = s0;
    const std::uint64_t b = bucket_of(now_ns);
    advance(s, b);
    const bool behind = b < s.newest;
    const std::uint64_t e0 = behind ? 0 : elapsed_of(now_ns, b);
    // Reading behind newest evaluates at the start of the newest bucket.
    const wide lead = behind ? wide(s.newest) * bucket_ns_ - now_ns : 0;
    const auto c = counts(s);
    std::uint64_t rest = 0;
    for (std::size_t i = 1; i < Slots; ++i) rest += c[i];
    for (std::size_t j = 0; j <= Slots; ++j) {
        const std::uint64_t oldest = j < Slots ? c[j] : 0;
        const std::uint64_t start = j == 0 ? e0 : 0;
        std::uint64_t at = bucket_ns_;  // not in this bucket
        if (rest <= room) {
            if (oldest == 0) {
                at = start;
            } else {
                const wide q = wide(room - rest) * bucket_ns_ / oldest;  // need bucket - e <= q
                if (q >= bucket_ns_ - start)
                    at = start;
                else if (q >= 1)
                    at = bucket_ns_ - static_cast<std::uint64_t>(q);
            }
        }
        if (at < bucket_ns_) {
            if (j == 0 && at == start) return 0;
            const wide w = lead + wide(j) * bucket_ns_ + at - e0;
            return w > never ? never : static_cast<std::uint64_t>(w);
        }
        if (j + 1 < Slots) rest -= c[j + 1];
    }
    return never;  // unreachable: with j == Slots the window is empty
}

template <class Slot, std::size_t Slots, SlidingOptions Options>
inline auto SlidingCounter<Slot, Slots, Options>::drain_ns(const State& s0, std::uint64_t now_ns) const noexcept -> std::uint64_t {
    State s = s0;
    const std::uint64_t b = bucket_of(now_ns);
    advance(s, b);
    const bool behind = b < s.newest;
    const std::uint64_t e0 = behind ? 0 : elapsed_of(now_ns, b);
    const auto c = counts(s);
    std::size_t k = Slots;  // newest nonzero bucket, oldest-first index
    for (std::size_t i = Slots; i-- > 0;)
        if (c[i] != 0) {
            k = i;
            break;
        }
    if (k == Slots) return 0;
    // Bucket k is last counted as the oldest of bucket newest + k; gone from the next one.
    const wide lead = behind ? wide(s.newest) * bucket_ns_ - now_ns : 0;
    const wide w = lead + wide(k + 1) * bucket_ns_ - e0;
    return w > ~std::uint64_t{0} ? ~std::uint64_t{0} : static_cast<std::uint64_t>(w);
}

template <class Slot, std::size_t Slots, SlidingOptions Options>
inline auto SlidingCounter<Slot, Slots, Options>::counts(const State& s) noexcept -> std::array<Slot, Slots> {
    std::array<Slot, Slots> c{};
    const std::size_t p = pos_of(s.newest);
    std::size_t q = p;
    for (std::size_t i = 0; i + 1 < Slots; ++i) {
        q = next_pos(q);
        c[i] = s.slots[q];
    }
    c[Slots - 1] = newest_count(s, p);
    return c;
}

template <class Slot, std::size_t Slots, SlidingOptions Options>
inline auto SlidingCounter<Slot, Slots, Options>::merge(const SlidingCounter& other) -> SlidingCounter& {
    if (!mergeable_with(other))
        detail::throw_invalid_argument("tally::SlidingCounter::merge: bucket widths differ (" +
                                       std::to_string(bucket_ns_) + " ns vs " +
                                       std::to_string(other.bucket_ns_) + " ns)");
    const std::uint64_t n = std::max(state_.newest, other.state_.newest);
    const auto a = counts(state_);
    const auto o = counts(other.state_);
    const std::uint64_t da = n - state_.newest, db = n - other.state_.newest;
    std::array<Slot, Slots> sum{};
    std::uint64_t acc = 0;  // clamped prefix sum from the newest bucket
    for (std::size_t i = Slots; i-- > 0;) {
        // Bucket n - (Slots-1-i) is index i + d in a ring that is d behind.
        const Slot x = da < Slots - i ? a[i + static_cast<std::size_t>(da)] : 0;
        const Slot y = db < Slots - i ? o[i + static_cast<std::size_t>(db)] : 0;
        // take = min(x + y, room) without overflowing 64 bits.
        const std::uint64_t room = max_count - acc;
        const std::uint64_t take = x >= room ? room : x + std::min<std::uint64_t>(y, room - x);
        sum[i] = static_cast<Slot>(take);
        acc += take;
    }
    state_.newest = n;
    pack(state_, sum);
    return *this;
}

template <class Slot, std::size_t Slots, SlidingOptions Options>
inline auto SlidingCounter<Slot, Slots, Options>::serialize() const -> std::vector<std::byte> {
    ByteWriter w(frame_header_size + 21 + sizeof(Slot) * Slots);
    w.header(Family::sliding_counter, 1);
    w.u8(static_cast<std::uint8_t>(sizeof(Slot)));
    w.u32(static_cast<std::uint32_t>(Slots));
    w.u64(bucket_ns_);
    w.u64(state_.newest);
    for (const Slot c : counts(state_)) {
        if constexpr (sizeof(Slot) == 2)
            w.u16(c);
        else if constexpr (sizeof(Slot) == 4)
            w.u32(c);
        else
            w.u64(c);
    }
    return w.take();
}

template <class Slot, std::size_t Slots, SlidingOptions Options>
inline auto SlidingCounter<Slot, Slots, Options>::deserialize(std::span<const std::byte> bytes) -> SlidingCounter {
    ByteReader r(bytes);
    r.header(Family::sliding_counter, 1);
    const std::uint8_t width = r.u8();
    if (width != sizeof(Slot))
        detail::throw_format_error("tally::SlidingCounter::deserialize: slot width " + std::to_string(width) +
                                   " bytes where " + std::to_string(sizeof(Slot)) + " was expected");
    const std::uint32_t slots = r.u32();
    if (slots != Slots)
        detail::throw_format_error("tally::SlidingCounter::deserialize: " + std::to_string(slots) + " slots where " +
                                   std::to_string(Slots) + " were expected");
    const std::uint64_t bucket = r.u64();
    if (bucket == 0 || bucket > max_bucket_ns)
        detail::throw_format_error(
            detail::out_of_range_message("tally::SlidingCounter::deserialize", "bucket_ns", bucket,
                                         std::uint64_t{1}, max_bucket_ns));
    if constexpr (Options.pow2_buckets)
        if (!std::has_single_bit(bucket)) fail("bucket_ns is not a power of two");
    const std::uint64_t newest = r.u64();
    r.count(Slots, sizeof(Slot), Slots, "SlidingCounter slot");
    std::array<Slot, Slots> c{};
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < Slots; ++i) {
        if constexpr (sizeof(Slot) == 2)
            c[i] = r.u16();
        else if constexpr (sizeof(Slot) == 4)
            c[i] = r.u32();
        else
            c[i] = r.u64();
        if (c[i] > max_count - total) fail("ring total exceeds the slot maximum");
        total += c[i];
        // Oldest-first index i is bucket newest - (Slots-1-i); below 0 it never existed.
        if (c[i] != 0 && newest < Slots - 1 - i) fail("count for a bucket before index 0");
    }
    r.expect_end();
    SlidingCounter out(bucket);
    out.state_.newest = newest;
    pack(out.state_, c);
    return out;
}

TALLY_END_NAMESPACE
