#include <tally/sketch/quantiles/tdigest.hpp>

#include <stdexcept>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    return tally::fuzz::deserialize_one<tally::TDigest>(data, size, [](const tally::TDigest& t) {
        if (t.total() > 0) {
            (void)t.quantile(0.5);
            (void)t.quantile(0.999);
            (void)t.cdf(0.0);
        }
        tally::TDigest copy = t;
        // The first add allocates the buffer (10 * compression entries, up to
        // 3 MB), legitimately but not in proportion to the input: only small
        // compressions take it here, so the allocation bound stays the input's.
        if (t.compression() <= 200) (void)copy.try_add(1.0);
        try {
            copy.merge(t);
        } catch (const std::invalid_argument&) {
            // documented: a merged total weight that would overflow is refused
        }
    });
}
