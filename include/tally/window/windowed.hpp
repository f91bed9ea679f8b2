// tally/window/windowed.hpp: the sliding ring of sub-buckets lifted to any
// mergeable summary (distinct users in the last hour, p99 over 5 minutes).
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/hash.hpp"
#include "../core/platform.hpp"
#include "../core/seed.hpp"
#include "../core/serialize.hpp"
#include "../core/summary.hpp"
#include "../detail/primitives.hpp"
#include "../detail/throw.hpp"
#include "detail/windowed_parts.hpp"

// Rare paths (ring roll, late events) stay out of line so add() inlines small.
#if defined(__GNUC__) || defined(__clang__)
#define TALLY_DETAIL_WINDOWED_COLD __attribute__((noinline, cold))
#else
#define TALLY_DETAIL_WINDOWED_COLD
#endif

TALLY_BEGIN_NAMESPACE

/// Windowed<S, Slots>: any MergeableSummary S over a sliding time window: a
/// ring of `Slots` sub-bucket summaries of width bucket_ns, with the ring
/// rules of SlidingCounter (advance before read, an idle gap clears at most
/// Slots buckets, late events land in their own bucket while it is in the
/// ring, older ones are dropped and counted, the ring never moves back).
///
/// Span: view(now) advances to B = max(now / bucket_ns, newest_bucket()) and
/// summarizes exactly the accepted events with B - (Slots-1) <= t / bucket_ns
/// <= B: (Slots-1)*bucket_ns to Slots*bucket_ns of time, bucket-aligned. It
/// equals S built from scratch over those events: exactly for HyperLogLog,
/// CountMin, BloomFilter; within S's own guarantee for TDigest and TopK; in
/// distribution for Reservoir (samplers get a generator per bucket).
///
/// Queries: Two-Stacks sliding-window aggregation (Tangwongsan, Hirzel,
/// Schneider, "Low-Latency Sliding-Window Aggregation in Worst-Case Constant
/// Time", DEBS 2017) with flips every Slots-1 buckets; no inverse needed.
/// view() <= 1 S::merge + 1 copy (0 while cached); a roll ~3 merges
/// amortized; add one S::add; a late event one S::add per aggregate covering it.
///
/// Memory: at most 2*Slots + 3 summaries (buckets, aggregates, prototype).
/// Thread safety: none; view() mutates. One window per thread, then merge.
///
///     tally::Windowed<tally::HyperLogLog, 61> users(60'000'000'000, tally::HyperLogLog(12));
///     users.add(now_ns, user_id);                           // 1-minute buckets
///     double last_hour = users.view(now_ns).estimate();     // 60 to 61 minutes
template <MergeableSummary S, std::size_t Slots = 8>
class Windowed {
    static_assert(Slots >= 2 && Slots <= 65536, "tally::Windowed: Slots must be in [2, 65536]");

  public:
    using summary_type = S;
    static constexpr std::size_t slot_count = Slots;
    /// Largest bucket width whose window (Slots-1)*bucket_ns fits in 64 bits.
    static constexpr std::uint64_t max_bucket_ns = ~std::uint64_t{0} / (Slots - 1);
    /// True when S owns a generator (Reservoir): each bucket and aggregate is
    /// then made from (k, seed) with its own seed instead of copied.
    static constexpr bool reseeds_buckets = detail::WindowedSampler<S>;
    static constexpr std::uint8_t format_version = 1;

    /// bucket_ns in [1, max_bucket_ns] (std::invalid_argument otherwise).
    /// `prototype` must hold no events (S::empty() or S::total() == 0 where S
    /// has them; std::invalid_argument otherwise): every bucket is a copy of it.
    Windowed(std::uint64_t bucket_ns, S prototype) : prototype_(std::move(prototype)), bucket_ns_(bucket_ns) {
        detail::check_range("tally::Windowed::Windowed", "bucket_ns", bucket_ns, std::uint64_t{1}, max_bucket_ns);
        if (!holds_nothing(prototype_))
            detail::throw_invalid_argument(
                "tally::Windowed::Windowed: prototype is not empty (pass a summary with no events)");
        init();
    }

    /// Counts one event at now_ns: forwards args to S::add of its bucket.
    template <class... Args>
        requires requires(S& s, Args&&... a) { s.add(std::forward<Args>(a)...); }
    TALLY_ALWAYS_INLINE void add(std::uint64_t now_ns, Args&&... args) noexcept(
        noexcept(std::declval<S&>().add(std::declval<Args>()...)) &&
        noexcept(std::declval<S&>().add(std::declval<Args&>()...)));

    /// The checked add: forwards args to S::try_add of its bucket and returns
    /// its answer; false also for an event older than the ring (counted in
    /// dropped()). A refused event changes no bucket (the ring still moves to
    /// now_ns). For summaries that can refuse an item (WeightedReservoir, TDigest).
    template <class... Args>
        requires requires(S& s, Args&&... a) { { s.try_add(std::forward<Args>(a)...) } -> std::same_as<bool>; }
    bool try_add(std::uint64_t now_ns, Args&&... args) noexcept(
        noexcept(std::declval<S&>().try_add(std::declval<Args&>()...)) &&
        noexcept(std::declval<S&>().add(std::declval<Args&>()...)));

    /// The merged summary of the window at now_ns (span: class comment).
    /// Valid until the next non-const call on this window. Propagates what
    /// S::merge throws (TDigest: total weight overflow); the window stays valid.
    [[nodiscard]] const S& view(std::uint64_t now_ns) {
        const std::uint64_t b = now_ns / bucket_ns_;
        if (b > newest_) roll_to(b);
        settle();
        if (!view_ok_) compute_view();
        return source(view_src_);
    }

    [[nodiscard]] std::uint64_t bucket_ns() const noexcept { return bucket_ns_; }
    /// The closed part of the window, (Slots-1)*bucket_ns.
    [[nodiscard]] std::uint64_t window_ns() const noexcept { return (Slots - 1) * bucket_ns_; }
    /// Absolute index (time / bucket_ns) of the newest bucket.
    [[nodiscard]] std::uint64_t newest_bucket() const noexcept { return newest_; }
    /// Events dropped because their bucket had left the ring (saturating).
    [[nodiscard]] std::uint64_t dropped() const noexcept { return dropped_; }
    [[nodiscard]] const S& prototype() const noexcept { return prototype_; }
    /// Stream weight held by the ring: the sum of S::total() over its buckets
    /// (as of newest_bucket(); view(now).total() is the window's at now).
    [[nodiscard]] auto total() const noexcept
        requires requires(const S& s) { s.total(); }
    {
        using T = std::remove_cvref_t<decltype(std::declval<const S&>().total())>;
        T sum{};
        for (const S& s : ring_) {
            if constexpr (std::is_unsigned_v<T>) {
                sum = detail::sat_add(sum, s.total());
            } else {
                sum += s.total();
            }
        }
        return sum;
    }
    /// No bucket in the ring holds an event (as of newest_bucket()).
    [[nodiscard]] bool empty() const noexcept {
        if (stale_) return false;
        return std::find(touched_.begin(), touched_.end(), std::uint8_t{1}) == touched_.end();
    }
    /// Heap and object bytes of every summary held (S::memory_bytes() where S has it).
    [[nodiscard]] std::size_t memory_bytes() const noexcept {
        std::size_t n = sizeof(*this) + touched_.capacity() + bytes_of(prototype_) + bytes_of(pre_.s) +
                        bytes_of(closed_.s) + bytes_of(view_);
        for (const S& s : ring_) n += bytes_of(s);
        for (const Agg& a : suf_) n += bytes_of(a.s);
        return n;
    }
    /// Forgets every event and the dropped count; keeps newest_bucket().
    void clear();

    // ---- MergeableSummary ---------------------------------------------------

    /// Same bucket width and S::mergeable_with between the prototypes.
    [[nodiscard]] bool mergeable_with(const Windowed& other) const noexcept {
        return bucket_ns_ == other.bucket_ns_ && prototype_.mergeable_with(other.prototype_);
    }

    /// Merges other's buckets into this one's, aligned by absolute index; the
    /// result's newest is the later one (the lagging ring advances first).
    /// Throws std::invalid_argument (unchanged) unless mergeable_with(other);
    /// an exception from S::merge itself (TDigest: total weight overflow)
    /// propagates after the buckets before it were merged.
    Windowed& merge(const Windowed& other);

    /// Bytes: docs/windowed.md (frame family 9, nested S frames).
    [[nodiscard]] std::vector<std::byte> serialize() const;

    /// Reads serialize()'s bytes; tally::FormatError for anything else.
    [[nodiscard]] static Windowed deserialize(std::span<const std::byte> bytes);

  private:
    static constexpr std::uint64_t L = Slots - 1;  // closed buckets in the window
    enum class Src : std::uint8_t { none, pre, suf, closed, view, current };
    enum Role : std::uint64_t { role_bucket = 1, role_pre, role_suf, role_closed, role_view };
    struct Agg {
        S s;
        bool has = false;
    };

    Windowed(std::uint64_t bucket_ns, S prototype, std::uint64_t newest)
        : prototype_(std::move(prototype)), bucket_ns_(bucket_ns), newest_(newest) {
        init();
    }

    static bool holds_nothing(const S& s) {
        if constexpr (requires { { s.empty() } -> std::convertible_to<bool>; })
            return static_cast<bool>(s.empty());
        else if constexpr (requires { s.total() == 0; })
            return s.total() == 0;
        else
            return true;
    }
    static std::size_t bytes_of(const S& s) noexcept {
        if constexpr (requires { { s.memory_bytes() } -> std::convertible_to<std::size_t>; })
            return static_cast<std::size_t>(s.memory_bytes());
        else
            return sizeof(S);
    }
    static std::span<const std::byte> nested(ByteReader& r) {
        const std::uint64_t n = r.u64();
        format_check(n <= r.remaining(), "Windowed: nested summary longer than the bytes that remain");
        return r.bytes(static_cast<std::size_t>(n));
    }

    void init() {
        if constexpr (reseeds_buckets) {
            const std::vector<std::byte> b = prototype_.serialize();
            salt_ = hash64(b.data(), b.size(), 0x77696e646f776564ull);
        }
        cur_pos_ = pos_of(newest_);
        cur_lo_ = newest_ * bucket_ns_;
        touched_.assign(Slots, 0);
        ring_.reserve(Slots);
        for (std::size_t p = 0; p < Slots; ++p) ring_.push_back(fresh(index_at(p)));
    }

    // ---- ring geometry ------------------------------------------------------
    static std::size_t pos_of(std::uint64_t b) noexcept { return static_cast<std::size_t>(b % Slots); }
    // Position of bucket newest - a, a < Slots.
    std::size_t pos_back(std::uint64_t a) const noexcept {
        const std::size_t d = static_cast<std::size_t>(a);
        return cur_pos_ >= d ? cur_pos_ - d : cur_pos_ + Slots - d;
    }
    // The (wrapping) absolute index held at ring position p.
    std::uint64_t index_at(std::size_t p) const noexcept {
        return newest_ - static_cast<std::uint64_t>(cur_pos_ >= p ? cur_pos_ - p : cur_pos_ + Slots - p);
    }
    bool holds(std::size_t p) const noexcept { return touched_[p] != 0 || (stale_ && p == cur_pos_); }
    const S& bucket(std::uint64_t b) const noexcept { return ring_[pos_back(newest_ - b)]; }
    bool bucket_holds(std::uint64_t b) const noexcept { return touched_[pos_back(newest_ - b)] != 0; }

    // ---- making summaries ---------------------------------------------------
    std::uint64_t seed_for(std::uint64_t role, std::uint64_t a, std::uint64_t c = 0) const noexcept {
        using detail::windowed_mix;
        return windowed_mix(salt_ ^ windowed_mix(role * 0x9e3779b97f4a7c15ull + windowed_mix(a + windowed_mix(c))));
    }
    std::uint64_t bucket_seed(std::uint64_t b) const noexcept { return seed_for(role_bucket, b); }
    S make_sampler(std::uint64_t seed) const {
        if constexpr (std::constructible_from<S, std::size_t, std::uint64_t>)
            return S(static_cast<std::size_t>(prototype_.k()), seed);
        else
            return S(static_cast<std::size_t>(prototype_.k()), Seed{seed});
    }
    S fresh(std::uint64_t b) const {
        if constexpr (reseeds_buckets)
            return make_sampler(bucket_seed(b));
        else
            return prototype_;
    }
    // dst := x. A sampler gets its own generator (merging into an empty one
    // copies the sample and keeps the target's generator).
    void start(S& dst, const S& x, std::uint64_t seed) const {
        if constexpr (reseeds_buckets) {
            dst = make_sampler(seed);
            dst.merge(x);
        } else {
            dst = x;
        }
    }
    void absorb(Agg& a, const S& x, std::uint64_t seed) const {
        if (a.has) {
            a.s.merge(x);
        } else {
            start(a.s, x, seed);
            a.has = true;
        }
    }
    void reset_slot(std::size_t p, std::uint64_t b) {
        if constexpr (reseeds_buckets) {
            ring_[p] = fresh(b);
        } else {
            if (touched_[p]) ring_[p] = prototype_;
        }
        touched_[p] = 0;
    }

    // ---- time ---------------------------------------------------------------
    void settle() noexcept {
        if (stale_) {
            touched_[cur_pos_] = 1;
            stale_ = false;
            view_ok_ = false;
        }
    }
    void invalidate() noexcept { pre_ok_ = suf_ok_ = closed_ok_ = view_ok_ = false; }

    // Moves the ring forward to bucket b > newest_, clearing at most Slots buckets.
    TALLY_DETAIL_WINDOWED_COLD void roll_to(std::uint64_t b) {
        settle();
        const std::uint64_t d = b - newest_;
        const std::uint64_t steps = d < Slots ? d : Slots;
        for (std::uint64_t k = steps; k >= 1; --k) {
            const std::uint64_t idx = b - (steps - k);  // newest first is fine: each slot once
            reset_slot(pos_of(idx), idx);
        }
        newest_ = b;
        cur_pos_ = pos_of(b);
        cur_lo_ = b * bucket_ns_;
        closed_ok_ = false;
        view_ok_ = false;
    }

    // Checked: try_add (the answer is returned), else add (true).
    template <bool Checked, class S2, class... Args>
    static bool put(S2& s, Args&... args) {
        if constexpr (Checked) {
            return s.try_add(args...);
        } else {
            s.add(args...);
            return true;
        }
    }

    template <bool Checked, class... Args>
    TALLY_DETAIL_WINDOWED_COLD bool add_slow(std::uint64_t now_ns, Args&... args) {
        const std::uint64_t b = now_ns / bucket_ns_;
        if (b > newest_) {
            roll_to(b);
            if (!put<Checked>(ring_[cur_pos_], args...)) return false;
            stale_ = true;
            return true;
        }
        const std::uint64_t age = newest_ - b;  // > 0 here
        if (age >= Slots) {
            dropped_ = detail::sat_add(dropped_, std::uint64_t{1});
            return false;
        }
        return late_add<Checked>(b, args...);
    }

    // An event for closed bucket b: the bucket and every live aggregate that
    // covers it take the same add, so no aggregate has to be rebuilt.
    template <bool Checked, class... Args>
    bool late_add(std::uint64_t b, Args&... args) {
        const std::size_t p = pos_back(newest_ - b);
        S& target = ring_[p];
        if (!put<Checked>(target, args...)) return false;
        touched_[p] = 1;
        view_ok_ = false;
        const std::uint64_t n = newest_;
        const std::uint64_t blk = (n - 1) / L;  // n >= 1 because b < n
        const auto feed = [&](Agg& a, std::uint64_t seed) {
            if (a.has)
                a.s.add(args...);
            else
                absorb(a, target, seed);
        };
        // The bucket holds the event now. If an aggregate's add throws
        // (TDigest: total weight overflow), the aggregates are dropped and
        // rebuilt from the buckets by the next view, where the merge reports it.
#if TALLY_HAS_EXCEPTIONS
        try {
#endif
        if (pre_ok_ && pre_block_ == blk && b >= blk * L && b < pre_end_) feed(pre_, seed_for(role_pre, blk));
        if (suf_ok_ && blk >= 1 && suf_block_ == blk - 1 && b < blk * L) {
            const std::uint64_t base = suf_block_ * L;
            const std::uint64_t j0 = std::max<std::uint64_t>(suf_lo_, n - L - base);
            for (std::uint64_t j = j0; j <= b - base; ++j) feed(suf_[j], seed_for(role_suf, suf_block_, j));
        }
        if (closed_ok_) {
            if (closed_src_ == Src::closed)
                closed_.s.add(args...);
            else
                closed_ok_ = false;  // re-pick the source (maybe one merge)
        }
#if TALLY_HAS_EXCEPTIONS
        } catch (...) {
            invalidate();
        }
#endif
        return true;
    }

    // ---- aggregates ---------------------------------------------------------
    // closed = merge of buckets [n-L, n-1] = suffix [n-L, blk*L-1] of the
    // previous block + prefix [blk*L, n-1] of the current block.
    void refresh_closed() {
        if (closed_ok_) return;
        const std::uint64_t n = newest_;
        closed_src_ = Src::none;
        if (n == 0) {
            closed_ok_ = true;
            return;
        }
        const std::uint64_t blk = (n - 1) / L;
        const std::uint64_t start_idx = blk * L;
        if (!(pre_ok_ && pre_block_ == blk && pre_end_ <= n)) {
            pre_.has = false;
            pre_block_ = blk;
            pre_end_ = start_idx;
            pre_ok_ = true;
        }
        // pre_end_ moves per bucket: a merge that throws leaves it exact.
        for (std::uint64_t b = pre_end_; b < n; pre_end_ = ++b)
            if (bucket_holds(b)) absorb(pre_, bucket(b), seed_for(role_pre, blk));
        const Agg* suf = nullptr;
        if (blk >= 1 && n - L < start_idx) {
            const std::uint64_t base = (blk - 1) * L;
            const std::uint64_t j0 = n - L - base;  // in [1, L-1]
            if (!(suf_ok_ && suf_block_ == blk - 1 && suf_lo_ <= j0)) build_suffixes(blk - 1, j0);
            if (suf_[j0].has) {
                suf = &suf_[j0];
                closed_j_ = static_cast<std::size_t>(j0);
            }
        }
        if (suf != nullptr && pre_.has) {
            start(closed_.s, suf->s, seed_for(role_closed, n));
            closed_.s.merge(pre_.s);
            closed_.has = true;
            closed_src_ = Src::closed;
        } else if (suf != nullptr) {
            closed_src_ = Src::suf;
        } else if (pre_.has) {
            closed_src_ = Src::pre;
        }
        closed_ok_ = true;
    }

    void build_suffixes(std::uint64_t block, std::uint64_t j0) {
        if (suf_.empty()) {
            suf_.reserve(static_cast<std::size_t>(L));
            for (std::uint64_t j = 0; j < L; ++j) suf_.push_back(Agg{prototype_, false});
        }
        const std::uint64_t base = block * L;
        for (std::uint64_t j = L; j-- > j0;) {
            Agg& a = suf_[j];
            const std::uint64_t seed = seed_for(role_suf, block, j);
            a.has = false;
            if (j + 1 < L && suf_[j + 1].has) {
                start(a.s, suf_[j + 1].s, seed);
                a.has = true;
            }
            if (bucket_holds(base + j)) absorb(a, bucket(base + j), seed);
        }
        suf_ok_ = true;
        suf_block_ = block;
        suf_lo_ = j0;
    }

    void compute_view() {
        refresh_closed();
        const bool cur = touched_[cur_pos_] != 0;
        if (closed_src_ == Src::none) {
            view_src_ = cur ? Src::current : Src::none;
        } else if (!cur) {
            view_src_ = closed_src_;
        } else {
            start(view_, source(closed_src_), seed_for(role_view, newest_));
            view_.merge(ring_[cur_pos_]);
            view_src_ = Src::view;
        }
        view_ok_ = true;
    }

    const S& source(Src s) const noexcept {
        switch (s) {
            case Src::pre: return pre_.s;
            case Src::suf: return suf_[closed_j_].s;
            case Src::closed: return closed_.s;
            case Src::view: return view_;
            case Src::current: return ring_[cur_pos_];
            case Src::none: break;
        }
        return prototype_;
    }

    S prototype_;
    std::uint64_t bucket_ns_;
    std::uint64_t newest_ = 0;
    std::uint64_t cur_lo_ = 0;  // newest_ * bucket_ns_
    std::size_t cur_pos_ = 0;
    bool stale_ = false;  // the current bucket took adds since the last settle()
    std::vector<S> ring_;
    std::vector<std::uint8_t> touched_;  // 1: may differ from a fresh bucket
    std::uint64_t dropped_ = 0;
    std::uint64_t salt_ = 0;

    // aggregates (Two-Stacks with fixed flip points)
    Agg pre_{prototype_, false};
    std::uint64_t pre_block_ = 0, pre_end_ = 0;
    bool pre_ok_ = false;
    std::vector<Agg> suf_;
    std::uint64_t suf_block_ = 0, suf_lo_ = 0;
    bool suf_ok_ = false;
    Agg closed_{prototype_, false};
    Src closed_src_ = Src::none;
    std::size_t closed_j_ = 0;
    bool closed_ok_ = false;
    S view_{prototype_};
    Src view_src_ = Src::none;
    bool view_ok_ = false;
};

// ---- Windowed: member definitions -------------------------------------

template <MergeableSummary S, std::size_t Slots>
template <class... Args>
requires requires(S& s, Args&&... a) { s.add(std::forward<Args>(a)...); }
TALLY_ALWAYS_INLINE void Windowed<S, Slots>::add(std::uint64_t now_ns, Args&&... args) noexcept( noexcept(std::declval<S&>().add(std::declval<Args>()...)) && noexcept(std::declval<S&>().add(std::declval<Args&>()...))) {
    if (TALLY_LIKELY(now_ns - cur_lo_ < bucket_ns_)) {
        ring_[cur_pos_].add(std::forward<Args>(args)...);
        stale_ = true;
        return;
    }
    add_slow<false>(now_ns, args...);
}

template <MergeableSummary S, std::size_t Slots>
template <class... Args>
requires requires(S& s, Args&&... a) { { s.try_add(std::forward<Args>(a)...) } -> std::same_as<bool>; }
inline auto Windowed<S, Slots>::try_add(std::uint64_t now_ns, Args&&... args) noexcept( noexcept(std::declval<S&>().try_add(std::declval<Args&>()...)) && noexcept(std::declval<S&>().add(std::declval<Args&>()...))) -> bool {
    if (TALLY_LIKELY(now_ns - cur_lo_ < bucket_ns_)) {
        if (!ring_[cur_pos_].try_add(args...)) return false;
        stale_ = true;
        return true;
    }
    return add_slow<true>(now_ns, args...);
}

template <MergeableSummary S, std::size_t Slots>
inline void Windowed<S, Slots>::clear() {
    for (std::size_t p = 0; p < Slots; ++p) {
        touched_[p] = 1;  // force the reset below
        reset_slot(p, index_at(p));
    }
    stale_ = false;
    dropped_ = 0;
    invalidate();
}

template <MergeableSummary S, std::size_t Slots>
inline auto Windowed<S, Slots>::merge(const Windowed& other) -> Windowed& {
    if (bucket_ns_ != other.bucket_ns_)
        detail::throw_invalid_argument("tally::Windowed::merge: bucket widths differ (" +
                                       std::to_string(bucket_ns_) + " ns vs " +
                                       std::to_string(other.bucket_ns_) + " ns)");
    if (!prototype_.mergeable_with(other.prototype_))
        detail::throw_invalid_argument(
            "tally::Windowed::merge: the summaries' parameters differ (S::mergeable_with is false)");
    if (this == &other) {
        const Windowed copy = other;
        return merge(copy);
    }
    const std::uint64_t n = std::max(newest_, other.newest_);
    if (n > newest_) roll_to(n);
    settle();
    invalidate();  // first: if an S::merge throws below, the aggregates are rebuilt
    for (std::uint64_t a = 0; a < Slots && a <= other.newest_; ++a) {
        const std::uint64_t b = other.newest_ - a;
        if (n - b >= Slots) break;
        const std::size_t op = other.pos_back(a);
        if (!other.holds(op)) continue;
        const std::size_t p = pos_back(n - b);
        if (touched_[p])
            ring_[p].merge(other.ring_[op]);
        else
            start(ring_[p], other.ring_[op], bucket_seed(b));
        touched_[p] = 1;
    }
    dropped_ = detail::sat_add(dropped_, other.dropped_);
    return *this;
}

template <MergeableSummary S, std::size_t Slots>
inline auto Windowed<S, Slots>::serialize() const -> std::vector<std::byte> {
    ByteWriter w;
    w.header(detail::windowed_family, format_version);
    w.u32(static_cast<std::uint32_t>(Slots));
    w.u64(bucket_ns_);
    w.u64(newest_);
    w.u64(dropped_);
    const std::vector<std::byte> proto = prototype_.serialize();
    w.u64(proto.size());
    w.bytes(proto);
    for (std::size_t i = 0; i < Slots; ++i) {
        const std::size_t p = pos_back(Slots - 1 - i);
        if (!holds(p)) {
            w.u8(0);
            continue;
        }
        const std::vector<std::byte> b = ring_[p].serialize();
        w.u8(1);
        w.u64(b.size());
        w.bytes(b);
    }
    return w.take();
}

template <MergeableSummary S, std::size_t Slots>
inline auto Windowed<S, Slots>::deserialize(std::span<const std::byte> bytes) -> Windowed {
    ByteReader r(bytes);
    r.header(detail::windowed_family, format_version);
    const std::uint32_t slots = r.u32();
    if (slots != Slots)
        detail::throw_format_error("tally::Windowed: " + std::to_string(slots) + " slots where " +
                                   std::to_string(Slots) + " were expected");
    const std::uint64_t bucket = r.u64();
    format_check(bucket >= 1 && bucket <= max_bucket_ns, "Windowed: bucket_ns out of range");
    const std::uint64_t newest = r.u64();
    format_check(newest <= ~std::uint64_t{0} / bucket, "Windowed: newest bucket lies beyond 2^64 - 1 ns");
    const std::uint64_t dropped = r.u64();
    S proto = S::deserialize(nested(r));
    format_check(holds_nothing(proto), "Windowed: prototype holds events");
    Windowed out(bucket, std::move(proto), newest);
    for (std::size_t i = 0; i < Slots; ++i) {
        const std::uint8_t flag = r.u8();
        format_check(flag <= 1, "Windowed: bucket flag is neither 0 nor 1");
        if (flag == 0) continue;
        format_check(newest >= Slots - 1 - i, "Windowed: events in a bucket before index 0");
        S s = S::deserialize(nested(r));
        format_check(s.mergeable_with(out.prototype_), "Windowed: a bucket's parameters differ from the prototype's");
        const std::size_t p = out.pos_back(Slots - 1 - i);
        out.ring_[p] = std::move(s);
        out.touched_[p] = 1;
    }
    r.expect_end();
    out.dropped_ = dropped;
    return out;
}

TALLY_END_NAMESPACE
