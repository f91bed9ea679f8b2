// Redis HLL import: any string must parse (dense or sparse) or raise FormatError.
#include <tally/sketch/distinct/hyperloglog.hpp>

#include <string_view>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const auto h = tally::fuzz::bounded("from_redis", size, [&] {
            return tally::HyperLogLog::from_redis(std::string_view(reinterpret_cast<const char*>(data), size));
        });
        (void)h.estimate();
        const auto again = h.to_redis();
        const auto back = tally::HyperLogLog::from_redis(again);
        if (back.serialize() != h.serialize()) __builtin_trap();
    } catch (const tally::FormatError&) {
    }
    return 0;
}
