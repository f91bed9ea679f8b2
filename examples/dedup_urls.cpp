// Deduplicating a crawl frontier with tally::BloomFilter.
//
// A crawler sees the same URLs again and again and must fetch each one once.
// An exact set grows with every distinct URL; a Bloom filter sized for the
// expected number of distinct URLs takes ~10 bits each at 1% and never lets a
// duplicate through (no false negatives). The price is the other direction: a
// few new URLs are wrongly taken for seen and skipped, at most the requested
// rate. Run past its design count, the filter says so (over_capacity()).
//
// Exits non-zero if a duplicate got through, if more than 1% of new URLs were
// skipped, if the fill-based count is off by more than 3%, or if the
// over-capacity signal is wrong.
#include <tally/sketch/membership/bloom_filter.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_set>

namespace {

// A synthetic stream: URL number d rendered as a plausible address.
std::string url(std::uint64_t d) {
    return "https://site" + std::to_string(d % 97) + ".example.com/articles/" + std::to_string(d) +
           "?ref=" + std::to_string((d * 7919) % 1000);
}

struct Stream {
    std::uint64_t state = 0x2545f4914f6cdd1dull;
    std::uint64_t next() {  // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        return state * 0x2545f4914f6cdd1dull;
    }
};

}  // namespace

int main() {
    constexpr std::size_t distinct_expected = 50'000;
    constexpr double fpp = 0.01;
    // URLs come from pages anyone can write: a real crawler passes
    // tally::Seed::random() as a third argument, so that no one can craft URLs
    // that collide in the filter. The example keeps the default seed to print
    // the same numbers on every run.
    tally::BloomFilter<> seen(distinct_expected, fpp);
    std::unordered_set<std::string> exact;  // the oracle, to grade the filter

    // 200K visits over 50K distinct URLs: each visit is a fresh URL with
    // probability 1/4, else a repeat of an earlier one.
    Stream rng;
    std::uint64_t next_new = 0, fetched = 0, skipped_new = 0, duplicates_fetched = 0;
    for (int visit = 0; visit < 200'000; ++visit) {
        const bool fresh = next_new == 0 || rng.next() % 4 == 0;
        const std::uint64_t d = fresh && next_new < distinct_expected ? next_new++ : rng.next() % next_new;
        const std::string u = url(d);
        const bool is_new = exact.insert(u).second;
        if (!seen.contains(u)) {
            seen.add(u);
            ++fetched;
            if (!is_new) ++duplicates_fetched;  // would be a false negative
        } else if (is_new) {
            ++skipped_new;  // a false positive: a new URL taken for seen
        }
    }

    const double skipped_rate = static_cast<double>(skipped_new) / static_cast<double>(exact.size());
    const double count = seen.estimate();
    const double count_err = std::fabs(count / static_cast<double>(fetched) - 1.0);  // keys actually added
    std::printf("visits 200000, distinct URLs %zu, fetched %llu\n", exact.size(),
                static_cast<unsigned long long>(fetched));
    std::printf("duplicates fetched twice: %llu (must be 0)\n", static_cast<unsigned long long>(duplicates_fetched));
    std::printf("new URLs skipped as seen: %llu = %.3f%% (bound %.1f%%)\n",
                static_cast<unsigned long long>(skipped_new), 100 * skipped_rate, 100 * fpp);
    std::printf("filter: %zu bytes = %.2f bits/URL, k = %u; an unordered_set of these strings needs > %zu bytes\n",
                seen.bit_bytes(), seen.bits_per_item(), seen.hash_count(), exact.size() * (32 + 60));
    std::printf("fill: estimate %.0f (error %.2f%%), estimated_fpp %.4f%%, over_capacity %s\n", count,
                100 * count_err, 100 * seen.estimated_fpp(), seen.over_capacity() ? "yes" : "no");
    const bool full_ok = !seen.over_capacity() || seen.estimated_fpp() > fpp;

    // The crawl keeps going past the design count: 30K more new URLs.
    for (std::uint64_t d = distinct_expected; d < distinct_expected + 30'000; ++d) seen.add(url(d));
    std::printf("after 30000 more new URLs: estimate %.0f, estimated_fpp %.3f%%, over_capacity %s\n",
                seen.estimate(), 100 * seen.estimated_fpp(), seen.over_capacity() ? "yes" : "no");

    bool ok = true;
    if (duplicates_fetched != 0) ok = false, std::printf("FAIL: a duplicate got through\n");
    if (skipped_rate > fpp) ok = false, std::printf("FAIL: more than %.1f%% of new URLs skipped\n", 100 * fpp);
    if (count_err > 0.03) ok = false, std::printf("FAIL: estimate off by more than 3%%\n");
    if (!full_ok) ok = false, std::printf("FAIL: over_capacity inconsistent with estimated_fpp\n");
    if (!seen.over_capacity()) ok = false, std::printf("FAIL: 160%% of the design count not flagged\n");
    std::printf("%s\n", ok ? "OK" : "FAILED");
    return ok ? 0 : 1;
}
