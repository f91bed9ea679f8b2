#include <tally/sketch/membership/bloom_filter.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "catch.hpp"
#include "merge_laws.hpp"
#include "test_support.hpp"

using tally::BloomFilter;
using tally::test::big;

namespace {

// Keys that were added are [0, n); negative probes come from a disjoint range.
constexpr std::uint64_t probe_base = std::uint64_t{1} << 40;

template <std::size_t B>
BloomFilter<B> filled(std::size_t n, double fpp, std::uint64_t first = 0, std::uint64_t seed = 0) {
    return tally::test::filled(BloomFilter<B>(n, fpp, tally::Seed{seed}), n, [first](auto& f, std::uint64_t i) { f.add(first + i); });
}

template <std::size_t B>
double measured_fpr(const BloomFilter<B>& f, std::uint64_t probes) {
    std::uint64_t fp = 0;
    for (std::uint64_t i = 0; i < probes; ++i) fp += f.contains(probe_base + i) ? 1 : 0;
    return static_cast<double>(fp) / static_cast<double>(probes);
}

std::string to_hex(const std::vector<std::byte>& bytes) {
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (std::byte b : bytes) {
        s += digits[std::to_integer<unsigned>(b) >> 4];
        s += digits[std::to_integer<unsigned>(b) & 15];
    }
    return s;
}

// Straightforward Poisson sum with long double, for checking the walk from the mode.
long double naive_fpr(long double lambda, long double lane_bits, unsigned k) {
    long double sum = 0, p = std::exp(-lambda);
    for (unsigned j = 0; j < 5000; ++j) {
        if (j > 0) p *= lambda / j;
        sum += p * std::pow(1.0L - std::pow(1.0L - 1.0L / lane_bits, static_cast<long double>(j)),
                            static_cast<long double>(k));
    }
    return sum;
}

}  // namespace

TEST_CASE("exact blocked formula: 10.53 bits/key at 1% for 256-bit blocks", "[bloom][sizing]") {
    // The continuous solution for 8 lanes of 32 bits (Parquet's layout).
    const double bits = tally::detail::bloom_bits_per_key(0.01, 256, 8);
    CHECK(bits == Catch::Approx(10.53).margin(0.005));
    // Parquet's closed form -8 / ln(1 - fpp^(1/8)) gives 9.68 bits/key, and at
    // that size the true rate is far above 1%.
    const double parquet = -8.0 / std::log(1.0 - std::pow(0.01, 1.0 / 8));
    CHECK(parquet == Catch::Approx(9.68).margin(0.005));
    CHECK(tally::detail::bloom_blocked_fpr(256.0 / parquet, 32, 8) > 0.0145);

    // The filter itself picks k = 8 for 256-bit blocks at 1% and lands on 10.53.
    const BloomFilter<32> f(1'000'000, 0.01);
    CHECK(f.hash_count() == 8);
    CHECK(f.bits_per_item() == Catch::Approx(10.53).margin(0.005));
}

TEST_CASE("sizing is the smallest block count meeting fpp", "[bloom][sizing]") {
    struct Case {
        double fpp;
        unsigned k;
        double bits;
    };
    // Pinned for 64-byte blocks (the x86-64 default); documented in the header.
    for (const Case c : {Case{0.01, 8, 10.10}, Case{0.001, 8, 15.72}, Case{0.0001, 16, 23.01}}) {
        INFO("fpp " << c.fpp);
        const BloomFilter<64> f(1'000'000, c.fpp);
        CHECK(f.hash_count() == c.k);
        CHECK(f.bits_per_item() == Catch::Approx(c.bits).margin(0.01));
        CHECK(f.design_fpp() <= c.fpp);
        // One block fewer would miss the target: the search is tight.
        const double lane_bits = 512.0 / f.hash_count();
        CHECK(tally::detail::bloom_blocked_fpr(1e6 / static_cast<double>(f.block_count() - 1), lane_bits,
                                               f.hash_count()) > c.fpp);
        CHECK(f.bit_bytes() == f.block_count() * 64);
    }
    // Every allowed k was considered: this k needs no more blocks than the others.
    for (double fpp : {0.2, 0.05, 0.01, 1e-3, 1e-5, 1e-7}) {
        const BloomFilter<128> f(100'000, fpp);
        for (std::uint32_t k = 1; k <= 32; k *= 2)
            CHECK(tally::detail::bloom_blocks_for(1e5, fpp, 1024, k, std::uint64_t{1} << 40) >= f.block_count());
    }
}

TEST_CASE("the Poisson sum agrees with a brute-force sum", "[bloom][sizing]") {
    for (double lambda : {0.01, 0.7, 3.0, 20.0, 50.3, 101.0, 700.0}) {
        for (unsigned k : {1u, 4u, 8u, 16u}) {
            for (double lane : {32.0, 64.0, 256.0}) {
                INFO("lambda " << lambda << " k " << k << " lane " << lane);
                const double exact = static_cast<double>(naive_fpr(lambda, lane, k));
                CHECK(tally::detail::bloom_blocked_fpr(lambda, lane, k) == Catch::Approx(exact).epsilon(1e-9));
            }
        }
    }
    // Beyond exp(-745) the naive sum underflows; the walk from the mode does not.
    CHECK(tally::detail::bloom_blocked_fpr(5000.0, 32, 16) == Catch::Approx(1.0).epsilon(1e-9));
    CHECK(tally::detail::bloom_blocked_fpr(0.0, 32, 16) == 0.0);
}

TEST_CASE("bad parameters throw invalid_argument with exact messages", "[bloom][errors]") {
    CHECK_THROWS_AS(BloomFilter<>(0, 0.01), std::invalid_argument);
    CHECK_THROWS_WITH(BloomFilter<>(0, 0.01), "tally::BloomFilter::BloomFilter: expected_items 0 is out of range [1, " +
                                                  std::to_string(SIZE_MAX) + "]");
    CHECK_THROWS_WITH(BloomFilter<>(10, 0.0), "tally::BloomFilter::BloomFilter: fpp 0 is out of range (0, 1)");
    CHECK_THROWS_WITH(BloomFilter<>(10, 1.0), "tally::BloomFilter::BloomFilter: fpp 1 is out of range (0, 1)");
    CHECK_THROWS_WITH(BloomFilter<>(10, -0.5), "tally::BloomFilter::BloomFilter: fpp -0.5 is out of range (0, 1)");
    CHECK_THROWS_WITH(BloomFilter<>(10, std::nan("")),
                      "tally::BloomFilter::BloomFilter: fpp nan is out of range (0, 1)");
    CHECK_THROWS_AS(BloomFilter<>(10, std::nan("")), std::invalid_argument);
    CHECK_THROWS_AS(BloomFilter<>(10, 1.5), std::invalid_argument);
    // Unreachable sizes are refused rather than allocated.
    CHECK_THROWS_WITH(BloomFilter<>(1000, 1e-300),
                      "tally::BloomFilter::BloomFilter: expected_items 1000 at fpp 1e-300 needs more than "
                      "70368744177664 bytes (the maximum)");
    CHECK_THROWS_AS(BloomFilter<>(std::size_t{1} << 62, 0.01), std::invalid_argument);
    // The largest counts: the block count is bounded before any byte count is
    // formed, so nothing wraps and the message names the real value.
    for (const std::size_t n : {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX / 2 + 1}) {
        CHECK_THROWS_WITH(BloomFilter<>(n, 0.5), "tally::BloomFilter::BloomFilter: expected_items " +
                                                     std::to_string(n) +
                                                     " at fpp 0.5 needs more than 70368744177664 bytes (the maximum)");
        CHECK_THROWS_AS(BloomFilter<16>(n, 0.999), std::invalid_argument);
    }
    // Extremes that are fine.
    CHECK_NOTHROW(BloomFilter<>(1, 0.999));
    CHECK_NOTHROW(BloomFilter<>(1, 1e-12));
    CHECK(BloomFilter<>(1, 0.5).block_count() == 1);
}

TEST_CASE("no false negatives over 1M keys", "[bloom][big]") {
    const std::size_t n = big(1'000'000, 1'000'000);
    BloomFilter<> f(n, 0.01);
    for (std::uint64_t i = 0; i < n; ++i) f.add(i * 0x9e3779b97f4a7c15ull);
    std::size_t missing = 0;
    for (std::uint64_t i = 0; i < n; ++i) missing += f.contains(i * 0x9e3779b97f4a7c15ull) ? 0 : 1;
    CHECK(missing == 0);

    // Strings, every string form hashing alike; and a seeded filter.
    BloomFilter<> s(10'000, 0.001, tally::Seed{42});
    for (int i = 0; i < 10'000; ++i) s.add("key-" + std::to_string(i));
    int s_missing = 0;
    for (int i = 0; i < 10'000; ++i) {
        const std::string key = "key-" + std::to_string(i);
        s_missing += s.contains(key) && s.contains(std::string_view(key)) && s.contains(key.c_str()) ? 0 : 1;
    }
    CHECK(s_missing == 0);
    s.add("literal");
    CHECK(s.contains(std::string("literal")));
}

TEST_CASE("measured FPR at the 1% and 0.1% design points", "[bloom][big]") {
    // 1M keys; 10M negative probes (2M in sanitizer builds, where the 1.1
    // margin is still more than three standard deviations at 0.1%).
    const std::size_t n = 1'000'000;
    const std::uint64_t probes = big(10'000'000, 2'000'000);
    for (double fpp : {0.01, 0.001}) {
        INFO("fpp " << fpp);
        const auto f = filled<tally::cache_line_size>(n, fpp);
        const double measured = measured_fpr(f, probes);
        INFO("measured " << measured << " design " << f.design_fpp() << " bits/item " << f.bits_per_item());
        CHECK(measured <= fpp * 1.1);
        // And the formula is the truth, not just a bound: a layout that set
        // fewer distinct bits than it claims would land well above, one
        // sized with slack well below.
        CHECK(measured >= f.design_fpp() * 0.9);
        // The fill-based estimate is the exact conditional rate of this filter.
        CHECK(f.estimated_fpp() == Catch::Approx(measured).epsilon(0.1));
    }
}

TEMPLATE_TEST_CASE_SIG("measured FPR for other block sizes", "[bloom][big]", ((std::size_t B), B), 16, 32, 128) {
    const std::size_t n = 200'000;
    const std::uint64_t probes = big(2'000'000, 1'000'000);
    const auto f = filled<B>(n, 0.01);
    const double measured = measured_fpr(f, probes);
    INFO("B " << B << " k " << f.hash_count() << " measured " << measured << " design " << f.design_fpp());
    CHECK(measured <= 0.011);
    CHECK(measured >= f.design_fpp() * 0.9);
    // estimated_fpp() holds for every layout, including the 32-byte k = 8
    // one that has its own per-key kernel.
    CHECK(f.estimated_fpp() == Catch::Approx(measured).epsilon(0.1));
    if constexpr (B == 32) CHECK(f.hash_count() == 8);
}

TEMPLATE_TEST_CASE_SIG("scalar and SIMD kernels set identical bits", "[bloom][simd]", ((std::size_t B), B), 32, 64,
                       128) {
    constexpr std::size_t W = 8 * B;
    INFO("SIMD kernel: " << tally::detail::bloom_simd_name<W>());
    // Kernel level: every k the layout allows, random in-block hashes.
    for (std::uint32_t k = 1; k <= W / 32; k *= 2) {
        INFO("k " << k);
        const auto layout = tally::detail::BloomLayout<W>::make(k);
        tally::test::Rng rng(k);
        for (int rep = 0; rep < 200; ++rep) {
            alignas(B) std::uint32_t scalar[W / 32] = {};
            alignas(B) std::uint32_t simd[W / 32] = {};
            const int keys = 1 + static_cast<int>(rng.below(40));
            std::vector<std::uint32_t> xs;
            for (int i = 0; i < keys; ++i) xs.push_back(static_cast<std::uint32_t>(rng.next()));
            for (std::uint32_t x : xs) tally::detail::bloom_add_scalar<W>(scalar, x, layout);
            // Each key sets exactly k bits, one in each lane.
            if (keys == 1) {
                std::uint32_t ones = 0;
                for (std::uint32_t w : scalar) ones += static_cast<std::uint32_t>(std::popcount(w));
                CHECK(ones == k);
            }
            if (!tally::detail::bloom_simd_available<W>()) continue;
#if TALLY_SIMD_X86
            for (std::uint32_t x : xs) tally::detail::bloom_add_avx2<W>(simd, x, layout);
            for (int i = 0; i < 50; ++i) {
                const auto y = static_cast<std::uint32_t>(rng.next());
                CHECK(tally::detail::bloom_contains_avx2<W>(simd, y, layout) ==
                      tally::detail::bloom_contains_scalar<W>(scalar, y, layout));
            }
#elif TALLY_SIMD_NEON
            for (std::uint32_t x : xs) tally::detail::bloom_add_neon<W>(simd, x, layout);
            for (int i = 0; i < 50; ++i) {
                const auto y = static_cast<std::uint32_t>(rng.next());
                CHECK(tally::detail::bloom_contains_neon<W>(simd, y, layout) ==
                      tally::detail::bloom_contains_scalar<W>(scalar, y, layout));
            }
#endif
            CHECK(std::memcmp(scalar, simd, sizeof scalar) == 0);
        }
    }
#if TALLY_SIMD_X86
    // The one-key-per-call kernels specialised for k = 8 (32- and 64-byte
    // blocks) against the scalar kernel, bit for bit.
    if constexpr (W == 256 || W == 512) {
        if (tally::detail::bloom_simd_available<W>()) {
            const auto layout = tally::detail::BloomLayout<W>::make(8);
            tally::test::Rng rng(99);
            for (int rep = 0; rep < 200; ++rep) {
                alignas(B) std::uint32_t scalar[W / 32] = {};
                alignas(B) std::uint32_t simd[W / 32] = {};
                const int keys = 1 + static_cast<int>(rng.below(40));
                for (int i = 0; i < keys; ++i) {
                    const auto x = static_cast<std::uint32_t>(rng.next());
                    tally::detail::bloom_add_scalar<W>(scalar, x, layout);
                    if constexpr (W == 256)
                        tally::detail::bloom_add_avx2_w256k8(simd, x);
                    else
                        tally::detail::bloom_add_avx2_k8(simd, x);
                }
                CHECK(std::memcmp(scalar, simd, sizeof scalar) == 0);
                for (int i = 0; i < 50; ++i) {
                    const auto y = static_cast<std::uint32_t>(rng.next());
                    bool fast = false;
                    if constexpr (W == 256)
                        fast = tally::detail::bloom_contains_avx2_w256k8(simd, y);
                    else
                        fast = tally::detail::bloom_contains_avx2_k8(simd, y);
                    CHECK(fast == tally::detail::bloom_contains_scalar<W>(scalar, y, layout));
                }
            }
        }
    }
#endif
    // Filter level: the same keys through either path give identical bytes
    // and identical answers.
    for (double fpp : {0.2, 0.01, 1e-4}) {
        BloomFilter<B> a(20'000, fpp);
        BloomFilter<B> b(20'000, fpp);
        tally::detail::bloom_force_scalar(b, true);
        for (std::uint64_t i = 0; i < 20'000; ++i) {
            a.add(i);
            b.add(i);
        }
        CHECK(a.serialize() == b.serialize());
        std::size_t disagree = 0;
        for (std::uint64_t i = 0; i < 100'000; ++i)
            disagree += a.contains(probe_base + i) != b.contains(probe_base + i);
        CHECK(disagree == 0);
    }
}

// FNV-1a over the serialized bytes: a digest that any build computes alike.
std::uint64_t fnv1a(const std::vector<std::byte>& bytes) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (std::byte b : bytes) h = (h ^ static_cast<std::uint64_t>(b)) * 0x100000001b3ull;
    return h;
}

TEMPLATE_TEST_CASE_SIG("the set bits are pinned: every kernel and every build writes the same bytes", "[bloom][simd]",
                       ((std::size_t B), B), 32, 64, 128) {
    // A filter written on one machine is read on another (AVX2 picked at run
    // time, AVX2 inlined with -mavx2, NEON, the scalar loop): all must set the
    // same bits. The digests below were produced by the scalar kernel
    // (-DTALLY_NO_SIMD); this test runs in the default, -mavx2, arm64 and
    // TALLY_NO_SIMD builds. Per-key, forced-scalar and batch paths, with and
    // without a seed.
    struct Case {
        double fpp;
        std::uint64_t seed;
        std::uint64_t digest;
    };
    // k is 8 at 1% and 2 at 20% for each of these block sizes.
    constexpr auto pinned = [] {
        if constexpr (B == 32)
            return std::array<Case, 4>{{{0.01, 0, 0xc1f0842795e5a1eeull},
                                        {0.01, 9, 0xec5a02ae2a743fafull},
                                        {0.2, 0, 0xc975b1e20a2e102aull},
                                        {0.2, 9, 0x30502b4d2e2b4e58ull}}};
        else if constexpr (B == 64)
            return std::array<Case, 4>{{{0.01, 0, 0x0cd83477f20c6c12ull},
                                        {0.01, 9, 0x90f8adb12a0fa931ull},
                                        {0.2, 0, 0x262a8fd231776a92ull},
                                        {0.2, 9, 0xbcd1b242b17195f1ull}}};
        else
            return std::array<Case, 4>{{{0.01, 0, 0x4d971db13d340e53ull},
                                        {0.01, 9, 0xef1ad74a1c94d39dull},
                                        {0.2, 0, 0x3f4457630e107fd7ull},
                                        {0.2, 9, 0xaf25606604a48857ull}}};
    }();
    for (const Case& c : pinned) {
        INFO("fpp " << c.fpp << " seed " << c.seed);
        BloomFilter<B> per_key(3000, c.fpp, tally::Seed{c.seed});
        BloomFilter<B> scalar(3000, c.fpp, tally::Seed{c.seed});
        BloomFilter<B> batch(3000, c.fpp, tally::Seed{c.seed});
        tally::detail::bloom_force_scalar(scalar, true);
        std::vector<std::uint64_t> hashes;
        for (std::uint64_t i = 0; i < 3000; ++i) {
            per_key.add(i);
            scalar.add(i);
            hashes.push_back(tally::hash_of(i));
        }
        batch.add_hashes(hashes);
        const auto bytes = per_key.serialize();
        CHECK(scalar.serialize() == bytes);
        CHECK(batch.serialize() == bytes);
        CHECK(per_key.hash_count() == (c.fpp == 0.01 ? 8u : 2u));
        CHECK(fnv1a(bytes) == c.digest);
    }
}

TEST_CASE("batch calls match per-key calls", "[bloom]") {
    // 20K keys fit the no-prefetch size (25 KB); 300K keys (379 KB) take the
    // prefetching loop, which kicks in above 256 KiB.
    for (std::uint64_t items : {std::uint64_t{20'000}, std::uint64_t{300'000}}) {
        for (std::uint64_t seed : {std::uint64_t{0}, std::uint64_t{77}}) {
            for (bool scalar : {false, true}) {
                INFO("items " << items << " seed " << seed << " scalar " << scalar);
                BloomFilter<> one(items, 0.01, tally::Seed{seed});
                BloomFilter<> batch(items, 0.01, tally::Seed{seed});
                CHECK((batch.bit_bytes() > (std::size_t{256} << 10)) == (items == 300'000));
                tally::detail::bloom_force_scalar(batch, scalar);
                std::vector<std::uint64_t> hashes;
                for (std::uint64_t i = 0; i < items; ++i) hashes.push_back(tally::hash_of(i));
                for (std::uint64_t h : hashes) one.add_hash(h);
                // Shorter than the prefetch distance first.
                batch.add_hashes(std::span<const std::uint64_t>(hashes.data(), 7));
                batch.add_hashes(std::span<const std::uint64_t>(hashes).subspan(7));
                batch.add_hashes({});
                CHECK(one.serialize() == batch.serialize());

                std::vector<std::uint64_t> probes;
                for (std::uint64_t i = 0; i < 50'000; ++i) probes.push_back(tally::hash_of(probe_base - 25'000 + i));
                for (std::uint64_t i = 0; i < 50'000; ++i) probes.push_back(hashes[(i * 7919) % items]);
                std::unique_ptr<bool[]> out(new bool[probes.size()]);
                const std::size_t positives = batch.contains_hashes(probes, std::span<bool>(out.get(), probes.size()));
                std::size_t expected = 0, disagree = 0;
                for (std::size_t i = 0; i < probes.size(); ++i) {
                    expected += one.contains_hash(probes[i]);
                    disagree += out[i] != one.contains_hash(probes[i]);
                }
                CHECK(positives == expected);
                CHECK(disagree == 0);
                CHECK(positives > 50'000);  // every added key plus some false positives
                // a size mismatch throws before any answer is written
                bool two[2] = {false, false};
                CHECK_THROWS_WITH(batch.contains_hashes(hashes, two),
                                  "tally::BloomFilter::contains_hashes: out.size() 2 differs from hashes.size() " +
                                      std::to_string(hashes.size()));
                CHECK((!two[0] && !two[1]));
                CHECK(batch.contains_hashes(std::span<const std::uint64_t>(hashes).first(2), two) == 2);
                CHECK((two[0] && two[1]));
                CHECK(batch.total() == items);
            }
        }
    }
}

TEST_CASE("merge is the filter of the union", "[bloom][merge]") {
    const auto a = filled<64>(50'000, 0.01, 0);
    const auto b = filled<64>(50'000, 0.01, 30'000);  // overlaps a
    BloomFilter<64> u(50'000, 0.01);
    for (std::uint64_t i = 0; i < 50'000; ++i) u.add(i);
    for (std::uint64_t i = 30'000; i < 80'000; ++i) u.add(i);  // the overlap twice: total() counts repeats
    CHECK(tally::merged(a, b).serialize() == u.serialize());
    CHECK(tally::merged(a, b).total() == 100'000);
    CHECK(tally::merged(a, b).estimate() == Catch::Approx(80'000).epsilon(0.03));

    const BloomFilter<64> empty(50'000, 0.01);
    const auto c = filled<64>(50'000, 0.01, 1'000'000);
    tally::test::check_merge_laws(empty, a, b, c);
    tally::test::check_merge_laws(BloomFilter<32>(1000, 0.05, tally::Seed{9}), filled<32>(1000, 0.05, 0, 9),
                                  filled<32>(1000, 0.05, 500, 9), filled<32>(1000, 0.05, 7000, 9));
}

TEST_CASE("incompatible merges name the mismatch and leave the target unchanged", "[bloom][merge]") {
    const auto a = filled<64>(1000, 0.01);
    tally::test::check_incompatible_merge(a, filled<64>(2000, 0.01));        // block count
    tally::test::check_incompatible_merge(a, filled<64>(1000, 0.01, 0, 1));  // seed

    auto target = a;
    CHECK_THROWS_WITH(target.merge(filled<64>(2000, 0.01)),
                      "tally::BloomFilter::merge: block count " + std::to_string(a.block_count()) + " does not match " +
                          std::to_string(BloomFilter<64>(2000, 0.01).block_count()));
    CHECK_THROWS_WITH(target.merge(BloomFilter<64>(1000, 0.01, tally::Seed{5})),
                      "tally::BloomFilter::merge: seed 0 does not match 5");
    // Same block count, different k: build it through the wire format.
    auto bytes = a.serialize();
    bytes[10] = std::byte{16};
    const auto other_k = BloomFilter<64>::deserialize(bytes);
    CHECK_THROWS_WITH(target.merge(other_k), "tally::BloomFilter::merge: hash count k 8 does not match 16");
    tally::test::check_incompatible_merge(a, other_k);
    CHECK(target.serialize() == a.serialize());
}

TEST_CASE("serialization: golden bytes, round trip, bad bytes", "[bloom][serialize]") {
    BloomFilter<32> f(60, 0.05, tally::Seed{7});
    for (int i = 1; i <= 5; ++i) f.add(i);
    const auto bytes = f.serialize();
    // frame v2 | block_bytes 32 | k 4 | reserved | seed 7 | expected 60 | fpp 0.05 | 2 blocks | total 5 |
    // 64 bytes of bits
    const std::string bits =
        "0000800000200004000400000002000490020000000000000004000001001000"
        "0200020000000000008000010000000000000800000020000100000000800000";
    const std::string golden = std::string("54414c5905020000") + "2000" + "04" + "00" + "0700000000000000" +
                               "3c00000000000000" + "9a9999999999a93f" + "0200000000000000" + "0500000000000000" + bits;
    CHECK(to_hex(bytes) == golden);

    // Version 1 (the same without total) is still read; total() is then the
    // rounded estimate() of the bits.
    const std::string golden_v1 = std::string("54414c5905010000") + "2000" + "04" + "00" + "0700000000000000" +
                                  "3c00000000000000" + "9a9999999999a93f" + "0200000000000000" + bits;
    std::vector<std::byte> v1;
    for (std::size_t i = 0; i < golden_v1.size(); i += 2)
        v1.push_back(static_cast<std::byte>(std::stoi(golden_v1.substr(i, 2), nullptr, 16)));
    const auto old = BloomFilter<32>::deserialize(v1);
    CHECK(old.serialize() == bytes);
    CHECK(old.total() == 5);
    tally::test::check_truncations_throw<BloomFilter<32>>(v1);
    CHECK_THROWS_AS(BloomFilter<32>::deserialize(std::span<const std::byte>(v1).first(v1.size() - 1)),
                    tally::FormatError);

    const auto back = BloomFilter<32>::deserialize(bytes);
    CHECK(back.serialize() == bytes);
    CHECK(back.hash_count() == f.hash_count());
    CHECK(back.block_count() == f.block_count());
    CHECK(back.seed() == tally::Seed{7});
    CHECK(back.total() == 5);
    CHECK(back.expected_items() == 60);
    CHECK(back.fpp() == 0.05);
    for (int i = 1; i <= 5; ++i) CHECK(back.contains(i));

    tally::test::check_truncations_throw<BloomFilter<32>>(bytes);
    tally::test::check_corruptions_safe<BloomFilter<32>>(bytes, 1);
    const auto bigger = filled<64>(3000, 0.01).serialize();
    tally::test::check_truncations_throw<BloomFilter<64>>(std::vector<std::byte>(bigger.begin(), bigger.begin() + 200));
    tally::test::check_corruptions_safe<BloomFilter<64>>(bigger, 2, 500);

    auto bad = [&](std::size_t offset, std::uint8_t value) {
        auto b = bytes;
        b[offset] = std::byte{value};
        try {
            (void)BloomFilter<32>::deserialize(b);
        } catch (const tally::FormatError& e) {
            return std::string(e.what());
        }
        return std::string("(no exception)");
    };
    CHECK(bad(4, 2) == "tally: family id 2 where 5 was expected");
    CHECK(bad(8, 64) == "tally: BloomFilter block_bytes 64 where 32 was expected");
    CHECK(bad(10, 3) == "tally: BloomFilter k is not a power of two in [1, block_bits / 32]");
    CHECK(bad(10, 16) == "tally: BloomFilter k is not a power of two in [1, block_bits / 32]");
    CHECK(bad(11, 1) == "tally: BloomFilter reserved byte is not zero");
    CHECK(bad(34, 0xf8) == "tally: BloomFilter fpp is not in (0, 1)");  // fpp -> NaN
    CHECK(bad(36, 0) == "tally: BloomFilter block count is zero");
    CHECK(bad(43, 1).find("exceeds the maximum") != std::string::npos);  // refused before allocating
    CHECK(bad(37, 1).find("needs more bytes than remain") != std::string::npos);
    CHECK_THROWS_AS(BloomFilter<64>::deserialize(bytes), tally::FormatError);
    CHECK_THROWS_AS(BloomFilter<32>::deserialize(bigger), tally::FormatError);
}

TEST_CASE("fill: estimate, estimated_fpp and over_capacity", "[bloom][fill]") {
    const std::size_t n = 100'000;
    BloomFilter<> f(n, 0.01);
    CHECK(f.estimated_fpp() == 0.0);
    CHECK(f.estimate() == 0.0);
    CHECK_FALSE(f.over_capacity());

    std::uint64_t next = 0;
    auto feed = [&](std::size_t upto) {
        for (; next < upto; ++next) f.add(next);
    };
    feed(n / 2);
    CHECK(f.estimate() == Catch::Approx(n / 2).epsilon(0.03));
    CHECK(f.estimated_fpp() < 0.01 / 5);
    CHECK_FALSE(f.over_capacity());
    feed(n * 8 / 10);
    CHECK_FALSE(f.over_capacity());
    feed(n);
    CHECK(f.estimate() == Catch::Approx(n).epsilon(0.03));
    CHECK(f.estimated_fpp() == Catch::Approx(f.design_fpp()).epsilon(0.1));
    // Duplicates change nothing: the filter counts distinct keys.
    for (std::uint64_t i = 0; i < n; ++i) f.add(i);
    CHECK(f.estimate() == Catch::Approx(n).epsilon(0.03));
    feed(n * 125 / 100);
    CHECK(f.over_capacity());
    CHECK(f.estimate() == Catch::Approx(n * 1.25).epsilon(0.03));
    const double est = f.estimated_fpp();
    const double measured = measured_fpr(f, 500'000);
    CHECK(est == Catch::Approx(measured).epsilon(0.1));
    CHECK(measured > 0.01);  // the signal is right: the 1% promise is broken
    feed(n * 3);
    CHECK(f.over_capacity());
    CHECK(f.estimated_fpp() > 0.1);

    f.clear();
    CHECK(f.set_bits() == 0);
    CHECK_FALSE(f.over_capacity());
    CHECK_FALSE(f.contains(std::uint64_t{1}));

    // A saturated filter: count is infinite, every probe is positive.
    BloomFilter<> tiny(1, 0.5);
    for (std::uint64_t i = 0; i < 100'000; ++i) tiny.add(i);
    CHECK(tiny.set_bits() == tiny.block_count() * BloomFilter<>::block_bits);
    CHECK(std::isinf(tiny.estimate()));
    CHECK(tiny.estimated_fpp() == 1.0);
}

TEST_CASE("the seed changes every bit position but not the guarantees", "[bloom]") {
    const auto a = filled<64>(10'000, 0.01, 0, 0);
    const auto b = filled<64>(10'000, 0.01, 0, 1);
    const auto c = filled<64>(10'000, 0.01, 0, 1);
    CHECK(b.serialize() == c.serialize());
    CHECK(a.serialize() != b.serialize());
    CHECK_FALSE(a.mergeable_with(b));
    // Independent seeds give nearly independent false positives.
    std::size_t both = 0, fa = 0;
    for (std::uint64_t i = 0; i < 200'000; ++i) {
        const bool pa = a.contains(probe_base + i);
        fa += pa;
        both += pa && b.contains(probe_base + i);
    }
    CHECK(fa > 1000);
    CHECK(both < fa / 20);
}

TEST_CASE("BloomFilter vocabulary: total, empty, memory_bytes, clear, Seed::random", "[bloom]") {
    BloomFilter<> f(1000, 0.01);
    CHECK(f.empty());
    CHECK(f.total() == 0);
    f.add(1);
    f.add(1);
    const std::uint64_t hs[3] = {11, 12, 13};
    f.add_hashes(hs);
    CHECK(f.total() == 5);  // with repeats
    CHECK(!f.empty());
    CHECK(f.memory_bytes() == f.bit_bytes() + sizeof(f));
    CHECK(f.bit_bytes() == f.block_count() * tally::cache_line_size);
    auto g = f;
    g.merge(f);
    CHECK(g.total() == 10);
    f.clear();
    CHECK(f.empty());
    CHECK(f.set_bits() == 0);

    // total() saturates wherever its parts come from: a deserialized total
    // near the maximum, then single-key adds, serialize and merge.
    {
        constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
        auto bytes = BloomFilter<>(1000, 0.01).serialize();
        for (int i = 0; i < 8; ++i)  // the total field, little-endian at offset 44
            bytes[44 + i] = static_cast<std::byte>(((max - 2) >> (8 * i)) & 0xff);
        auto n = BloomFilter<>::deserialize(bytes);
        CHECK(n.total() == max - 2);
        n.add(1);
        CHECK(n.total() == max - 1);
        n.add_hash(2);
        n.add(3);
        n.add(4);
        CHECK(n.total() == max);
        CHECK(!n.empty());
        CHECK(BloomFilter<>::deserialize(n.serialize()).total() == max);
        BloomFilter<> m(1000, 0.01);
        m.add(5);
        m.merge(n);
        CHECK(m.total() == max);
        m.add(6);
        CHECK(m.total() == max);
        BloomFilter<> small(1000, 0.01);
        small.add(7);
        small.add(8);
        CHECK(BloomFilter<>::deserialize(small.serialize()).total() == 2);
        small.clear();
        CHECK(small.total() == 0);
        CHECK(small.empty());
    }

    // a random seed: different bits from seed 0, kept by serialize, merges
    // only with the same seed
    const tally::Seed s = tally::Seed::random();
    BloomFilter<> r(1000, 0.01, s), r2(1000, 0.01, s), zero(1000, 0.01);
    for (std::uint64_t i = 0; i < 100; ++i) r.add(i), zero.add(i), r2.add(i + 100);
    if (s != tally::Seed{}) CHECK(r.serialize() != zero.serialize());
    auto back = BloomFilter<>::deserialize(r.serialize());
    CHECK(back.seed() == s);
    back.merge(r2);
    for (std::uint64_t i = 0; i < 200; ++i) CHECK(back.contains(i));
    if (s != tally::Seed{}) CHECK_THROWS_AS(back.merge(zero), std::invalid_argument);
}
