#include <tally/sketch/sampling/reservoir.hpp>

#include <string>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // The first byte picks the item type so one corpus covers both encodings.
    if (size == 0) return 0;
    if (data[0] & 1) {
        using R = tally::Reservoir<std::string>;
        return tally::fuzz::deserialize_one<R>(data + 1, size - 1, [](const R& r) {
            R copy = r;
            copy.add(std::string("x"));
            (void)copy.sample();
        });
    }
    using R = tally::Reservoir<std::uint64_t>;
    return tally::fuzz::deserialize_one<R>(data + 1, size - 1, [](const R& r) {
        R copy = r;
        copy.add(std::uint64_t{1});
        (void)copy.sample();
    });
}
