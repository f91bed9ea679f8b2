// tally/core/detail/byte_order.hpp: little_endian, the byte order of every frame
// (core/serialize.hpp).
#pragma once

#include "../../detail/abi.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

TALLY_BEGIN_NAMESPACE
namespace detail {

/// v in little-endian byte order (and back: the swap is its own inverse).
template <class U>
    requires std::is_unsigned_v<U>
constexpr U little_endian(U v) noexcept {
    if constexpr (std::endian::native == std::endian::big && sizeof(U) > 1) {
        U r = 0;
        for (std::size_t i = 0; i < sizeof(U); ++i) r = static_cast<U>((r << 8) | ((v >> (8 * i)) & 0xff));
        return r;
    } else {
        return v;
    }
}

/// The low `bytes` (1..8) bytes of v, little-endian, at out (any alignment):
/// the fixed-layout fields of foreign images written in place.
inline void store_le(std::byte* out, std::uint64_t v, std::size_t bytes = 8) noexcept {
    for (std::size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::byte>(v >> (8 * i));
}

/// A little-endian unsigned integer of `bytes` (1..8) bytes at in; the
/// caller has checked that they are there.
inline std::uint64_t load_le(const std::byte* in, std::size_t bytes) noexcept {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(std::to_integer<std::uint8_t>(in[i])) << (8 * i);
    return v;
}

}  // namespace detail
TALLY_END_NAMESPACE
