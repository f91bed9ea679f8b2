// tally/core/detail/byte_order.hpp: little_endian, the byte order of every frame
// (core/serialize.hpp).
#pragma once

#include "../../detail/abi.hpp"

#include <bit>
#include <cstddef>
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

}  // namespace detail
TALLY_END_NAMESPACE
