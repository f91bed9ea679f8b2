// sample_stream: keep a uniform sample of request latencies from four
// shards, merge the shards, and check that the merged sample estimates the
// stream's mean within its stated error; then a weighted sample of users by
// bytes sent.
//
// Exits non-zero if what it demonstrates is wrong.
#include <tally/sketch/sampling/reservoir.hpp>
#include <tally/sketch/sampling/weighted_reservoir.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

int main() {
    constexpr std::size_t k = 2000;
    constexpr std::uint64_t per_shard = 500'000;

    // Four shards, each with its own reservoir and seed (e.g. one per thread).
    // Latencies: shard s serves requests of (10 + 10 s) ms on average, so a
    // merge that gave each shard an equal share regardless of traffic, or
    // ignored a shard, would be visibly off.
    const std::uint64_t traffic[4] = {per_shard, per_shard / 2, per_shard * 2, per_shard / 10};
    std::vector<tally::Reservoir<double>> shards;
    double true_sum = 0;
    double true_sq = 0;
    std::uint64_t total = 0;
    std::uint64_t x = 12345;
    for (std::size_t s = 0; s < 4; ++s) {
        shards.emplace_back(k, /*seed=*/100 + s);
        std::vector<double> batch;
        batch.reserve(traffic[s]);
        for (std::uint64_t i = 0; i < traffic[s]; ++i) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            const double u = static_cast<double>(x >> 11) * 0x1.0p-53;
            const double latency = (10.0 + 10.0 * static_cast<double>(s)) * (0.5 + u);  // mean 10 + 10 s
            batch.push_back(latency);
            true_sum += latency;
            true_sq += latency * latency;
        }
        shards[s].add_range(batch);  // skips the items it will not keep without reading them
        total += traffic[s];
    }

    const tally::Reservoir<double> all = tally::merge_all(shards);
    const double true_mean = true_sum / static_cast<double>(total);
    const double true_sd = std::sqrt(true_sq / static_cast<double>(total) - true_mean * true_mean);
    double sample_sum = 0;
    for (double v : all.sample()) sample_sum += v;
    const double est = sample_sum / static_cast<double>(all.size());
    // Standard error of a mean of k draws without replacement from n.
    const double se = true_sd / std::sqrt(static_cast<double>(k)) *
                      std::sqrt(static_cast<double>(total - k) / static_cast<double>(total - 1));

    std::printf("stream: %llu requests on 4 shards, reservoir k = %zu per shard\n",
                static_cast<unsigned long long>(total), k);
    std::printf("merged sample: %zu items of %llu seen\n", all.size(), static_cast<unsigned long long>(all.total()));
    std::printf("mean latency: sample %.3f ms, true %.3f ms, standard error %.3f ms (%.2f se off)\n", est,
                true_mean, se, std::abs(est - true_mean) / se);
    std::printf("first sampled latencies:");
    for (std::size_t i = 0; i < 5; ++i) std::printf(" %.2f", all.sample()[i]);
    std::printf("\n");

    bool ok = all.size() == k && all.total() == total && std::abs(est - true_mean) < 5 * se;

    // Round trip through bytes, as a shard would ship its reservoir.
    const auto bytes = all.serialize();
    const auto back = tally::Reservoir<double>::deserialize(bytes);
    ok = ok && back.total() == all.total() && back.serialize() == bytes;
    std::printf("serialized: %zu bytes\n", bytes.size());

    // Weighted: pick 3 users, more likely the more bytes they sent.
    tally::WeightedReservoir<std::string> users(3, /*seed=*/7);
    const char* names[] = {"ada", "brian", "claude", "dennis", "edsger", "frances", "grace", "hedy"};
    const double sent[] = {10, 10, 10, 10, 10, 10, 5000, 4000};
    for (int round = 0; round < 100; ++round)
        for (std::size_t i = 0; i < 8; ++i) users.add(names[i] + std::to_string(round), sent[i]);
    std::printf("weighted sample of 3 users out of %llu by bytes sent:", static_cast<unsigned long long>(users.items_seen()));
    int heavy = 0;
    for (const auto& u : users.sample()) {
        std::printf(" %s", u.c_str());
        heavy += (u.rfind("grace", 0) == 0 || u.rfind("hedy", 0) == 0) ? 1 : 0;
    }
    std::printf("\n");
    // Heavy users hold 9000 of every 9060 bytes; three light picks would have
    // probability below 1e-6.
    ok = ok && users.size() == 3 && heavy >= 1;

    std::printf("%s\n", ok ? "OK" : "FAILED");
    return ok ? 0 : 1;
}
