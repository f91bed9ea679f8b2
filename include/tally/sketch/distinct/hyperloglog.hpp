// tally/sketch/distinct/hyperloglog.hpp: HyperLogLog distinct counting with the HIP
// estimator while a sketch has only seen adds, Ertl's improved estimator for
// merged sketches, exact folding, and Redis and Apache DataSketches interop.
// Details, error tables and the wire format: docs/hyperloglog.md.
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <charconv>
#include <cmath>
#include <concepts>
#include <limits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../../core/detail/aligned_allocator.hpp"
#include "../../core/detail/lazy.hpp"
#include "../../core/hash.hpp"
#include "../../core/serialize.hpp"
#include "../../core/summary.hpp"
#include "hyperloglog_options.hpp"
#include "detail/hyperloglog_datasketches.hpp"
#include "detail/hyperloglog_datasketches_estimators.hpp"
#include "detail/hyperloglog_estimator.hpp"
#include "detail/hyperloglog_postgres.hpp"
#include "detail/hyperloglog_redis.hpp"
#include "detail/hyperloglog_sparse.hpp"
#include "../../detail/primitives.hpp"
#include "../../detail/throw.hpp"

TALLY_BEGIN_NAMESPACE

/// How a HyperLogLog turns an item into (register, rank). Part of the
/// serialized state: sketches merge only with sketches of the same mode.
enum class HllHashMode : std::uint8_t {
    /// tally::Hasher; register = top p bits, rank = leading zeros of the rest + 1.
    tally = 0,
    /// Redis's PFADD: MurmurHash64A (seed 0xadc83b19) of the item's bytes;
    /// register = low p bits, rank = trailing zeros of the rest + 1.
    redis = 1,
    /// Apache DataSketches: MurmurHash3 x64 128 (seed 9001) of the item in
    /// DataSketches' byte conventions; register = low p bits of the first
    /// half, rank = min(leading zeros of the second half, 62) + 1.
    datasketches = 2,
    /// PostgreSQL's postgresql-hll (hll_hash_bigint, hll_hash_text, ...):
    /// MurmurHash3 x64 128 (seed 0) of the item's bytes, first half;
    /// register = low p bits, value = trailing zeros of the rest + 1 (0 when
    /// the rest is 0), capped at 2^regwidth - 1. p in [4, 17].
    postgres = 3,
};
static_assert(static_cast<std::uint8_t>(HllHashMode::datasketches) == detail::hll_mode_datasketches);


/// Which estimator HyperLogLog::estimate() answers with.
enum class HllEstimator : std::uint8_t {
    /// Historic inverse probability: a sketch that has only seen add()s.
    hip = 0,
    /// Ertl's improved estimator over the registers: after merge, reduce or
    /// decoding a sketch without HIP state.
    ertl = 1,
    /// Linear counting over the 2^25 sparse index while the sketch is sparse
    /// (HLL++, Heule et al. 2013); mode datasketches: DataSketches' coupon
    /// table over its 2^26 addresses.
    linear_counting = 2,
};

/// HyperLogLog: the number of distinct items in a stream, in 2^p bytes or,
/// while small, about 4 bytes per distinct item.
/// A sketch starts sparse (HLL++, Heule, Nunkesser, Hall, EDBT 2013): one
/// 4-byte entry per distinct index of precision p' = 25 (26 in mode
/// datasketches: one per DataSketches coupon), estimated by linear counting, nearly
/// exact: |estimate - n| <= max(1, 0.002 n) in 99% of sketches while sparse.
/// At m / 4 entries (mode datasketches: where DataSketches leaves coupon mode,
/// 3/32 m + 1 entries from p = 8; docs/hyperloglog.md) it turns dense.
/// Flajolet et al. (AofA 2007) registers with a 64-bit hash. While a sketch has
/// only seen adds, estimate() is the HIP estimator (Ting, KDD 2014; Cohen,
/// PODS 2014 / TKDE 2015): unbiased, RSE sqrt(ln 2) / sqrt(m) = 0.83 / sqrt(m)
/// (m = 2^p). After merge()/reduce() it is Ertl's improved estimator
/// (arXiv:1702.01284, as Redis's PFCOUNT), RSE 1.04 / sqrt(m); estimator()
/// says which. Both are O(1): a register histogram is kept on add.
/// add O(1), allocation-free after the first (sparse: a sorted insert); merge
/// and reduce O(m). Memory: ~330 bytes plus 4 bytes per sparse entry, or plus
/// 2^p bytes of registers when dense (docs/hyperloglog.md has the details).
/// p in [4, 18] ([4, 21] in mode datasketches). Hash modes match Redis and
/// Apache DataSketches register for register; mode datasketches also answers
/// estimate() and lower/upper_bound() as DataSketches Java's HllSketch does
/// on the same image (its coupon, composite and bound tables). total() counts
/// add calls (merged ones included), not distinct items.
/// Thread safety: writers (add, merge, clear) need exclusive access; const
/// members may run concurrently (one computes a pending histogram or register
/// array, the others wait). Give each thread its own sketch and merge.
///
///     tally::HyperLogLog hll(14);
///     for (const auto& user : events) hll.add(user);
///     double distinct = hll.estimate();  // +-0.65% (one sigma, HIP)
class HyperLogLog {
  public:
    using HashMode = HllHashMode;
    using Estimator = HllEstimator;

    static constexpr int min_precision = 4;
    /// The largest precision in modes tally, redis and postgres (17 there).
    static constexpr int max_precision = 18;
    /// Mode datasketches goes to 21, as DataSketches' lg_k does.
    static constexpr int max_datasketches_precision = detail::ds_max_lg_k;
    static_assert(sizeof(detail::hll_zero_registers) >= std::size_t{1} << max_datasketches_precision);
    [[nodiscard]] static constexpr int max_precision_of(HashMode mode) noexcept {
        return mode == HashMode::datasketches ? max_datasketches_precision : max_precision;
    }
    static constexpr int redis_precision = detail::redis_hll_p;
    /// 1 / (2 ln 2), the limit of alpha_m as m grows (Ertl's alpha_inf).
    static constexpr double alpha_inf = 0.721347520444481703680;
    /// 3 adds sparse entries, 2 the HIP state and total(); versions 1 and 2
    /// still decode.
    static constexpr std::uint8_t format_version = 3;

    /// The empty sketch. Throws std::invalid_argument unless 4 <= precision <=
    /// 18 (21 in mode datasketches; 17 in mode postgres).
    explicit HyperLogLog(int precision = 12, HashMode mode = HashMode::tally);
    /// Copies never wait and never force the lazy parts (a pending histogram
    /// stays pending, pending sparse registers are copied sparse).
    HyperLogLog(const HyperLogLog& other);
    /// The moved-from sketch is the empty sketch of its precision.
    HyperLogLog(HyperLogLog&& other) noexcept;
    HyperLogLog& operator=(const HyperLogLog& other);
    HyperLogLog& operator=(HyperLogLog&& other) noexcept;
    ~HyperLogLog() = default;

    /// p = 14 with Redis's hashing: a sketch that to_redis() exports and that
    /// Redis PFADD/PFMERGE extend without double counting.
    static HyperLogLog redis_compatible() { return HyperLogLog(redis_precision, HashMode::redis); }

    /// log2m = p and regwidth with PostgreSQL hll's hashing (HashMode::postgres):
    /// the same items as SQL hll_add_agg(hll_hash_bigint(x), log2m, regwidth)
    /// give the same registers. (HyperLogLog(p, HashMode::postgres) is regwidth 5.)
    /// Throws std::invalid_argument unless 4 <= log2m <= 17 and 1 <= regwidth <= 7.
    static HyperLogLog postgres_compatible(int log2m = 11, int regwidth = 5);

    // ---- adding (not thread-safe) ------------------------------------------

    /// Adds one item. Mode tally: tally::hash_of. Mode redis: strings as
    /// bytes, integers as their decimal text ("42"), bool as "1"/"0". Mode
    /// datasketches: as DataSketches' update(): integers as a little-endian
    /// int64 (smaller ones sign-extended), floating point as a canonical
    /// double, strings as bytes, empty strings ignored. Other types go through
    /// tally::Hasher in every mode (they count correctly among themselves).
    template <class T>
        requires Hashable<std::decay_t<T>> || detail::HllByteString<T>
    void add(const T& item) noexcept;

    /// Adds an item by its 64-bit hash, which must be well mixed; interpreted
    /// by the hash mode (see HllHashMode; mode datasketches: register = low p
    /// bits, rank = min(leading zeros, 62) + 1). Any value is valid.
    void add_hash(std::uint64_t hash) noexcept;

    /// Resets to the empty (sparse) sketch, total() 0, keeping precision and
    /// mode; the register memory is released.
    void clear() noexcept;

    // ---- queries (const, thread-safe among themselves) ---------------------

    /// The estimated number of distinct items: linear counting while sparse,
    /// HIP while estimator() == hip, else ertl_estimate(). O(1). Mode
    /// datasketches answers as DataSketches Java's getEstimate(): its coupon
    /// table while sparse, HIP, else its composite estimator (in place of
    /// Ertl's; ertl_estimate() still gives Ertl's).
    [[nodiscard]] double estimate() const noexcept;

    /// Bounds of about num_std_dev standard errors around estimate()
    /// (num_std_dev 1, 2 or 3, else std::invalid_argument). Mode
    /// datasketches: DataSketches Java's getLowerBound/getUpperBound (its
    /// relative-error tables up to p = 12). Other modes: estimate() / (1 +- s
    /// relative_standard_error()), the lower one at least the number of
    /// nonzero registers (sparse: entries); the upper one infinite where s
    /// RSE >= 1. O(1) (O(m) once after a merge).
    [[nodiscard]] double lower_bound(int num_std_dev) const;
    [[nodiscard]] double upper_bound(int num_std_dev) const;

    /// Which estimator estimate() uses.
    [[nodiscard]] Estimator estimator() const noexcept;

    /// True while the sketch keeps sparse entries instead of 2^p registers.
    [[nodiscard]] bool sparse() const noexcept { return is_sparse(); }

    /// Ertl's improved estimate from the register histogram, whatever the
    /// history (O(64)). For the same registers its value rounded half away
    /// from zero equals Redis's PFCOUNT.
    [[nodiscard]] double ertl_estimate() const noexcept;

    /// The relative standard error of estimate(): sqrt(ln 2) / sqrt(m) for
    /// HIP (the HIP asymptote of Ting 2014), 1.04 / sqrt(m) for Ertl, and
    /// sqrt(m' (e^t - t - 1)) / n, t = n / m', for linear counting (Whang 1990).
    [[nodiscard]] double relative_standard_error() const noexcept;

    [[nodiscard]] int precision() const noexcept { return p_; }
    [[nodiscard]] HashMode hash_mode() const noexcept { return mode_; }
    [[nodiscard]] std::size_t register_count() const noexcept { return std::size_t{1} << p_; }
    /// Register values, each in 0 .. max_rank (64 - p + 1; 63 in mode datasketches).
    [[nodiscard]] std::span<const std::uint8_t> registers() const noexcept;
    /// Number of registers equal to k, k in 0..63 (kept up to date on add).
    [[nodiscard]] std::uint32_t registers_equal_to(int k) const noexcept;
    /// The largest register value of this precision and mode (mode postgres:
    /// min(2^regwidth - 1, 64 - p)).
    [[nodiscard]] int max_rank() const noexcept {
        return mode_ == HashMode::postgres ? detail::pg_hll_max_rank(p_, pg_regwidth_) : max_rank(p_, mode_);
    }
    /// The register width of a HashMode::postgres sketch (1..7); 0 in other modes.
    [[nodiscard]] int postgres_regwidth() const noexcept { return pg_regwidth_; }
    /// True when no register is set (nothing was added, or only empty strings
    /// in mode datasketches).
    [[nodiscard]] bool empty() const noexcept;
    /// Number of add/add_hash calls that hashed an item, summed over merges
    /// (saturating). Decoded Redis and DataSketches sketches and tally format
    /// version 1 do not record it and start at 0.
    [[nodiscard]] std::uint64_t total() const noexcept { return total_; }
    /// Bytes held: the object and its register array or sparse entries.
    [[nodiscard]] std::size_t memory_bytes() const noexcept;

    /// Same precision, mode and registers (the estimator state may differ).
    friend bool operator==(const HyperLogLog& a, const HyperLogLog& b) noexcept { return a.same_registers(b); }

    // ---- merging -----------------------------------------------------------

    /// Same precision and hash mode (and regwidth in mode postgres). (Fold a
    /// larger precision with reduce().)
    [[nodiscard]] bool mergeable_with(const HyperLogLog& other) const noexcept {
        return p_ == other.p_ && mode_ == other.mode_ && pg_regwidth_ == other.pg_regwidth_;
    }

    /// Register-wise maximum: afterwards *this is exactly the sketch of the
    /// union, and estimator() is ertl (unless one side was empty: then the
    /// other's state is kept). Mode datasketches merges as DataSketches'
    /// Union: a sparse side's entries are updates of the other side, whose
    /// estimator (HIP while it has only seen updates) goes on; two dense
    /// sides give ertl. Throws std::invalid_argument (and changes nothing)
    /// unless mergeable_with(other). Not thread-safe for *this.
    HyperLogLog& merge(const HyperLogLog& other);

    /// The sketch this one would have been at precision `precision`
    /// (4 <= precision <= this->precision()), computed exactly from the
    /// registers (estimator ertl unless the sketch is empty). Same hash mode.
    [[nodiscard]] HyperLogLog reduce(int precision) const;

    // ---- tally serialization -----------------------------------------------

    /// Format version 3 (docs/hyperloglog.md): precision, mode, the HIP state
    /// and total(), then the sparse entries of a sparse sketch, or the
    /// registers as a list or 6-bit dense array, whichever is shorter.
    [[nodiscard]] std::vector<std::byte> serialize() const;

    /// A tally-mode sketch holding these 2^precision registers (each 0 ..
    /// 65 - precision, the rank of the longest run seen for its index) and
    /// `total` items seen; estimate() is Ertl's estimator (no HIP state). What
    /// other register-based sketches (UltraLogLog::to_hyperloglog) convert
    /// through. std::invalid_argument for a precision outside [4, 18], a
    /// register count other than 2^precision, or a value past the maximum rank.
    [[nodiscard]] static HyperLogLog from_registers(int precision, std::span<const std::uint8_t> registers,
                                                    std::uint64_t total);

    /// Decodes format versions 1 to 3. Every length is checked against the
    /// bytes present before anything is allocated, and sparse and empty
    /// sketches allocate no registers. Throws tally::FormatError for anything
    /// but a valid encoding.
    [[nodiscard]] static HyperLogLog deserialize(std::span<const std::byte> bytes);

    // ---- Redis interop -----------------------------------------------------

    /// The dense "HYLL" string Redis 7 would hold for these registers (12304
    /// bytes, cached cardinality marked invalid so PFCOUNT recomputes). SET it
    /// and PFCOUNT/PFMERGE/PFADD accept it. Throws std::invalid_argument unless
    /// precision() == 14 (reduce() a larger sketch first). Any hash mode
    /// exports, but only HashMode::redis registers line up with Redis's own
    /// PFADD of the same elements.
    [[nodiscard]] std::string to_redis() const;

    /// Parses a Redis HYLL string (dense or sparse), as returned by GET on a
    /// key that PFADD/PFMERGE built, into a p = 14 HashMode::redis sketch
    /// (estimator ertl). The three unused header bytes and the cached
    /// cardinality are ignored, as Redis ignores them. Throws
    /// tally::FormatError on a bad magic, an unknown encoding, a dense string
    /// of the wrong size, a register above 51, sparse runs that overflow or
    /// fall short of 16384 registers, or a truncated opcode.
    [[nodiscard]] static HyperLogLog from_redis(std::string_view s);

    /// The hash HashMode::redis gives an item (MurmurHash64A of its Redis
    /// bytes); add_hash(redis_hash_of(x)) in redis mode is PFADD k x.
    template <class T>
        requires Hashable<std::decay_t<T>> || detail::HllByteString<T>
    [[nodiscard]] static std::uint64_t redis_hash_of(const T& item) noexcept;

    // ---- Apache DataSketches interop ---------------------------------------

    /// The sketch as Apache DataSketches HllSketch bytes (compact, serial
    /// version 1) of target type `type`: the 8-byte empty form; LIST or SET
    /// mode holding the entries as coupons for a sparse HashMode::datasketches
    /// sketch that DataSketches would keep as coupons; else HLL mode.
    /// The HIP state travels (out-of-order flag set after a merge). Only
    /// HashMode::datasketches registers line up with DataSketches' own
    /// hashing of the same items; other modes export registers only.
    [[nodiscard]] std::vector<std::byte> to_datasketches(DataSketchesHll type = DataSketchesHll::hll_8) const;

    /// Reads any HllSketch image DataSketches writes (LIST, SET or HLL mode;
    /// HLL_4, HLL_6 or HLL_8; compact or updatable) with lg_k in [4, 21] into
    /// a HashMode::datasketches sketch. LIST/SET coupons become sparse entries
    /// (estimator linear_counting; dense past the sparse limit); an HLL image keeps its HIP state unless its
    /// out-of-order flag is set (estimator ertl). Throws tally::FormatError
    /// on malformed bytes and on lg_k outside [4, 21].
    [[nodiscard]] static HyperLogLog from_datasketches(std::span<const std::byte> bytes);

    // ---- PostgreSQL hll interop (docs/postgres.md) --------------------------

    /// The sketch as a postgresql-hll value (storage specification v1.0.0,
    /// schema version 1): EMPTY, or SPARSE / FULL by the extension's rule, the
    /// header carrying `options` (they must match the values it is unioned
    /// with; the defaults are the extension's). Throws std::invalid_argument
    /// unless hash_mode() is postgres or if an option is out of range.
    [[nodiscard]] std::vector<std::byte> to_postgres(const PostgresHllOptions& options = {}) const;

    /// Reads an hll value (EMPTY, EXPLICIT, SPARSE or FULL) into a
    /// HashMode::postgres sketch of its log2m and regwidth: EXPLICIT hashes
    /// are added (total() stays 0), registers are taken as they are. Throws
    /// tally::FormatError unless every field and length is valid, with log2m
    /// in [4, 17] and regwidth in [1, 7].
    [[nodiscard]] static HyperLogLog from_postgres(std::span<const std::byte> bytes);

    /// The hash HashMode::postgres gives an item, what the extension's
    /// hll_hash_* returns: integers (bool and char included) as their
    /// sizeof(T) little-endian bytes (hll_hash_bigint / integer / smallint /
    /// boolean), floating point as its bytes, strings and byte spans as bytes
    /// (hll_hash_text / hll_hash_bytea); other types through tally::Hasher.
    template <class T>
        requires Hashable<std::decay_t<T>> || detail::HllByteString<T>
    [[nodiscard]] static std::uint64_t postgres_hash_of(const T& item) noexcept;

  private:
    template <class T>
    void add_redis(const T& item) noexcept {
        add_hash(redis_hash_of(item));
    }

    static int check_precision(int precision, HashMode mode, const char* who);
    double sparse_estimate() const noexcept;
    double bound(int num_std_dev, bool upper, const char* who) const;
    static constexpr int max_rank(int p, HashMode mode) noexcept {
        return mode == HashMode::datasketches ? detail::ds_hll_max_rank : 64 - p + 1;
    }
    static const char* mode_name(HashMode mode) noexcept;
    static std::size_t varint_size(std::size_t v) noexcept;

    static constexpr std::uint8_t lazy_ready = detail::lazy_ready;
    static constexpr std::uint8_t lazy_pending = detail::lazy_pending;

    // The register view of a sparse sketch (an allocation failure
    // terminates, as in add).
    void ensure_registers() const noexcept;
    void ensure_histogram() const noexcept;
    void set_histogram(const std::uint32_t (&h)[64]) noexcept;
    void set_histogram_values(const std::uint32_t (&h)[64]) const noexcept;
    void copy_from(const HyperLogLog& o);
    void move_from(HyperLogLog& o) noexcept;
    void reset_state() noexcept;
    // The register array is allocated on the first add (an allocation failure
    // there terminates, as add is noexcept).
    void allocate();
    // update_register(hash & (m - 1), rank), the mask taken from the
    // allocated array's size rather than recomputed from p.
    void update_register_low_bits(std::uint64_t hash, std::uint8_t rank) noexcept;
    void update_register(std::size_t index, std::uint8_t rank) noexcept;
    // One register goes from `from` to `to`: HIP increment, histogram, kxq.
    void raise(std::uint8_t from, std::uint8_t to) noexcept;
    // Histogram and kxq from the registers, after a bulk change.
    void rebuild_from_registers() const noexcept;
    // Registers read from a foreign image: histogram rebuilt; no HIP history
    // (its estimate is valid only for the empty sketch).
    void adopt_registers() noexcept;
    bool same_registers(const HyperLogLog& other) const noexcept;

    // ---- sparse representation (detail/hyperloglog_sparse.hpp) ----
    void add_hash_sparse(std::uint64_t hash) noexcept;
    // Inserts one entry (the larger rank wins); at the limit, turns dense.
    void insert_sparse(std::uint32_t entry) noexcept;
    // The sparse entries changed: the register view and histogram are stale.
    void sparse_changed() noexcept;
    // Exclusive access: the entries become 2^p registers; HIP starts from
    // the sparse estimate.
    void to_dense();
    // Sparse entries (or the empty sketch), not a dense sketch's registers
    // (allocated or still a decoded list).
    bool is_sparse() const noexcept { return registers_.empty() && decoded_list_.empty(); }
    // Exclusive access: a decoded register list becomes the 2^p registers
    // (histogram and HIP state are already those of the registers).
    void materialize_list();
    // Register array of a dense sketch, else the sparse view, else zeros.
    const std::uint8_t* register_data() const noexcept;
    // The mode for the sparse helpers and the frame: mode postgres carries
    // its regwidth in the high nibble.
    std::uint8_t mode_byte() const noexcept { return static_cast<std::uint8_t>(static_cast<int>(mode_) | (pg_regwidth_ << 4)); }

    int p_;
    HashMode mode_;
    std::uint8_t pg_regwidth_ = 0;  // mode postgres: 1..7; else 0
    bool hip_valid_ = true;
    // Lazy parts (core/detail/lazy.hpp): the histogram and
    // kxq after a merge or of a sparse sketch, the register view of a sparse sketch.
    mutable std::atomic<std::uint8_t> hist_state_{lazy_ready};
    mutable std::atomic<std::uint8_t> regs_state_{lazy_ready};
    mutable std::uint32_t hist_[64];  // hist_[k] = number of registers equal to k
    double hip_ = 0.0;
    mutable double kxq0_ = 0.0;  // sum of 2^-R over registers R < 32
    mutable double kxq1_ = 0.0;  // ... and R >= 32
    std::uint64_t total_ = 0;
    // 2^p registers when dense, cache-line aligned (merge streams whole lines); empty while sparse
    mutable std::vector<std::uint8_t, detail::CacheAlignedAllocator<std::uint8_t>> registers_;
    std::vector<std::uint32_t> sparse_;               // sorted entries (index' << 6) | rank' while sparse
    mutable std::vector<std::uint8_t> sparse_view_;  // registers() of a sparse sketch, built on demand
    // A dense sketch decoded from a register list (encoding 1) keeps the list,
    // (index << 8) | value ascending, until first mutation: a few bytes of
    // input never allocate 2^p registers. Its histogram is built at decode, so
    // estimates need no registers; registers() builds the view on demand.
    std::vector<std::uint32_t> decoded_list_;
};

static_assert(MergeableSummary<HyperLogLog>);

TALLY_END_NAMESPACE

#include "detail/hyperloglog_impl.hpp"
