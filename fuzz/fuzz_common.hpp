// Shared body of the deserializer fuzz targets. For any input bytes,
// S::deserialize must either throw tally::FormatError or return a summary
// that answers queries, re-serializes, and decodes again to the same bytes.
// Any other exception, a crash, a leak or UB (ASan/UBSan) is a finding.
#pragma once

#include <tally/core/serialize.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tally::fuzz {

template <class S, class Query>
int deserialize_one(const std::uint8_t* data, std::size_t size, Query&& query) {
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    try {
        S s = S::deserialize(bytes);
        query(s);
        const std::vector<std::byte> again = s.serialize();
        const S back = S::deserialize(std::span<const std::byte>(again));
        if (back.serialize() != again) __builtin_trap();  // round trip must be byte-stable
    } catch (const tally::FormatError&) {
    }
    return 0;
}

}  // namespace tally::fuzz
