#include <tally/sketch/frequency/top_k.hpp>

#include <string>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // The first byte picks the item type so one corpus covers both encodings.
    if (size == 0) return 0;
    if (data[0] & 1) {
        using T = tally::TopK<std::string>;
        return tally::fuzz::deserialize_one<T>(data + 1, size - 1, [](const T& t) {
            T copy = t;
            copy.add("x", 3);
            copy.merge(t);
            (void)copy.top();
        });
    }
    using T = tally::TopK<std::uint64_t>;
    return tally::fuzz::deserialize_one<T>(data + 1, size - 1, [](const T& t) {
        T copy = t;
        for (std::uint64_t i = 0; i < 40; ++i) copy.add(i, i + 1);
        copy.merge(t);
        (void)copy.top();
    });
}
