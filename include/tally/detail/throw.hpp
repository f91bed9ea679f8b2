// tally/detail/throw.hpp: every throw in tally goes through these helpers, so a
// build with -fno-exceptions compiles and aborts with the message instead.
#pragma once

#include "abi.hpp"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define TALLY_HAS_EXCEPTIONS 1
#else
#define TALLY_HAS_EXCEPTIONS 0
#endif

TALLY_BEGIN_NAMESPACE
namespace detail {

[[noreturn]] inline void abort_with(const char* kind, const char* what) noexcept {
    std::fprintf(stderr, "tally: %s: %s\n", kind, what);
    std::abort();
}

template <class Exception>
[[noreturn]] inline void throw_as(const std::string& message) {
#if TALLY_HAS_EXCEPTIONS
    throw Exception(message);
#else
    abort_with("fatal error (exceptions disabled)", message.c_str());
#endif
}

/// Bad construction parameter or incompatible merge: std::invalid_argument.
[[noreturn]] inline void throw_invalid_argument(const std::string& message) {
    throw_as<std::invalid_argument>(message);
}

}  // namespace detail
TALLY_END_NAMESPACE
