// tally/sketch/distinct/ultraloglog.hpp: UltraLogLog distinct counting (Ertl, PVLDB
// 17(7), 2024): HyperLogLog's properties in about a quarter less memory, with
// registers byte-identical to the reference implementation (hash4j).
// Details, error tables and the wire format: docs/ultraloglog.md.
#pragma once

#include "../../detail/abi.hpp"

#include <cstdlib>

// hyperloglog.hpp (which to_hyperloglog and from_hyperloglog convert to and
// from) brings the standard headers and the core parts (hash, serialize,
// summary, the aligned allocator and the once-latch) both sketches build on.
#include "hyperloglog.hpp"
#include "detail/ultraloglog_estimators.hpp"
#include "detail/ultraloglog_kernels.hpp"

TALLY_BEGIN_NAMESPACE

/// Which estimator UltraLogLog::estimate() answers with, and its relative
/// standard error for m registers:
/// - fgra: further generalized remaining area (the paper's Algorithm 6), for
///   any registers; sqrt(0.6119 / m) = 0.782 / sqrt(m).
/// - ml: maximum likelihood (section 3.1), for any registers; 0.761 / sqrt(m);
///   an iterative solve, several times slower than fgra.
/// - martingale: historic inverse probability, for a sketch that has only seen
///   adds; sqrt(5 ln 2 / 8) / sqrt(m) = 0.658 / sqrt(m).
enum class UllEstimator : std::uint8_t { fgra = 0, ml = 1, martingale = 2 };

/// UltraLogLog: the number of distinct items in a stream, in 2^p bytes.
///
/// Ertl, "UltraLogLog: A Practical and More Space-Efficient Alternative to
/// HyperLogLog for Approximate Distinct Counting", PVLDB 17(7), 2024. Each
/// one-byte register keeps the largest update value of its items and whether
/// the two values below it occurred, so m = 2^p registers carry the
/// information of about 1.3 m HyperLogLog registers. RSE (large n, m = 2^p):
/// martingale 0.658 / sqrt(m) while the sketch has only seen adds (what
/// estimate() answers then), FGRA 0.782 / sqrt(m) after merge, reduce or
/// from_state, ML 0.761 / sqrt(m) on request; smaller near n = m and below.
/// Memory: 2^p bytes (allocated on the first add or merge) plus ~100 bytes.
/// p in [3, 26]. Registers equal hash4j's UltraLogLog for the same 64-bit
/// hashes (state(), from_state()); to_hyperloglog() gives the HyperLogLog
/// registers of the same stream. total() counts add calls, not distinct items.
///
/// add O(1) and allocation-free after the first; estimate() O(1) while
/// martingale, else O(m) once (cached until the next change); merge and
/// reduce O(m). Thread safety: writers (add, merge, clear) need exclusive
/// access; const members may run concurrently with each other.
///
///     tally::UltraLogLog ull(12);                 // 4 KiB
///     for (const auto& user : events) ull.add(user);
///     double distinct = ull.estimate();           // +-1.0% (one sigma)
class UltraLogLog {
  public:
    using Estimator = UllEstimator;

    static constexpr int min_precision = 3;
    static constexpr int max_precision = 26;
    static constexpr std::uint8_t format_version = 1;

    /// Throws std::invalid_argument unless 3 <= precision <= 26.
    explicit UltraLogLog(int precision = 12) : p_(check_precision(precision, "tally::UltraLogLog::UltraLogLog")) {}
    UltraLogLog(const UltraLogLog& o) { copy_from(o); }
    UltraLogLog(UltraLogLog&& o) noexcept { move_from(o); }
    UltraLogLog& operator=(const UltraLogLog& o) {
        if (this != &o) copy_from(o);
        return *this;
    }
    UltraLogLog& operator=(UltraLogLog&& o) noexcept {
        if (this != &o) move_from(o);
        return *this;
    }
    ~UltraLogLog() = default;

    // ---- adding (not thread-safe) ------------------------------------------

    /// Adds one item, hashed with tally::hash_of (strings: tally::hash64 of their bytes).
    template <class T>
    requires Hashable<std::decay_t<T>> || std::is_convertible_v<const T&, std::string_view> TALLY_ALWAYS_INLINE void
    add(const T& item) noexcept {
        if constexpr (Hashable<std::decay_t<T>>) {
            add_hash(hash_of(item));
        } else {
            const std::string_view s = item;
            add_hash(hash64(s.data(), s.size()));
        }
    }

    /// Adds an item by its 64-bit hash, which must be well mixed: register =
    /// the top p bits, update value = leading zeros of the rest (at most
    /// 64 - p), as hash4j's UltraLogLog.add(long). Any value is valid.
    TALLY_ALWAYS_INLINE void add_hash(std::uint64_t hash) noexcept;

    /// Back to the empty sketch (martingale estimator, total() 0), keeping
    /// the precision and the register memory.
    void clear() noexcept {
        if (!regs_.empty()) std::memset(regs_.data(), 0, regs_.size());
        std::vector<std::uint32_t>().swap(sparse_);
        regs_state_.store(lazy_ready, std::memory_order_relaxed);
        reset_estimators();
        total_ = 0;
    }

    // ---- queries (const, thread-safe among themselves) ---------------------

    /// The martingale estimate while estimator() == martingale, else the FGRA estimate.
    [[nodiscard]] double estimate() const noexcept { return martingale_ ? mart_estimate_ : fgra_estimate(); }

    /// The estimate of estimator `e`. Throws std::invalid_argument for
    /// martingale when estimator() is not martingale (after merge, reduce,
    /// from_state or a decoded frame without it).
    [[nodiscard]] double estimate(Estimator e) const;

    /// Which estimator estimate() uses: martingale for a sketch that has only seen adds, else fgra.
    [[nodiscard]] Estimator estimator() const noexcept { return martingale_ ? Estimator::martingale : Estimator::fgra; }

    /// Bounds of estimate() at num_std_dev (1..3, else std::invalid_argument)
    /// relative standard errors: estimate / (1 + s RSE), never below the
    /// registers set, and estimate / (1 - s RSE); HyperLogLog's rule in tally mode.
    [[nodiscard]] double lower_bound(int num_std_dev) const;
    [[nodiscard]] double upper_bound(int num_std_dev) const;

    /// The asymptotic relative standard error of estimate() (large n).
    [[nodiscard]] double relative_standard_error() const noexcept { return relative_standard_error(estimator()); }
    /// ... of estimator `e`: 0.658, 0.782 or 0.761 over sqrt(m) for martingale, fgra, ml.
    [[nodiscard]] double relative_standard_error(Estimator e) const noexcept {
        const double m = static_cast<double>(register_count());
        switch (e) {
            case Estimator::fgra:
                return std::sqrt(detail::UllFgra::v / m);
            case Estimator::ml:
                return detail::UllMl::rse_factor / std::sqrt(m);
            case Estimator::martingale:
                break;
        }
        return std::sqrt(5.0 * 0.6931471805599453 / 8.0 / m);
    }

    /// The FGRA estimate (O(m) after a change, then cached).
    [[nodiscard]] double fgra_estimate() const noexcept;

    /// The maximum-likelihood estimate (O(m) plus a few dozen solver steps).
    [[nodiscard]] double ml_estimate() const noexcept {
        std::uint32_t hist[256];
        histogram(hist);
        return detail::UllMl::estimate(hist, p_);
    }

    /// The probability that one more distinct item changes a register (1 when
    /// empty). O(1) while estimator() == martingale, else O(m).
    [[nodiscard]] double state_change_probability() const noexcept {
        if (martingale_) return change_probability();
        std::uint32_t hist[256];
        histogram(hist);
        return detail::ull_change_probability(hist, p_);
    }

    [[nodiscard]] int precision() const noexcept { return p_; }
    [[nodiscard]] std::size_t register_count() const noexcept { return std::size_t{1} << p_; }

    /// The 2^p register bytes, identical to hash4j's UltraLogLog.getState()
    /// for the same hashes (valid until the next non-const call).
    [[nodiscard]] std::span<const std::uint8_t> state() const noexcept {
        ensure_registers();
        if (regs_.empty()) return {zero_registers(p_), register_count()};
        return regs_;
    }

    /// True when no register is set.
    [[nodiscard]] bool empty() const noexcept { return !any_; }
    /// Number of add/add_hash calls, summed over merges (saturating there); 0 for from_state.
    [[nodiscard]] std::uint64_t total() const noexcept { return total_; }
    [[nodiscard]] std::size_t memory_bytes() const noexcept {
        return sizeof(*this) + regs_.capacity() + sparse_.capacity() * sizeof(std::uint32_t);
    }

    /// Same precision and registers (the estimator state may differ).
    friend bool operator==(const UltraLogLog& a, const UltraLogLog& b) noexcept {
        if (a.p_ != b.p_) return false;
        const auto x = a.state();
        const auto y = b.state();
        return std::memcmp(x.data(), y.data(), x.size()) == 0;
    }

    // ---- merging -----------------------------------------------------------

    /// Same precision (fold a larger one with reduce()).
    [[nodiscard]] bool mergeable_with(const UltraLogLog& other) const noexcept { return p_ == other.p_; }

    /// Register-wise union: afterwards *this is exactly the sketch of the union
    /// of both streams, and estimator() is fgra (unless one side was empty:
    /// then the other's state is kept). Throws std::invalid_argument (and
    /// changes nothing) unless mergeable_with(other).
    UltraLogLog& merge(const UltraLogLog& other);

    /// The sketch this one would be at precision `precision` (3 <=
    /// precision <= this->precision()), exactly, as hash4j's downsize
    /// (estimator fgra unless empty).
    [[nodiscard]] UltraLogLog reduce(int precision) const;

    /// The HyperLogLog (HllHashMode::tally, the same precision) whose
    /// registers are those of a HyperLogLog fed the same hashes: each register
    /// is the largest update value + 1. Estimator ertl; total() carries over.
    /// Throws std::invalid_argument unless precision() is in HyperLogLog's [4, 18].
    [[nodiscard]] HyperLogLog to_hyperloglog() const;

    // ---- hash4j state ------------------------------------------------------

    /// A sketch with these register bytes (a hash4j getState()): the length
    /// must be 2^p with p in [3, 26] and every byte a valid register of that
    /// precision, else tally::FormatError. Estimator fgra (martingale when all
    /// zero); total() 0.
    [[nodiscard]] static UltraLogLog from_state(std::span<const std::uint8_t> state);

    // ---- tally serialization -----------------------------------------------

    /// Format version 1 (docs/ultraloglog.md): precision, flags, encoding,
    /// total(), the martingale estimate while estimator() is martingale, then
    /// the registers dense (2^p bytes) or as a sparse list, whichever is shorter.
    [[nodiscard]] std::vector<std::byte> serialize() const;

    /// Decodes format version 1. Every length is checked before anything is
    /// allocated; an empty sketch allocates no registers. Throws
    /// tally::FormatError for anything but a valid encoding (a register
    /// impossible at the precision, a martingale estimate that is negative,
    /// not finite, or not 0 exactly when the registers are empty).
    [[nodiscard]] static UltraLogLog deserialize(std::span<const std::byte> bytes);

  private:
    static int check_precision(int precision, const char* who) {
        detail::check_range(who, "precision", precision, min_precision, max_precision);
        return precision;
    }

    static std::size_t varint_size(std::size_t v) noexcept {
        std::size_t n = 1;
        while (v >= 0x80) {
            v >>= 7;
            ++n;
        }
        return n;
    }

    // 2^p zero bytes for an unallocated sketch's state(): one calloc per p,
    // made once (untouched pages cost address space, not memory).
    static const std::uint8_t* zero_registers(int p) noexcept;

    // Exclusive access (non-const callers): the register array, allocated (an
    // allocation failure in add terminates, as add is noexcept).
    void allocate() {
        if (regs_state_.load(std::memory_order_relaxed) != lazy_ready) {
            ensure_registers();
            std::vector<std::uint32_t>().swap(sparse_);
        }
        if (regs_.empty()) regs_.assign(register_count(), 0);
    }

    static constexpr std::uint8_t lazy_ready = detail::lazy_ready;
    static constexpr std::uint8_t lazy_pending = detail::lazy_pending;

    // The registers of a decoded sparse frame, built once; concurrent const
    // callers wait for the one that builds them. The list stays until a writer.
    void ensure_registers() const noexcept;

    // f(index, value) for every non-zero register, in index order, without
    // building the array of a decoded sparse frame.
    template <class F>
    void for_each_nonzero(F&& f) const {
        if (regs_state_.load(std::memory_order_acquire) != lazy_ready) {
            for (const std::uint32_t e : sparse_) f(std::size_t{e >> 8}, static_cast<std::uint8_t>(e & 0xff));
            return;
        }
        if (!any_) return;
        for (std::size_t i = 0; i < regs_.size(); ++i)
            if (regs_[i] != 0) f(i, regs_[i]);
    }

    void reset_estimators() noexcept {
        any_ = false;
        martingale_ = true;
        mart_estimate_ = 0.0;
        change_sum_ = 0;
        fgra_cache_.store(-1.0, std::memory_order_relaxed);
    }

    double change_probability() const noexcept {
        // change_sum_ is 2^64 (wrapped to 0) exactly when every register is
        // empty, and 0 when every register is full (then no add changes it).
        if (change_sum_ == 0) return any_ ? 0.0 : 1.0;
        return static_cast<double>(change_sum_) * 0x1p-64;
    }

    // One register went from `old` to `now`: the martingale estimate grows by
    // 1 / (the change probability before the change), which then drops by the
    // register's share.
    void changed(std::uint8_t old, std::uint8_t now) noexcept {
        any_ = true;
        fgra_cache_.store(-1.0, std::memory_order_relaxed);
        if (!martingale_) return;
        const double prob = change_sum_ == 0 ? 1.0 : static_cast<double>(change_sum_) * 0x1p-64;
        mart_estimate_ += 1.0 / prob;
        change_sum_ -= detail::ull_change_weight(old, p_) - detail::ull_change_weight(now, p_);
    }

    void histogram(std::uint32_t (&hist)[256]) const noexcept;
    double bound(int num_std_dev, bool upper) const;

    // a[i] = the register of the union of a[i]'s and b[i]'s hash prefixes
    // (the rule and its kernels: detail/ultraloglog_kernels.hpp).
    static void merge_registers(std::uint8_t* __restrict a, const std::uint8_t* __restrict b, std::size_t m) noexcept;

    // The precision and estimator state, the members copy and move share.
    void copy_counts(const UltraLogLog& o) noexcept;
    void copy_from(const UltraLogLog& o);

    void move_from(UltraLogLog& o) noexcept;

    int p_ = 12;
    bool any_ = false;  // some register is set
    bool martingale_ = true;
    double mart_estimate_ = 0.0;
    std::uint64_t change_sum_ = 0;  // the change probability in units of 2^-64 (wrapping: empty = 2^64 = 0)
    std::uint64_t total_ = 0;
    mutable std::atomic<double> fgra_cache_{-1.0};              // < 0: not computed since the last change
    mutable std::atomic<std::uint8_t> regs_state_{lazy_ready};  // lazy_pending: regs_ not built from sparse_ yet
    // empty until the first add or merge; cache-line aligned for the merge kernels
    mutable std::vector<std::uint8_t, detail::CacheAlignedAllocator<std::uint8_t>> regs_;
    std::vector<std::uint32_t> sparse_;  // (index << 8) | value, ascending, while regs_state_ is pending
};

TALLY_END_NAMESPACE

#include "detail/ultraloglog_impl.hpp"
