// One include for Catch2 v2 (Debian) and v3 (Homebrew, vcpkg). Tests use only
// what both have: TEST_CASE, SECTION, REQUIRE/CHECK, STATIC_REQUIRE(_FALSE),
// CHECK_THROWS_AS, CHECK_THROWS_WITH (with a string or a string matcher),
// TEMPLATE_TEST_CASE, GENERATE, Catch::Approx, and the matchers
// Catch::Matchers::WithinRel/WithinAbs/StartsWith/EndsWith/ContainsSubstring.
#pragma once

#if TALLY_CATCH_V3
#include <catch2/catch_all.hpp>
#else
#include <catch2/catch.hpp>
namespace Catch {
using Detail::Approx;
namespace Matchers {
// v3's name for v2's Contains (v3 keeps Contains for ranges).
inline auto ContainsSubstring(const std::string& s, CaseSensitive::Choice cs = CaseSensitive::Yes) {
    return Contains(s, cs);
}
}  // namespace Matchers
}  // namespace Catch
#endif
