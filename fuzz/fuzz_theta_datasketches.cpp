// DataSketches theta images (compact, serial versions 1-4, and Java's update
// sketch image, family 2): any bytes must decode or raise FormatError; a
// decoded sketch exports both compact versions and reads them back to the
// same hashes, theta and estimate.
#include <tally/sketch/distinct/theta.hpp>

#include <span>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const auto s = tally::fuzz::bounded("from_datasketches", size, [&] {
            return tally::ThetaSketch::from_datasketches(
                std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size));
        });
        (void)s.lower_bound(1);
        (void)s.upper_bound(2);
        for (const bool compressed : {false, true}) {
            const auto back = tally::ThetaSketch::from_datasketches(s.to_datasketches(compressed), s.lg_k());
            if (back.hashes() != s.hashes() || back.theta64() != s.theta64() || back.empty() != s.empty())
                __builtin_trap();
        }
        const auto again = tally::ThetaSketch::deserialize(s.serialize());
        if (again.serialize() != s.serialize()) __builtin_trap();
    } catch (const tally::FormatError&) {
    }
    return 0;
}
