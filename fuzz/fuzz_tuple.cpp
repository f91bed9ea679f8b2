// ArrayOfDoublesSketch: any bytes must decode as a tally frame or as a
// DataSketches compact ArrayOfDoubles image, or raise FormatError; a decoded
// sketch answers its queries, re-encodes byte-stably both ways, and combines
// with itself.
#include <tally/sketch/distinct/tuple.hpp>

#include <span>

#include "fuzz_common.hpp"

namespace {

void exercise(tally::ArrayOfDoublesSketch& s) {
    (void)s.estimate();
    (void)s.lower_bound(2);
    (void)s.upper_bound(3);
    (void)s.column_sum_estimates();
    (void)s.column_sum_upper_bound(0, 2);
    (void)s.column_mean(s.num_values() - 1);
    const auto image = s.to_datasketches();
    const auto back = tally::ArrayOfDoublesSketch::from_datasketches(image, s.lg_k());
    if (back.hashes() != s.hashes() || back.to_datasketches() != image) __builtin_trap();
    if (tally::tuple_intersection(s, s, tally::TupleSum{}).hashes() != s.hashes()) __builtin_trap();
    if (tally::tuple_a_not_b(s, s).num_retained() != 0) __builtin_trap();
    const auto u = tally::tuple_union(s, s);
    if (u.num_retained() > s.num_retained()) __builtin_trap();
    s.merge(u);
    const double v[1] = {1.0};
    s.add(std::uint64_t{42}, std::span<const double>(v));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    tally::fuzz::deserialize_one<tally::ArrayOfDoublesSketch>(data, size, exercise);
    try {
        auto s = tally::fuzz::bounded("from_datasketches", size, [&] {
            return tally::ArrayOfDoublesSketch::from_datasketches(
                std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size));
        });
        const auto again = tally::ArrayOfDoublesSketch::deserialize(s.serialize());
        if (again.serialize() != s.serialize()) __builtin_trap();
        exercise(s);
    } catch (const tally::FormatError&) {
    }
    return 0;
}
