// tally/sketch/quantiles/detail/tdigest_impl.hpp: the bodies of TDigest.
// Included at the end of the public header, whose declarations it needs.
#pragma once

#include "../../../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numbers>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>
#include "../../../core/platform.hpp"
#include "../../../core/serialize.hpp"
#include "../../../detail/primitives.hpp"
#include "tdigest_pass.hpp"
#include "tdigest_postgres.hpp"
#include "tdigest_scale.hpp"
#include "tdigest_sort.hpp"
#include "../../../detail/throw.hpp"
#include "../tdigest.hpp"

TALLY_BEGIN_NAMESPACE

// ---- implementation -----------------------------------------------------

inline std::string TDigest::to_postgres(int postgres_compression) const {
    constexpr const char* who = "tally::TDigest::to_postgres: ";
    if (empty()) detail::throw_invalid_argument(std::string(who) + "an empty digest has no tdigest value (store NULL)");
    if (postgres_compression != 0)
        detail::check_range("tally::TDigest::to_postgres", "postgres_compression", postgres_compression, 10, 10000);
    else if (compression_ != std::floor(compression_))
        detail::throw_invalid_argument(std::string(who) + "compression " + detail::format_number(compression_) +
                                       " is not an integer (the extension's compression is)");
    if (!(total_ == std::floor(total_) && total_ <= static_cast<double>(detail::pg_tdigest_max_count)))
        detail::throw_invalid_argument(std::string(who) + "total weight " + detail::format_number(total_) +
                                       " is not an integer in [1, 2^53] (the extension counts values)");
    return with_flushed([&](const TDigest& d) {
        // Counts are the rounded cumulative weights' steps: they sum to the
        // total exactly and each is within 1 of its weight; one that rounds
        // to 0 is left out.
        std::vector<detail::PgTdigestCentroid> cs;
        cs.reserve(d.centroids_.size());
        double cum = 0;
        std::int64_t before = 0;
        for (const Centroid& c : d.centroids_) {
            cum += c.weight;
            const auto upto = static_cast<std::int64_t>(std::llround(cum));
            if (upto > before) cs.push_back({c.mean, upto - before});
            before = upto > before ? upto : before;
        }
        return detail::pg_tdigest_format(postgres_compression != 0 ? postgres_compression : static_cast<int>(compression_),
                                         before, cs);
    });
}

inline TDigest TDigest::from_postgres(std::string_view text) {
    const detail::PgTdigestText t = detail::pg_tdigest_parse(text);
    std::vector<Centroid> cs;
    cs.reserve(t.centroids.size());
    for (const auto& c : t.centroids) cs.push_back({c.mean, static_cast<double>(c.count)});
    return from_centroids(cs, cs.front().mean, cs.back().mean, static_cast<double>(t.compression));
}

inline TDigest::TDigest(double compression) : compression_(compression) {
    detail::check_range("tally::TDigest::TDigest", "compression", compression, min_compression, max_compression);
    cap_ = static_cast<std::size_t>(std::ceil(10 * compression));
}

inline TDigest TDigest::from_centroids(std::span<const Centroid> centroids, double compression) {
    if (centroids.empty()) return TDigest(compression);
    double mx = centroids.front().mean;
    for (const Centroid& c : centroids) mx = c.mean > mx ? c.mean : mx;  // NaN stays out; checked below
    return from_centroids(centroids, centroids.front().mean, mx, compression);
}

inline TDigest TDigest::from_centroids(std::span<const Centroid> centroids, double min, double max,
                                       double compression) {
    constexpr const char* who = "tally::TDigest::from_centroids: ";
    TDigest d(compression);
    if (centroids.empty()) return d;
    if (!(std::isfinite(min) && std::isfinite(max) && min <= max))
        detail::throw_invalid_argument(std::string(who) + "min " + detail::format_number(min) + " and max " +
                                       detail::format_number(max) + " must be finite with min <= max");
    double sum = 0, prev = min;
    for (std::size_t i = 0; i < centroids.size(); ++i) {
        const Centroid& c = centroids[i];
        const std::string at = std::string(who) + "centroid " + std::to_string(i) + " ";
        if (!(std::isfinite(c.mean) && c.mean >= prev && c.mean <= max))
            detail::throw_invalid_argument(at + "mean " + detail::format_number(c.mean) +
                                           " is not finite, non-decreasing and within [min, max] = [" +
                                           detail::format_number(min) + ", " + detail::format_number(max) + "]");
        if (!(c.weight > 0 && std::isfinite(c.weight)))
            detail::throw_invalid_argument(at + "weight " + detail::format_number(c.weight) +
                                           " is not in (0, inf)");
        sum += c.weight;
        prev = c.mean;
    }
    if (!std::isfinite(sum)) detail::throw_invalid_argument(std::string(who) + "total weight overflows");
    d.min_ = min;
    d.max_ = max;
    d.total_ = sum;
    if (centroids.size() <= max_centroids(compression)) {
        d.centroids_.assign(centroids.begin(), centroids.end());
        d.build_view();
    } else {
        // too many to keep: one merge pass (through the record buffer)
        d.recs_.assign(centroids.begin(), centroids.end());
        d.nrecs_ = d.recs_.size();
        d.compress(true);
    }
    return d;
}

inline void TDigest::add(double x, double weight) {
    if (TALLY_LIKELY(try_add(x, weight))) return;
    std::string why;
    if (!std::isfinite(x))
        why = "x " + detail::format_number(x) + " is not a finite number";
    else if (!(weight > 0) || !std::isfinite(weight))
        why = "weight " + detail::format_number(weight) + " is not in (0, inf)";
    else if (keys_.empty())
        why = "out of memory for the buffer";
    else
        why = "total weight would overflow";
    detail::throw_invalid_argument("tally::TDigest::add: " + why);
}

inline bool TDigest::try_add(double x, double weight) noexcept {
    constexpr double big = std::numeric_limits<double>::max();
    if (!(std::fabs(x) <= big && weight > 0 && total_ + weight <= big)) return false;
    if (TALLY_UNLIKELY(keys_.empty()) && !allocate_buffers()) return false;
    x += 0.0;  // -0.0 -> +0.0: one zero, one encoding
    // unit weights (the common case) take the radix-sorted key buffer
    if (TALLY_LIKELY(weight == 1))
        keys_[nkeys_++] = detail::tdigest_key(x);
    else
        recs_[nrecs_++] = Centroid{x, weight};
    total_ += weight;
    min_ = std::min(min_, x);
    max_ = std::max(max_, x);
    if (TALLY_UNLIKELY(nkeys_ + nrecs_ >= cap_)) compress();
    return true;
}

inline void TDigest::flush() noexcept {
    if (nkeys_ + nrecs_ != 0) compress();
}

inline void TDigest::clear() noexcept {
    nkeys_ = nrecs_ = 0;
    total_ = 0;
    min_ = std::numeric_limits<double>::infinity();
    max_ = -std::numeric_limits<double>::infinity();
    centroids_.clear();
    knot_pos_.clear();
    knot_val_.clear();
}

inline double TDigest::quantile(double q) {
    check_q(q, "quantile");
    flush();
    return std::as_const(*this).quantile_flushed(q);
}
inline double TDigest::quantile(double q) const {
    check_q(q, "quantile");
    return with_flushed([&](const TDigest& d) { return d.quantile_flushed(q); });
}

inline double TDigest::cdf(double x) {
    check_x(x, "cdf");
    flush();
    return std::as_const(*this).cdf_flushed(x);
}
inline double TDigest::cdf(double x) const {
    check_x(x, "cdf");
    return with_flushed([&](const TDigest& d) { return d.cdf_flushed(x); });
}

inline double TDigest::rank(double x) {
    if (empty()) return check_x(x, "rank"), 0.0;
    return cdf(x) * total_;
}
inline double TDigest::rank(double x) const {
    if (empty()) return check_x(x, "rank"), 0.0;
    return cdf(x) * total_;
}

inline double TDigest::trimmed_mean(double lo, double hi) {
    check_trim(lo, hi);
    flush();
    return std::as_const(*this).trimmed_mean_flushed(lo, hi);
}
inline double TDigest::trimmed_mean(double lo, double hi) const {
    check_trim(lo, hi);
    return with_flushed([&](const TDigest& d) { return d.trimmed_mean_flushed(lo, hi); });
}

inline std::span<const TDigest::Centroid> TDigest::centroids() {
    flush();
    return {centroids_.data(), centroids_.size()};
}

inline std::size_t TDigest::memory_bytes() const noexcept {
    return sizeof(*this) + sizeof(Centroid) * (centroids_.capacity() + scratch_.capacity() + recs_.capacity()) +
           sizeof(double) * (knot_pos_.capacity() + knot_val_.capacity()) +
           sizeof(std::uint64_t) * (keys_.capacity() + key_tmp_.capacity());
}

inline TDigest& TDigest::merge(const TDigest& other) {
    if (!mergeable_with(other))
        detail::throw_invalid_argument("tally::TDigest::merge: compression " + detail::format_number(compression_) +
                                       " differs from " + detail::format_number(other.compression_) +
                                       " (merge needs equal compression)");
    if (other.empty()) return *this;
    if (!(total_ + other.total_ <= std::numeric_limits<double>::max()))
        detail::throw_invalid_argument("tally::TDigest::merge: total weight would overflow");
    // allocate everything first, so a failure leaves *this unchanged
    TDigest flushed_other(0.0, 0);
    const TDigest* o = &other;
    if (other.nkeys_ + other.nrecs_ != 0 || &other == this) {
        flushed_other = other;
        flushed_other.flush();
        o = &flushed_other;
    }
    flush();
    const std::size_t nrecs = centroids_.size() + o->centroids_.size();
    if (recs_.size() < nrecs) recs_.resize(nrecs);
    scratch_.reserve(nrecs);
    centroids_.reserve(nrecs);
    // both centroid lists go through the record buffer (sorted by (mean,
    // weight)), so the pass does not depend on which side is *this
    Centroid* out = std::copy(centroids_.begin(), centroids_.end(), recs_.data());
    std::copy(o->centroids_.begin(), o->centroids_.end(), out);
    nrecs_ = nrecs;
    centroids_.clear();
    total_ += o->total_;
    min_ = std::min(min_, o->min_);
    max_ = std::max(max_, o->max_);
    compress(true);
    return *this;
}

inline std::vector<std::byte> TDigest::serialize() const {
    return with_flushed([](const TDigest& d) {
        ByteWriter w(44 + 16 * d.centroids_.size());
        w.header(Family::tdigest, format_version);
        w.f64(d.compression_);
        w.f64(d.min_);
        w.f64(d.max_);
        w.f64(d.total_);
        w.u32(static_cast<std::uint32_t>(d.centroids_.size()));
        for (const Centroid& c : d.centroids_) {
            w.f64(c.mean);
            w.f64(c.weight);
        }
        return w.take();
    });
}

// Every length is checked against the bytes present before anything is
// allocated, and the add buffer is left to the first add.
inline TDigest TDigest::deserialize(std::span<const std::byte> bytes) {
    ByteReader r(bytes);
    r.header(Family::tdigest, format_version);
    const double compression = r.f64();
    format_check(compression >= min_compression && compression <= max_compression,
                 "tdigest compression is outside [10, 10000]");
    const double mn = r.f64(), mx = r.f64(), total = r.f64();
    const std::uint64_t k = r.count(r.u32(), 16, max_centroids(compression), "tdigest centroid");
    TDigest d(compression);
    if (k == 0) {
        format_check(mn == std::numeric_limits<double>::infinity() && mx == -std::numeric_limits<double>::infinity() &&
                         total == 0,
                     "empty tdigest must have min +inf, max -inf and count 0");
    } else {
        format_check(std::isfinite(mn) && std::isfinite(mx) && mn <= mx, "tdigest min/max not finite and ordered");
        d.centroids_.reserve(static_cast<std::size_t>(k));
        double sum = 0, prev = mn;
        for (std::uint64_t i = 0; i < k; ++i) {
            const double m = r.f64(), w = r.f64();
            format_check(std::isfinite(m), "tdigest centroid mean is not finite");
            format_check(m >= prev && m <= mx, "tdigest centroid means unsorted or outside [min, max]");
            format_check(w > 0 && std::isfinite(w), "tdigest centroid weight is not positive and finite");
            sum += w;
            prev = m;
            d.centroids_.push_back(Centroid{m, w});
        }
        format_check(std::isfinite(sum) && sum == total, "tdigest count is not the sum of the centroid weights");
    }
    r.expect_end();
    d.min_ = mn;
    d.max_ = mx;
    d.total_ = total;
    d.build_view();
    return d;
}

inline void TDigest::check_q(double q, const char* what) {
    if (!(q >= 0 && q <= 1)) [[unlikely]]
        detail::throw_invalid_argument(
            detail::out_of_range_message((std::string("tally::TDigest::") + what).c_str(), "q", q, 0, 1));
}
inline void TDigest::check_x(double x, const char* what) {
    if (std::isnan(x)) detail::throw_invalid_argument(std::string("tally::TDigest::") + what + ": x is NaN");
}
inline void TDigest::check_trim(double lo, double hi) {
    if (!(lo >= 0 && lo < hi && hi <= 1))
        detail::throw_invalid_argument("tally::TDigest::trimmed_mean: (lo, hi) = (" + detail::format_number(lo) +
                                       ", " + detail::format_number(hi) + ") needs 0 <= lo < hi <= 1");
}

template <class F>
std::invoke_result_t<F&, const TDigest&> TDigest::with_flushed(F&& f) const {
    if (nkeys_ + nrecs_ == 0) return f(*this);
    TDigest copy(*this);
    copy.flush();
    return f(std::as_const(copy));
}


// One merge pass (detail::tdigest_pass) over the sorted buffer and the
// centroids, read in (mean, weight) order: a centroid that starts at
// cumulative weight W may grow up to weight n * q(k(W / n) + 1) - W. The
// record buffer holds weighted values of add, or centroids (merge).
inline void TDigest::compress(bool recs_are_centroids) noexcept {
    detail::tdigest_radix_sort(keys_.data(), nkeys_, key_tmp_.data());
    std::sort(recs_.data(), recs_.data() + nrecs_, detail::tdigest_less<Centroid>);
    const double n = total_;
    const detail::TDigestScale full(compression_, n);
    // a pure run is a point mass when it is heavy on the scale of all the weight
    double fraction = detail::tdigest_point_mass_fraction;
    auto heavy = [&](double before, double w) {
        const double q0 = std::clamp(before / n, 0.0, 1.0);
        return w > fraction * (n * full.next_q(q0) - before);
    };
    scratch_.clear();
    // The k-size limit of the centroids that are not point masses is taken
    // over the weight outside point masses (so that a point mass does not
    // coarsen the centroids around it), estimated by the fraction of the
    // centroids' weight in point masses before this pass.
    const double in_masses = recs_are_centroids
                                 ? detail::tdigest_point_mass_fraction_of(recs_.data(), nrecs_)
                                 : detail::tdigest_point_mass_fraction_of(centroids_.data(), centroids_.size());
    const double rest = in_masses > 0 && in_masses < 1 ? n * (1 - in_masses) : n;
    const detail::TDigestScale scale = rest == n ? full : detail::TDigestScale(compression_, rest);
    auto limit = [&](double w_closed) {
        const double q0 = std::clamp(w_closed / rest, 0.0, 1.0);
        return rest * scale.next_q(q0);
    };
    // three sorted streams, read in (mean, weight) order: centroids,
    // weighted records, unit-weight keys (the pass takes its own copy, so
    // that the cursors live in registers)
    const detail::TDigestStream<Centroid> stream(centroids_.data(), centroids_.size(), recs_.data(), nrecs_,
                                                 keys_.data(), nkeys_, !recs_are_centroids);
    // Point masses take two centroids each; data made of many values just
    // heavy enough could exceed what deserialize accepts, and then the pass
    // runs again with a doubled threshold (at 1, point masses and centroids
    // together stay within a few times the compression).
    for (;;) {
        if (nrecs_ == 0)
            detail::tdigest_pass(scratch_, limit, heavy, stream.without_records());
        else
            detail::tdigest_pass(scratch_, limit, heavy, stream);
        if (scratch_.size() <= max_centroids(compression_) || fraction >= 1) break;
        fraction *= 2;
        scratch_.clear();
    }
    centroids_.swap(scratch_);
    nkeys_ = nrecs_ = 0;
    double sum = 0;
    for (const Centroid& x : centroids_) sum += x.weight;
    total_ = sum;
    build_view();
}

// The buffers of add, allocated on the first value (so that an empty
// digest, and one fresh from deserialize, costs only what it holds).
inline bool TDigest::allocate_buffers() noexcept {
    const std::size_t expect = static_cast<std::size_t>(2 * std::ceil(compression_)) + 64;
#if TALLY_HAS_EXCEPTIONS
    try {
#endif
        keys_.resize(cap_);
        key_tmp_.resize(cap_);
        recs_.resize(std::max(recs_.size(), cap_));
        centroids_.reserve(expect);
        scratch_.reserve(expect);
        knot_pos_.reserve(2 * expect + 3);
        knot_val_.reserve(2 * expect + 3);
#if TALLY_HAS_EXCEPTIONS
    } catch (...) {
        keys_ = {};
        key_tmp_ = {};
        return false;
    }
#endif
    return true;
}

// The knots of walk_knots, kept once per flush, so that quantile and cdf
// are one binary search and one interpolation. The knot count is at most
// 2 * centroids + 3; positions and values both never decrease.
inline void TDigest::build_view() noexcept {
    knot_pos_.clear();
    knot_val_.clear();
    if (empty()) return;
    const std::size_t need = 2 * centroids_.size() + 3;
    if (knot_pos_.capacity() < need || knot_val_.capacity() < need) {
#if TALLY_HAS_EXCEPTIONS
        try {
#endif
            knot_pos_.reserve(need);
            knot_val_.reserve(need);
#if TALLY_HAS_EXCEPTIONS
        } catch (...) {
            // the linear walk answers without the view
            knot_pos_ = {};
            knot_val_ = {};
            return;
        }
#endif
    }
    walk_knots([&](double p, double v) {
        knot_pos_.push_back(p);
        knot_val_.push_back(v);
        return false;
    });
}

// First index in a[0, n) whose value is >= x (upper: > x), n >= 1, or n
// when there is none; branch-free halving, so the cost is log2(n) steps
// whatever the data.
template <bool Upper>
std::size_t TDigest::first_at_least(const double* a, std::size_t n, double x) noexcept {
    const double* base = a;
    while (n > 1) {
        const std::size_t half = n / 2;
        const bool right = Upper ? !(x < base[half - 1]) : base[half - 1] < x;
        base = right ? base + half : base;
        n -= half;
    }
    const bool right = Upper ? !(x < *base) : *base < x;
    return static_cast<std::size_t>(base - a) + (right ? 1 : 0);
}

// The knots of the interpolated quantile function (detail::tdigest_walk_knots):
// point masses are flat steps, other centroids a knot at their middle.
template <class Visit>
void TDigest::walk_knots(Visit&& visit) const {
    detail::tdigest_walk_knots(centroids_.data(), centroids_.size(), total_, min_, max_, visit);
}

inline double TDigest::quantile_flushed(double q) const noexcept {
    if (empty()) return std::numeric_limits<double>::quiet_NaN();
    const double r = q * total_;
    if (TALLY_LIKELY(!knot_pos_.empty())) {
        // the first knot at or past r (the last knot sits at total_ >= r)
        const std::size_t n = knot_pos_.size();
        const std::size_t i = std::min(first_at_least<false>(knot_pos_.data(), n, r), n - 1);
        const double p = knot_pos_[i], v = knot_val_[i];
        if (i == 0) return v;
        const double pp = knot_pos_[i - 1], pv = knot_val_[i - 1];
        return p <= pp ? v : detail::tdigest_lerp(pv, v, (r - pp) / (p - pp));
    }
    double pp = 0, pv = min_, result = max_;
    bool have_prev = false;
    walk_knots([&](double p, double v) {
        if (p >= r) {
            result = (!have_prev || p <= pp) ? v : detail::tdigest_lerp(pv, v, (r - pp) / (p - pp));
            return true;
        }
        pp = p;
        pv = v;
        have_prev = true;
        return false;
    });
    return result;
}

inline double TDigest::cdf_flushed(double x) const noexcept {
    if (empty()) return std::numeric_limits<double>::quiet_NaN();
    if (x < min_) return 0;
    if (x >= max_) return 1;
    if (TALLY_LIKELY(!knot_val_.empty())) {
        // the first knot above x: not the first (min_ <= x), and there is
        // one (max_ > x is the last)
        const std::size_t n = knot_val_.size();
        const std::size_t i = std::clamp<std::size_t>(first_at_least<true>(knot_val_.data(), n, x), 1, n - 1);
        const double p = knot_pos_[i], v = knot_val_[i], pp = knot_pos_[i - 1], pv = knot_val_[i - 1];
        const double d = v - pv;
        const double t = std::isfinite(d) ? (x - pv) / d : (x / 2 - pv / 2) / (v / 2 - pv / 2);
        const double r = pp + (p - pp) * std::min(std::max(t, 0.0), 1.0);
        return std::clamp(r / total_, 0.0, 1.0);
    }
    double pp = 0, pv = min_, r = total_;
    walk_knots([&](double p, double v) {
        if (v > x) {
            // pv <= x < v; v - pv is exact or overflows, never 0
            const double d = v - pv;
            const double t = std::isfinite(d) ? (x - pv) / d : (x / 2 - pv / 2) / (v / 2 - pv / 2);
            r = pp + (p - pp) * std::min(std::max(t, 0.0), 1.0);
            return true;
        }
        pp = p;
        pv = v;
        return false;
    });
    return std::clamp(r / total_, 0.0, 1.0);
}

// Integral of f over [a, b] (a < b within [0, n]), as a mean value.
inline double TDigest::mean_of_f(double a, double b) const noexcept {
    double pp = 0, pv = min_, acc_w = 0, acc_m = 0;
    walk_knots([&](double p, double v) {
        const double s = std::max(pp, a), e = std::min(p, b);
        if (e > s && p > pp) {
            const double vs = detail::tdigest_lerp(pv, v, (s - pp) / (p - pp));
            const double ve = detail::tdigest_lerp(pv, v, (e - pp) / (p - pp));
            add_to_mean(acc_m, acc_w, vs / 2 + ve / 2, e - s);
        }
        pp = p;
        pv = v;
        return p >= b;
    });
    return acc_m;
}

inline void TDigest::add_to_mean(double& mean, double& weight, double v, double w) noexcept {
    weight += w;
    const double d = v - mean;
    mean = std::isfinite(d) ? mean + d * (w / weight) : mean * (1 - w / weight) + v * (w / weight);
}

inline double TDigest::trimmed_mean_flushed(double lo, double hi) const noexcept {
    if (empty()) return std::numeric_limits<double>::quiet_NaN();
    const double a = lo * total_, b = hi * total_;
    double acc_m = 0, acc_w = 0, w_before = 0;
    for (const Centroid& c : centroids_) {
        const double s = std::max(a, w_before), e = std::min(b, w_before + c.weight);
        if (e > s) {
            if (s <= w_before && e >= w_before + c.weight)
                add_to_mean(acc_m, acc_w, c.mean, c.weight);
            else
                add_to_mean(acc_m, acc_w, mean_of_f(s, e), e - s);
        }
        w_before += c.weight;
        if (w_before >= b) break;
    }
    if (acc_w == 0) return quantile_flushed((lo + hi) / 2);
    return std::clamp(acc_m, min_, max_);
}

TALLY_END_NAMESPACE
