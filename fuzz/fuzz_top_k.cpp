#include <tally/sketch/top_k.hpp>

#include <string>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // The first byte picks the item type so one corpus covers both encodings.
    if (size == 0) return 0;
    if (data[0] & 1) {
        using T = tally::TopK<std::string>;
        return tally::fuzz::deserialize_one<T>(data + 1, size - 1, [](const T& t) { (void)t.top(); });
    }
    using T = tally::TopK<std::uint64_t>;
    return tally::fuzz::deserialize_one<T>(data + 1, size - 1, [](const T& t) { (void)t.top(); });
}
