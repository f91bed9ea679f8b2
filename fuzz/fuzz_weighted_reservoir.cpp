#include <tally/sketch/sampling/weighted_reservoir.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using R = tally::WeightedReservoir<std::uint64_t>;
    return tally::fuzz::deserialize_one<R>(data, size, [](const R& r) {
        R copy = r;
        copy.add(std::uint64_t{1}, 2.0);
        (void)copy.sample();
    });
}
