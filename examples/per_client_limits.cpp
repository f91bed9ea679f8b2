// Per-client rate limits for many clients in a fixed block of memory.
//
// 50,000 well-behaved clients (2 requests/s each) share a table with one
// abusive client (1,000 requests/s). Each client is allowed 10 requests/s with
// a burst of 5 (GCRA). Simulated time, so the run is instant and exact.
// Exits non-zero if any well-behaved client is denied, if the abuser gets more
// than burst + rate * time, or if memory grows.
#include <tally/limit/gcra.hpp>
#include <tally/limit/keyed.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

int main() {
    const tally::Quota quota = tally::Quota::per_second(10).with_burst(5);
    const std::size_t clients = 50'000;
    tally::KeyedLimiter<std::uint64_t, tally::Gcra> per_client(quota, 80'000);
    const std::size_t memory_at_start = per_client.memory_bytes();

    const std::uint64_t abuser = 0xBAD;
    const std::uint64_t second = 1'000'000'000;
    const std::uint64_t duration = 3 * second;
    std::uint64_t abuser_allowed = 0, abuser_denied = 0, good_denied = 0, good_allowed = 0;
    std::uint64_t last_retry_after = 0;

    // Every millisecond: the abuser sends one request; a slice of the good
    // clients (each one every 500 ms) arrives as a batch.
    std::vector<std::uint64_t> batch;
    std::vector<tally::Decision> out;
    for (std::uint64_t now = second; now < second + duration; now += 1'000'000) {
        const auto d = per_client.try_acquire(abuser, now);
        if (d) {
            ++abuser_allowed;
        } else {
            ++abuser_denied;
            last_retry_after = d.retry_after_ns;
        }
        batch.clear();
        const std::uint64_t slot = (now / 1'000'000) % 500;
        for (std::uint64_t c = slot; c < clients; c += 500) batch.push_back(1'000'000 + c);
        out.resize(batch.size());
        per_client.try_acquire_batch(batch, now, out);
        for (const auto& r : out) (r ? good_allowed : good_denied)++;
    }

    const std::uint64_t abuser_bound = quota.capacity() + duration / (second / quota.limit) + 1;
    std::printf("table: %zu keys in %zu slots, %.1f bytes per slot, %zu bytes total\n", per_client.size(),
                per_client.capacity(), static_cast<double>(per_client.memory_bytes()) / per_client.capacity(),
                per_client.memory_bytes());
    std::printf("abuser: %llu allowed, %llu denied (bound %llu), last Retry-After %.1f ms\n",
                static_cast<unsigned long long>(abuser_allowed), static_cast<unsigned long long>(abuser_denied),
                static_cast<unsigned long long>(abuser_bound), static_cast<double>(last_retry_after) / 1e6);
    std::printf("good clients: %llu allowed, %llu denied\n", static_cast<unsigned long long>(good_allowed),
                static_cast<unsigned long long>(good_denied));

    // An hour later every client is idle; evict_idle reclaims them a slice at
    // a time (here in one sweep) and the memory stays what it was.
    const std::uint64_t later = second + duration + 3600 * second;
    const std::size_t held = per_client.size();  // <= clients + 1: fresh keys are also reused on insert
    std::size_t freed = 0;
    for (std::size_t i = 0; i * 1024 < per_client.group_count(); ++i) freed += per_client.evict_idle(later, 1024);
    std::printf("after an idle hour: evict_idle freed %zu keys, size %zu, memory %zu bytes\n", freed,
                per_client.size(), per_client.memory_bytes());

    // String keys (API tokens) with many threads: the sharded form.
    tally::ConcurrentKeyedLimiter<std::string, tally::Gcra> api(quota, 1 << 16);
    int api_allowed = 0;
    for (int i = 0; i < 20; ++i) api_allowed += api.try_acquire("tok_live_4eC39HqLyjWDarjtT1zdp7dc", later).allowed;
    std::printf("api token: %d of 20 instant requests allowed (burst %llu), %zu shards\n", api_allowed,
                static_cast<unsigned long long>(quota.capacity()), api.shard_count());

    bool ok = true;
    if (good_denied != 0) ok = false;
    if (abuser_allowed > abuser_bound || abuser_allowed < quota.limit * 3) ok = false;
    if (per_client.memory_bytes() != memory_at_start || per_client.evictions() != 0) ok = false;
    if (per_client.collisions() != 0 || api.collisions() != 0) ok = false;  // nobody refused a slot
    if (held > clients + 1 || freed != held || per_client.size() != 0) ok = false;
    if (api_allowed != static_cast<int>(quota.capacity())) ok = false;
    std::printf("%s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
