// tally/sketch/distinct/detail/tuple_impl.hpp: the bodies of TupleSketch, ArrayOfDoublesSketch and their set operations.
// Included at the end of the public header, whose declarations it needs.
#pragma once

#include "../../../detail/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
#include "../../../core/platform.hpp"
#include "../../../core/serialize.hpp"
#include "../../../detail/primitives.hpp"
#include "../../../detail/throw.hpp"
#include "datasketches_hash.hpp"
#include "theta_table.hpp"
#include "tuple_datasketches.hpp"
#include "tuple_table.hpp"
#include "../theta.hpp"
#include "../tuple.hpp"

TALLY_BEGIN_NAMESPACE

// ---- implementation --------------------------------------------------------

namespace detail {

inline constexpr std::uint8_t tuple_kind_aod = 1;
inline constexpr std::uint8_t tuple_kind_summary = 2;

template <class S>
struct TupleTraits;
template <class Summary, class Policy>
struct TupleTraits<TupleSketch<Summary, Policy>> {
    using value_type = Summary;
};
template <>
struct TupleTraits<ArrayOfDoublesSketch> {
    using value_type = double;
};

struct TupleAccess {
    template <class S>
    static auto& table(S& s) noexcept {
        return s.t_;
    }
    template <class S>
    static const auto& table(const S& s) noexcept {
        return s.t_;
    }
    // A sketch like `proto` (its policy, num_values) holding table t.
    template <class S, class T>
    static S with_table(const S& proto, T&& t) {
        S s = like(proto, t.lg_k);
        s.t_ = std::forward<T>(t);
        return s;
    }
    template <class Summary, class Policy>
    static TupleSketch<Summary, Policy> like(const TupleSketch<Summary, Policy>& proto, int lg_k) {
        return TupleSketch<Summary, Policy>(lg_k, proto.policy_);
    }
    static ArrayOfDoublesSketch like(const ArrayOfDoublesSketch& proto, int lg_k) {
        return ArrayOfDoublesSketch(lg_k, proto.num_values());
    }
    // Union policy on rows.
    template <class Summary, class Policy>
    static auto union_rows(const TupleSketch<Summary, Policy>& s) {
        return [&p = s.policy_](Summary* d, const Summary* o) { p.merge(*d, *o); };
    }
    static auto union_rows(const ArrayOfDoublesSketch& s) {
        return [w = s.t_.width](double* d, const double* o) {
            for (std::size_t i = 0; i < w; ++i) d[i] += o[i];
        };
    }
};

// A combine policy on rows.
template <class Summary, class Policy, class Combine>
auto tuple_combine_rows(const TupleSketch<Summary, Policy>&, Combine& c) {
    return [&c](Summary* d, const Summary* o) { c(*d, *o); };
}
template <class Combine>
auto tuple_combine_rows(const ArrayOfDoublesSketch& s, Combine& c) {
    return [&c, w = static_cast<std::size_t>(s.num_values())](double* d, const double* o) {
        c(std::span<double>(d, w), std::span<const double>(o, w));
    };
}

template <class S>
void tuple_check_width(const S& a, const S& b, const char* who) {
    if constexpr (std::is_same_v<S, ArrayOfDoublesSketch>) {
        if (a.num_values() != b.num_values())
            throw_invalid_argument(std::string(who) + ": num_values " + std::to_string(b.num_values()) +
                                   " differs from the first sketch's " + std::to_string(a.num_values()));
    } else {
        (void)a;
        (void)b;
        (void)who;
    }
}

template <class S, class Get>
S tuple_union_of(std::size_t m, Get get, int lg_k) {
    if (m == 0) {
        if constexpr (std::is_same_v<S, ArrayOfDoublesSketch>)
            return ArrayOfDoublesSketch(lg_k == 0 ? ArrayOfDoublesSketch::default_lg_k : lg_k);
        else
            return S(lg_k == 0 ? S::default_lg_k : lg_k);
    }
    int max_lg = get(0).lg_k();
    for (std::size_t i = 1; i < m; ++i) {
        max_lg = std::max(max_lg, get(i).lg_k());
        tuple_check_width(get(0), get(i), "tally::tuple_union");
    }
    if (lg_k == 0) lg_k = max_lg;
    check_range("tally::tuple_union", "lg_k", lg_k, S::min_lg_k, S::max_lg_k);
    S r = TupleAccess::like(get(0), lg_k);
    auto& t = TupleAccess::table(r);
    const auto rows = TupleAccess::union_rows(get(0));
    std::size_t i = 0;
    if (get(0).lg_k() == lg_k) t = TupleAccess::table(get(i++));  // a copy costs less than a fold into nothing
    for (; i < m; ++i) t.fold(TupleAccess::table(get(i)), rows);
    if (t.count > t.k()) t.trim_to_k();
    return r;
}

template <class S, class Get, class Combine>
S tuple_intersection_of(std::size_t m, Get get, Combine& combine) {
    if (m == 0) throw_invalid_argument("tally::tuple_intersection: no sketches (need at least one)");
    using V = typename TupleTraits<S>::value_type;
    const S& first = get(0);
    std::uint64_t theta = theta_max;
    bool any_empty = false;
    std::size_t upper = TupleAccess::table(first).count;
    for (std::size_t i = 0; i < m; ++i) {
        tuple_check_width(first, get(i), "tally::tuple_intersection");
        any_empty |= get(i).empty();
        theta = std::min(theta, get(i).theta64());
        upper = std::min<std::size_t>(upper, get(i).num_retained());
    }
    const auto& ft = TupleAccess::table(first);
    const auto rows = tuple_combine_rows(first, combine);
    const std::size_t w = ft.width;
    std::vector<const V*> found(m);
    auto t = tuple_table_of<V>(first.lg_k(), ft.width, any_empty, theta, first.total(), upper, [&](auto put) {
        ft.each([&](std::uint64_t h, const V* r) {
            if (h >= theta) return;
            for (std::size_t i = 1; i < m; ++i) {
                const auto& ti = TupleAccess::table(get(i));
                const auto at = ti.find(h);
                if (at < 0) return;
                found[i] = ti.row(static_cast<std::size_t>(at));
            }
            V* d = put(h);
            std::copy(r, r + w, d);
            for (std::size_t i = 1; i < m; ++i) rows(d, found[i]);
        });
    });
    if (t.count == 0 && theta == theta_max) t = TupleTable<V>(first.lg_k(), ft.width);
    return TupleAccess::with_table(first, std::move(t));
}

// A's rows below theta (min of both) that keep(h) accepts.
template <class S, class Keep>
S tuple_filter_of(const S& a, std::uint64_t theta, std::size_t upper, Keep keep) {
    using V = typename TupleTraits<S>::value_type;
    const auto& at = TupleAccess::table(a);
    const std::size_t w = at.width;
    auto t = tuple_table_of<V>(a.lg_k(), at.width, a.empty(), theta, a.total(), upper, [&](auto put) {
        at.each([&](std::uint64_t h, const V* r) {
            if (h < theta && keep(h)) std::copy(r, r + w, put(h));
        });
    });
    if (t.count == 0 && theta == theta_max) t = TupleTable<V>(a.lg_k(), at.width);
    return TupleAccess::with_table(a, std::move(t));
}

}  // namespace detail

template <class S>
S tuple_union(std::span<const S> sketches, int lg_k) {
    return detail::tuple_union_of<S>(
        sketches.size(), [&](std::size_t i) -> const S& { return sketches[i]; }, lg_k);
}
template <class S>
S tuple_union(std::span<const S* const> sketches, int lg_k) {
    return detail::tuple_union_of<S>(
        sketches.size(), [&](std::size_t i) -> const S& { return *sketches[i]; }, lg_k);
}
template <class S>
S tuple_union(const S& a, const S& b) {
    const S* both[2] = {&a, &b};
    return tuple_union(std::span<const S* const>(both, 2), 0);
}

template <class S, class Combine>
S tuple_intersection(std::span<const S> sketches, Combine combine) {
    return detail::tuple_intersection_of<S>(
        sketches.size(), [&](std::size_t i) -> const S& { return sketches[i]; }, combine);
}
template <class S, class Combine>
S tuple_intersection(std::span<const S* const> sketches, Combine combine) {
    return detail::tuple_intersection_of<S>(
        sketches.size(), [&](std::size_t i) -> const S& { return *sketches[i]; }, combine);
}
template <class S, class Combine>
S tuple_intersection(const S& a, const S& b, Combine combine) {
    const S* both[2] = {&a, &b};
    return tuple_intersection(std::span<const S* const>(both, 2), combine);
}
template <class S>
S tuple_intersection(const S& a, const ThetaSketch& b) {
    const std::uint64_t theta = std::min(a.theta64(), b.theta64());
    if (a.empty() || b.empty()) {
        S r = detail::TupleAccess::like(a, a.lg_k());
        return r;
    }
    return detail::tuple_filter_of(a, theta, std::min<std::size_t>(a.num_retained(), b.num_retained()),
                                   [&](std::uint64_t h) { return b.contains_hash(h); });
}

template <class S>
S tuple_a_not_b(const S& a, const S& b) {
    detail::tuple_check_width(a, b, "tally::tuple_a_not_b");
    if (a.empty() || b.empty()) return a;
    return detail::tuple_filter_of(a, std::min(a.theta64(), b.theta64()), a.num_retained(),
                                   [&](std::uint64_t h) { return !b.contains_hash(h); });
}
template <class S>
S tuple_a_not_b(const S& a, const ThetaSketch& b) {
    if (a.empty() || b.empty()) return a;
    return detail::tuple_filter_of(a, std::min(a.theta64(), b.theta64()), a.num_retained(),
                                   [&](std::uint64_t h) { return !b.contains_hash(h); });
}

// ---- ArrayOfDoublesSketch --------------------------------------------------

inline ArrayOfDoublesSketch& ArrayOfDoublesSketch::merge(const ArrayOfDoublesSketch& other) {
    if (!mergeable_with(other))
        detail::throw_invalid_argument("tally::ArrayOfDoublesSketch::merge: lg_k " + std::to_string(other.lg_k()) +
                                       " and num_values " + std::to_string(other.num_values()) +
                                       " differ from this sketch's " + std::to_string(lg_k()) + " and " +
                                       std::to_string(num_values()) + " (tuple_union takes any lg_k)");
    if (other.empty()) return *this;
    if (&other == this) {
        const ArrayOfDoublesSketch copy = other;
        return merge(copy);
    }
    if (empty()) {
        *this = other;
        return *this;
    }
    t_.fold(other.t_, detail::TupleAccess::union_rows(*this));
    return *this;
}

namespace detail {

// Frame bytes shared by both classes: width bytes per row, written by put_row.
template <class V, class PutRow>
std::vector<std::byte> tuple_frame_encode(const TupleTable<V>& t, std::uint8_t kind, std::size_t width_byte,
                                          std::size_t row_bytes, PutRow put_row) {
    const std::vector<std::uint32_t> order = t.sorted_slots();
    ByteWriter w(8 + 28 + order.size() * (9 + row_bytes));
    w.header(Family::tuple, TupleBase<V>::format_version);
    w.u8(t.lg_k);
    w.u8(t.empty() ? 0 : 1);
    w.u8(kind);
    w.u8(static_cast<std::uint8_t>(width_byte));
    w.u64(t.theta);
    w.varint(t.total);
    w.u32(static_cast<std::uint32_t>(order.size()));
    std::uint64_t prev = 0;
    for (const std::uint32_t i : order) {
        w.varint(t.slots[i] - prev);
        prev = t.slots[i];
    }
    for (const std::uint32_t i : order) put_row(w, t.row(i));
    return w.take();
}

// Reads the frame into a table; get_row(reader, row) reads one row.
template <class V, class GetRow>
TupleTable<V> tuple_frame_decode(std::span<const std::byte> bytes, std::uint8_t kind, std::size_t width_byte,
                                 std::uint32_t width, std::size_t row_bytes, const char* who, GetRow get_row) {
    ByteReader r(bytes);
    r.header(Family::tuple, TupleBase<V>::format_version);
    const int lg_k = r.u8();
    format_check(lg_k >= theta_min_lg_k && lg_k <= theta_max_lg_k, "TupleSketch: lg_k is out of range [5, 26]");
    const std::uint8_t flags = r.u8();
    format_check(flags <= 1, "TupleSketch: unknown flag bits");
    const std::uint8_t got_kind = r.u8();
    if (got_kind != kind) throw_format_error(std::string(who) + ": the frame is of another tuple sketch kind");
    const std::uint8_t got_width = r.u8();
    if (width_byte != 0 && got_width != width_byte)
        throw_format_error(std::string(who) + ": the frame's summary width " + std::to_string(got_width) +
                           " is not this type's " + std::to_string(width_byte));
    if (width_byte == 0) {
        format_check(got_width >= 1, "ArrayOfDoublesSketch: num_values 0 is out of range [1, 255]");
        width = got_width;
        row_bytes = 8 * std::size_t{got_width};
    }
    const std::uint64_t theta = r.u64();
    format_check(theta >= 1 && theta <= theta_max, "TupleSketch: theta is out of range [1, 2^63 - 1]");
    const std::uint64_t total = r.varint();
    const std::uint64_t count = r.count(r.u32(), 1 + row_bytes, theta_capacity(lg_k + 1, lg_k), "TupleSketch hash");
    if (flags == 0)
        format_check(total == 0 && theta == theta_max && count == 0,
                     "TupleSketch: an empty sketch has total 0, theta 1 and no hashes");
    std::vector<std::uint64_t> h(static_cast<std::size_t>(count));
    std::uint64_t prev = 0;
    for (auto& v : h) {
        const std::uint64_t d = r.varint();
        format_check(d > 0 && d < theta - prev, "TupleSketch: hashes are not ascending below theta");
        prev += d;
        v = prev;
    }
    std::size_t j = 0;
    TupleTable<V> t = tuple_table_of<V>(lg_k, width, flags == 0, theta, total, h.size(), [&](auto put) {
        for (; j < h.size(); ++j) get_row(r, put(h[j]), width);
    });
    r.expect_end();
    return t;
}

}  // namespace detail

inline std::vector<std::byte> ArrayOfDoublesSketch::serialize() const {
    const std::size_t w = t_.width;
    return detail::tuple_frame_encode(t_, detail::tuple_kind_aod, w, 8 * w, [w](ByteWriter& out, const double* r) {
        for (std::size_t i = 0; i < w; ++i) out.f64(r[i]);
    });
}

inline ArrayOfDoublesSketch ArrayOfDoublesSketch::deserialize(std::span<const std::byte> bytes) {
    auto t = detail::tuple_frame_decode<double>(bytes, detail::tuple_kind_aod, 0, 1, 8, "tally::ArrayOfDoublesSketch",
                                                [](ByteReader& in, double* r, std::uint32_t w) {
                                                    for (std::uint32_t i = 0; i < w; ++i) r[i] = in.f64();
                                                });
    ArrayOfDoublesSketch s(t.lg_k, static_cast<int>(t.width));
    s.t_ = std::move(t);
    return s;
}

inline std::vector<std::byte> ArrayOfDoublesSketch::to_datasketches() const {
    const std::vector<std::uint32_t> order = t_.sorted_slots();
    std::vector<std::uint64_t> h;
    std::vector<double> v;
    h.reserve(order.size());
    v.reserve(order.size() * t_.width);
    for (const std::uint32_t i : order) {
        h.push_back(t_.slots[i]);
        v.insert(v.end(), t_.row(i), t_.row(i) + t_.width);
    }
    return detail::ds_aod_encode(empty(), empty() ? max_theta : t_.theta, static_cast<std::uint8_t>(t_.width), h, v);
}

inline ArrayOfDoublesSketch ArrayOfDoublesSketch::from_datasketches(std::span<const std::byte> bytes, int lg_k) {
    detail::check_range("tally::ArrayOfDoublesSketch::from_datasketches", "lg_k", lg_k, min_lg_k, max_lg_k);
    detail::DsAodImage img = detail::ds_aod_decode(bytes, detail::theta_capacity(max_lg_k + 1, max_lg_k));
    while (lg_k < max_lg_k && img.hashes.size() > detail::theta_capacity(lg_k + 1, lg_k)) ++lg_k;
    const std::size_t w = img.num_values;
    auto t = detail::tuple_table_of<double>(lg_k, img.num_values, img.empty, img.theta, 0, img.hashes.size(),
                                            [&](auto put) {
                                                for (std::size_t i = 0; i < img.hashes.size(); ++i)
                                                    std::copy_n(img.values.data() + i * w, w, put(img.hashes[i]));
                                            });
    ArrayOfDoublesSketch s(lg_k, img.num_values);
    s.t_ = std::move(t);
    return s;
}

// ---- TupleSketch bytes -----------------------------------------------------

template <class Summary, class Policy>
std::vector<std::byte> TupleSketch<Summary, Policy>::serialize() const
    requires std::is_trivially_copyable_v<Summary>
{
    static_assert(sizeof(Summary) <= 255, "tally::TupleSketch::serialize: Summary larger than 255 bytes");
    return detail::tuple_frame_encode(this->t_, detail::tuple_kind_summary, sizeof(Summary), sizeof(Summary),
                                      [](ByteWriter& out, const Summary* s) {
                                          std::byte b[sizeof(Summary)];
                                          std::memcpy(b, s, sizeof(Summary));
                                          for (const std::byte x : b) out.u8(std::to_integer<std::uint8_t>(x));
                                      });
}

template <class Summary, class Policy>
TupleSketch<Summary, Policy> TupleSketch<Summary, Policy>::deserialize(std::span<const std::byte> bytes)
    requires std::is_trivially_copyable_v<Summary>
{
    auto t = detail::tuple_frame_decode<Summary>(bytes, detail::tuple_kind_summary, sizeof(Summary), 1,
                                                 sizeof(Summary), "tally::TupleSketch",
                                                 [](ByteReader& in, Summary* s, std::uint32_t) {
                                                     in.bytes_into(s, sizeof(Summary));
                                                 });
    TupleSketch s(t.lg_k);
    s.t_ = std::move(t);
    return s;
}

TALLY_END_NAMESPACE
