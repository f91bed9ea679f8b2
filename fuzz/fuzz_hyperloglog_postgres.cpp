// PostgreSQL hll import: any bytes must decode (EMPTY, EXPLICIT, SPARSE or
// FULL) or raise FormatError; a decoded sketch answers, re-encodes, and
// decodes again to the same registers.
#include <tally/sketch/distinct/hyperloglog.hpp>

#include <span>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
    try {
        const auto h = tally::fuzz::bounded("from_postgres", size, [&] { return tally::HyperLogLog::from_postgres(in); });
        for (const std::uint8_t r : h.registers())
            if (static_cast<int>(r) > h.max_rank()) __builtin_trap();
        (void)h.estimate();
        const auto again = h.to_postgres();
        const auto back = tally::HyperLogLog::from_postgres(again);
        if (!(back == h) || back.to_postgres() != again) __builtin_trap();
        if (!(tally::HyperLogLog::deserialize(h.serialize()) == h)) __builtin_trap();
    } catch (const tally::FormatError&) {
    }
    return 0;
}
