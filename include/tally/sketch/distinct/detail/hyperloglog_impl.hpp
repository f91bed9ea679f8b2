// tally/sketch/distinct/detail/hyperloglog_impl.hpp: the member definitions of
// tally::HyperLogLog, declared in tally/sketch/distinct/hyperloglog.hpp (which includes
// this file after the class; include that header, not this one).
#pragma once

#include "../../../detail/abi.hpp"

TALLY_BEGIN_NAMESPACE

// ---- construction ----------------------------------------------------------

inline HyperLogLog::HyperLogLog(int precision, HashMode mode)
    : p_(check_precision(precision, mode, "tally::HyperLogLog::HyperLogLog")),
      mode_(mode),
      pg_regwidth_(mode == HashMode::postgres ? 5 : 0) {
    if (mode == HashMode::postgres)
        detail::check_range("tally::HyperLogLog::HyperLogLog", "precision", precision, detail::pg_hll_min_log2m,
                            detail::pg_hll_max_log2m);
    reset_state();
}

inline HyperLogLog::HyperLogLog(const HyperLogLog& other)
    : p_(other.p_), mode_(other.mode_), pg_regwidth_(other.pg_regwidth_) {
    copy_from(other);
}

inline HyperLogLog::HyperLogLog(HyperLogLog&& other) noexcept
    : p_(other.p_), mode_(other.mode_), pg_regwidth_(other.pg_regwidth_) {
    move_from(other);
}

inline HyperLogLog& HyperLogLog::operator=(const HyperLogLog& other) {
    if (this != &other) {
        HyperLogLog copy(other);
        *this = std::move(copy);
    }
    return *this;
}

inline HyperLogLog& HyperLogLog::operator=(HyperLogLog&& other) noexcept {
    if (this != &other) {
        p_ = other.p_;
        mode_ = other.mode_;
        pg_regwidth_ = other.pg_regwidth_;
        move_from(other);
    }
    return *this;
}

// ---- adding ----------------------------------------------------------------

template <class T>
    requires Hashable<std::decay_t<T>> || detail::HllByteString<T>
TALLY_ALWAYS_INLINE void HyperLogLog::add(const T& item) noexcept {
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
        if (!detail::ds_hash_item(item, h)) return;
        ++total_;
        if (TALLY_UNLIKELY(registers_.empty())) {
            if (decoded_list_.empty()) {
                insert_sparse(detail::hll_sparse_entry_ds(h.h1, h.h2));
                return;
            }
            materialize_list();
        }
        update_register_low_bits(h.h1, detail::ds_hll_rank(h.h2));
    } else if (mode_ == HashMode::redis) {
        add_redis(item);
    } else {
        add_hash(postgres_hash_of(item));
    }
}

TALLY_ALWAYS_INLINE void HyperLogLog::add_hash(std::uint64_t hash) noexcept {
    ++total_;
    if (TALLY_UNLIKELY(registers_.empty())) {
        if (decoded_list_.empty()) {
            add_hash_sparse(hash);
            return;
        }
        materialize_list();
    }
    std::size_t index;
    std::uint8_t rank;
    if (TALLY_LIKELY(mode_ == HashMode::tally)) {
        index = static_cast<std::size_t>(hash >> (64 - p_));
        // The low p bits are shifted-in zeros; bit p - 1 caps the count at 64 - p.
        rank = static_cast<std::uint8_t>(std::countl_zero((hash << p_) | (std::uint64_t{1} << (p_ - 1))) + 1);
    } else if (mode_ == HashMode::redis) {
        index = static_cast<std::size_t>(hash & (register_count() - 1));
        rank = static_cast<std::uint8_t>(std::countr_zero((hash >> p_) | (std::uint64_t{1} << (64 - p_))) + 1);
    } else if (TALLY_LIKELY(mode_ == HashMode::datasketches)) {
        index = static_cast<std::size_t>(hash & (register_count() - 1));
        rank = detail::ds_hll_rank(hash);
    } else {  // postgres: value 0 (no change) when the rest is 0, capped at 2^regwidth - 1
        index = static_cast<std::size_t>(hash & (register_count() - 1));
        rank = detail::pg_hll_rank(hash, p_, (1 << pg_regwidth_) - 1);
    }
    update_register(index, rank);
}

inline void HyperLogLog::clear() noexcept {
    decltype(registers_)().swap(registers_);
    std::vector<std::uint32_t>().swap(sparse_);
    std::vector<std::uint8_t>().swap(sparse_view_);
    std::vector<std::uint32_t>().swap(decoded_list_);
    regs_state_.store(lazy_ready, std::memory_order_relaxed);
    reset_state();
}

// ---- queries ---------------------------------------------------------------

inline double HyperLogLog::estimate() const noexcept {
    if (is_sparse()) return sparse_estimate();
    if (hip_valid_) return hip_;
    if (mode_ != HashMode::datasketches) return ertl_estimate();
    ensure_histogram();
    return detail::ds_composite_estimate(p_, kxq0_ + kxq1_, hist_[0]);
}

inline double HyperLogLog::sparse_estimate() const noexcept {
    if (mode_ == HashMode::datasketches) return detail::ds_coupon_estimate(sparse_.size());
    return detail::hll_sparse_estimate(sparse_.size(), mode_byte());
}

inline double HyperLogLog::lower_bound(int num_std_dev) const {
    return bound(num_std_dev, false, "tally::HyperLogLog::lower_bound");
}

inline double HyperLogLog::upper_bound(int num_std_dev) const {
    return bound(num_std_dev, true, "tally::HyperLogLog::upper_bound");
}

inline double HyperLogLog::bound(int num_std_dev, bool upper, const char* who) const {
    detail::check_range(who, "num_std_dev", num_std_dev, 1, 3);
    if (mode_ == HashMode::datasketches) {
        // A sparse sketch at the promotion point is an HLL-mode HllSketch
        // (to_datasketches writes it so): HIP bounds around the same estimate.
        if (is_sparse() && detail::ds_keeps_coupons(p_, sparse_.size()))
            return detail::ds_coupon_bound(sparse_.size(), num_std_dev, upper);
        ensure_histogram();
        return detail::ds_hll_bound(p_, estimate(), hist_[0], num_std_dev, upper, !(is_sparse() || hip_valid_));
    }
    double seen;
    if (is_sparse()) {
        seen = static_cast<double>(sparse_.size());
    } else {
        ensure_histogram();
        seen = static_cast<double>(register_count() - hist_[0]);
    }
    return detail::rse_bound(estimate(), relative_standard_error(), num_std_dev, seen, upper);
}

inline HllEstimator HyperLogLog::estimator() const noexcept {
    if (is_sparse()) return Estimator::linear_counting;
    return hip_valid_ ? Estimator::hip : Estimator::ertl;
}

inline double HyperLogLog::ertl_estimate() const noexcept {
    ensure_histogram();
    const std::uint32_t* c = hist_;
    const int q = max_rank() - 1;
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

inline double HyperLogLog::relative_standard_error() const noexcept {
    if (is_sparse()) {
        const double n = estimate();
        if (n == 0.0) return 0.0;
        const double m = std::ldexp(1.0, detail::hll_sparse_precision(mode_byte()));
        const double t = n / m;
        return std::sqrt(m * (std::expm1(t) - t)) / n;
    }
    const double factor = hip_valid_ ? 0.8325546111576977 : 1.04;
    return factor / std::sqrt(static_cast<double>(register_count()));
}

inline std::span<const std::uint8_t> HyperLogLog::registers() const noexcept {
    if (!registers_.empty()) return std::span<const std::uint8_t>(registers_);
    ensure_registers();
    return std::span<const std::uint8_t>(register_data(), register_count());
}

inline std::uint32_t HyperLogLog::registers_equal_to(int k) const noexcept {
    if (k < 0 || k >= 64) return 0;
    ensure_histogram();
    return hist_[k];
}

inline bool HyperLogLog::empty() const noexcept {
    if (is_sparse()) return sparse_.empty();
    // A pending histogram only follows a merge of two non-empty sketches.
    return hist_state_.load(std::memory_order_acquire) == lazy_ready && hist_[0] == register_count();
}

inline std::size_t HyperLogLog::memory_bytes() const noexcept {
    return sizeof(*this) + registers_.capacity() + sparse_.capacity() * sizeof(std::uint32_t) +
           sparse_view_.capacity() + decoded_list_.capacity() * sizeof(std::uint32_t);
}

inline bool HyperLogLog::same_registers(const HyperLogLog& other) const noexcept {
    if (p_ != other.p_ || mode_ != other.mode_ || pg_regwidth_ != other.pg_regwidth_) return false;
    const auto ra = registers();
    const auto rb = other.registers();
    return std::equal(ra.begin(), ra.end(), rb.begin());
}

// ---- merging ---------------------------------------------------------------

inline HyperLogLog& HyperLogLog::merge(const HyperLogLog& other) {
    if (p_ != other.p_)
        detail::throw_invalid_argument("tally::HyperLogLog::merge: precision " + std::to_string(other.p_) +
                                       " does not match " + std::to_string(p_) +
                                       " (fold the larger one with reduce())");
    if (mode_ != other.mode_)
        detail::throw_invalid_argument(std::string("tally::HyperLogLog::merge: hash mode ") +
                                       mode_name(other.mode_) + " does not match " + mode_name(mode_));
    if (pg_regwidth_ != other.pg_regwidth_)
        detail::throw_invalid_argument("tally::HyperLogLog::merge: regwidth " + std::to_string(other.pg_regwidth_) +
                                       " does not match " + std::to_string(pg_regwidth_));
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
    materialize_list();
    // Mode datasketches merges as DataSketches' Union: the entries of a sparse
    // side (its LIST/SET coupons) are updates of the other side, whose HIP
    // state goes on; only two dense sides leave the estimator to Ertl.
    const bool ds = mode_ == HashMode::datasketches;
    if (other.is_sparse()) {
        if (registers_.empty()) {
            // Both sparse: the union of the entries, the larger rank per index'
            // (mode datasketches: of the (address, value) pairs).
            // In mode datasketches the other's entries are inserted in order,
            // so the union turns dense where an insert would (HIP from there):
            // only other.sparse_[0, stop) join the sparse union.
            const std::size_t limit = detail::hll_sparse_limit(p_, mode_byte());
            std::size_t stop = other.sparse_.size();
            if (ds) {
                std::size_t size = sparse_.size();
                auto at = sparse_.begin();
                for (std::size_t k = 0; k < other.sparse_.size(); ++k) {
                    const std::uint32_t key = other.sparse_[k];
                    while (at != sparse_.end() && *at < key) ++at;
                    const bool fresh = at == sparse_.end() || *at != key;
                    if (fresh && size >= limit) {
                        stop = k;
                        break;
                    }
                    size += fresh ? 1 : 0;
                }
            }
            const auto other_end = other.sparse_.begin() + static_cast<std::ptrdiff_t>(stop);
            std::vector<std::uint32_t> u;
            u.reserve(sparse_.size() + stop);
            auto i = sparse_.begin();
            auto j = other.sparse_.begin();
            const int shift = ds ? 0 : 6;
            while (i != sparse_.end() || j != other_end) {
                std::uint32_t e;
                if (j == other_end || (i != sparse_.end() && (*i >> shift) < (*j >> shift))) {
                    e = *i++;
                } else if (i == sparse_.end() || (*j >> shift) < (*i >> shift)) {
                    e = *j++;
                } else {
                    e = *i > *j ? *i : *j;
                    ++i;
                    ++j;
                }
                u.push_back(e);
            }
            total_ = total;
            if (stop == other.sparse_.size() && u.size() <= limit) {
                if (u.capacity() > limit) u.shrink_to_fit();
                sparse_ = std::move(u);
                sparse_changed();
                return *this;
            }
            sparse_ = std::move(u);
            to_dense();
            if (!ds) {
                hip_valid_ = false;
                return *this;
            }
            for (auto k = other_end; k != other.sparse_.end(); ++k) {
                const auto [index, rank] = detail::hll_sparse_register(*k, p_, mode_byte());
                update_register(index, rank);
            }
            return *this;
        }
        if (ds && hip_valid_) {
            // Sparse into dense, HIP going on: each entry is an update.
            ensure_histogram();
            for (const std::uint32_t e : other.sparse_) {
                const auto [index, rank] = detail::hll_sparse_register(e, p_, mode_byte());
                update_register(index, rank);
            }
            total_ = total;
            return *this;
        }
        // Sparse into dense: each entry raises its register.
        for (const std::uint32_t e : other.sparse_) {
            const auto [index, rank] = detail::hll_sparse_register(e, p_, mode_byte());
            std::uint8_t& reg = registers_[index];
            reg = reg < rank ? rank : reg;
        }
        hist_state_.store(lazy_pending, std::memory_order_relaxed);
        hip_valid_ = false;
        total_ = total;
        return *this;
    }
    if (ds && registers_.empty()) {
        // Dense into sparse: the other one takes this one's entries as
        // updates, keeping its estimator state (DataSketches keeps the HLL
        // side's out-of-order flag).
        HyperLogLog out(other);
        out.materialize_list();
        out.ensure_histogram();
        for (const std::uint32_t e : sparse_) {
            const auto [index, rank] = detail::hll_sparse_register(e, p_, mode_byte());
            out.update_register(index, rank);
        }
        out.total_ = total;
        return *this = std::move(out);
    }
    if (registers_.empty()) to_dense();
    std::uint8_t* a = registers_.data();
    const std::uint8_t* b = other.registers().data();  // a decoded list: its view
    const std::size_t m = registers_.size();
    for (std::size_t i = 0; i < m; ++i) a[i] = a[i] < b[i] ? b[i] : a[i];  // vectorizes
    // The histogram is rebuilt once, by the first query that needs it
    // (merging many sketches costs one rebuild, not one per merge).
    hist_state_.store(lazy_pending, std::memory_order_relaxed);
    hip_valid_ = false;
    total_ = total;
    return *this;
}

inline HyperLogLog HyperLogLog::reduce(int precision) const {
    detail::check_range("tally::HyperLogLog::reduce", "precision", precision, min_precision, p_);
    HyperLogLog out(precision, mode_);
    out.pg_regwidth_ = pg_regwidth_;
    out.total_ = total_;
    if (empty()) return out;
    if (is_sparse()) {
        // The entries do not depend on p: they stay, sparse while they fit.
        out.sparse_ = sparse_;
        if (sparse_.size() <= detail::hll_sparse_limit(precision, mode_byte())) {
            out.sparse_changed();
        } else {
            out.to_dense();
            out.hip_valid_ = false;
        }
        return out;
    }
    out.allocate();
    const int k = p_ - precision;
    const std::size_t low_mask = (std::size_t{1} << k) - 1;
    const std::size_t out_mask = out.registers_.size() - 1;
    const std::span<const std::uint8_t> regs = registers();
    for (std::size_t i = 0; i < regs.size(); ++i) {
        const std::uint8_t r = regs[i];
        if (r == 0) continue;
        std::size_t target;
        int rank;
        if (mode_ == HashMode::tally) {
            target = i >> k;
            const std::size_t dropped = i & low_mask;  // the top k bits of the new remainder
            rank = dropped != 0 ? k - static_cast<int>(std::bit_width(dropped)) + 1 : k + r;
        } else if (mode_ == HashMode::redis || mode_ == HashMode::postgres) {
            target = i & out_mask;
            const std::size_t dropped = i >> precision;  // the low k bits of the new remainder
            rank = dropped != 0 ? std::countr_zero(dropped) + 1 : k + r;
            if (mode_ == HashMode::postgres) rank = std::min(rank, out.max_rank());  // exact: the cap commutes
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

// ---- tally serialization ---------------------------------------------------

inline std::vector<std::byte> HyperLogLog::serialize() const {
    if (is_sparse() || empty()) {
        // Encoding 2: the sparse entries, ascending, each as its varint
        // difference from the previous one (the first from 0). An empty
        // sketch is written as the empty sparse sketch it decodes to.
        std::size_t body = varint_size(sparse_.size());
        std::uint32_t prev = 0;
        for (const std::uint32_t e : sparse_) {
            body += varint_size(e - prev);
            prev = e;
        }
        ByteWriter w(frame_header_size + 12 + body);
        w.header(Family::hyperloglog, format_version);
        w.u8(static_cast<std::uint8_t>(p_));
        w.u8(mode_byte());
        w.u8(2);
        w.u8(0);
        w.u64(total_);
        w.varint(sparse_.size());
        prev = 0;
        for (const std::uint32_t e : sparse_) {
            w.varint(e - prev);
            prev = e;
        }
        return w.take();
    }
    const std::size_t m = register_count();
    const std::size_t dense_bytes = m * 6 / 8;
    // Calls f(index, value) for every non-zero register in index order (a
    // decoded list without building its registers).
    const auto for_each_nonzero = [&](auto&& f) {
        if (!decoded_list_.empty()) {
            for (const std::uint32_t e : decoded_list_) f(std::size_t{e >> 8}, static_cast<std::uint8_t>(e & 0xff));
        } else if (!empty()) {
            const std::span<const std::uint8_t> regs = registers();
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
    w.u8(mode_byte());
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

inline HyperLogLog HyperLogLog::from_registers(int precision, std::span<const std::uint8_t> registers,
                                               std::uint64_t total) {
    constexpr const char* who = "tally::HyperLogLog::from_registers";
    HyperLogLog out(check_precision(precision, HashMode::tally, who));
    const std::size_t m = out.register_count();
    if (registers.size() != m)
        detail::throw_invalid_argument(std::string(who) + ": " + std::to_string(registers.size()) +
                                       " registers where precision " + std::to_string(precision) + " has " +
                                       std::to_string(m));
    const std::uint8_t top = static_cast<std::uint8_t>(out.max_rank());
    bool any = false;
    for (const std::uint8_t v : registers) {
        if (v > top)
            detail::throw_invalid_argument(std::string(who) + ": register value " + std::to_string(v) +
                                           " is out of range [0, " + std::to_string(top) + "]");
        any |= v != 0;
    }
    out.total_ = total;
    if (!any) return out;  // stays sparse: no registers allocated
    out.allocate();
    std::memcpy(out.registers_.data(), registers.data(), m);
    out.rebuild_from_registers();
    out.hip_valid_ = false;  // registers alone carry no HIP state: Ertl's estimator
    return out;
}

inline HyperLogLog HyperLogLog::deserialize(std::span<const std::byte> bytes) {
    ByteReader r(bytes);
    const std::uint8_t version = r.header(Family::hyperloglog, format_version);
    const int p = r.u8();
    if (p < min_precision || p > max_datasketches_precision)
        detail::throw_format_error(detail::out_of_range_message("tally::HyperLogLog::deserialize", "precision", p, 4,
                                                                max_datasketches_precision));
    const std::uint8_t mode = r.u8();
    // 19-21 only in mode datasketches (2)
    if (p > max_precision && mode != 2)
        detail::throw_format_error(
            detail::out_of_range_message("tally::HyperLogLog::deserialize", "precision", p, 4, max_precision));
    // Mode postgres (3, version 3) carries its regwidth 1..7 in the high nibble.
    const int regwidth = mode >> 4;
    format_check(mode <= 2 ? (version >= 2 || mode <= 1)
                           : (mode & 15) == 3 && version >= 3 && regwidth >= 1 && regwidth <= 7,
                 "HyperLogLog: unknown hash mode");
    if ((mode & 15) == 3 && p > detail::pg_hll_max_log2m)
        detail::throw_format_error(
            detail::out_of_range_message("tally::HyperLogLog::deserialize", "precision", p, 4, 17));
    const std::uint8_t encoding = r.u8();
    format_check(encoding <= 1 || (encoding == 2 && version >= 3), "HyperLogLog: unknown register encoding");
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
    HyperLogLog out(p, static_cast<HashMode>(mode & 15));
    if ((mode & 15) == 3) out.pg_regwidth_ = static_cast<std::uint8_t>(regwidth);
    const std::uint8_t top = static_cast<std::uint8_t>(out.max_rank());
    // The whole frame is validated before anything is allocated; sparse
    // entries (encoding 2) stay sparse, their number bounded by the input.
    if (encoding == 2) {
        format_check(!hip, "HyperLogLog: a sparse frame carries no HIP state");
        const std::uint64_t k =
            r.count(r.varint(), 1, std::max(detail::hll_sparse_limit(p), detail::hll_sparse_decoded_limit(p, mode)),
                    "HyperLogLog sparse entry");
        const ByteReader entries = r;
        const std::uint64_t end = std::uint64_t{1} << (detail::hll_sparse_precision(mode) + 6);
        const auto top_rank = static_cast<std::uint32_t>(detail::hll_sparse_max_rank(mode));
        std::uint64_t prev = 0;
        for (std::uint64_t j = 0; j < k; ++j) {
            const std::uint64_t delta = r.varint();
            format_check(delta < end - prev, "HyperLogLog: sparse entry out of range");
            const std::uint64_t e = prev + delta;
            format_check(j == 0 || ((mode & 15) == 2 ? e > prev : (e >> 6) > (prev >> 6)),
                         "HyperLogLog: sparse entries are not ascending");
            format_check((e & 63) >= 1 && (e & 63) <= top_rank, "HyperLogLog: sparse entry rank out of range");
            prev = e;
        }
        r.expect_end();
        ByteReader again = entries;
        out.sparse_.reserve(static_cast<std::size_t>(k));
        prev = 0;
        for (std::uint64_t j = 0; j < k; ++j) {
            prev += again.varint();
            out.sparse_.push_back(static_cast<std::uint32_t>(prev));
        }
        out.total_ = total;
        out.sparse_changed();
        return out;
    }
    // A register list (encoding 1) is stored once the HIP state is checked.
    ByteReader list = r;
    std::size_t list_size = 0;
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
        hist[0] = static_cast<std::uint32_t>(m - k);
        out.set_histogram(hist);
        list = entries;
        list_size = static_cast<std::size_t>(k);
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
        format_check(out.hist_[0] != m || hip_value == 0, "HyperLogLog: HIP estimate of an empty sketch is not 0");
        out.hip_ = hip_value;
        out.kxq0_ = kxq0;
        out.kxq1_ = kxq1;
    }
    // Register values make a dense sketch, kept as its list until first
    // mutation (the input bounds its size); an empty list stays the empty
    // sparse sketch.
    if (list_size != 0) {
        out.decoded_list_.reserve(list_size);
        std::size_t next = 0;
        for (std::size_t j = 0; j < list_size; ++j) {
            const std::size_t index = next + static_cast<std::size_t>(list.varint());
            out.decoded_list_.push_back(static_cast<std::uint32_t>(index << 8) | list.u8());
            next = index + 1;
        }
        out.regs_state_.store(lazy_pending, std::memory_order_relaxed);
    }
    return out;
}

// ---- Redis interop ---------------------------------------------------------

inline std::string HyperLogLog::to_redis() const {
    if (p_ != redis_precision)
        detail::throw_invalid_argument("tally::HyperLogLog::to_redis: precision " + std::to_string(p_) +
                                       " is not Redis's 14 (reduce() a larger sketch to 14 first)");
    return detail::redis_hll_encode(registers());
}

inline HyperLogLog HyperLogLog::from_redis(std::string_view s) {
    HyperLogLog out = redis_compatible();
    detail::redis_hll_decode(s, out.registers_);
    out.adopt_registers();
    return out;
}

template <class T>
    requires Hashable<std::decay_t<T>> || detail::HllByteString<T>
inline std::uint64_t HyperLogLog::redis_hash_of(const T& item) noexcept {
    return detail::visit_item(item, detail::RedisItemHasher{});
}

// ---- Apache DataSketches interop -------------------------------------------

inline std::vector<std::byte> HyperLogLog::to_datasketches(DataSketchesHll type) const {
    if (registers_.empty() && mode_ == HashMode::datasketches && !sparse_.empty() &&
        detail::ds_keeps_coupons(p_, sparse_.size())) {
        std::vector<std::uint32_t> coupons;
        coupons.reserve(sparse_.size());
        for (const std::uint32_t e : sparse_) coupons.push_back(((e & 63) << 26) | (e >> 6));
        return detail::ds_coupon_encode(p_, coupons, type);
    }
    // A sparse sketch sends its sparse estimate as the HIP state
    // (HIP continues from any accurate start, as in to_dense()).
    const bool sparse_now = is_sparse();
    const bool hip = sparse_now || hip_valid_;
    detail::DsHllState st;
    st.lg_k = p_;
    st.registers = registers();
    ensure_histogram();
    st.empty = empty();
    st.out_of_order = !hip;
    st.hip = sparse_now ? estimate() : hip ? hip_ : 0.0;
    st.kxq0 = kxq0_;
    st.kxq1 = kxq1_;
    st.zeros = hist_[0];
    return detail::ds_hll_encode(st, type);
}

inline HyperLogLog HyperLogLog::from_datasketches(std::span<const std::byte> bytes) {
    detail::DsHllImage img = detail::ds_hll_decode(bytes, min_precision, max_datasketches_precision);
    HyperLogLog out(img.lg_k, HashMode::datasketches);
    if (img.mode == detail::DsHllMode::hll) {
        if (!img.registers.empty()) {
            out.registers_.assign(img.registers.begin(), img.registers.end());
            out.rebuild_from_registers();
        }
        out.hip_valid_ = !img.out_of_order || out.empty();
        if (!img.out_of_order) {
            out.hip_ = img.hip;
            out.kxq0_ = img.kxq0;
            out.kxq1_ = img.kxq1;
        }
    } else {
        // The coupons are the sparse entries of mode datasketches (each
        // (address, value) pair); a SET stays sparse even past the limit that
        // adds fill (lg_k 20, 21), so that it answers as DataSketches does.
        std::vector<std::uint32_t>& e = out.sparse_;
        e.reserve(img.coupons.size());
        for (const std::uint32_t c : img.coupons) e.push_back(((c & ((std::uint32_t{1} << 26) - 1)) << 6) | (c >> 26));
        std::sort(e.begin(), e.end());
        e.erase(std::unique(e.begin(), e.end()), e.end());
        if (e.size() > detail::hll_sparse_decoded_limit(out.p_, out.mode_byte())) {
            out.to_dense();
        } else {
            e.shrink_to_fit();
            out.sparse_changed();
        }
    }
    return out;
}

// ---- PostgreSQL hll interop (codec: detail/hyperloglog_postgres.hpp) -------

inline HyperLogLog HyperLogLog::postgres_compatible(int log2m, int regwidth) {
    constexpr const char* who = "tally::HyperLogLog::postgres_compatible";
    detail::check_range(who, "log2m", log2m, detail::pg_hll_min_log2m, detail::pg_hll_max_log2m);
    detail::check_range(who, "regwidth", regwidth, detail::pg_hll_min_regwidth, detail::pg_hll_max_regwidth);
    HyperLogLog out(log2m, HashMode::postgres);
    out.pg_regwidth_ = static_cast<std::uint8_t>(regwidth);
    return out;
}

inline std::vector<std::byte> HyperLogLog::to_postgres(const PostgresHllOptions& options) const {
    if (mode_ != HashMode::postgres)
        detail::throw_invalid_argument(std::string("tally::HyperLogLog::to_postgres: hash mode ") + mode_name(mode_) +
                                       " registers do not line up with the extension's; use HashMode::postgres "
                                       "(postgres_compatible())");
    detail::pg_hll_check_options(options, "tally::HyperLogLog::to_postgres");
    return detail::pg_hll_encode(registers(), p_, pg_regwidth_, options);
}

inline HyperLogLog HyperLogLog::from_postgres(std::span<const std::byte> bytes) {
    detail::PgHllImage img = detail::pg_hll_decode(bytes);
    HyperLogLog out = postgres_compatible(img.log2m, img.regwidth);
    if (img.type == detail::PgHllType::explicit_list) {
        // The hashes themselves: added as SQL added them (sparse while few).
        for (const std::uint64_t h : img.elements) out.add_hash(h);
        if (!out.registers_.empty()) out.hip_valid_ = false;  // sorted replay: Ertl, not HIP
        out.total_ = 0;
        return out;
    }
    if (img.type == detail::PgHllType::sparse && !img.entries.empty()) {
        const std::size_t m = out.register_count();
        if (m <= detail::pg_hll_dense_decode_bytes(bytes.size())) {
            out.registers_.assign(m, 0);
            for (const std::uint32_t e : img.entries) out.registers_[e >> 8] = static_cast<std::uint8_t>(e & 0xff);
            out.rebuild_from_registers();
            out.hip_valid_ = false;
        } else {
            // 2^17 registers from a few bytes: kept as sparse entries that set
            // exactly these registers (an entry per register).
            out.sparse_ = detail::pg_hll_sparse_entries(img.entries, out.p_);
            out.sparse_changed();
        }
    } else if (img.type == detail::PgHllType::full) {
        out.registers_.assign(img.registers.begin(), img.registers.end());
        out.adopt_registers();
    }
    return out;
}

template <class T>
    requires Hashable<std::decay_t<T>> || detail::HllByteString<T>
inline std::uint64_t HyperLogLog::postgres_hash_of(const T& item) noexcept {
    return detail::visit_item(item, detail::PostgresItemHasher{});
}

// ---- private ---------------------------------------------------------------

inline int HyperLogLog::check_precision(int precision, HashMode mode, const char* who) {
    detail::check_range(who, "precision", precision, min_precision, max_precision_of(mode));
    return precision;
}

inline const char* HyperLogLog::mode_name(HashMode mode) noexcept {
    return mode == HashMode::tally          ? "tally"
           : mode == HashMode::redis        ? "redis"
           : mode == HashMode::datasketches ? "datasketches"
                                            : "postgres";
}

inline std::size_t HyperLogLog::varint_size(std::size_t v) noexcept {
    std::size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        ++n;
    }
    return n;
}

inline void HyperLogLog::ensure_registers() const noexcept {
    if (TALLY_LIKELY(regs_state_.load(std::memory_order_acquire) == lazy_ready)) return;
    detail::run_lazy(regs_state_, [this] {
        sparse_view_.assign(register_count(), 0);
        for (const std::uint32_t e : decoded_list_) sparse_view_[e >> 8] = static_cast<std::uint8_t>(e & 0xff);
        for (const std::uint32_t e : sparse_) {
            const auto [index, rank] = detail::hll_sparse_register(e, p_, mode_byte());
            std::uint8_t& reg = sparse_view_[index];
            reg = reg < rank ? rank : reg;
        }
    });
}

inline void HyperLogLog::ensure_histogram() const noexcept {
    if (TALLY_LIKELY(hist_state_.load(std::memory_order_acquire) == lazy_ready)) return;
    ensure_registers();
    detail::run_lazy(hist_state_, [this] { rebuild_from_registers(); });
}

inline void HyperLogLog::set_histogram(const std::uint32_t (&h)[64]) noexcept {
    set_histogram_values(h);
    hist_state_.store(lazy_ready, std::memory_order_relaxed);
}

inline void HyperLogLog::set_histogram_values(const std::uint32_t (&h)[64]) const noexcept {
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

inline void HyperLogLog::adopt_registers() noexcept {
    rebuild_from_registers();
    hip_valid_ = empty();
}

inline void HyperLogLog::copy_from(const HyperLogLog& o) {
    hip_valid_ = o.hip_valid_;
    hip_ = o.hip_;
    total_ = o.total_;
    // Registers and entries are never modified by const members, so no
    // claim is needed; the register view of a sparse sketch is not copied.
    registers_ = o.registers_;
    sparse_ = o.sparse_;
    decoded_list_ = o.decoded_list_;
    regs_state_.store(sparse_.empty() && decoded_list_.empty() ? lazy_ready : lazy_pending, std::memory_order_relaxed);
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

inline void HyperLogLog::move_from(HyperLogLog& o) noexcept {
    hip_valid_ = o.hip_valid_;
    hip_ = o.hip_;
    total_ = o.total_;
    registers_ = std::move(o.registers_);
    sparse_ = std::move(o.sparse_);
    sparse_view_ = std::move(o.sparse_view_);
    decoded_list_ = std::move(o.decoded_list_);
    regs_state_.store(o.regs_state_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    std::copy(std::begin(o.hist_), std::end(o.hist_), std::begin(hist_));
    kxq0_ = o.kxq0_;
    kxq1_ = o.kxq1_;
    hist_state_.store(o.hist_state_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    // The moved-from sketch is the empty sketch of its precision.
    o.registers_.clear();
    o.sparse_.clear();
    o.sparse_view_.clear();
    o.decoded_list_.clear();
    o.regs_state_.store(lazy_ready, std::memory_order_relaxed);
    o.reset_state();
}

inline void HyperLogLog::reset_state() noexcept {
    std::fill(std::begin(hist_), std::end(hist_), 0u);
    hist_[0] = static_cast<std::uint32_t>(register_count());
    hip_valid_ = true;
    hip_ = 0.0;
    kxq0_ = static_cast<double>(register_count());
    kxq1_ = 0.0;
    total_ = 0;
    hist_state_.store(lazy_ready, std::memory_order_relaxed);
}

inline void HyperLogLog::allocate() {
    if (registers_.empty()) registers_.assign(register_count(), 0);
}

TALLY_ALWAYS_INLINE void HyperLogLog::update_register_low_bits(std::uint64_t hash, std::uint8_t rank) noexcept {
    std::uint8_t& reg = registers_[static_cast<std::size_t>(hash) & (registers_.size() - 1)];
    if (rank > reg) {
        if (TALLY_LIKELY(hist_state_.load(std::memory_order_relaxed) == lazy_ready)) raise(reg, rank);
        reg = rank;
    }
}

TALLY_ALWAYS_INLINE void HyperLogLog::update_register(std::size_t index, std::uint8_t rank) noexcept {
    std::uint8_t& reg = registers_[index];
    if (rank > reg) {
        // After a merge (no HIP) the histogram is rebuilt when queried.
        if (TALLY_LIKELY(hist_state_.load(std::memory_order_relaxed) == lazy_ready)) raise(reg, rank);
        reg = rank;
    }
}

// The HIP increment is 1 / (the probability that the next distinct item
// changes some register) = m / sum_j 2^-R_j, taken before the change; then the
// histogram and the two-part sum (values < 32 and >= 32, as DataSketches keeps
// it, so that an imported HIP state continues exactly) follow.

inline void HyperLogLog::raise(std::uint8_t from, std::uint8_t to) noexcept {
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

inline void HyperLogLog::rebuild_from_registers() const noexcept {
    std::uint32_t h[4][64] = {};
    const std::uint8_t* r = register_data();
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

// ---- sparse representation -------------------------------------------------

inline void HyperLogLog::add_hash_sparse(std::uint64_t hash) noexcept {
    std::uint32_t e;
    if (mode_ == HashMode::tally)
        e = detail::hll_sparse_entry_tally(hash);
    else if (mode_ == HashMode::redis)
        e = detail::hll_sparse_entry_redis(hash);
    else if (mode_ == HashMode::datasketches)
        e = detail::hll_sparse_entry_ds(hash, hash);
    else if ((hash >> p_) == 0)  // postgres: a zero rest sets no register
        return;
    else  // postgres: redis's entry; the cap applies where the entry becomes a register
        e = detail::hll_sparse_entry_redis(hash);
    insert_sparse(e);
}

inline void HyperLogLog::insert_sparse(std::uint32_t entry) noexcept {
    const std::uint32_t key = entry >> 6;
    // Mode datasketches keeps every (address, value) pair, as DataSketches'
    // coupon list and set do: the same count, so the same estimate and
    // promotion point. The other modes keep the largest rank per index'.
    const bool pairs = mode_ == HashMode::datasketches;
    auto it = std::lower_bound(sparse_.begin(), sparse_.end(), pairs ? entry : key << 6);
    if (pairs && it != sparse_.end() && *it == entry) return;
    if (!pairs && it != sparse_.end() && (*it >> 6) == key) {
        if (*it < entry) {
            *it = entry;
            sparse_changed();
        }
        return;
    }
    const std::size_t limit = detail::hll_sparse_limit(p_, mode_byte());
    if (sparse_.size() >= limit) {
        // Break-even: 2^p registers take no more than the entries.
        to_dense();
        const auto [index, rank] = detail::hll_sparse_register(entry, p_, mode_byte());
        update_register(index, rank);
        return;
    }
    if (sparse_.size() == sparse_.capacity()) {
        // Grow by half, never past the limit (so never past the dense size).
        const auto at = it - sparse_.begin();
        std::size_t cap = sparse_.capacity() + sparse_.capacity() / 2;
        cap = cap < 4 ? 4 : cap > limit ? limit : cap;
        sparse_.reserve(cap);
        it = sparse_.begin() + at;
    }
    sparse_.insert(it, entry);
    sparse_changed();
}

inline void HyperLogLog::sparse_changed() noexcept {
    if (!sparse_view_.empty()) std::vector<std::uint8_t>().swap(sparse_view_);
    regs_state_.store(sparse_.empty() ? lazy_ready : lazy_pending, std::memory_order_relaxed);
    hist_state_.store(sparse_.empty() ? lazy_ready : lazy_pending, std::memory_order_relaxed);
}

inline void HyperLogLog::to_dense() {
    const double start = sparse_estimate();
    registers_.assign(register_count(), 0);
    for (const std::uint32_t e : sparse_) {
        const auto [index, rank] = detail::hll_sparse_register(e, p_, mode_byte());
        std::uint8_t& reg = registers_[index];
        reg = reg < rank ? rank : reg;
    }
    std::vector<std::uint32_t>().swap(sparse_);
    std::vector<std::uint8_t>().swap(sparse_view_);
    regs_state_.store(lazy_ready, std::memory_order_relaxed);
    rebuild_from_registers();
    hist_state_.store(lazy_ready, std::memory_order_relaxed);
    // HIP continues from the sparse estimate: its later increments count the
    // items that change a register, new to the sketch whatever its history.
    hip_valid_ = true;
    hip_ = start;
}

inline void HyperLogLog::materialize_list() {
    if (decoded_list_.empty()) return;
    registers_.assign(register_count(), 0);
    for (const std::uint32_t e : decoded_list_) registers_[e >> 8] = static_cast<std::uint8_t>(e & 0xff);
    std::vector<std::uint32_t>().swap(decoded_list_);
    std::vector<std::uint8_t>().swap(sparse_view_);
    regs_state_.store(lazy_ready, std::memory_order_relaxed);
}

inline const std::uint8_t* HyperLogLog::register_data() const noexcept {
    if (!registers_.empty()) return registers_.data();
    return sparse_view_.empty() ? detail::hll_zero_registers : sparse_view_.data();
}

TALLY_END_NAMESPACE
