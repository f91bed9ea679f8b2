// One include for Catch2 v2 (Debian) and v3 (Homebrew). Tests use only what
// both have: TEST_CASE, SECTION, REQUIRE/CHECK, TEMPLATE_TEST_CASE, GENERATE,
// Catch::Approx and Catch::Matchers::WithinRel/WithinAbs.
#pragma once

#if TALLY_CATCH_V3
#include <catch2/catch_all.hpp>
#else
#include <catch2/catch.hpp>
namespace Catch {
using Detail::Approx;
}
#endif
