// Writes real serialized summaries as the fuzzers' seed corpus:
//   make_corpus <dir>   ->  <dir>/<target>/<case>.bin
// The committed corpus in fuzz/corpus/ was made by this program.
#include <tally/tally.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace {

std::filesystem::path root;

void put(const std::string& target, const std::string& name, const void* data, std::size_t size) {
    const auto dir = root / target;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / (name + ".bin"), std::ios::binary)
        .write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}
void put(const std::string& target, const std::string& name, const std::vector<std::byte>& bytes) {
    put(target, name, bytes.data(), bytes.size());
}
// For targets whose first byte selects the item type.
void put_tagged(const std::string& target, const std::string& name, std::uint8_t tag,
                const std::vector<std::byte>& bytes) {
    std::vector<std::byte> b{static_cast<std::byte>(tag)};
    b.insert(b.end(), bytes.begin(), bytes.end());
    put(target, name, b);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: make_corpus <dir>\n");
        return 2;
    }
    root = argv[1];

    {
        tally::SlidingCounter<std::uint32_t, 8> c(10);
        put("sliding_counter", "empty", c.serialize());
        for (std::uint64_t t = 0; t < 200; t += 3) c.add(t, static_cast<std::uint32_t>(t % 5));
        put("sliding_counter", "filled", c.serialize());
    }
    for (int p : {4, 10, 14}) {
        tally::HyperLogLog h(p);
        put("hyperloglog", "empty_p" + std::to_string(p), h.serialize());
        for (std::uint64_t i = 0; i < 50; ++i) h.add(i);
        put("hyperloglog", "small_p" + std::to_string(p), h.serialize());
        for (std::uint64_t i = 0; i < 20000; ++i) h.add(i);
        put("hyperloglog", "large_p" + std::to_string(p), h.serialize());
    }
    for (int p : {4, 10, 14}) {  // DataSketches HllSketch images: empty, HLL_4/6/8, LIST and SET
        tally::HyperLogLog h(p, tally::HllHashMode::datasketches);
        put("hyperloglog_datasketches", "empty_p" + std::to_string(p), h.to_datasketches());
        for (std::uint64_t i = 0; i < 3000; ++i) h.add(i);
        for (auto t : {tally::DataSketchesHll::hll_4, tally::DataSketchesHll::hll_6, tally::DataSketchesHll::hll_8})
            put("hyperloglog_datasketches", "hll" + std::to_string(4 + 2 * static_cast<int>(t)) + "_p" +
                std::to_string(p), h.to_datasketches(t));
    }
    {
        // LIST (lg_k 10, HLL_8, compact, 2 coupons) and SET (lg_k 10, HLL_4, compact, 3 coupons).
        const unsigned char list[] = {2, 1, 7, 10, 3, 8, 2, 8, 0x05, 0, 0, 0x04, 0x07, 0, 0, 0x0c};
        put("hyperloglog_datasketches", "list", list, sizeof list);
        const unsigned char set[] = {3, 1, 7, 10, 5, 8, 0, 1, 3, 0, 0, 0, 0x05, 0, 0, 0x04,
                                     0x07, 0, 0, 0x0c, 0x09, 0x01, 0, 0x10};
        put("hyperloglog_datasketches", "set", set, sizeof set);
    }
    {
        tally::HyperLogLog h(14);
        const auto dense = h.to_redis();
        put("hyperloglog_redis", "dense_empty", dense.data(), dense.size());
        for (std::uint64_t i = 0; i < 1000; ++i) h.add(i);
        const auto d2 = h.to_redis();
        put("hyperloglog_redis", "dense_1000", d2.data(), d2.size());
        // Redis sparse strings: an empty sketch (one XZERO run of 16384) and a few VAL opcodes.
        const unsigned char sparse_empty[] = {'H', 'Y', 'L', 'L', 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff};
        put("hyperloglog_redis", "sparse_empty", sparse_empty, sizeof sparse_empty);
        const unsigned char sparse_vals[] = {'H', 'Y', 'L', 'L', 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80,
                                             0x40, 0x10, 0x84, 0x7f, 0xec};
        put("hyperloglog_redis", "sparse_vals", sparse_vals, sizeof sparse_vals);
    }
    for (const auto& [log2m, regwidth] : {std::pair{4, 1}, std::pair{11, 5}, std::pair{14, 6}, std::pair{17, 7}}) {
        // PostgreSQL hll values: EMPTY, SPARSE, FULL, and an EXPLICIT list of hashes.
        const std::string sfx = "_" + std::to_string(log2m) + "_" + std::to_string(regwidth);
        tally::HyperLogLog h = tally::HyperLogLog::postgres_compatible(log2m, regwidth);
        put("hyperloglog_postgres", "empty" + sfx, h.to_postgres());
        std::vector<std::uint64_t> hashes;
        for (std::int64_t i = 0; i < 40; ++i) {
            h.add(i);
            hashes.push_back(tally::HyperLogLog::postgres_hash_of(i));
        }
        put("hyperloglog_postgres", "sparse" + sfx, h.to_postgres());
        put("hyperloglog_postgres", "explicit" + sfx, tally::detail::pg_hll_encode_explicit(hashes, log2m, regwidth, {}));
        for (std::int64_t i = 40; i < 20'000; ++i) h.add(i);
        put("hyperloglog_postgres", "full" + sfx, h.to_postgres(tally::PostgresHllOptions{0, false, -1}));
    }
    for (int p : {3, 10, 16}) {  // UltraLogLog: empty, sparse, dense, merged (no martingale)
        tally::UltraLogLog u(p);
        put("ultraloglog", "empty_p" + std::to_string(p), u.serialize());
        for (std::uint64_t i = 0; i < 40; ++i) u.add(i);
        put("ultraloglog", "small_p" + std::to_string(p), u.serialize());
        if (p <= 10) {
            for (std::uint64_t i = 0; i < 20000; ++i) u.add(i);
            put("ultraloglog", "large_p" + std::to_string(p), u.serialize());
            tally::UltraLogLog v(p);
            v.add(std::uint64_t{7});
            put("ultraloglog", "merged_p" + std::to_string(p), u.merge(v).serialize());
        }
    }
    {
        tally::CountMin<std::uint32_t> c(64, 4);
        put("count_min", "empty", c.serialize());
        for (std::uint64_t i = 0; i < 500; ++i) c.add(i % 37, i % 3 + 1);
        put("count_min", "filled", c.serialize());
    }
    {
        tally::TopK<std::uint64_t> t(8);
        put_tagged("top_k", "u64_empty", 0, t.serialize());
        for (std::uint64_t i = 0; i < 300; ++i) t.add(i % 13 == 0 ? 1 : i % 29);
        put_tagged("top_k", "u64_filled", 0, t.serialize());
        tally::TopK<std::string> s(4, tally::Seed{5});
        for (int i = 0; i < 50; ++i) s.add(std::string("key") + std::to_string(i % 31), 1 + i % 3);
        put_tagged("top_k", "string_filled", 1, s.serialize());
    }
    {
        tally::BloomFilter<> b(100, 0.01);
        put("bloom_filter", "empty", b.serialize());
        for (std::uint64_t i = 0; i < 100; ++i) b.add(i);
        put("bloom_filter", "filled", b.serialize());
    }
    {
        tally::Reservoir<std::uint64_t> r(4, 1);
        put_tagged("reservoir", "u64_empty", 0, r.serialize());
        for (std::uint64_t i = 0; i < 100; ++i) r.add(i);
        put_tagged("reservoir", "u64_filled", 0, r.serialize());
        tally::Reservoir<std::string> s(3, 2);
        for (int i = 0; i < 20; ++i) s.add(std::string("item") + std::to_string(i));
        put_tagged("reservoir", "string_filled", 1, s.serialize());
    }
    {
        tally::WeightedReservoir<std::uint64_t> r(4, 1);
        put("weighted_reservoir", "empty", r.serialize());
        for (std::uint64_t i = 0; i < 100; ++i) r.add(i, 1.0 + static_cast<double>(i % 5));
        put("weighted_reservoir", "filled", r.serialize());
    }
    {
        tally::TDigest t(50);
        put("tdigest", "empty", t.serialize());
        t.add(3.5);
        put("tdigest", "single", t.serialize());
        for (int i = 0; i < 2000; ++i) t.add(static_cast<double>(i % 97) * 1.5, 1.0 + (i % 3));
        put("tdigest", "filled", t.serialize());
    }
    {
        // KllSketch: tally frames (fuzz_kll) and DataSketches images (fuzz_kll_datasketches)
        tally::KllSketch<double> d(8, 1);
        put("kll", "empty_double", d.serialize());
        put("kll_datasketches", "empty", d.to_datasketches());
        d.add(2.5);
        put("kll", "single_double", d.serialize());
        put("kll_datasketches", "single_double", d.to_datasketches());
        for (int i = 0; i < 300; ++i) d.add(static_cast<double>(i % 37));
        put("kll", "filled_double", d.serialize());
        put("kll_datasketches", "filled_double", d.to_datasketches());
        tally::KllSketch<float> f(16, 2);
        for (int i = 0; i < 200; ++i) f.add(static_cast<float>(i) / 3);
        put("kll", "filled_float", f.serialize());
        put("kll_datasketches", "filled_float", f.to_datasketches());
    }
    {
        // Windowed: tag byte (0 HLL, 1 CountMin, 2 TDigest, 3 TopK, 4 Bloom, 5 Reservoir), then the frame.
        auto fill = [](auto w, auto add) {
            for (std::uint64_t t = 0; t < 9000; t += 150) add(w, t, t);
            add(w, 6100, 1);  // late
            return w;
        };
        auto plain = [](auto& w, std::uint64_t t, std::uint64_t x) { w.add(t, x); };
        using HW = tally::Windowed<tally::HyperLogLog, 4>;
        put_tagged("windowed", "hll_empty", 0, HW(1000, tally::HyperLogLog(6)).serialize());
        put_tagged("windowed", "hll", 0, fill(HW(1000, tally::HyperLogLog(6)), plain).serialize());
        put_tagged("windowed", "count_min", 1,
                   fill(tally::Windowed<tally::CountMin<>, 4>(1000, tally::CountMin<>(16, 2)), plain).serialize());
        put_tagged("windowed", "tdigest", 2,
                   fill(tally::Windowed<tally::TDigest, 4>(1000, tally::TDigest(20)),
                        [](auto& w, std::uint64_t t, std::uint64_t x) { w.add(t, static_cast<double>(x % 97)); })
                       .serialize());
        put_tagged("windowed", "top_k", 3,
                   fill(tally::Windowed<tally::TopK<std::uint64_t>, 4>(1000, tally::TopK<std::uint64_t>(4)),
                        [](auto& w, std::uint64_t t, std::uint64_t x) { w.add(t, x % 11); })
                       .serialize());
        put_tagged("windowed", "bloom_filter", 4,
                   fill(tally::Windowed<tally::BloomFilter<>, 4>(1000, tally::BloomFilter<>(20, 0.1)), plain).serialize());
        put_tagged("windowed", "reservoir", 5,
                   fill(tally::Windowed<tally::Reservoir<std::uint64_t>, 4>(1000, tally::Reservoir<std::uint64_t>(3, 7)),
                        plain)
                       .serialize());
    }
    for (int lg : {5, 9}) {  // ThetaSketch frames and DataSketches compact images (v3, v4; exact and estimating)
        tally::ThetaSketch s(lg);
        const std::string sfx = "_lgk" + std::to_string(lg);
        put("theta", "empty" + sfx, s.serialize());
        put("theta_datasketches", "empty" + sfx, s.to_datasketches());
        s.add(std::uint64_t{1});
        put("theta_datasketches", "single" + sfx, s.to_datasketches());
        for (std::uint64_t i = 0; i < 12; ++i) s.add(i);
        put("theta", "exact" + sfx, s.serialize());
        put("theta_datasketches", "exact_v3" + sfx, s.to_datasketches());
        put("theta_datasketches", "exact_v4" + sfx, s.to_datasketches(true));
        for (std::uint64_t i = 0; i < 3000; ++i) s.add(i);
        put("theta", "estimating" + sfx, s.serialize());
        put("theta_datasketches", "estimating_v3" + sfx, s.to_datasketches());
        put("theta_datasketches", "estimating_v4" + sfx, s.to_datasketches(true));
        tally::ThetaSketch other(lg);
        for (std::uint64_t i = 5000; i < 9000; ++i) other.add(i);
        put("theta", "intersection_no_hashes" + sfx, tally::theta_intersection(s, other).serialize());
    }
    for (int nv : {1, 3}) {  // ArrayOfDoubles frames and DataSketches compact images (empty, exact, estimating)
        tally::ArrayOfDoublesSketch s(5, nv);
        const std::string sfx = "_nv" + std::to_string(nv);
        put("tuple", "empty" + sfx, s.serialize());
        put("tuple", "ds_empty" + sfx, s.to_datasketches());
        const double v[3] = {1.5, -2, 0.25};
        for (std::uint64_t i = 0; i < 12; ++i) s.add(i, std::span<const double>(v, 3));
        put("tuple", "exact" + sfx, s.serialize());
        put("tuple", "ds_exact" + sfx, s.to_datasketches());
        for (std::uint64_t i = 0; i < 3000; ++i) s.add(i, std::span<const double>(v, 3));
        put("tuple", "estimating" + sfx, s.serialize());
        put("tuple", "ds_estimating" + sfx, s.to_datasketches());
    }
    std::printf("corpus written to %s\n", argv[1]);
    return 0;
}
