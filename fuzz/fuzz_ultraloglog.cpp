#include <tally/sketch/distinct/ultraloglog.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    return tally::fuzz::deserialize_one<tally::UltraLogLog>(data, size, [](const tally::UltraLogLog& u) {
        (void)u.estimate();
        (void)u.estimate(tally::UllEstimator::fgra);
        (void)u.state_change_probability();
        // ML and a merged copy build the 2^p registers: only for small p, so
        // the work stays proportional to the input.
        if (u.precision() <= 16) {
            (void)u.estimate(tally::UllEstimator::ml);
            tally::UltraLogLog copy = u;
            copy.merge(u);
            copy.add_hash(0x9e3779b97f4a7c15ull);
            if (u.precision() >= 4) (void)u.reduce(u.precision() - 1);
        }
        // from_state accepts exactly the registers a valid frame holds.
        if (u.precision() <= 12) (void)tally::UltraLogLog::from_state(u.state());
    });
}
