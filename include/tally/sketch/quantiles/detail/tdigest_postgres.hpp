// tally/sketch/quantiles/detail/tdigest_postgres.hpp: the text form of PostgreSQL's
// `tdigest` type (the tdigest extension, 1.x) for tally::TDigest. Written from
// the extension's documented input/output format; docs/postgres.md has the
// mapping.
//
//   flags F count N compression C centroids K (mean, count) (mean, count) ...
//
// F: 1 = centroids store their mean (what the extension writes since 1.2),
// 0 = the older form whose first field is the centroid's sum; N: total count,
// a positive integer, equal to the sum of the centroid counts; C: integer
// compression in [10, 10000]; K: 1 .. 10 * C centroids, means non-decreasing,
// counts positive integers. The server prints means with six decimals
// ("%lf"); tally writes them in shortest round-trip form, which the server
// reads exactly. An empty digest has no text form (store NULL).
//
// All functions are pure and thread-safe.
#pragma once

#include "../../../detail/abi.hpp"

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "../../../core/serialize.hpp"
#include "../../../detail/throw.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

inline constexpr double pg_tdigest_min_compression = 10;
inline constexpr double pg_tdigest_max_compression = 10000;
/// Counts above 2^53 would not be exact as TDigest's double weights.
inline constexpr std::int64_t pg_tdigest_max_count = std::int64_t{1} << 53;

/// The shortest text that reads back as v ("C" locale digits).
inline std::string pg_tdigest_format_double(double v) {
    char buf[64];
#if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, static_cast<std::size_t>(r.ptr - buf));
#else
    for (int digits = 6; digits <= 17; ++digits) {
        std::snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (std::strtod(buf, nullptr) == v) break;
    }
    return buf;
#endif
}

/// Parses a decimal floating-point number at [b, e); returns the end of it,
/// or nullptr when there is none.
inline const char* pg_tdigest_parse_double(const char* b, const char* e, double& v) {
#if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
    const auto r = std::from_chars(b, e, v, std::chars_format::general);
    return r.ec == std::errc{} && r.ptr != b ? r.ptr : nullptr;
#else
    char buf[128];  // a copy of the number's characters only: strtod needs a terminator
    std::size_t n = 0;
    while (b + n != e && n + 1 < sizeof buf &&
           std::strchr("0123456789+-.eEinfatyINFATY", b[n]) != nullptr && b[n] != '\0')
        ++n;
    std::memcpy(buf, b, n);
    buf[n] = '\0';
    char* end = nullptr;
    v = std::strtod(buf, &end);
    return end == buf ? nullptr : b + (end - buf);
#endif
}

struct PgTdigestCentroid {
    double mean;
    std::int64_t count;
};

struct PgTdigestText {
    int compression = 0;
    std::int64_t count = 0;
    std::vector<PgTdigestCentroid> centroids;  // means (flags 0 sums already divided)
};

/// "flags 1 count N compression C centroids K (mean, count) ...", means in
/// shortest round-trip form. The caller validates compression and counts.
inline std::string pg_tdigest_format(int compression, std::int64_t count, std::span<const PgTdigestCentroid> cs) {
    std::string out = "flags 1 count " + std::to_string(count) + " compression " + std::to_string(compression) +
                      " centroids " + std::to_string(cs.size());
    out.reserve(out.size() + cs.size() * 32);
    for (const auto& c : cs) {
        out += " (";
        out += pg_tdigest_format_double(c.mean);
        out += ", ";
        out += std::to_string(c.count);
        out += ')';
    }
    return out;
}

class PgTdigestParser {
  public:
    explicit PgTdigestParser(std::string_view s) : s_(s) {}

    PgTdigestText parse() {
        PgTdigestText t;
        word("flags");
        const std::int64_t flags = integer("flags");
        if (flags != 0 && flags != 1) bad("flags " + std::to_string(flags) + " (expected 0 or 1)");
        word("count");
        t.count = integer("count");
        if (t.count <= 0 || t.count > pg_tdigest_max_count)
            bad("count " + std::to_string(t.count) + " is out of range [1, 2^53]");
        word("compression");
        const std::int64_t compression = integer("compression");
        if (compression < 10 || compression > 10000)
            bad("compression " + std::to_string(compression) + " is out of range [10, 10000]");
        t.compression = static_cast<int>(compression);
        word("centroids");
        const std::int64_t k = integer("centroids");
        if (k <= 0 || k > 10 * compression)
            bad("centroids " + std::to_string(k) + " is out of range [1, " + std::to_string(10 * compression) + "]");
        t.centroids.reserve(static_cast<std::size_t>(k));
        std::int64_t sum = 0;
        for (std::int64_t i = 0; i < k; ++i) {
            skip_space();
            literal('(');
            double mean = real();
            skip_space();
            literal(',');
            const std::int64_t c = integer("centroid count");
            skip_space();
            literal(')');
            if (c <= 0 || c > t.count)
                bad("centroid " + std::to_string(i) + " count " + std::to_string(c) + " is out of range [1, " +
                    std::to_string(t.count) + "]");
            if (flags == 0) mean /= static_cast<double>(c);
            if (!std::isfinite(mean)) bad("centroid " + std::to_string(i) + " mean is not finite");
            if (!t.centroids.empty() && mean < t.centroids.back().mean)
                bad("centroid " + std::to_string(i) + " mean is below the previous one (not sorted)");
            sum += c;  // each c <= count <= 2^53 and at most 10^5 of them: no overflow
            t.centroids.push_back({mean, c});
        }
        skip_space();
        if (pos_ != s_.size()) bad("trailing text at offset " + std::to_string(pos_));
        if (sum != t.count)
            bad("centroid counts sum to " + std::to_string(sum) + ", not the count " + std::to_string(t.count));
        return t;
    }

  private:
    [[noreturn]] static void bad(const std::string& what) {
        throw_format_error("tally::TDigest::from_postgres: " + what);
    }
    void skip_space() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
            ++pos_;
    }
    void literal(char c) {
        if (pos_ >= s_.size() || s_[pos_] != c)
            bad(std::string("expected '") + c + "' at offset " + std::to_string(pos_));
        ++pos_;
    }
    void word(std::string_view w) {
        skip_space();
        if (s_.substr(pos_, w.size()) != w) bad("expected \"" + std::string(w) + "\" at offset " + std::to_string(pos_));
        pos_ += w.size();
    }
    std::int64_t integer(const char* what) {
        skip_space();
        std::int64_t v = 0;
        const char* b = s_.data() + pos_;
        const char* e = s_.data() + s_.size();
        if (b != e && *b == '+') ++b;
        const auto r = std::from_chars(b, e, v);
        if (r.ec != std::errc{} || r.ptr == b) bad(std::string("bad ") + what + " at offset " + std::to_string(pos_));
        pos_ = static_cast<std::size_t>(r.ptr - s_.data());
        return v;
    }
    double real() {
        skip_space();
        double v = 0;
        const char* b = s_.data() + pos_;
        const char* e = s_.data() + s_.size();
        if (b != e && *b == '+') ++b;
        const char* end = pg_tdigest_parse_double(b, e, v);
        if (end == nullptr) bad("bad centroid mean at offset " + std::to_string(pos_));
        pos_ = static_cast<std::size_t>(end - s_.data());
        return v;
    }

    std::string_view s_;
    std::size_t pos_ = 0;
};

/// Parses the extension's text form; throws FormatError on malformed text.
inline PgTdigestText pg_tdigest_parse(std::string_view text) { return PgTdigestParser(text).parse(); }

}  // namespace detail
TALLY_END_NAMESPACE
