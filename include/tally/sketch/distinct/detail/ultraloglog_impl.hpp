// tally/sketch/distinct/detail/ultraloglog_impl.hpp: the bodies of UltraLogLog.
// Included at the end of the public header, whose declarations it needs.
#pragma once

#include "../../../detail/abi.hpp"

#include <atomic>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>
#include "../../../core/detail/aligned_allocator.hpp"
#include "../../../core/hash.hpp"
#include "../../../core/serialize.hpp"
#include "../../../core/summary.hpp"
#include "../../../detail/primitives.hpp"
#include "../../../detail/throw.hpp"
#include "ultraloglog_estimators.hpp"
#include "ultraloglog_kernels.hpp"
#include "../hyperloglog.hpp"
#include "../ultraloglog.hpp"

TALLY_BEGIN_NAMESPACE

// ---- implementation -----------------------------------------------------

TALLY_ALWAYS_INLINE void UltraLogLog::add_hash(std::uint64_t hash) noexcept {
    ++total_;
    if (TALLY_UNLIKELY(regs_.empty())) allocate();
    const auto index = static_cast<std::size_t>(hash >> (64 - p_));
    // Bit p - 1 caps the count at 64 - p (the low p bits are shifted-in zeros).
    const int bit = std::countl_zero((hash << p_) | (std::uint64_t{1} << (p_ - 1))) + p_ - 1;
    std::uint8_t& reg = regs_[index];
    const std::uint8_t old = reg;
    // Most updates fall at or below the register's top position, where
    // it changes only for an unset bit h - 1 or h - 2.
    if (TALLY_LIKELY(((detail::ull_unchanged_by[old] >> bit) & 1) != 0)) return;
    const std::uint8_t now = detail::ull_pack(detail::ull_unpack(old) | (std::uint64_t{1} << bit));
    reg = now;
    changed(old, now);
}

inline double UltraLogLog::lower_bound(int num_std_dev) const { return bound(num_std_dev, false); }

inline double UltraLogLog::upper_bound(int num_std_dev) const { return bound(num_std_dev, true); }

inline double UltraLogLog::bound(int num_std_dev, bool upper) const {
    detail::check_range(upper ? "tally::UltraLogLog::upper_bound" : "tally::UltraLogLog::lower_bound", "num_std_dev",
                        num_std_dev, 1, 3);
    std::size_t seen = 0;
    for_each_nonzero([&](std::size_t, std::uint8_t) { ++seen; });
    return detail::rse_bound(estimate(), relative_standard_error(), num_std_dev, static_cast<double>(seen), upper);
}

inline double UltraLogLog::estimate(Estimator e) const {
    switch (e) {
        case Estimator::fgra:
            return fgra_estimate();
        case Estimator::ml:
            return ml_estimate();
        case Estimator::martingale:
            if (!martingale_)
                detail::throw_invalid_argument(
                    "tally::UltraLogLog::estimate: the martingale estimate is not available after merge, "
                    "reduce or from_state (estimator() is fgra)");
            return mart_estimate_;
    }
    detail::throw_invalid_argument("tally::UltraLogLog::estimate: estimator " + std::to_string(static_cast<int>(e)) +
                                   " is out of range [0, 2]");
}

inline double UltraLogLog::fgra_estimate() const noexcept {
    const double cached = fgra_cache_.load(std::memory_order_relaxed);
    if (cached >= 0) return cached;
    std::uint32_t hist[256];
    histogram(hist);
    const double e = detail::UllFgra::get().estimate(hist, p_);
    fgra_cache_.store(e, std::memory_order_relaxed);
    return e;
}

inline UltraLogLog& UltraLogLog::merge(const UltraLogLog& other) {
    if (p_ != other.p_)
        detail::throw_invalid_argument("tally::UltraLogLog::merge: precision " + std::to_string(other.p_) +
                                       " does not match " + std::to_string(p_) +
                                       " (fold the larger one with reduce())");
    const std::uint64_t total = detail::sat_add(total_, other.total_);
    if (this == &other || other.empty()) {
        total_ = total;
        return *this;
    }
    if (empty()) {
        *this = other;
        total_ = total;
        return *this;
    }
    allocate();
    other.ensure_registers();
    merge_registers(regs_.data(), other.regs_.data(), regs_.size());
    martingale_ = false;
    fgra_cache_.store(-1.0, std::memory_order_relaxed);
    total_ = total;
    return *this;
}

inline UltraLogLog UltraLogLog::reduce(int precision) const {
    detail::check_range("tally::UltraLogLog::reduce", "precision", precision, min_precision, p_);
    if (precision == p_) {
        UltraLogLog out(*this);
        if (!out.empty()) out.martingale_ = false;
        return out;
    }
    UltraLogLog out(precision);
    out.total_ = total_;
    if (empty()) return out;
    out.allocate();
    const int d = p_ - precision;
    const std::size_t group = std::size_t{1} << d;
    const std::uint8_t* src = state().data();
    for (std::size_t i = 0; i < out.regs_.size(); ++i, src += group) {
        // Register (i << d) + k, k != 0: its items have k's top bit as their
        // first 1 after the new index: update value d - bit_width(k).
        std::uint64_t prefix = detail::ull_unpack(src[0]);
        for (std::size_t k = 1; k < group; ++k)
            if (src[k] != 0) prefix |= std::uint64_t{1} << (p_ - 1 - static_cast<int>(std::bit_width(k)));
        if (prefix != 0) out.regs_[i] = detail::ull_pack(prefix);
    }
    out.any_ = true;
    out.martingale_ = false;
    return out;
}

inline HyperLogLog UltraLogLog::to_hyperloglog() const {
    detail::check_range("tally::UltraLogLog::to_hyperloglog", "precision", p_, HyperLogLog::min_precision,
                        HyperLogLog::max_precision);
    // An UltraLogLog register keeps the HyperLogLog register in its top six bits.
    std::vector<std::uint8_t> hll(register_count(), 0);
    for_each_nonzero([&](std::size_t i, std::uint8_t r) { hll[i] = static_cast<std::uint8_t>((r >> 2) - p_ + 2); });
    return HyperLogLog::from_registers(p_, hll, total_);
}

inline UltraLogLog UltraLogLog::from_state(std::span<const std::uint8_t> state) {
    const std::size_t n = state.size();
    if (n < (std::size_t{1} << min_precision) || n > (std::size_t{1} << max_precision) || !std::has_single_bit(n))
        detail::throw_format_error("tally::UltraLogLog::from_state: length " + std::to_string(n) +
                                   " is not 2^p for p in [3, 26]");
    const int p = std::countr_zero(n);
    UltraLogLog out(p);
    bool any = false;
    for (std::size_t i = 0; i < n; ++i) {
        if (!detail::ull_valid_register(state[i], p))
            detail::throw_format_error("tally::UltraLogLog::from_state: register " + std::to_string(i) + " has value " +
                                       std::to_string(state[i]) + ", not a register of precision " + std::to_string(p));
        any |= state[i] != 0;
    }
    if (any) {
        out.regs_.assign(state.begin(), state.end());
        out.any_ = true;
        out.martingale_ = false;
    }
    return out;
}

inline std::vector<std::byte> UltraLogLog::serialize() const {
    const std::size_t m = register_count();
    std::size_t nonzero = 0;
    std::size_t sparse_bytes = 0;
    std::size_t next = 0;
    for_each_nonzero([&](std::size_t i, std::uint8_t) {
        sparse_bytes += varint_size(i - next) + 1;
        next = i + 1;
        ++nonzero;
    });
    sparse_bytes += varint_size(nonzero);
    const bool sparse = sparse_bytes < m;
    ByteWriter w(frame_header_size + 12 + 8 + (sparse ? sparse_bytes : m));
    w.header(Family::ultraloglog, format_version);
    w.u8(static_cast<std::uint8_t>(p_));
    w.u8(martingale_ ? 1 : 0);
    w.u8(sparse ? 1 : 0);
    w.u8(0);
    w.u64(total_);
    if (martingale_) w.f64(mart_estimate_);
    if (sparse) {
        w.varint(nonzero);
        next = 0;
        for_each_nonzero([&](std::size_t i, std::uint8_t r) {
            w.varint(i - next);
            w.u8(r);
            next = i + 1;
        });
    } else {
        const auto regs = state();
        w.bytes(regs.data(), regs.size());
    }
    return w.take();
}

inline UltraLogLog UltraLogLog::deserialize(std::span<const std::byte> bytes) {
    ByteReader r(bytes);
    (void)r.header(Family::ultraloglog, format_version);
    const int p = r.u8();
    if (p < min_precision || p > max_precision)
        detail::throw_format_error(
            detail::out_of_range_message("tally::UltraLogLog::deserialize", "precision", p, 3, 26));
    const std::uint8_t flags = r.u8();
    format_check(flags <= 1, "UltraLogLog: unknown flags");
    const std::uint8_t encoding = r.u8();
    format_check(encoding <= 1, "UltraLogLog: unknown register encoding");
    format_check(r.u8() == 0, "UltraLogLog: reserved byte is not zero");
    const std::uint64_t total = r.u64();
    const double mart = flags == 1 ? r.f64() : 0.0;
    const std::size_t m = std::size_t{1} << p;
    UltraLogLog out(p);
    bool any = false;
    if (encoding == 0) {
        const auto raw = r.bytes(m);
        r.expect_end();
        const auto* b = reinterpret_cast<const std::uint8_t*>(raw.data());
        for (std::size_t i = 0; i < m; ++i) {
            format_check(detail::ull_valid_register(b[i], p),
                         "UltraLogLog: register value impossible at this precision");
            any |= b[i] != 0;
        }
        // The encoding is canonical: dense only where the sparse list is not shorter.
        std::size_t sparse_bytes = 0, nonzero = 0, next = 0;
        for (std::size_t i = 0; i < m; ++i) {
            if (b[i] == 0) continue;
            sparse_bytes += varint_size(i - next) + 1;
            next = i + 1;
            ++nonzero;
        }
        format_check(sparse_bytes + varint_size(nonzero) >= m,
                     "UltraLogLog: dense registers where the sparse list is shorter");
        out.regs_.assign(b, b + m);
    } else {
        const std::uint64_t k = r.count(r.varint(), 2, m, "UltraLogLog non-zero register");
        ByteReader again = r;
        std::size_t next = 0;
        for (std::uint64_t j = 0; j < k; ++j) {
            const std::uint64_t gap = r.varint();
            format_check(gap < m - next, "UltraLogLog: sparse register index out of range");
            const std::uint8_t v = r.u8();
            format_check(v != 0 && detail::ull_valid_register(v, p),
                         "UltraLogLog: sparse register value impossible at this precision");
            next += static_cast<std::size_t>(gap) + 1;
        }
        r.expect_end();
        // A sparse list as long as the dense array would not be written.
        format_check(r.position() - again.position() + varint_size(k) < m,
                     "UltraLogLog: sparse list is not shorter than the dense registers");
        if (k != 0) {
            // Kept as a list (its size bounded by the input's), the 2^p
            // registers built on first use.
            any = true;
            out.sparse_.reserve(static_cast<std::size_t>(k));
            next = 0;
            for (std::uint64_t j = 0; j < k; ++j) {
                next += static_cast<std::size_t>(again.varint());
                out.sparse_.push_back(static_cast<std::uint32_t>(next << 8) | again.u8());
                ++next;
            }
            out.regs_state_.store(lazy_pending, std::memory_order_relaxed);
        }
    }
    out.total_ = total;
    out.any_ = any;
    if (flags == 1) {
        format_check(std::isfinite(mart) && mart >= 0 && ((mart == 0) == !any),
                     "UltraLogLog: martingale estimate does not match the registers");
        out.mart_estimate_ = mart;
        if (any) {
            std::uint32_t hist[256];
            out.histogram(hist);
            std::uint64_t sum = 0;  // wraps to 0 only for the empty sketch
            for (int v = 0; v < 256; ++v)
                sum += static_cast<std::uint64_t>(hist[v]) * detail::ull_change_weight(static_cast<std::uint8_t>(v), p);
            out.change_sum_ = sum;
        }
    } else {
        out.martingale_ = !any;
    }
    return out;
}

inline const std::uint8_t* UltraLogLog::zero_registers(int p) noexcept {
    static std::atomic<const std::uint8_t*> cache[max_precision + 1] = {};
    const std::uint8_t* z = cache[p].load(std::memory_order_acquire);
    if (z != nullptr) return z;
    auto* fresh = static_cast<const std::uint8_t*>(std::calloc(std::size_t{1} << p, 1));
    if (fresh == nullptr) detail::abort_with("tally::UltraLogLog", "out of memory for the zero state");
    if (cache[p].compare_exchange_strong(z, fresh, std::memory_order_acq_rel)) return fresh;
    std::free(const_cast<std::uint8_t*>(fresh));
    return z;
}

inline void UltraLogLog::ensure_registers() const noexcept {
    if (TALLY_LIKELY(regs_state_.load(std::memory_order_acquire) == lazy_ready)) return;
    detail::run_lazy(regs_state_, [this] {
        regs_.assign(register_count(), 0);
        for (const std::uint32_t e : sparse_) regs_[e >> 8] = static_cast<std::uint8_t>(e & 0xff);
    });
}

inline void UltraLogLog::histogram(std::uint32_t (&hist)[256]) const noexcept {
    if (regs_state_.load(std::memory_order_acquire) != lazy_ready || regs_.empty()) {
        std::memset(hist, 0, sizeof hist);
        std::uint32_t k = 0;
        for_each_nonzero([&](std::size_t, std::uint8_t r) {
            ++hist[r];
            ++k;
        });
        hist[0] = static_cast<std::uint32_t>(register_count()) - k;
        return;
    }
    detail::ull_histogram(regs_.data(), regs_.size(), hist);
}

inline void UltraLogLog::merge_registers(std::uint8_t* __restrict a, const std::uint8_t* __restrict b,
                                         std::size_t m) noexcept {
    detail::ull_merge_registers(a, b, m);
}

inline void UltraLogLog::copy_counts(const UltraLogLog& o) noexcept {
    p_ = o.p_;
    any_ = o.any_;
    martingale_ = o.martingale_;
    mart_estimate_ = o.mart_estimate_;
    change_sum_ = o.change_sum_;
    total_ = o.total_;
}

inline void UltraLogLog::copy_from(const UltraLogLog& o) {
    copy_counts(o);
    // A pending list is never modified by const members: copied as it is.
    if (o.regs_state_.load(std::memory_order_acquire) == lazy_ready) {
        regs_ = o.regs_;
        sparse_.clear();
        regs_state_.store(lazy_ready, std::memory_order_relaxed);
    } else {
        regs_.clear();
        sparse_ = o.sparse_;
        regs_state_.store(lazy_pending, std::memory_order_relaxed);
    }
    fgra_cache_.store(o.fgra_cache_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

inline void UltraLogLog::move_from(UltraLogLog& o) noexcept {
    copy_counts(o);
    regs_ = std::move(o.regs_);
    sparse_ = std::move(o.sparse_);
    regs_state_.store(o.regs_state_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    fgra_cache_.store(o.fgra_cache_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    // The moved-from sketch is the empty sketch of its precision.
    o.regs_.clear();
    o.sparse_.clear();
    o.regs_state_.store(lazy_ready, std::memory_order_relaxed);
    o.reset_estimators();
    o.total_ = 0;
}

static_assert(MergeableSummary<UltraLogLog>);
static_assert(SummaryObservers<UltraLogLog>);

TALLY_END_NAMESPACE
