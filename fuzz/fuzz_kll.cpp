// KllSketch<double> and <float> tally frames: any bytes must decode or raise
// FormatError; a decoded sketch answers queries, takes adds and merges, and
// round-trips byte for byte.
#include <tally/sketch/quantiles/kll.hpp>

#include <stdexcept>

#include "fuzz_common.hpp"

namespace {

template <class T>
void query(const tally::KllSketch<T>& s) {
    if (!s.empty()) {
        (void)s.quantile(0.5);
        (void)s.quantile(1.0, false);
        (void)s.rank(s.min_item());
        const T splits[] = {s.min_item()};
        (void)s.pmf(splits);
        if (!(s.min_item() <= s.quantile(0.5) && s.quantile(0.5) <= s.max_item())) __builtin_trap();
    }
    tally::KllSketch<T> copy = s;
    for (int i = 0; i < 64; ++i) copy.add(static_cast<T>(i));
    try {
        copy.merge(s);
    } catch (const std::invalid_argument&) {
        // documented: an item count past 2^64 - 1 is refused
    }
    if (copy.total() < s.total()) __builtin_trap();
    (void)copy.to_datasketches();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    tally::fuzz::deserialize_one<tally::KllSketch<double>>(data, size, [](const auto& s) { query(s); });
    tally::fuzz::deserialize_one<tally::KllSketch<float>>(data, size, [](const auto& s) { query(s); });
    return 0;
}
