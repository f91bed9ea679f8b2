// tally/tally.hpp: the umbrella header. Includes every public tally header.
// An include guard rather than #pragma once, so the header also compiles as a
// main file (g++ -x c++ tally.hpp) without a warning.
#ifndef TALLY_TALLY_HPP
#define TALLY_TALLY_HPP

#include "version.hpp"

#include "core/clock.hpp"
#include "core/hash.hpp"
#include "core/platform.hpp"
#include "core/seed.hpp"
#include "core/serialize.hpp"
#include "core/summary.hpp"

#include "window/sliding_counter.hpp"
#include "window/windowed.hpp"

#include "limit/acquire_all.hpp"
#include "limit/adaptive_throttle.hpp"
#include "limit/concurrency.hpp"
#include "limit/decision.hpp"
#include "limit/dry_run.hpp"
#include "limit/fixed_window.hpp"
#include "limit/gcra.hpp"
#include "limit/keyed.hpp"
#include "limit/quota.hpp"
#include "limit/sliding_log.hpp"
#include "limit/sliding_window.hpp"
#include "limit/token_bucket.hpp"
#include "limit/wait.hpp"

#include "sketch/membership/bloom_filter.hpp"
#include "sketch/frequency/count_min.hpp"
#include "sketch/distinct/hyperloglog.hpp"
#include "sketch/quantiles/kll.hpp"
#include "sketch/sampling/reservoir.hpp"
#include "sketch/quantiles/tdigest.hpp"
#include "sketch/distinct/theta.hpp"
#include "sketch/frequency/top_k.hpp"
#include "sketch/distinct/tuple.hpp"
#include "sketch/distinct/ultraloglog.hpp"
#include "sketch/sampling/weighted_reservoir.hpp"

#endif  // TALLY_TALLY_HPP
