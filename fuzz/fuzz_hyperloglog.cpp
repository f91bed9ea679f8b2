#include <tally/sketch/distinct/hyperloglog.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    return tally::fuzz::deserialize_one<tally::HyperLogLog>(data, size, [](const tally::HyperLogLog& h) {
        (void)h.estimate();
        tally::HyperLogLog copy = h;
        copy.merge(h);
    });
}
