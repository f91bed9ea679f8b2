// tally/sketch/distinct/hyperloglog_options.hpp: the options of HyperLogLog's
// foreign forms (part of hyperloglog.hpp's API; include that header).
#pragma once

#include "../../detail/abi.hpp"

#include <cstdint>

TALLY_BEGIN_NAMESPACE

/// The register array type of a DataSketches HllSketch image.
enum class DataSketchesHll : std::uint8_t {
    hll_4 = 0,  ///< 4-bit registers relative to the minimum, plus an exception table (Druid's default)
    hll_6 = 1,  ///< 6-bit packed registers
    hll_8 = 2,  ///< one byte per register (Spark's hll_sketch_agg)
};

/// The cutoffs a PostgreSQL `hll` value carries in its header, and the
/// SPARSE-or-FULL choice when writing one. The defaults are the extension's
/// (hll_add_agg(x) and a column of plain type hll). Values are unioned by the
/// extension only when log2m, regwidth, expthresh and sparse_on all match.
struct PostgresHllOptions {
    /// EXPLICIT cutoff recorded in the header: -1 (auto), 0 (never
    /// explicit), or a power of two up to 8192. tally writes no EXPLICIT
    /// values (it keeps registers, not hashes); the server promotes from it.
    std::int64_t expthresh = -1;
    /// Whether SPARSE values are allowed (the extension's sparseon).
    bool sparse_on = true;
    /// The extension's hll_set_max_sparse: -1 writes SPARSE when it is
    /// smaller than FULL; n >= 0 writes SPARSE when at most n registers are set.
    std::int64_t max_sparse = -1;
};

TALLY_END_NAMESPACE
