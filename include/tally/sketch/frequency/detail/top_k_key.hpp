// tally/sketch/frequency/detail/top_k_key.hpp: the key types TopK's lookups accept and its
// item equality (every NaN one item) (sketch/top_k.hpp).
#pragma once

#include "../../../detail/abi.hpp"

#include <cmath>
#include <string>
#include <string_view>
#include <type_traits>

#include "../../../core/platform.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

template <class T>
inline constexpr bool top_k_is_string = std::is_same_v<T, std::string>;

// The key types TopK<T>'s lookups accept: T itself, and for std::string
// anything convertible to std::string_view (no string is built on a lookup).
template <class T, class K>
concept TopKKey = (!top_k_is_string<T> && std::is_convertible_v<const K&, const T&>) ||
                  (top_k_is_string<T> && std::is_convertible_v<const K&, std::string_view>);

// Every NaN is one item, as Hasher<float> hashes it.
template <class T>
TALLY_ALWAYS_INLINE bool top_k_equal(const T& a, const T& b) noexcept {
    if constexpr (std::is_floating_point_v<T>) {
        return a == b || (std::isnan(a) && std::isnan(b));
    } else {
        return a == b;
    }
}

}  // namespace detail
TALLY_END_NAMESPACE
