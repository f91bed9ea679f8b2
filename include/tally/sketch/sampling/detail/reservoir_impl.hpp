// tally/sketch/sampling/detail/reservoir_impl.hpp: the bodies of Reservoir.
// Included at the end of the public header, whose declarations it needs.
#pragma once

#include "../../../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <numeric>
#include <ranges>
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
#include "../reservoir.hpp"

TALLY_BEGIN_NAMESPACE

// ---- Reservoir: member definitions -------------------------------------

template <class T>
template <std::ranges::input_range R>
requires std::convertible_to<std::ranges::range_reference_t<R>, T>
inline void Reservoir<T>::add_range(R&& items) {
    if constexpr (std::ranges::random_access_range<R> && std::ranges::sized_range<R>) {
        auto first = std::ranges::begin(items);
        const auto count = static_cast<std::uint64_t>(std::ranges::size(items));
        std::uint64_t pos = 0;
        while (pos < count && sample_.size() < k_) {
            offer(first[static_cast<std::ranges::range_difference_t<R>>(pos)]);
            ++pos;
        }
        if (pos == count) return;
        const std::uint64_t base = seen_ - pos;  // stream index of items[0]
        const std::uint64_t end = sat_add(base, count);
        if (w_ == 0.0 && seen_ < end) {
            // Dense phase with the generator in a local: stores into the
            // sample cannot alias it, so it stays in registers. Same
            // draws as replace(), hence the same result as add().
            detail::ReservoirRng rng = rng_;
            T* slots = sample_.data();
            const std::uint64_t stop = std::min(end, sparse_from());
            std::uint64_t i = seen_;
            for (; i < stop; ++i) {
                const std::uint64_t j = rng.below(i + 1);
                if (j < k_) slots[j] = first[static_cast<std::ranges::range_difference_t<R>>(i - base)];
            }
            rng_ = rng;
            seen_ = i;
            after(i);
        }
        while (next_ < end) {
            const std::uint64_t i = next_;
            seen_ = i + 1;
            replace(i, first[static_cast<std::ranges::range_difference_t<R>>(i - base)]);
        }
        seen_ = end;
    } else {
        for (auto&& item : items) offer(std::forward<decltype(item)>(item));
    }
}

template <class T>
inline auto Reservoir<T>::merge(const Reservoir& other) -> Reservoir& {
    // Into an empty one: the other's state is a valid state for the union
    // (which is its stream); W and the pending skip are memoryless, so any
    // generator may continue from them.
    if (detail::merge_without_sampling("tally::Reservoir::merge", *this, other, k_, other.k_, seen_ == 0,
                                       other.seen_ == 0, rng_))
        return *this;
    const std::uint64_t n1 = seen_;
    const std::uint64_t n2 = other.seen_;
    const std::uint64_t n = sat_add(n1, n2);
    detail::ReservoirRng rng = rng_;
    std::vector<T> result;
    std::uint64_t next = n;
    double w = 0.0;
    if (n < k_) {  // still filling: keep everything
        result.reserve(static_cast<std::size_t>(n));
        result.insert(result.end(), sample_.begin(), sample_.end());
        result.insert(result.end(), other.sample_.begin(), other.sample_.end());
    } else {
        const std::size_t m = static_cast<std::size_t>(k_);
        const std::size_t m1 = sample_.size();
        const std::size_t m2 = other.sample_.size();
        // Each side's sample is a uniform sample of its stream, so drawing
        // from the union without replacement can be simulated by picking
        // the side with probability (remaining on that side) / (remaining
        // in all), exactly with integer arithmetic, then a uniform unused
        // item of that side's sample. The count taken from this side is
        // hypergeometric, and it never exceeds m1 (it is <= min(k, n1)).
        std::vector<std::size_t> ia(m1);
        std::vector<std::size_t> ib(m2);
        std::iota(ia.begin(), ia.end(), std::size_t{0});
        std::iota(ib.begin(), ib.end(), std::size_t{0});
        std::size_t ja = 0;
        std::size_t jb = 0;
        std::uint64_t ra = n1;
        std::uint64_t rb = n2;
        result.reserve(m);
        for (std::size_t t = 0; t < m; ++t) {
            const std::uint64_t total = sat_add(ra, rb);
            if ((ja < m1 && rng.below(total) < ra) || jb == m2) {
                const std::size_t p = ja + static_cast<std::size_t>(rng.below(m1 - ja));
                std::swap(ia[ja], ia[p]);
                result.push_back(sample_[ia[ja]]);
                ++ja;
                --ra;
            } else {
                const std::size_t p = jb + static_cast<std::size_t>(rng.below(m2 - jb));
                std::swap(ib[jb], ib[p]);
                result.push_back(other.sample_[ib[jb]]);
                ++jb;
                --rb;
            }
        }
        // Dense: Algorithm R needs nothing but a uniform sample. Sparse:
        // W is drawn afresh from its law at n (see draw_w).
        if (n >= sparse_from()) {
            w = draw_w(rng, n);
            next = sat_add(n, skip(rng, w));
        }
    }
    sample_.swap(result);
    seen_ = n;
    next_ = next;
    w_ = w;
    rng_ = rng;
    return *this;
}

template <class T>
inline auto Reservoir<T>::serialize() const -> std::vector<std::byte> requires detail::ReservoirSerializable<T> {
    using Codec = detail::WireCodec<T>;
    ByteWriter w(82 + sample_.size() * Codec::min_wire_bytes);
    detail::write_sampler_head<T>(w, Family::reservoir, format_version, k_, seen_);
    w.u64(next_);
    w.f64(w_);
    rng_.write(w);
    w.u64(sample_.size());
    for (const T& item : sample_) Codec::write(w, item);
    return w.take();
}

template <class T>
inline auto Reservoir<T>::deserialize(std::span<const std::byte> bytes) -> Reservoir requires detail::ReservoirSerializable<T> {
    using Codec = detail::WireCodec<T>;
    ByteReader r(bytes);
    const auto [version, k, seen] =
        detail::read_sampler_head<T>(r, Family::reservoir, format_version, max_k, "tally::Reservoir::deserialize");
    const std::uint64_t next = r.u64();
    const double w = r.f64();
    if (seen < k * dense_factor) {
        format_check(next == seen, "reservoir not yet skipping but its next index is not its count");
        format_check(w == 0.0 && !std::signbit(w), "reservoir not yet skipping but W is not 0");
    } else {
        format_check(next >= seen, "reservoir next index lies before its count");
        format_check(w > 0.0 && w <= 1.0, "reservoir W is outside (0, 1]");
    }
    Reservoir out(static_cast<std::size_t>(k), 0);
    out.rng_ = detail::ReservoirRng::read(r);
    const std::size_t m = detail::read_sample_size(r, k, seen, Codec::min_wire_bytes, "reservoir item");
    out.sample_.reserve(m);
    for (std::size_t i = 0; i < m; ++i) out.sample_.push_back(Codec::read(r));
    r.expect_end();
    std::tie(out.seen_, out.next_, out.w_) = std::tuple(seen, next, w);
    return out;
}

TALLY_END_NAMESPACE
