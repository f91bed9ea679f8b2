// tally/sketch/sampling/detail/weighted_reservoir_impl.hpp: the bodies of WeightedReservoir.
// Included at the end of the public header, whose declarations it needs.
#pragma once

#include "../../../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>
#include "../../../core/platform.hpp"
#include "../../../core/serialize.hpp"
#include "../../../core/summary.hpp"
#include "reservoir_random.hpp"
#include "../../../detail/primitives.hpp"
#include "../../../detail/throw.hpp"
#include "../weighted_reservoir.hpp"

TALLY_BEGIN_NAMESPACE

// ---- WeightedReservoir: member definitions -------------------------------------

template <class T>
inline auto WeightedReservoir<T>::merge(const WeightedReservoir& other) -> WeightedReservoir& {
    if (detail::merge_without_sampling("tally::WeightedReservoir::merge", *this, other, k_, other.k_, seen_ == 0,
                                       other.seen_ == 0, rng_))
        return *this;
    const std::size_t n1 = keys_.size();
    const std::size_t n2 = other.keys_.size();
    std::vector<std::size_t> order(n1 + n2);
    std::iota(order.begin(), order.end(), std::size_t{0});
    auto key_of = [&](std::size_t i) { return i < n1 ? keys_[i] : other.keys_[i - n1]; };
    const std::size_t m = static_cast<std::size_t>(std::min<std::uint64_t>(k_, n1 + n2));
    // Largest keys first; ties keep this side first, so the result is deterministic.
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return key_of(a) > key_of(b); });
    std::vector<double> keys;
    std::vector<T> items;
    keys.reserve(m);
    items.reserve(m);
    for (std::size_t j = 0; j < m; ++j) {
        const std::size_t i = order[j];
        keys.push_back(key_of(i));
        items.push_back(i < n1 ? items_[i] : other.items_[i - n1]);
    }
    make_heap(keys, items);
    detail::ReservoirRng rng = rng_;
    const double jump = m == k_ ? draw_jump(rng, keys[0]) : 0.0;
    keys_.swap(keys);
    items_.swap(items);
    seen_ = sat_add(seen_, other.seen_);
    total_weight_ += other.total_weight_;
    jump_ = jump;
    rng_ = rng;
    return *this;
}

template <class T>
inline auto WeightedReservoir<T>::serialize() const -> std::vector<std::byte> requires detail::ReservoirSerializable<T> {
    using Codec = detail::WireCodec<T>;
    ByteWriter w(82 + items_.size() * (8 + Codec::min_wire_bytes));
    detail::write_sampler_head<T>(w, Family::weighted_reservoir, format_version, k_, seen_);
    w.f64(total_weight_);
    w.f64(jump_);
    rng_.write(w);
    w.u64(items_.size());
    for (std::size_t i = 0; i < items_.size(); ++i) {
        w.f64(keys_[i]);
        Codec::write(w, items_[i]);
    }
    return w.take();
}

template <class T>
inline auto WeightedReservoir<T>::deserialize(std::span<const std::byte> bytes) -> WeightedReservoir requires detail::ReservoirSerializable<T> {
    using Codec = detail::WireCodec<T>;
    ByteReader r(bytes);
    const auto [version, k, seen] = detail::read_sampler_head<T>(r, Family::weighted_reservoir, format_version, max_k,
                                                                 "tally::WeightedReservoir::deserialize");
    const double total = r.f64();
    format_check(total >= 0.0, "weighted reservoir total weight is negative or NaN");
    const double jump = r.f64();
    if (seen < k) {
        format_check(jump == 0.0 && !std::signbit(jump), "weighted reservoir still filling but its jump is not 0");
    } else {
        format_check(jump >= 0.0, "weighted reservoir jump is negative or NaN");
    }
    WeightedReservoir out(static_cast<std::size_t>(k), 0);
    out.rng_ = detail::ReservoirRng::read(r);
    const std::size_t m = detail::read_sample_size(r, k, seen, 8 + Codec::min_wire_bytes, "weighted reservoir entry");
    out.keys_.reserve(m);
    out.items_.reserve(m);
    for (std::size_t i = 0; i < m; ++i) {
        double key = r.f64();
        if (version == 1) {
            format_check(key <= 0.0, "weighted reservoir key is positive or NaN");
            key = -std::log(-key);  // log(u) / w  ->  log(w) - log(-log u); 0 -> +inf
        }
        format_check(!std::isnan(key), "weighted reservoir key is NaN");
        if (i > 0) format_check(out.keys_[(i - 1) / 2] <= key, "weighted reservoir keys are not in heap order");
        out.keys_.push_back(key);
        out.items_.push_back(Codec::read(r));
    }
    r.expect_end();
    std::tie(out.seen_, out.total_weight_, out.jump_) = std::tuple(seen, total, jump);
    return out;
}

TALLY_END_NAMESPACE
