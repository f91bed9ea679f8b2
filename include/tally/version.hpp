// tally/version.hpp: the library version, also exported as the CMake package version.
#pragma once

#define TALLY_VERSION_MAJOR 0
#define TALLY_VERSION_MINOR 1
#define TALLY_VERSION_PATCH 0
// Single comparable number: major * 10000 + minor * 100 + patch.
#define TALLY_VERSION (TALLY_VERSION_MAJOR * 10000 + TALLY_VERSION_MINOR * 100 + TALLY_VERSION_PATCH)
