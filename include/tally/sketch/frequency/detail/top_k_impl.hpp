// tally/sketch/frequency/detail/top_k_impl.hpp: the bodies of TopK.
// Included at the end of the public header, whose declarations it needs.
#pragma once

#include "../../../detail/abi.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>
#include "../../../core/hash.hpp"
#include "../../../core/platform.hpp"
#include "../../../core/seed.hpp"
#include "../../../core/serialize.hpp"
#include "../../common/item_codec.hpp"
#include "../../common/detail/item_codec.hpp"
#include "../../../detail/primitives.hpp"
#include "../../../detail/throw.hpp"
#include "top_k_group.hpp"
#include "top_k_key.hpp"
#include "top_k_string.hpp"
#include "../top_k.hpp"

TALLY_BEGIN_NAMESPACE

// ---- TopK: member definitions -------------------------------------

template <class T>
inline void TopK<T>::clear() noexcept {
    slots_.clear();
    slots_.shrink_to_fit();
    tags_.clear();
    tags_.shrink_to_fit();
    if constexpr (is_string) {
        arena_.clear();
        arena_.shrink_to_fit();
        arena_live_ = 0;
    }
    lg_slots_ = 0;
    mask_ = 0;
    home_mask_ = 0;
    home_shift_ = 0;
    limit_ = 0;
    size_ = 0;
    total_ = 0;
    offset_ = 0;
}

template <class T>
inline auto TopK<T>::top(std::size_t n) const -> std::vector<Entry> {
    std::vector<std::size_t> order = canonical_order();
    if (order.size() > n) order.resize(n);
    std::vector<Entry> out;
    out.reserve(order.size());
    for (const std::size_t i : order)
        out.push_back(Entry{item_at(i), detail::sat_add(slots_[i].count, offset_), offset_});
    return out;
}

template <class T>
inline auto TopK<T>::merge(const TopK& other) -> TopK& {
    if (!mergeable_with(other))
        detail::throw_invalid_argument("tally::TopK::merge: counters " + std::to_string(counters()) +
                                       " does not match the other summary's counters " +
                                       std::to_string(other.counters()));
    struct Cand {
        const TopK* from;
        std::size_t slot;
        std::uint64_t hash;
        std::uint64_t count;
    };
    std::vector<Cand> cand;
    cand.reserve(size_ + other.size_);
    std::vector<std::uint32_t> of_slot(slots_.size());
    for (std::size_t i = 0; i < slots_.size(); ++i)
        if (slots_[i].count != 0) {
            of_slot[i] = static_cast<std::uint32_t>(cand.size());
            cand.push_back({this, i, hash_of_slot(slots_[i]), slots_[i].count});
        }
    for (std::size_t j = 0; j < other.slots_.size(); ++j) {
        if (other.slots_[j].count == 0) continue;
        std::uint64_t h;
        std::size_t i;
        if constexpr (is_string) {
            const StrKey key = other.key_at(j);
            h = hash_key(key);
            i = find_hashed(key, h);
        } else {
            h = slot_hash(other.slots_[j].item);
            i = find_hashed(other.slots_[j].item, h);
        }
        if (i != npos) {
            Cand& c = cand[of_slot[i]];
            c.count = detail::sat_add(c.count, other.slots_[j].count);
        } else {
            cand.push_back({&other, j, h, other.slots_[j].count});
        }
    }
    std::uint64_t m = 0;
    const std::size_t cap = counters();
    if (cand.size() > cap) {
        std::vector<std::uint64_t> counts(cand.size());
        for (std::size_t c = 0; c < cand.size(); ++c) counts[c] = cand[c].count;
        std::nth_element(counts.begin(), counts.begin() + static_cast<std::ptrdiff_t>(cap), counts.end(),
                         std::greater<>());
        m = counts[cap];  // the (cap+1)-th largest: at least cap+1 counts lose m each
    }
    std::size_t keep = 0;
    for (const Cand& c : cand) keep += c.count > m;
    TopK result(lg_max_, seed_, 0);
    result.k_ = std::min(k_, other.k_);
    result.total_ = detail::sat_add(total_, other.total_);
    result.offset_ = detail::sat_add(detail::sat_add(offset_, other.offset_), m);
    result.reserve_for(keep);
    if constexpr (is_string) {
        std::size_t bytes = 0;
        for (const Cand& c : cand)
            if (c.count > m) bytes += c.from->arena_len(c.from->slots_[c.slot]);
        if (bytes > std::numeric_limits<std::uint32_t>::max())
            detail::throw_invalid_argument("tally::TopK::merge: held items would exceed 4 GiB of string bytes");
        result.arena_.reserve(bytes);
        result.arena_live_ = 0;
    }
    for (const Cand& c : cand) {
        if (c.count <= m) continue;
        if constexpr (is_string) {
            result.place_new(c.from->key_at(c.slot), c.hash, c.count - m);
        } else {
            result.place_new(c.from->slots_[c.slot].item, c.hash, c.count - m);
        }
    }
    *this = std::move(result);
    return *this;
}

template <class T>
inline auto TopK<T>::serialize() const -> std::vector<std::byte> requires detail::WireItem<T> {
    ByteWriter out(52 + size_ * (Codec::min_wire_bytes + 8));
    out.header(Family::top_k, format_version);
    Codec::write_descriptor(out);
    out.u8(static_cast<std::uint8_t>(lg_max_));
    out.u8(0);
    out.u64(k_);
    out.u64(seed_.value);
    out.u64(total_);
    out.u64(offset_);
    out.u64(size_);
    for (const std::size_t i : canonical_order()) {
        if constexpr (is_string) {
            char buf[detail::top_k_inline_max];
            out.string(view_at(i, buf));
        } else {
            Codec::write(out, slots_[i].item);
        }
        out.u64(slots_[i].count);
    }
    return out.take();
}

template <class T>
inline auto TopK<T>::deserialize(std::span<const std::byte> bytes) -> TopK requires detail::WireItem<T> {
    ByteReader in(bytes);
    const std::uint8_t version = in.header(Family::top_k, format_version);
    const std::uint8_t kind = in.u8();
    const std::uint8_t size = in.u8();
    Codec::check_descriptor(kind, size, "tally::TopK");
    return version == 1 ? read_v1(in) : read_v2(in, version == 2 ? max_counters_v2 : max_counters);
}

TALLY_END_NAMESPACE
