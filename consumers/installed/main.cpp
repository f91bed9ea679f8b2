// Smallest real use of the umbrella header: hash a key and check the platform constant.
#include <tally/tally.hpp>

#include <cstdio>

int main() {
    static_assert(tally::cache_line_size >= 64);
    const auto h = tally::hash_of("consumer");
    std::printf("tally %d.%d.%d: hash_of(\"consumer\") = %016llx\n", TALLY_VERSION_MAJOR, TALLY_VERSION_MINOR,
                TALLY_VERSION_PATCH, static_cast<unsigned long long>(h));
    return h == tally::hash64("consumer", 8) ? 0 : 1;
}
