// tally/tally.hpp: the umbrella header. Includes every public tally header.
#pragma once

#include "version.hpp"

#include "core/clock.hpp"
#include "core/hash.hpp"
#include "core/platform.hpp"
#include "core/serialize.hpp"
#include "core/summary.hpp"
