// ThetaSketch frame: any bytes must decode or raise FormatError; a decoded
// sketch answers its queries, re-encodes byte-stably, exports DataSketches
// images that read back to the same hashes, and combines with itself.
#include <tally/sketch/distinct/theta.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    return tally::fuzz::deserialize_one<tally::ThetaSketch>(data, size, [](tally::ThetaSketch& s) {
        (void)s.estimate();
        (void)s.lower_bound(2);
        (void)s.upper_bound(3);
        for (const bool compressed : {false, true}) {
            const auto back = tally::ThetaSketch::from_datasketches(s.to_datasketches(compressed), s.lg_k());
            if (back.hashes() != s.hashes() || back.estimate() != s.estimate()) __builtin_trap();
        }
        if (tally::theta_intersection(s, s).hashes() != s.hashes()) __builtin_trap();
        if (tally::theta_a_not_b(s, s).num_retained() != 0) __builtin_trap();
        const auto u = tally::theta_union(s, s);
        if (u.num_retained() > s.num_retained()) __builtin_trap();
        s.merge(u);
        s.add(std::uint64_t{42});
    });
}
