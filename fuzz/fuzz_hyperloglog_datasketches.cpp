// DataSketches HllSketch import: any bytes must decode or raise FormatError,
// and a decoded sketch must export (every target type) and decode back to the
// same registers and estimator (or, sparse into HLL mode, the same estimate).
#include <tally/sketch/distinct/hyperloglog.hpp>

#include <span>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const auto h = tally::fuzz::bounded("from_datasketches", size, [&] {
            return tally::HyperLogLog::from_datasketches(
                std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size));
        });
        (void)h.estimate();
        (void)h.ertl_estimate();
        for (auto t : {tally::DataSketchesHll::hll_4, tally::DataSketchesHll::hll_6, tally::DataSketchesHll::hll_8}) {
            const auto back = tally::HyperLogLog::from_datasketches(h.to_datasketches(t));
            if (!(back == h)) __builtin_trap();
            // A sparse sketch that DataSketches would hold in HLL mode comes back
            // dense, its estimate carried as the HIP state.
            if (back.sparse() == h.sparse() ? back.estimator() != h.estimator() : back.estimate() != h.estimate())
                __builtin_trap();
        }
        const auto again = tally::HyperLogLog::deserialize(h.serialize());
        if (!(again == h)) __builtin_trap();
    } catch (const tally::FormatError&) {
    }
    return 0;
}
