// tally/sketch/distinct/detail/ultraloglog_estimators.hpp: UltraLogLog's register
// arithmetic and its estimators (Ertl, "UltraLogLog: A Practical and More
// Space-Efficient Alternative to HyperLogLog for Approximate Distinct
// Counting", PVLDB 17(7), 2024): the FGRA estimator (Algorithm 6), the
// maximum-likelihood estimator (section 3.1, solved with Algorithm 8 of Ertl,
// arXiv:1702.01284) and the register change probability the martingale
// estimator needs. Every estimator reads a histogram of the 256 byte values,
// so its cost after the O(m) count is O(256).
//
// Register byte (as hash4j stores it): 0 while empty, else 4 h + l, where h
// in [p - 1, 63] is the highest bit position set in the register's "hash
// prefix" (an update with NLZ value u sets bit u + p - 1, u in [0, 64 - p]),
// and l holds the two bits below it (bit 1 of l: position h - 1, bit 0:
// position h - 2). That is the paper's register value 4 k + l (k = h - p + 2)
// plus 4 p - 8.
#pragma once

#include "../../../detail/abi.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../../../detail/primitives.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

/// The hash prefix a register byte stands for (bits 0 and 1 are never part of
/// a valid register: positions start at p - 1 >= 2; r = 0 gives 0).
constexpr std::uint64_t ull_unpack(std::uint8_t r) noexcept {
    const unsigned h = r >> 2;
    return ((std::uint64_t{4u | (r & 3u)} << 61) >> (63 - h)) & ~std::uint64_t{3};
}

/// The register byte of a non-zero hash prefix whose set bits are >= 2.
constexpr std::uint8_t ull_pack(std::uint64_t prefix) noexcept {
    const unsigned h = 63u - static_cast<unsigned>(std::countl_zero(prefix));
    return static_cast<std::uint8_t>((h << 2) | ((prefix >> (h - 2)) & 3u));
}

/// For each register byte, the bit positions whose update leaves it unchanged:
/// every position below h - 2, h itself, and h - 1 and h - 2 where set (0 for
/// the empty register). Independent of p; 2 KiB, so the add path tests one bit.
inline constexpr std::array<std::uint64_t, 256> ull_unchanged_by = [] {
    std::array<std::uint64_t, 256> t{};
    for (unsigned r = 8; r < 256; ++r) {
        const unsigned h = r >> 2;
        std::uint64_t mask = ((std::uint64_t{1} << (h - 2)) - 1) | (std::uint64_t{1} << h);
        if ((r & 2) != 0) mask |= std::uint64_t{1} << (h - 1);
        if ((r & 1) != 0) mask |= std::uint64_t{1} << (h - 2);
        t[r] = mask;
    }
    return t;
}();

/// True when `r` can occur in a sketch of precision p: 0, or h in [p - 1, 63]
/// with no bit below position p - 1.
constexpr bool ull_valid_register(std::uint8_t r, int p) noexcept {
    if (r == 0) return true;
    const int h = r >> 2;
    if (h < p - 1) return false;
    if (h == p - 1) return (r & 3) == 0;
    if (h == p) return (r & 1) == 0;
    return true;
}

/// Register `r`'s share of the probability that one more distinct item
/// changes the sketch, in units of 2^-64. An update of NLZ value u < 64 - p lands in a
/// given register with probability 2^-(u + 1) / m, u = 64 - p with 2^-(64 - p) / m;
/// with m = 2^p, bit b = u + p - 1 carries 2^(62 - b) (b < 63) or 1 (b = 63)
/// in units of 2^-64. The register changes for a bit above h, or for h - 1 or
/// h - 2 when unset (and not below p - 1). Empty: 2^(64 - p).
constexpr std::uint64_t ull_change_weight(std::uint8_t r, int p) noexcept {
    if (r == 0) return std::uint64_t{1} << (64 - p);
    const int h = r >> 2;
    std::uint64_t w = h < 63 ? std::uint64_t{1} << (62 - h) : 0;
    if ((r & 2) == 0 && h - 1 >= p - 1) w += std::uint64_t{1} << (63 - h);
    if ((r & 1) == 0 && h - 2 >= p - 1) w += std::uint64_t{1} << (64 - h);
    return w;
}

/// Counts of each byte value over `m` registers (4 interleaved tables, so
/// that repeated values do not serialize on one counter).
inline void ull_histogram(const std::uint8_t* r, std::size_t m, std::uint32_t (&out)[256]) noexcept {
    std::uint32_t h[4][256] = {};
    std::size_t i = 0;
    for (; i + 8 <= m; i += 8) {
        std::uint64_t word;
        std::memcpy(&word, r + i, 8);
        if (word == 0) {  // common while sparse
            h[0][0] += 8;
            continue;
        }
        ++h[0][r[i]];
        ++h[1][r[i + 1]];
        ++h[2][r[i + 2]];
        ++h[3][r[i + 3]];
        ++h[0][r[i + 4]];
        ++h[1][r[i + 5]];
        ++h[2][r[i + 6]];
        ++h[3][r[i + 7]];
    }
    for (; i < m; ++i) ++h[0][r[i]];
    for (int v = 0; v < 256; ++v) out[v] = h[0][v] + h[1][v] + h[2][v] + h[3][v];
}

/// Sum of ull_change_weight over the histogram, times 2^-64: the probability
/// that one more distinct item changes the sketch (1 for an empty sketch).
inline double ull_change_probability(const std::uint32_t (&hist)[256], int p) noexcept {
    uint128 sum = 0;
    for (int v = 0; v < 256; ++v)
        if (hist[v] != 0) sum += static_cast<uint128>(hist[v]) * ull_change_weight(static_cast<std::uint8_t>(v), p);
    return static_cast<double>(sum) * 0x1p-64;
}

// ---- FGRA (Algorithm 6 of the paper) ---------------------------------------

struct UllFgra {
    // The optimal parameters of section 3.3 (tau, eta_0..3) and the resulting
    // variance factor v (RSE sqrt(v / m)).
    static constexpr double eta0 = 4.663135422063788;
    static constexpr double eta1 = 2.1378502137958524;
    static constexpr double eta2 = 2.781144650979996;
    static constexpr double eta3 = 0.9824082545153715;
    static constexpr double tau = 0.8194911375910897;
    static constexpr double v = 0.6118931496978437;
    static constexpr double eta_x = eta0 - eta1 - eta2 + eta3;

    double pow2_tau, pow2_mtau, pow4_mtau;
    // g(r) = eta_(r & 3) 2^(-tau k) for the paper's register values 4 k + l,
    // k in [3, w - 1], indexed by 4 (k - 3) + l.
    std::array<double, 252> g;

    static const UllFgra& get() {
        static const UllFgra t;
        return t;
    }

    UllFgra() noexcept
        : pow2_tau(std::pow(2.0, tau)), pow2_mtau(std::pow(2.0, -tau)), pow4_mtau(std::pow(4.0, -tau)), g{} {
        const double eta[4] = {eta0, eta1, eta2, eta3};
        for (int i = 0; i < 252; ++i)
            g[static_cast<std::size_t>(i)] = eta[i & 3] * std::pow(2.0, -tau * ((i >> 2) + 3));
    }

    // psi(z) / eta_x (psi of eq. 17).
    static double psi_prime(double z, double z2) noexcept {
        constexpr double a = (eta2 - eta3) / eta_x;
        constexpr double b = (eta1 - eta3) / eta_x;
        constexpr double c = (eta3 * eta0 - eta1 * eta2) / (eta_x * eta_x);
        return (z + a) * (z2 + b) + c;
    }

    // sigma(z) of the small-range correction (eq. 18), summed until it stops growing.
    double sigma(double z) const noexcept {
        if (z <= 0.0) return eta3;
        if (z >= 1.0) return HUGE_VAL;
        double pz = z;
        double next = pz * pz;
        double s = 0.0;
        double pt = eta_x;
        for (;;) {
            const double old = s;
            const double next2 = next * next;
            s += pt * (pz - next) * psi_prime(next, next2);
            if (!(s > old)) return s / z;
            pz = next;
            next = next2;
            pt *= pow2_tau;
        }
    }

    // phi(z) of the large-range correction (eq. 18), summed until it stops growing.
    double phi(double z, double z2) const noexcept {
        if (z <= 0.0) return 0.0;
        if (z >= 1.0) return eta0 / (pow2_tau * (2.0 * pow2_tau - 1.0));
        double prev = z2;
        double pz = z;
        double next = std::sqrt(pz);
        double f = eta_x * (pow4_mtau / (2.0 - pow2_mtau)) / (1.0 + next);
        double ps = psi_prime(pz, prev);
        double s = next * (ps + ps) * f;
        for (;;) {
            prev = pz;
            pz = next;
            const double old = s;
            next = std::sqrt(pz);
            const double nps = psi_prime(pz, prev);
            f *= pow2_mtau / (1.0 + next);
            s += next * ((nps + nps) - (pz + next) * ps) * f;
            if (!(s > old)) return s;
            ps = nps;
        }
    }

    // The estimate from a histogram of register bytes (hash4j's encoding).
    double estimate(const std::uint32_t (&hist)[256], int p) const noexcept {
        const std::int64_t m = std::int64_t{1} << p;
        const int off = 4 * p + 4;  // byte of the paper's r = 12 (k = 3, l = 0)
        // Paper values 0, 4, 8, 10 and 4w + l (w = 65 - p) are corrected apart.
        const std::int64_t c0 = hist[0];
        const std::int64_t c4 = hist[off - 8];
        const std::int64_t c8 = hist[off - 4];
        const std::int64_t c10 = hist[off - 2];
        const std::int64_t w0 = hist[252], w1 = hist[253], w2 = hist[254], w3 = hist[255];
        double sum = 0.0;
        for (int r = off; r < 252; ++r)
            if (hist[r] != 0) sum += static_cast<double>(hist[r]) * g[static_cast<std::size_t>(r - off)];
        if (c0 + c4 + c8 + c10 > 0) {
            // Small-range z: the root of eq. 23.
            const std::int64_t alpha = m + 3 * (c0 + c4 + c8 + c10);
            const std::int64_t beta = m - c0 - c4;
            const std::int64_t gamma = 4 * c0 + 2 * c4 + 3 * c8 + c10;
            const double q =
                (std::sqrt(static_cast<double>(beta * beta + 4 * alpha * gamma)) - static_cast<double>(beta)) /
                static_cast<double>(2 * alpha);
            const double z = (q * q) * (q * q);
            if (c0 > 0) sum += static_cast<double>(c0) * sigma(z);
            if (c4 > 0) sum += static_cast<double>(c4) * pow2_mtau * eta_x * psi_prime(z, z * z);
            if (c8 > 0) sum += static_cast<double>(c8) * (z * pow4_mtau * (eta0 - eta1) + pow4_mtau * eta1);
            if (c10 > 0) sum += static_cast<double>(c10) * (z * pow4_mtau * (eta2 - eta3) + pow4_mtau * eta3);
        }
        if (w0 + w1 + w2 + w3 > 0) {
            // Large-range z: the root of eq. 24.
            const std::int64_t alpha = m + 3 * (w0 + w1 + w2 + w3);
            const std::int64_t beta = w0 + w1 + 2 * (w2 + w3);
            const std::int64_t gamma = m + 2 * w0 + w2 - w3;
            const double z = std::sqrt(
                (std::sqrt(static_cast<double>(beta * beta + 4 * alpha * gamma)) - static_cast<double>(beta)) /
                static_cast<double>(2 * alpha));
            const double rz = std::sqrt(z);
            double s = phi(rz, z) * static_cast<double>(w0 + w1 + w2 + w3);
            s += z * (1 + rz) *
                 (static_cast<double>(w0) * eta0 + static_cast<double>(w1) * eta1 + static_cast<double>(w2) * eta2 +
                  static_cast<double>(w3) * eta3);
            s += rz * (static_cast<double>(w0 + w1) * (z * pow2_mtau * (eta0 - eta2) + pow2_mtau * eta2) +
                       static_cast<double>(w2 + w3) * (z * pow2_mtau * (eta1 - eta3) + pow2_mtau * eta3));
            sum += s * std::pow(pow2_mtau, 65 - p) / ((1 + rz) * (1 + z));
        }
        // lambda_p s^(-1/tau), lambda_p = m^(1 + 1/tau) / (1 + (1 + tau) v / (2 m)).
        const double md = static_cast<double>(m);
        const double lambda = std::pow(md, 1.0 + 1.0 / tau) / (1.0 + (1.0 + tau) * v / (2.0 * md));
        return lambda * std::pow(sum, -1.0 / tau);
    }
};

// ---- maximum likelihood (section 3.1; Algorithm 8 of arXiv:1702.01284) ------

/// Maximizes e^(-x a) prod_k (1 - e^(-x / 2^k))^b[k] over x > 0 by the secant
/// method on the monotone derivative, from Ertl's lower bound, to relative
/// accuracy `eps`. b[k] >= 0 for k <= n < 64; a = 0 gives infinity, b all
/// zero gives 0.
inline double ull_solve_ml(double a, const std::uint32_t* b, int n, double eps) noexcept {
    if (a == 0.0) return HUGE_VAL;
    int k_max = n;
    while (k_max >= 0 && b[k_max] == 0) --k_max;
    if (k_max < 0) return 0.0;
    int k_min = k_max;
    double s1 = 0.0;  // sum b[k]
    double s2 = 0.0;  // sum b[k] 2^k
    for (int k = k_max; k >= 0; --k) {
        if (b[k] == 0) continue;
        s1 += static_cast<double>(b[k]);
        s2 += std::ldexp(static_cast<double>(b[k]), k);
        k_min = k;
    }
    double x = s2 <= 1.5 * a ? s1 / (0.5 * s2 + a) : std::log1p(s2 / a) * (s1 / s2);
    double g_prev = 0.0;
    double dx = x;
    while (dx > x * eps) {
        // h(y) = 1 - y / (e^y - 1) at y = x / 2^k, from a Taylor series at the
        // largest useful scale, then doubled: h(2y) from h(y).
        int e;
        (void)std::frexp(x, &e);  // x = f 2^e, f in [0.5, 1)
        const int kappa = e + 1;
        const int top = k_max > kappa ? k_max : kappa;
        double xp = std::ldexp(x, -(top + 1));  // in (0, 0.25]
        const double xp2 = xp * xp;
        double h = xp + xp2 * (-1.0 / 3.0 + xp2 * (1.0 / 45.0 - xp2 * (1.0 / 472.5)));
        for (int k = kappa - 1; k >= k_max; --k) {
            const double hc = 1.0 - h;
            h = (xp + h * hc) / (xp + hc);
            xp += xp;
        }
        double g = static_cast<double>(b[k_max]) * h;
        for (int k = k_max - 1; k >= k_min; --k) {
            const double hc = 1.0 - h;
            h = (xp + h * hc) / (xp + hc);
            xp += xp;
            g += static_cast<double>(b[k]) * h;
        }
        g += x * a;
        if (g_prev < g && g <= s1)
            dx *= (g - s1) / (g_prev - g);
        else
            dx = 0.0;
        x += dx;
        g_prev = g;
    }
    return x;
}

struct UllMl {
    /// sqrt(ln 2 / zeta(2, 5/4)): the RSE factor (inverse square root of the Fisher information).
    static constexpr double rse_factor = 0.7608621002725182;
    /// 3/2 ln 2 zeta(3, 5/4) / zeta(2, 5/4)^2: the first-order bias, divided out.
    static constexpr double bias = 0.48147376527720065;

    static double estimate(const std::uint32_t (&hist)[256], int p) noexcept {
        // a: the change probability times 2 m; b[u]: registers whose update
        // value u (bit u + p - 1) is known to have occurred; bit 63 counts
        // with bit 62 (the last two NLZ values are equally likely).
        uint128 sum = 0;
        std::uint32_t b[64] = {};
        for (int v = 0; v < 256; ++v) {
            const std::uint32_t c = hist[v];
            if (c == 0) continue;
            const auto r = static_cast<std::uint8_t>(v);
            sum += static_cast<uint128>(c) * ull_change_weight(r, p);
            if (r == 0) continue;
            const int h = r >> 2;
            b[h - p + 1] += c;
            if ((r & 2) != 0) b[h - p] += c;
            if ((r & 1) != 0) b[h - p - 1] += c;
        }
        if (sum == 0) return hist[0] != 0 ? 0.0 : HUGE_VAL;  // never for valid states
        b[63 - p] += b[64 - p];
        const double m = std::ldexp(1.0, p);
        const double a = static_cast<double>(sum) * (2.0 * m) * 0x1p-64;
        if (hist[0] == static_cast<std::uint32_t>(m)) return 0.0;
        return 2.0 * m * ull_solve_ml(a, b, 63 - p, 0.001 * rse_factor / std::sqrt(m)) / (1.0 + bias / m);
    }
};

}  // namespace detail
TALLY_END_NAMESPACE
