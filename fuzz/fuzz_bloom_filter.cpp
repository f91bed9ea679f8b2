#include <tally/sketch/membership/bloom_filter.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using B = tally::BloomFilter<>;
    return tally::fuzz::deserialize_one<B>(data, size, [](const B& b) {
        (void)b.contains(std::uint64_t{7});
        (void)b.estimated_fpp();
        (void)b.estimate();
    });
}
