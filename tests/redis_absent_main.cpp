// Stands in for examples/fleet_limits.cpp where hiredis was not found (or in
// a cross build): says so and exits 0.
#include <cstdio>

int main() {
    std::printf("fleet_limits: tally::redis not built (hiredis not found at configure time, or cross build)\n");
    return 0;
}
