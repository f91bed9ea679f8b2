// tally/redis/cluster.hpp: Redis Cluster key routing, client-agnostic.
#pragma once

#include "../detail/abi.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

TALLY_BEGIN_NAMESPACE
namespace redis {

/// Number of hash slots of a Redis Cluster.
inline constexpr std::uint32_t cluster_slots = 16384;

namespace detail {

// CRC-16/XMODEM (CCITT polynomial 0x1021, initial value 0, no reflection),
// the checksum the Redis Cluster specification assigns keys with; table
// built at compile time.
inline constexpr std::array<std::uint16_t, 256> crc16_table = [] {
    std::array<std::uint16_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i << 8;
        for (int b = 0; b < 8; ++b) c = (c & 0x8000) != 0 ? (c << 1) ^ 0x1021 : c << 1;
        t[i] = static_cast<std::uint16_t>(c);
    }
    return t;
}();

}  // namespace detail

/// CRC-16/XMODEM of `bytes` ("123456789" gives 0x31C3).
[[nodiscard]] constexpr std::uint16_t crc16(std::string_view bytes) noexcept {
    std::uint16_t crc = 0;
    for (const char ch : bytes)
        crc = static_cast<std::uint16_t>((crc << 8) ^
                                         detail::crc16_table[((crc >> 8) ^ static_cast<unsigned char>(ch)) & 0xff]);
    return crc;
}

/// The part of a key that Redis Cluster hashes: the bytes between the first
/// '{' and the first '}' after it when that is non-empty (a hash tag: keys
/// "{tenant:7}:user:42" and "{tenant:7}:global" share a slot), else the key.
[[nodiscard]] constexpr std::string_view hash_tag(std::string_view key) noexcept {
    const auto open = key.find('{');
    if (open == std::string_view::npos) return key;
    const auto close = key.find('}', open + 1);
    if (close == std::string_view::npos || close == open + 1) return key;
    return key.substr(open + 1, close - open - 1);
}

/// The hash slot of a (full, prefixed) key: crc16(hash_tag(key)) mod 16384.
[[nodiscard]] constexpr std::uint32_t cluster_slot(std::string_view key) noexcept {
    return crc16(hash_tag(key)) & (cluster_slots - 1);
}

}  // namespace redis
TALLY_END_NAMESPACE
