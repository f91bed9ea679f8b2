// tally/sketch/distinct/detail/hyperloglog_datasketches_tables.hpp: the numeric tables
// of Apache DataSketches Java 6.2.0's HllSketch estimators, as data:
//   ds_coupon_x / ds_coupon_y       hll/CouponMapping.java (xArr, yArr)
//   ds_composite_x (rows in hyperloglog_datasketches_composite_x.inc)
//   / ds_composite_y_stride
//                                   hll/CompositeInterpolationXTable.java
//   ds_rel_err (rows in hyperloglog_datasketches_rel_err.inc)
//                                   hll/RelativeErrorTables.java
//   ds_exact_harmonic               hll/HarmonicNumbers.java
// The values are those files' decimal literals (the harmonic numbers their
// exact fractions), so each parses to the same double as there. How they are
// used: detail/hyperloglog_datasketches_estimators.hpp.
#pragma once

#include "../../../detail/abi.hpp"

#include <cstdint>
#include <span>

TALLY_BEGIN_NAMESPACE
namespace detail {

/// Coupon count (of 2^26 coupon addresses) to cardinality, for cubic interpolation.
inline constexpr double ds_coupon_x[40] = {
    0.0,       1.0,       20.0,      400.0,     8000.0,    160000.0,  300000.0,  600000.0,  900000.0,  1200000.0,
    1500000.0, 1800000.0, 2100000.0, 2400000.0, 2700000.0, 3000000.0, 3300000.0, 3600000.0, 3900000.0, 4200000.0,
    4500000.0, 4800000.0, 5100000.0, 5400000.0, 5700000.0, 6000000.0, 6300000.0, 6600000.0, 6900000.0, 7200000.0,
    7500000.0, 7800000.0, 8100000.0, 8400000.0, 8700000.0, 9000000.0, 9300000.0, 9600000.0, 9900000.0, 10200000.0,
};
inline constexpr double ds_coupon_y[40] = {
    0.0000000000000000,       1.0000000000000000,       20.0000009437402611,       400.0003963713384110,
    8000.1589294602090376,    160063.6067763759638183,  300223.7071597663452849,   600895.5933856170158833,
    902016.8065120954997838,  1203588.4983199508860707, 1505611.8245524743106216,  1808087.9449319066479802,
    2111018.0231759352609515, 2414403.2270142501220107, 2718244.7282051891088486,  3022543.7025524540804327,
    3327301.3299219091422856, 3632518.7942584538832307, 3938197.2836029687896371,  4244337.9901093561202288,
    4550942.1100616492331028, 4858010.8438911894336343, 5165545.3961938973516226,  5473546.9757476449012756,
    5782016.7955296505242586, 6090956.0727340159937739, 6400366.0287892958149314,  6710247.8893762007355690,
    7020602.8844453142955899, 7331432.2482349723577499, 7642737.2192891482263803,  7954519.0404754765331745,
    8266778.9590033423155546, 8579518.2264420464634895, 8892738.0987390466034412,  9206439.8362383283674717,
    9520624.7036988288164139, 9835293.9703129194676876, 10150448.9097250290215015, 10466090.8000503256917000,
};

/// Composite estimator, lg_k 4..21: raw HLL estimates x_i whose cardinality is
/// i * stride(lg_k).
inline constexpr std::int32_t ds_composite_y_stride[18] = {1,   2,   3,    5,    10,   20,    40,    80,    160,
                                                           320, 640, 1280, 2560, 5120, 10240, 20480, 40960, 81920};
inline constexpr double ds_composite_x[18][257] = {
#include "hyperloglog_datasketches_composite_x.inc"
};

/// Relative errors of the bounds for lg_k 4..12: ds_rel_err[out of order][upper]
/// [3 (lg_k - 4) + (num_std_dev - 1)], HIP (in order) and non-HIP (out of
/// order), lower and upper (the upper ones negative).
inline constexpr double ds_rel_err[2][2][27] = {
#include "hyperloglog_datasketches_rel_err.inc"
};

/// H(0) .. H(24).
inline constexpr double ds_exact_harmonic[25] = {
    0.0,
    1.0,
    1.5,
    11.0 / 6.0,
    25.0 / 12.0,
    137.0 / 60.0,
    49.0 / 20.0,
    363.0 / 140.0,
    761.0 / 280.0,
    7129.0 / 2520.0,
    7381.0 / 2520.0,
    83711.0 / 27720.0,
    86021.0 / 27720.0,
    1145993.0 / 360360.0,
    1171733.0 / 360360.0,
    1195757.0 / 360360.0,
    2436559.0 / 720720.0,
    42142223.0 / 12252240.0,
    14274301.0 / 4084080.0,
    275295799.0 / 77597520.0,
    55835135.0 / 15519504.0,
    18858053.0 / 5173168.0,
    19093197.0 / 5173168.0,
    444316699.0 / 118982864.0,
    1347822955.0 / 356948592.0,
};

}  // namespace detail
TALLY_END_NAMESPACE
