#include <tally/sketch/frequency/count_min.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using CM = tally::CountMin<std::uint32_t>;
    return tally::fuzz::deserialize_one<CM>(data, size, [](const CM& c) {
        (void)c.estimate(42);
        (void)c.total();
    });
}
