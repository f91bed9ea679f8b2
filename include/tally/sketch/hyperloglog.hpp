// tally/sketch/hyperloglog.hpp: HyperLogLog distinct counting with the HIP
// estimator while a sketch has only seen adds, Ertl's improved estimator for
// merged sketches, exact folding, and Redis and Apache DataSketches interop.
// Details, error tables and the wire format: docs/hyperloglog.md.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "../core/hash.hpp"
#include "../core/serialize.hpp"
#include "../core/summary.hpp"
#include "detail/hyperloglog_datasketches.hpp"
#include "detail/hyperloglog_redis.hpp"
#include "../detail/primitives.hpp"
#include "../detail/throw.hpp"

TALLY_BEGIN_NAMESPACE

namespace detail {

// sigma(x) = x + sum_{k>=1} x^(2^k) 2^(k-1) (Ertl 2017, eq. 36), x in [0, 1];
// summed until the double stops changing. sigma(1) = infinity.
inline double hll_sigma(double x) noexcept {
    if (x == 1.0) return HUGE_VAL;
    double y = 1.0;
    double z = x;
    double previous;
    do {
        x *= x;
        previous = z;
        z += x * y;
        y += y;
    } while (previous != z);
    return z;
}

// tau(x) = (1 - x - sum_{k>=1} (1 - x^(2^-k))^2 2^-k) / 3 (Ertl 2017, eq. 38).
inline double hll_tau(double x) noexcept {
    if (x == 0.0 || x == 1.0) return 0.0;
    double y = 1.0;
    double z = 1.0 - x;
    double previous;
    do {
        x = std::sqrt(x);
        previous = z;
        y *= 0.5;
        const double d = 1.0 - x;
        z -= d * d * y;
    } while (previous != z);
    return z / 3.0;
}

template <class T>
concept HllByteString = std::is_convertible_v<const T&, std::string_view>;

// All-zero registers for a sketch whose register array is not allocated yet
// (zero-initialized, so it costs address space, not memory).
inline std::uint8_t hll_zero_registers[std::size_t{1} << 18] = {};

}  // namespace detail

/// How a HyperLogLog turns an item into (register, rank). Part of the
/// serialized state: sketches merge only with sketches of the same mode.
enum class HllHashMode : std::uint8_t {
    /// tally::Hasher; register = top p bits, rank = leading zeros of the rest + 1.
    tally = 0,
    /// Redis's PFADD: MurmurHash64A (seed 0xadc83b19) of the item's bytes;
    /// register = low p bits, rank = trailing zeros of the rest + 1.
    redis = 1,
    /// Apache DataSketches: MurmurHash3 x64 128 (seed 9001) of the item in
    /// DataSketches' byte conventions; register = low p bits of the first
    /// half, rank = min(leading zeros of the second half, 62) + 1.
    datasketches = 2,
};

/// Which estimator HyperLogLog::estimate() answers with.
enum class HllEstimator : std::uint8_t {
    /// Historic inverse probability: a sketch that has only seen add()s.
    hip = 0,
    /// Ertl's improved estimator over the registers: after merge, reduce or
    /// decoding a sketch without HIP state.
    ertl = 1,
};

/// HyperLogLog: the number of distinct items in a stream, in 2^p bytes.
///
/// Flajolet et al. (AofA 2007) registers with a 64-bit hash. While a sketch has
/// only seen adds, estimate() is the HIP estimator (Ting, KDD 2014; Cohen,
/// PODS 2014 / TKDE 2015): unbiased, RSE sqrt(ln 2) / sqrt(m) = 0.83 / sqrt(m)
/// (m = 2^p). After merge()/reduce() it is Ertl's improved estimator
/// (arXiv:1702.01284, as Redis's PFCOUNT), RSE 1.04 / sqrt(m); estimator()
/// says which. Both are O(1): a register histogram is kept on add.
///
/// add is O(1) and allocation-free after the first; estimate O(1) (HIP) or
/// O(64) (Ertl); merge (a register max) and reduce O(m); the first query
/// after merges rebuilds the histogram once, O(m). Memory: 2^p bytes of
/// registers (allocated on the first add, merge or dense export; an empty
/// or decoded sparse sketch holds only its entries) plus ~330 bytes.
/// p in [4, 18]. Hash modes (HllHashMode) match Redis (to_redis/from_redis)
/// and Apache DataSketches (to_datasketches/from_datasketches) register for
/// register. total() counts add calls (of this sketch and of those merged
/// into it), not distinct items.
///
/// Thread safety: writers (add, merge, clear) need exclusive access; const
/// members may run concurrently with each other (one computes a pending
/// histogram or register array, the others wait). Give each thread its own
/// sketch and merge.
///
///     tally::HyperLogLog hll(14);
///     for (const auto& user : events) hll.add(user);
///     double distinct = hll.estimate();  // +-0.65% (one sigma, HIP)
class HyperLogLog {
  public:
    using HashMode = HllHashMode;
    using Estimator = HllEstimator;

    static constexpr int min_precision = 4;
    static constexpr int max_precision = 18;
    static constexpr int redis_precision = detail::redis_hll_p;
    /// 1 / (2 ln 2), the limit of alpha_m as m grows (Ertl's alpha_inf).
    static constexpr double alpha_inf = 0.721347520444481703680;
    /// 2 adds the HIP state and total(); version 1 bytes still decode.
    static constexpr std::uint8_t format_version = 2;

    /// Throws std::invalid_argument unless 4 <= precision <= 18.
    explicit HyperLogLog(int precision = 12, HashMode mode = HashMode::tally)
        : p_(check_precision(precision, "tally::HyperLogLog::HyperLogLog")), mode_(mode) {
        reset_state();
    }

    // Copies never wait and never force the lazy parts: a pending histogram
    // stays pending in the copy, pending sparse registers are copied sparse.
    HyperLogLog(const HyperLogLog& other) : p_(other.p_), mode_(other.mode_) { copy_from(other); }
    HyperLogLog(HyperLogLog&& other) noexcept : p_(other.p_), mode_(other.mode_) { move_from(other); }
    HyperLogLog& operator=(const HyperLogLog& other) {
        if (this != &other) {
            HyperLogLog copy(other);
            *this = std::move(copy);
        }
        return *this;
    }
    HyperLogLog& operator=(HyperLogLog&& other) noexcept {
        if (this != &other) {
            p_ = other.p_;
            mode_ = other.mode_;
            move_from(other);
        }
        return *this;
    }
    ~HyperLogLog() = default;

    /// p = 14 with Redis's hashing: a sketch that to_redis() exports and that
    /// Redis PFADD/PFMERGE extend without double counting.
    static HyperLogLog redis_compatible() { return HyperLogLog(redis_precision, HashMode::redis); }

    // ---- adding (not thread-safe) ------------------------------------------

    /// Adds one item. Mode tally: tally::hash_of. Mode redis: strings as
    /// bytes, integers as their decimal text ("42"), bool as "1"/"0". Mode
    /// datasketches: as DataSketches' update(): integers as a little-endian
    /// int64 (smaller ones sign-extended), floating point as a canonical
    /// double, strings as bytes, empty strings ignored. Other types go through
    /// tally::Hasher in every mode (they count correctly among themselves).
    template <class T>
        requires Hashable<std::decay_t<T>> || detail::HllByteString<T>
    TALLY_ALWAYS_INLINE void add(const T& item) noexcept {
        // Each mode's path is inlined whole, so the mode is tested once per
        // item; redis's decimal text for integers stays out of line.
        if (TALLY_LIKELY(mode_ == HashMode::tally)) {
            if constexpr (Hashable<std::decay_t<T>>) {
                add_hash(hash_of(item));
            } else {
                const std::string_view s = item;
                add_hash(hash64(s.data(), s.size()));
            }
        } else if (TALLY_LIKELY(mode_ == HashMode::datasketches)) {
            detail::Hash128 h;
            if (!detail::ds_hll_hash_item(item, h)) return;
            ++total_;
            update_register_low_bits(h.h1, detail::ds_hll_rank(h.h2));
        } else {
            add_redis(item);
        }
    }

    /// Adds an item by its 64-bit hash, which must be well mixed; interpreted
    /// by the hash mode (see HllHashMode; mode datasketches: register = low p
    /// bits, rank = min(leading zeros, 62) + 1). Any value is valid.
    TALLY_ALWAYS_INLINE void add_hash(std::uint64_t hash) noexcept {
        ++total_;
        std::size_t index;
        std::uint8_t rank;
        if (TALLY_LIKELY(mode_ == HashMode::tally)) {
            index = static_cast<std::size_t>(hash >> (64 - p_));
            // The low p bits are shifted-in zeros; bit p - 1 caps the count at 64 - p.
            rank = static_cast<std::uint8_t>(std::countl_zero((hash << p_) | (std::uint64_t{1} << (p_ - 1))) + 1);
        } else if (mode_ == HashMode::redis) {
            index = static_cast<std::size_t>(hash & (register_count() - 1));
            rank = static_cast<std::uint8_t>(std::countr_zero((hash >> p_) | (std::uint64_t{1} << (64 - p_))) + 1);
        } else {
            index = static_cast<std::size_t>(hash & (register_count() - 1));
            rank = detail::ds_hll_rank(hash);
        }
        update_register(index, rank);
    }

    /// Resets to the empty sketch (HIP estimator, total() 0), keeping
    /// precision, mode and the register memory.
    void clear() noexcept {
        std::fill(registers_.begin(), registers_.end(), std::uint8_t{0});
        sparse_.clear();
        regs_state_.store(lazy_ready, std::memory_order_relaxed);
        reset_state();
    }

    // ---- queries (const, thread-safe among themselves) ---------------------

    /// The estimated number of distinct items: HIP while estimator() == hip,
    /// else ertl_estimate(). O(1).
    [[nodiscard]] double estimate() const noexcept { return hip_valid_ ? hip_ : ertl_estimate(); }

    /// Which estimator estimate() uses.
    [[nodiscard]] Estimator estimator() const noexcept { return hip_valid_ ? Estimator::hip : Estimator::ertl; }

    /// Ertl's improved estimate from the register histogram, whatever the
    /// history (O(64)). For the same registers its value rounded half away
    /// from zero equals Redis's PFCOUNT.
    [[nodiscard]] double ertl_estimate() const noexcept {
        ensure_histogram();
        const std::uint32_t* c = hist_;
        const int q = max_rank(p_, mode_) - 1;
        const double m = static_cast<double>(register_count());
        // Same operation order as Redis's hllCount, so that rounding this
        // value reproduces PFCOUNT bit for bit.
        double z = m * detail::hll_tau((m - c[q + 1]) / m);
        int top = q;
        if (z == 0.0)  // 0 + 0 halved stays exactly 0: skip the empty top of the histogram
            while (top >= 1 && c[top] == 0) --top;
        for (int k = top; k >= 1; --k) {
            z += c[k];
            z *= 0.5;
        }
        z += m * detail::hll_sigma(c[0] / m);
        return alpha_inf * m * m / z;
    }

    /// The relative standard error of estimate(): sqrt(ln 2) / sqrt(m) for
    /// HIP (the HIP asymptote of Ting 2014), 1.04 / sqrt(m) for Ertl.
    [[nodiscard]] double relative_standard_error() const noexcept {
        const double factor = hip_valid_ ? 0.8325546111576977 : 1.04;
        return factor / std::sqrt(static_cast<double>(register_count()));
    }

    [[nodiscard]] int precision() const noexcept { return p_; }
    [[nodiscard]] HashMode hash_mode() const noexcept { return mode_; }
    [[nodiscard]] std::size_t register_count() const noexcept { return std::size_t{1} << p_; }
    /// Register values, each in 0 .. max_rank (64 - p + 1; 63 in mode datasketches).
    [[nodiscard]] std::span<const std::uint8_t> registers() const noexcept {
        ensure_registers();
        return registers_.empty() ? std::span<const std::uint8_t>(detail::hll_zero_registers, register_count())
                                  : std::span<const std::uint8_t>(registers_);
    }
    /// Number of registers equal to k, k in 0..63 (kept up to date on add).
    [[nodiscard]] std::uint32_t registers_equal_to(int k) const noexcept {
        if (k < 0 || k >= 64) return 0;
        ensure_histogram();
        return hist_[k];
    }
    /// The largest register value of this precision and mode.
    [[nodiscard]] int max_rank() const noexcept { return max_rank(p_, mode_); }
    /// True when no register is set (nothing was added, or only empty strings
    /// in mode datasketches).
    [[nodiscard]] bool empty() const noexcept {
        // A pending histogram only follows a merge of two non-empty sketches.
        return hist_state_.load(std::memory_order_acquire) == lazy_ready && hist_[0] == register_count();
    }
    /// Number of add/add_hash calls that hashed an item, summed over merges
    /// (saturating). Decoded Redis and DataSketches sketches and tally format
    /// version 1 do not record it and start at 0.
    [[nodiscard]] std::uint64_t total() const noexcept { return total_; }
    [[nodiscard]] std::size_t memory_bytes() const noexcept {
        return sizeof(*this) + registers_.capacity() + sparse_.capacity() * sizeof(std::uint32_t);
    }

    /// Same precision, mode and registers (the estimator state may differ).
    friend bool operator==(const HyperLogLog& a, const HyperLogLog& b) noexcept {
        if (a.p_ != b.p_ || a.mode_ != b.mode_) return false;
        const auto ra = a.registers();
        const auto rb = b.registers();
        return std::equal(ra.begin(), ra.end(), rb.begin());
    }

    // ---- merging -----------------------------------------------------------

    /// Same precision and hash mode. (Fold a larger precision with reduce().)
    [[nodiscard]] bool mergeable_with(const HyperLogLog& other) const noexcept {
        return p_ == other.p_ && mode_ == other.mode_;
    }

    /// Register-wise maximum: afterwards *this is exactly the sketch of the
    /// union, and estimator() is ertl (unless one side was empty: then the
    /// other's state is kept). Throws std::invalid_argument (and changes
    /// nothing) unless mergeable_with(other). Not thread-safe for *this.
    HyperLogLog& merge(const HyperLogLog& other) {
        if (p_ != other.p_)
            detail::throw_invalid_argument("tally::HyperLogLog::merge: precision " + std::to_string(other.p_) +
                                           " does not match " + std::to_string(p_) +
                                           " (fold the larger one with reduce())");
        if (mode_ != other.mode_)
            detail::throw_invalid_argument(std::string("tally::HyperLogLog::merge: hash mode ") +
                                           mode_name(other.mode_) + " does not match " + mode_name(mode_));
        if (this == &other) {
            total_ = detail::sat_add(total_, total_);
            return *this;
        }
        const std::uint64_t total = detail::sat_add(total_, other.total_);
        if (other.empty()) {
            total_ = total;
            return *this;
        }
        if (empty()) {
            *this = other;
            total_ = total;
            return *this;
        }
        make_registers();
        other.ensure_registers();
        std::uint8_t* a = registers_.data();
        const std::uint8_t* b = other.registers_.data();
        const std::size_t m = registers_.size();
        for (std::size_t i = 0; i < m; ++i) a[i] = a[i] < b[i] ? b[i] : a[i];  // vectorizes
        // The histogram is rebuilt once, by the first query that needs it
        // (merging many sketches costs one rebuild, not one per merge).
        hist_state_.store(lazy_pending, std::memory_order_relaxed);
        hip_valid_ = false;
        total_ = total;
        return *this;
    }

    /// The sketch this one would have been at precision `precision`
    /// (4 <= precision <= this->precision()), computed exactly from the
    /// registers (estimator ertl unless the sketch is empty). Same hash mode.
    [[nodiscard]] HyperLogLog reduce(int precision) const {
        detail::check_range("tally::HyperLogLog::reduce", "precision", precision, min_precision, p_);
        HyperLogLog out(precision, mode_);
        out.total_ = total_;
        if (empty()) return out;
        ensure_registers();
        out.allocate();
        const int k = p_ - precision;
        const std::size_t low_mask = (std::size_t{1} << k) - 1;
        const std::size_t out_mask = out.registers_.size() - 1;
        for (std::size_t i = 0; i < registers_.size(); ++i) {
            const std::uint8_t r = registers_[i];
            if (r == 0) continue;
            std::size_t target;
            int rank;
            if (mode_ == HashMode::tally) {
                target = i >> k;
                const std::size_t dropped = i & low_mask;  // the top k bits of the new remainder
                rank = dropped != 0 ? k - static_cast<int>(std::bit_width(dropped)) + 1 : k + r;
            } else if (mode_ == HashMode::redis) {
                target = i & out_mask;
                const std::size_t dropped = i >> precision;  // the low k bits of the new remainder
                rank = dropped != 0 ? std::countr_zero(dropped) + 1 : k + r;
            } else {
                target = i & out_mask;  // the rank comes from the other half of the hash
                rank = r;
            }
            std::uint8_t& reg = out.registers_[target];
            if (rank > reg) reg = static_cast<std::uint8_t>(rank);
        }
        out.rebuild_from_registers();
        out.hip_valid_ = false;
        return out;
    }

    // ---- tally serialization -----------------------------------------------

    /// Format version 2 (docs/hyperloglog.md): precision, mode, the HIP state
    /// and total(), then the registers as a sparse list or 6-bit dense array,
    /// whichever is shorter.
    [[nodiscard]] std::vector<std::byte> serialize() const {
        const std::size_t m = register_count();
        const std::size_t dense_bytes = m * 6 / 8;
        // Registers still held as a decoded sparse list are written from it,
        // without materializing the 2^p array (the list is immutable while pending).
        const bool from_list = regs_state_.load(std::memory_order_acquire) != lazy_ready;
        const std::span<const std::uint8_t> regs = from_list ? std::span<const std::uint8_t>() : registers();
        // Calls f(index, value) for every non-zero register in index order.
        const auto for_each_nonzero = [&](auto&& f) {
            if (from_list) {
                for (const std::uint32_t e : sparse_) f(std::size_t{e >> 8}, static_cast<std::uint8_t>(e & 0xff));
            } else if (!empty()) {
                for (std::size_t i = 0; i < m; ++i)
                    if (regs[i] != 0) f(i, regs[i]);
            }
        };
        // Size of the sparse form, computed first so we write only the shorter.
        std::size_t nonzero = 0;
        std::size_t sparse_bytes = 0;
        std::size_t prev = 0;
        for_each_nonzero([&](std::size_t i, std::uint8_t) {
            const std::size_t gap = nonzero == 0 ? i : i - prev - 1;
            sparse_bytes += varint_size(gap) + 1;
            prev = i;
            ++nonzero;
        });
        sparse_bytes += varint_size(nonzero);
        const bool sparse = sparse_bytes < dense_bytes;

        ByteWriter w(frame_header_size + 12 + (hip_valid_ ? 24 : 0) + (sparse ? sparse_bytes : dense_bytes));
        w.header(Family::hyperloglog, format_version);
        w.u8(static_cast<std::uint8_t>(p_));
        w.u8(static_cast<std::uint8_t>(mode_));
        w.u8(sparse ? 1 : 0);
        w.u8(hip_valid_ ? 1 : 0);
        w.u64(total_);
        if (hip_valid_) {
            w.f64(hip_);
            w.f64(kxq0_);
            w.f64(kxq1_);
        }
        if (sparse) {
            w.varint(nonzero);
            std::size_t n = 0;
            for_each_nonzero([&](std::size_t i, std::uint8_t v) {
                w.varint(n == 0 ? i : i - prev - 1);
                w.u8(v);
                prev = i;
                ++n;
            });
        } else {
            std::vector<unsigned char> packed(dense_bytes, 0);
            detail::pack6(registers().data(), m, packed.data());
            w.bytes(packed.data(), packed.size());
        }
        return w.take();
    }

    /// Decodes format version 1 or 2. Every length is checked against the
    /// bytes present before anything is allocated, and an empty sketch
    /// allocates no registers. Throws tally::FormatError for anything but a
    /// valid encoding.
    [[nodiscard]] static HyperLogLog deserialize(std::span<const std::byte> bytes) {
        ByteReader r(bytes);
        const std::uint8_t version = r.header(Family::hyperloglog, format_version);
        const int p = r.u8();
        if (p < min_precision || p > max_precision)
            detail::throw_format_error(
                detail::out_of_range_message("tally::HyperLogLog::deserialize", "precision", p, 4, 18));
        const std::uint8_t mode = r.u8();
        format_check(mode <= 2 && (version >= 2 || mode <= 1), "HyperLogLog: unknown hash mode");
        const std::uint8_t encoding = r.u8();
        format_check(encoding <= 1, "HyperLogLog: unknown register encoding");
        bool hip = false;
        std::uint64_t total = 0;
        double hip_value = 0, kxq0 = 0, kxq1 = 0;
        if (version >= 2) {
            const std::uint8_t flags = r.u8();
            format_check(flags <= 1, "HyperLogLog: unknown flags");
            hip = flags == 1;
            total = r.u64();
            if (hip) {
                hip_value = r.f64();
                kxq0 = r.f64();
                kxq1 = r.f64();
            }
        }
        const std::size_t m = std::size_t{1} << p;
        const std::uint8_t top = static_cast<std::uint8_t>(max_rank(p, static_cast<HashMode>(mode)));
        HyperLogLog out(p, static_cast<HashMode>(mode));
        // The whole frame is validated before anything is allocated; a sparse
        // frame keeps its (index, value) list, whose size the input bounds, and
        // the 2^p registers are built on first use (add, merge, dense export).
        if (encoding == 0) {
            const auto packed = r.bytes(m * 6 / 8);
            r.expect_end();
            out.allocate();
            detail::unpack6(reinterpret_cast<const unsigned char*>(packed.data()), m, out.registers_.data());
            for (const std::uint8_t v : out.registers_)
                format_check(v <= top, "HyperLogLog: register value exceeds the maximum rank");
            out.rebuild_from_registers();
        } else {
            const std::uint64_t k = r.count(r.varint(), 2, m, "HyperLogLog non-zero register");
            const ByteReader entries = r;
            std::uint32_t hist[64] = {};
            std::size_t next = 0;  // smallest index the next entry may take
            for (std::uint64_t j = 0; j < k; ++j) {
                const std::uint64_t gap = r.varint();
                format_check(gap < m - next, "HyperLogLog: sparse register index out of range");
                const std::size_t index = next + static_cast<std::size_t>(gap);
                const std::uint8_t v = r.u8();
                format_check(v >= 1 && v <= top, "HyperLogLog: sparse register value out of range");
                ++hist[v];
                next = index + 1;
            }
            r.expect_end();
            if (k != 0) {
                ByteReader again = entries;
                out.sparse_.reserve(static_cast<std::size_t>(k));
                next = 0;
                for (std::uint64_t j = 0; j < k; ++j) {
                    const std::size_t index = next + static_cast<std::size_t>(again.varint());
                    out.sparse_.push_back(static_cast<std::uint32_t>(index << 8) | again.u8());
                    next = index + 1;
                }
                out.regs_state_.store(lazy_pending, std::memory_order_relaxed);
            }
            hist[0] = static_cast<std::uint32_t>(m - k);
            out.set_histogram(hist);
        }
        out.total_ = total;
        out.hip_valid_ = hip;
        if (hip) {
            // The stored kxq must be the registers' sum of 2^-r (up to rounding of
            // its incremental updates), and the HIP estimate finite and >= 0.
            const double sum = out.kxq0_ + out.kxq1_;
            format_check(std::isfinite(hip_value) && hip_value >= 0 && std::isfinite(kxq0) && std::isfinite(kxq1) &&
                             std::abs((kxq0 + kxq1) - sum) <= 1e-9 * sum,
                         "HyperLogLog: HIP state does not match the registers");
            format_check(!out.empty() || hip_value == 0, "HyperLogLog: HIP estimate of an empty sketch is not 0");
            out.hip_ = hip_value;
            out.kxq0_ = kxq0;
            out.kxq1_ = kxq1;
        }
        return out;
    }

    // ---- Redis interop -----------------------------------------------------

    /// The dense "HYLL" string Redis 7 would hold for these registers (12304
    /// bytes, cached cardinality marked invalid so PFCOUNT recomputes). SET it
    /// and PFCOUNT/PFMERGE/PFADD accept it. Throws std::invalid_argument unless
    /// precision() == 14 (reduce() a larger sketch first). Any hash mode
    /// exports, but only HashMode::redis registers line up with Redis's own
    /// PFADD of the same elements.
    [[nodiscard]] std::string to_redis() const {
        if (p_ != redis_precision)
            detail::throw_invalid_argument("tally::HyperLogLog::to_redis: precision " + std::to_string(p_) +
                                           " is not Redis's 14 (reduce() a larger sketch to 14 first)");
        std::string s(detail::redis_hll_dense_size, '\0');
        std::memcpy(s.data(), "HYLL", 4);
        s[4] = static_cast<char>(detail::redis_hll_dense);
        s[15] = static_cast<char>(0x80);  // card[7] bit 7: cached cardinality invalid
        detail::pack6(registers().data(), register_count(),
                      reinterpret_cast<unsigned char*>(s.data()) + detail::redis_hll_header);
        return s;
    }

    /// Parses a Redis HYLL string (dense or sparse), as returned by GET on a
    /// key that PFADD/PFMERGE built, into a p = 14 HashMode::redis sketch
    /// (estimator ertl). The three unused header bytes and the cached
    /// cardinality are ignored, as Redis ignores them. Throws
    /// tally::FormatError on a bad magic, an unknown encoding, a dense string
    /// of the wrong size, a register above 51, sparse runs that overflow or
    /// fall short of 16384 registers, or a truncated opcode.
    [[nodiscard]] static HyperLogLog from_redis(std::string_view s) {
        using namespace detail;
        if (s.size() < redis_hll_header)
            throw_format_error("tally::HyperLogLog::from_redis: truncated header (" + std::to_string(s.size()) +
                               " bytes, need 16)");
        if (std::memcmp(s.data(), "HYLL", 4) != 0)
            throw_format_error("tally::HyperLogLog::from_redis: bad magic (expected \"HYLL\")");
        const auto encoding = static_cast<std::uint8_t>(s[4]);
        HyperLogLog out = redis_compatible();
        const std::size_t m = out.register_count();
        const std::uint8_t top = 64 - redis_hll_p + 1;
        const auto* in = reinterpret_cast<const unsigned char*>(s.data());
        if (encoding == redis_hll_dense) {
            if (s.size() != redis_hll_dense_size)
                throw_format_error("tally::HyperLogLog::from_redis: dense string is " + std::to_string(s.size()) +
                                   " bytes, not 12304");
            out.allocate();
            unpack6(in + redis_hll_header, m, out.registers_.data());
            for (const std::uint8_t v : out.registers_)
                if (v > top)
                    throw_format_error("tally::HyperLogLog::from_redis: register value " + std::to_string(v) +
                                       " exceeds 51");
        } else if (encoding == redis_hll_sparse) {
            std::size_t index = 0;
            for (std::size_t pos = redis_hll_header; pos < s.size();) {
                const unsigned char op = in[pos];
                std::size_t run;
                std::uint8_t value = 0;
                if ((op & 0xc0) == 0x00) {  // ZERO
                    run = (op & 0x3fu) + 1;
                    pos += 1;
                } else if ((op & 0xc0) == 0x40) {  // XZERO
                    if (pos + 1 >= s.size())
                        throw_format_error("tally::HyperLogLog::from_redis: truncated XZERO opcode");
                    run = ((static_cast<std::size_t>(op & 0x3fu) << 8) | in[pos + 1]) + 1;
                    pos += 2;
                } else {  // VAL
                    value = static_cast<std::uint8_t>(((op >> 2) & 0x1fu) + 1);
                    run = (op & 0x3u) + 1;
                    pos += 1;
                }
                if (run > m - index)
                    throw_format_error("tally::HyperLogLog::from_redis: sparse runs overflow 16384 registers");
                if (value != 0) {
                    out.allocate();
                    std::fill_n(out.registers_.begin() + static_cast<std::ptrdiff_t>(index), run, value);
                }
                index += run;
            }
            if (index != m)
                throw_format_error("tally::HyperLogLog::from_redis: sparse runs cover " + std::to_string(index) +
                                   " registers, not 16384 (truncated)");
        } else {
            throw_format_error("tally::HyperLogLog::from_redis: bad encoding " + std::to_string(encoding) +
                               " (expected 0 dense or 1 sparse)");
        }
        out.rebuild_from_registers();
        out.hip_valid_ = out.empty();
        return out;
    }

    /// The hash HashMode::redis gives an item (MurmurHash64A of its Redis
    /// bytes); add_hash(redis_hash_of(x)) in redis mode is PFADD k x.
    template <class T>
        requires Hashable<std::decay_t<T>> || detail::HllByteString<T>
    [[nodiscard]] static std::uint64_t redis_hash_of(const T& item) noexcept {
        using D = std::decay_t<T>;
        if constexpr (std::is_same_v<D, const char*> || std::is_same_v<D, char*>) {
            const char* s = item;
            return s == nullptr ? detail::redis_hll_hash({}) : detail::redis_hll_hash(std::string_view(s));
        } else if constexpr (detail::HllByteString<T>) {
            return detail::redis_hll_hash(std::string_view(item));
        } else if constexpr (std::is_same_v<D, std::span<const std::byte>> ||
                             std::is_same_v<D, std::span<std::byte>> ||
                             std::is_same_v<D, std::span<const unsigned char>>) {
            return detail::murmur64a(item.data(), item.size(), detail::redis_hll_seed);
        } else if constexpr (std::is_same_v<D, bool>) {
            return detail::redis_hll_hash(item ? "1" : "0");
        } else if constexpr (std::is_integral_v<D>) {
            char buf[24];
            const auto res = std::to_chars(buf, buf + sizeof buf, item);
            return detail::murmur64a(buf, static_cast<std::size_t>(res.ptr - buf), detail::redis_hll_seed);
        } else {
            return hash_of(item);
        }
    }

    // ---- Apache DataSketches interop ---------------------------------------

    /// The sketch as Apache DataSketches HllSketch bytes (compact, serial
    /// version 1) of target type `type`: HLL mode, or the 8-byte empty form.
    /// The HIP state travels (out-of-order flag set after a merge). Only
    /// HashMode::datasketches registers line up with DataSketches' own
    /// hashing of the same items; other modes export registers only.
    [[nodiscard]] std::vector<std::byte> to_datasketches(DataSketchesHll type = DataSketchesHll::hll_8) const {
        detail::DsHllState st;
        st.lg_k = p_;
        st.registers = registers();
        ensure_histogram();
        st.empty = empty();
        st.out_of_order = !hip_valid_;
        st.hip = hip_valid_ ? hip_ : 0.0;
        st.kxq0 = kxq0_;
        st.kxq1 = kxq1_;
        st.zeros = hist_[0];
        return detail::ds_hll_encode(st, type);
    }

    /// Reads any HllSketch image DataSketches writes (LIST, SET or HLL mode;
    /// HLL_4, HLL_6 or HLL_8; compact or updatable) with lg_k in [4, 18] into
    /// a HashMode::datasketches sketch. LIST/SET coupons are replayed in
    /// order (estimator hip); an HLL image keeps its HIP state unless its
    /// out-of-order flag is set (estimator ertl). Throws tally::FormatError
    /// on malformed bytes and on lg_k outside [4, 18].
    [[nodiscard]] static HyperLogLog from_datasketches(std::span<const std::byte> bytes) {
        detail::DsHllImage img = detail::ds_hll_decode(bytes, min_precision, max_precision);
        HyperLogLog out(img.lg_k, HashMode::datasketches);
        if (img.mode == detail::DsHllMode::hll) {
            if (!img.registers.empty()) {
                out.registers_ = std::move(img.registers);
                out.rebuild_from_registers();
            }
            out.hip_valid_ = !img.out_of_order || out.empty();
            if (!img.out_of_order) {
                out.hip_ = img.hip;
                out.kxq0_ = img.kxq0;
                out.kxq1_ = img.kxq1;
            }
        } else {
            // Replayed into a sparse list (its size bounded by the input), not
            // the 2^lg_k registers, which are built on first use.
            std::unordered_map<std::uint32_t, std::uint8_t> seen;
            seen.reserve(img.coupons.size());
            for (const std::uint32_t c : img.coupons) {
                const auto index = static_cast<std::uint32_t>(c & (out.register_count() - 1));
                const auto rank = static_cast<std::uint8_t>(c >> 26);
                std::uint8_t& reg = seen[index];
                if (rank > reg) {
                    out.raise(reg, rank);
                    reg = rank;
                }
            }
            for (const auto& [index, value] : seen)
                if (value != 0) out.sparse_.push_back((index << 8) | value);
            std::sort(out.sparse_.begin(), out.sparse_.end());
            if (!out.sparse_.empty()) out.regs_state_.store(lazy_pending, std::memory_order_relaxed);
            out.hip_valid_ = !img.out_of_order || out.empty();
        }
        return out;
    }

  private:
    template <class T>
    void add_redis(const T& item) noexcept {
        add_hash(redis_hash_of(item));
    }

    static int check_precision(int precision, const char* who) {
        detail::check_range(who, "precision", precision, min_precision, max_precision);
        return precision;
    }

    static constexpr int max_rank(int p, HashMode mode) noexcept {
        return mode == HashMode::datasketches ? detail::ds_hll_max_rank : 64 - p + 1;
    }

    static const char* mode_name(HashMode mode) noexcept {
        return mode == HashMode::tally ? "tally" : mode == HashMode::redis ? "redis" : "datasketches";
    }

    static std::size_t varint_size(std::size_t v) noexcept {
        std::size_t n = 1;
        while (v >= 0x80) {
            v >>= 7;
            ++n;
        }
        return n;
    }

    static constexpr std::uint8_t lazy_ready = 0;
    static constexpr std::uint8_t lazy_pending = 1;
    static constexpr std::uint8_t lazy_busy = 2;

    // Runs `make` once for a lazy part in state pending; concurrent const
    // callers wait for the one that computes it.
    template <class F>
    static void run_lazy(std::atomic<std::uint8_t>& state, F make) noexcept {
        for (;;) {
            std::uint8_t s = state.load(std::memory_order_acquire);
            if (s == lazy_ready) return;
            if (s == lazy_pending &&
                state.compare_exchange_weak(s, lazy_busy, std::memory_order_acquire, std::memory_order_relaxed)) {
                make();
                state.store(lazy_ready, std::memory_order_release);
                return;
            }
            std::this_thread::yield();
        }
    }

    // Dense registers from the decoded sparse list (an allocation failure
    // terminates, as in add). The list stays: copies and serialize may read it.
    void ensure_registers() const noexcept {
        if (TALLY_LIKELY(regs_state_.load(std::memory_order_acquire) == lazy_ready)) return;
        run_lazy(regs_state_, [this] {
            registers_.assign(register_count(), 0);
            for (const std::uint32_t e : sparse_) registers_[e >> 8] = static_cast<std::uint8_t>(e & 0xff);
        });
    }

    void ensure_histogram() const noexcept {
        if (TALLY_LIKELY(hist_state_.load(std::memory_order_acquire) == lazy_ready)) return;
        ensure_registers();
        run_lazy(hist_state_, [this] { rebuild_from_registers(); });
    }

    // Exclusive access (non-const callers): dense registers, allocated.
    void make_registers() {
        if (regs_state_.load(std::memory_order_relaxed) != lazy_ready) ensure_registers();
        if (!sparse_.empty()) std::vector<std::uint32_t>().swap(sparse_);
        allocate();
    }

    void set_histogram(const std::uint32_t (&h)[64]) noexcept {
        set_histogram_values(h);
        hist_state_.store(lazy_ready, std::memory_order_relaxed);
    }

    void set_histogram_values(const std::uint32_t (&h)[64]) const noexcept {
        kxq0_ = 0;
        kxq1_ = 0;
        for (int k = 0; k < 64; ++k) {
            hist_[k] = h[k];
            if (k < 32)
                kxq0_ += h[k] * detail::ds_inv_pow2(k);
            else
                kxq1_ += h[k] * detail::ds_inv_pow2(k);
        }
    }

    void copy_from(const HyperLogLog& o) {
        hip_valid_ = o.hip_valid_;
        hip_ = o.hip_;
        total_ = o.total_;
        // The registers are stable unless pending; a pending list is never
        // modified by const members, so no claim is needed.
        if (o.regs_state_.load(std::memory_order_acquire) == lazy_ready) {
            registers_ = o.registers_;
            regs_state_.store(lazy_ready, std::memory_order_relaxed);
        } else {
            sparse_ = o.sparse_;
            regs_state_.store(lazy_pending, std::memory_order_relaxed);
        }
        // A histogram being rebuilt elsewhere is simply rebuilt again here.
        if (o.hist_state_.load(std::memory_order_acquire) == lazy_ready) {
            std::copy(std::begin(o.hist_), std::end(o.hist_), std::begin(hist_));
            kxq0_ = o.kxq0_;
            kxq1_ = o.kxq1_;
            hist_state_.store(lazy_ready, std::memory_order_relaxed);
        } else {
            hist_state_.store(lazy_pending, std::memory_order_relaxed);
        }
    }

    void move_from(HyperLogLog& o) noexcept {
        hip_valid_ = o.hip_valid_;
        hip_ = o.hip_;
        total_ = o.total_;
        registers_ = std::move(o.registers_);
        sparse_ = std::move(o.sparse_);
        regs_state_.store(o.regs_state_.load(std::memory_order_relaxed), std::memory_order_relaxed);
        std::copy(std::begin(o.hist_), std::end(o.hist_), std::begin(hist_));
        kxq0_ = o.kxq0_;
        kxq1_ = o.kxq1_;
        hist_state_.store(o.hist_state_.load(std::memory_order_relaxed), std::memory_order_relaxed);
        // The moved-from sketch is the empty sketch of its precision.
        o.registers_.clear();
        o.sparse_.clear();
        o.regs_state_.store(lazy_ready, std::memory_order_relaxed);
        o.reset_state();
    }

    void reset_state() noexcept {
        std::fill(std::begin(hist_), std::end(hist_), 0u);
        hist_[0] = static_cast<std::uint32_t>(register_count());
        hip_valid_ = true;
        hip_ = 0.0;
        kxq0_ = static_cast<double>(register_count());
        kxq1_ = 0.0;
        total_ = 0;
        hist_state_.store(lazy_ready, std::memory_order_relaxed);
    }

    // The register array is allocated on the first add (an allocation failure
    // there terminates, as add is noexcept).
    void allocate() {
        if (registers_.empty()) registers_.assign(register_count(), 0);
    }

    // update_register(hash & (m - 1), rank), the mask taken from the
    // allocated array's size rather than recomputed from p.
    TALLY_ALWAYS_INLINE void update_register_low_bits(std::uint64_t hash, std::uint8_t rank) noexcept {
        if (TALLY_UNLIKELY(registers_.empty())) make_registers();
        std::uint8_t& reg = registers_[static_cast<std::size_t>(hash) & (registers_.size() - 1)];
        if (rank > reg) {
            if (TALLY_LIKELY(hist_state_.load(std::memory_order_relaxed) == lazy_ready)) raise(reg, rank);
            reg = rank;
        }
    }

    TALLY_ALWAYS_INLINE void update_register(std::size_t index, std::uint8_t rank) noexcept {
        if (TALLY_UNLIKELY(registers_.empty())) make_registers();
        std::uint8_t& reg = registers_[index];
        if (rank > reg) {
            // After a merge (no HIP) the histogram is rebuilt when queried.
            if (TALLY_LIKELY(hist_state_.load(std::memory_order_relaxed) == lazy_ready)) raise(reg, rank);
            reg = rank;
        }
    }

    // One register goes from `from` to `to`: the HIP increment is 1 / (the
    // probability that the next distinct item changes some register) =
    // m / sum_j 2^-R_j, taken before the change; then the histogram and the
    // two-part sum (values < 32 and >= 32, as DataSketches keeps it, so that
    // an imported HIP state continues exactly) follow.
    void raise(std::uint8_t from, std::uint8_t to) noexcept {
        if (hip_valid_) hip_ += static_cast<double>(register_count()) / (kxq0_ + kxq1_);
        --hist_[from];
        ++hist_[to];
        if (from < 32)
            kxq0_ -= detail::ds_inv_pow2(from);
        else
            kxq1_ -= detail::ds_inv_pow2(from);
        if (to < 32)
            kxq0_ += detail::ds_inv_pow2(to);
        else
            kxq1_ += detail::ds_inv_pow2(to);
    }

    // Histogram and kxq from the registers, after a bulk change.
    void rebuild_from_registers() const noexcept {
        std::uint32_t h[4][64] = {};
        const std::uint8_t* r = registers_.empty() ? detail::hll_zero_registers : registers_.data();
        const std::size_t m = register_count();  // a multiple of 16
        for (std::size_t i = 0; i < m; i += 8) {
            std::uint64_t word;
            std::memcpy(&word, r + i, 8);
            if (word == 0) {  // all-zero words are common in sparse sketches
                h[0][0] += 8;
                continue;
            }
            ++h[0][r[i] & 63];
            ++h[1][r[i + 1] & 63];
            ++h[2][r[i + 2] & 63];
            ++h[3][r[i + 3] & 63];
            ++h[0][r[i + 4] & 63];
            ++h[1][r[i + 5] & 63];
            ++h[2][r[i + 6] & 63];
            ++h[3][r[i + 7] & 63];
        }
        std::uint32_t sum[64];
        for (int k = 0; k < 64; ++k) sum[k] = h[0][k] + h[1][k] + h[2][k] + h[3][k];
        set_histogram_values(sum);
    }

    int p_;
    HashMode mode_;
    bool hip_valid_ = true;
    // Lazy parts (lazy_ready / lazy_pending / lazy_busy): the histogram and
    // kxq after a merge, the dense registers of a decoded sparse frame.
    mutable std::atomic<std::uint8_t> hist_state_{lazy_ready};
    mutable std::atomic<std::uint8_t> regs_state_{lazy_ready};
    mutable std::uint32_t hist_[64];  // hist_[k] = number of registers equal to k
    double hip_ = 0.0;
    mutable double kxq0_ = 0.0;  // sum of 2^-R over registers R < 32
    mutable double kxq1_ = 0.0;  // ... and R >= 32
    std::uint64_t total_ = 0;
    mutable std::vector<std::uint8_t> registers_;  // empty until the first add
    std::vector<std::uint32_t> sparse_;             // (index << 8) | value, ascending, while registers_ is pending
};

static_assert(MergeableSummary<HyperLogLog>);

TALLY_END_NAMESPACE
