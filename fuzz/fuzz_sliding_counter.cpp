#include <tally/window/sliding_counter.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using Counter = tally::SlidingCounter<std::uint32_t, 8>;
    return tally::fuzz::deserialize_one<Counter>(data, size, [](const Counter& c) {
        Counter copy = c;
        (void)copy.estimate(123456789);
        (void)copy.allow(~0ull, 100);
        copy.add(0);
    });
}
