#include <tally/sketch/membership/bloom_filter.hpp>
#include <tally/sketch/frequency/count_min.hpp>
#include <tally/sketch/distinct/hyperloglog.hpp>
#include <tally/sketch/sampling/reservoir.hpp>
#include <tally/sketch/quantiles/tdigest.hpp>
#include <tally/sketch/frequency/top_k.hpp>
#include <tally/window/windowed.hpp>

#include <stdexcept>

#include "fuzz_common.hpp"

namespace {

// Views the window at a few times, adds late, current and future events
// through `add`, and views again: the aggregates must stay consistent.
template <class W, class Add>
int one(const std::uint8_t* data, std::size_t size, Add add) {
    return tally::fuzz::deserialize_one<W>(data, size, [&](const W& w) {
        // S::merge and S::add may refuse with std::invalid_argument (TDigest:
        // total weight overflow on hostile weights); that is documented.
        try {
            W copy = w;
            const std::uint64_t b = copy.bucket_ns();
            const std::uint64_t t = copy.newest_bucket() * b;
            (void)copy.view(t);
            add(copy, t > b ? t - b : 0);
            add(copy, t);
            (void)copy.view(t);
            W merged = copy;
            merged.merge(w);
            if (t <= ~std::uint64_t{0} - 3 * b) add(merged, t + 3 * b);
            (void)merged.view(t + b);
            (void)merged.serialize();
        } catch (const std::invalid_argument&) {
        }
    });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // The first byte picks the summary type, so one corpus covers all six.
    if (size == 0) return 0;
    const std::uint8_t* d = data + 1;
    const std::size_t n = size - 1;
    switch (data[0] % 6) {
        case 0: return one<tally::Windowed<tally::HyperLogLog, 4>>(d, n, [](auto& w, std::uint64_t t) { w.add(t, t); });
        case 1: return one<tally::Windowed<tally::CountMin<>, 4>>(d, n, [](auto& w, std::uint64_t t) { w.add(t, t, 2); });
        case 2: return one<tally::Windowed<tally::TDigest, 4>>(d, n, [](auto& w, std::uint64_t t) { w.add(t, 1.5); });
        case 3: return one<tally::Windowed<tally::TopK<std::uint64_t>, 4>>(d, n, [](auto& w, std::uint64_t t) { w.add(t, t % 7); });
        case 4: return one<tally::Windowed<tally::BloomFilter<>, 4>>(d, n, [](auto& w, std::uint64_t t) { w.add(t, t); });
        default: return one<tally::Windowed<tally::Reservoir<std::uint64_t>, 4>>(d, n, [](auto& w, std::uint64_t t) { w.add(t, t); });
    }
}
