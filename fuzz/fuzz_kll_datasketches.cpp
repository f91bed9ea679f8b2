// DataSketches KLL images (kll_sketch<double|float>): any bytes must decode or
// raise FormatError; a decoded sketch answers queries, re-exports to bytes
// that decode again, and its tally frame decodes to the same answers.
#include <tally/sketch/quantiles/kll.hpp>

#include <span>
#include <vector>

#include "fuzz_common.hpp"

namespace {

template <class T>
void one(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    try {
        const auto s = tally::fuzz::bounded("from_datasketches", size,
                                            [&] { return tally::KllSketch<T>::from_datasketches(bytes); });
        // re-exported bytes decode to the same bytes again (the export is
        // canonical: version 2 for the single-item form)
        const std::vector<std::byte> out = s.to_datasketches();
        if (tally::KllSketch<T>::from_datasketches(out).to_datasketches() != out) __builtin_trap();
        const auto back = tally::KllSketch<T>::deserialize(s.serialize());
        if (!s.empty()) {
            for (double r : {0.0, 0.25, 0.5, 0.99, 1.0})
                if (!(back.quantile(r) == s.quantile(r))) __builtin_trap();
            (void)s.rank(s.max_item(), false);
        }
        tally::KllSketch<T> copy = s;
        copy.add(static_cast<T>(1));
        copy.merge(s);
    } catch (const tally::FormatError&) {
    } catch (const std::invalid_argument&) {
        // merge: an item count past 2^64 - 1 is refused
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    one<double>(data, size);
    one<float>(data, size);
    return 0;
}
