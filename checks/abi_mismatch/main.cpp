// Built with another TALLY_CACHE_LINE_SIZE: calls the function with its own
// layout of the same type. Without the ABI namespace this links silently and
// the two halves disagree about the table's layout.
#include <tally/limit/gcra.hpp>
#include <tally/limit/keyed.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>

std::size_t abi_check_keyed_memory(const tally::KeyedLimiter<std::uint64_t, tally::Gcra>& table);

int main() {
    const tally::KeyedLimiter<std::uint64_t, tally::Gcra> table(tally::Quota::per_second(10), 1000);
    const std::size_t here = table.memory_bytes(), there = abi_check_keyed_memory(table);
    std::printf("memory_bytes: %zu here, %zu in the other translation unit\n", here, there);
    return here == there ? 0 : 1;
}
