// Built with one TALLY_CACHE_LINE_SIZE: defines a function that takes a tally type.
#include <tally/limit/gcra.hpp>
#include <tally/limit/keyed.hpp>

#include <cstddef>
#include <cstdint>

std::size_t abi_check_keyed_memory(const tally::KeyedLimiter<std::uint64_t, tally::Gcra>& table) {
    return table.memory_bytes();
}
