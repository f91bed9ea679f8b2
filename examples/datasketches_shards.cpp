// Per-shard distinct users, handed to a data warehouse as Apache DataSketches
// HllSketch bytes (HLL_8, the image Spark's hll_sketch_agg writes; pass
// tally::DataSketchesHll::hll_4 for Druid's default).
//
// Each shard counts its users in HllHashMode::datasketches, so its registers
// are exactly those DataSketches would build from the same user ids, and
// writes one .sk file. A warehouse then unions the files: in Spark 3.5+,
// load the bytes as a BINARY column and run
//     SELECT hll_sketch_estimate(hll_union_agg(sketch)) FROM shards
// in Druid, ingest them as an HLLSketchMerge column. Here we read the files
// back with tally and union them the same way.
#include <tally/sketch/distinct/hyperloglog.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

int main() {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("tally_datasketches_" + std::to_string(static_cast<unsigned long>(std::hash<std::string>{}(fs::current_path().string()))));
    fs::create_directories(dir);

    constexpr int shards = 4;
    constexpr std::uint64_t users_per_shard = 50000;
    for (int s = 0; s < shards; ++s) {
        tally::HyperLogLog hll(12, tally::HllHashMode::datasketches);
        // Shards overlap: shard s sees users [s * 25000, s * 25000 + 50000).
        for (std::uint64_t u = 0; u < users_per_shard; ++u) hll.add(static_cast<std::int64_t>(s * 25000 + u));
        const std::vector<std::byte> bytes = hll.to_datasketches(tally::DataSketchesHll::hll_8);
        std::ofstream(dir / ("shard" + std::to_string(s) + ".sk"), std::ios::binary)
            .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        std::printf("shard %d: ~%.0f distinct users, %zu bytes\n", s, hll.estimate(), bytes.size());
    }

    tally::HyperLogLog all(12, tally::HllHashMode::datasketches);
    for (int s = 0; s < shards; ++s) {
        std::ifstream in(dir / ("shard" + std::to_string(s) + ".sk"), std::ios::binary);
        const std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        all.merge(tally::HyperLogLog::from_datasketches(
            std::span<const std::byte>(reinterpret_cast<const std::byte*>(raw.data()), raw.size())));
    }
    fs::remove_all(dir);

    const double truth = 25000.0 * (shards - 1) + users_per_shard;  // 125000
    std::printf("union of %d shards: ~%.0f distinct users (exact %.0f)\n", shards, all.estimate(), truth);
    // 4 sigma of the merged estimator at p = 12.
    return std::fabs(all.estimate() / truth - 1) < 4 * 1.04 / 64 ? 0 : 1;
}
