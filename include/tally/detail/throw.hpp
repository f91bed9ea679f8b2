// tally/detail/throw.hpp: every throw in tally goes through these helpers, so a
// build with -fno-exceptions compiles and aborts with the message instead.
#pragma once

#include "abi.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>

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

/// One piece of an error message: text or an integer. A throw site passes
/// its pieces to one out-of-line function (join_message), so it costs a call
/// instead of the inlined string building of each std::to_string and +,
/// which is most of the code, and compile time, of a decoder.
struct MessagePart {
    const char* text = nullptr;
    std::uint64_t magnitude = 0;
    bool negative = false;

    MessagePart(const char* t) noexcept : text(t) {}  // NOLINT: pieces convert implicitly
    MessagePart(const std::string& t) noexcept : text(t.c_str()) {}  // NOLINT
    template <class I>
        requires(std::is_integral_v<I> && !std::is_same_v<I, bool> && !std::is_same_v<I, char>)
    MessagePart(I v) noexcept  // NOLINT
        : magnitude(v < 0 ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v)), negative(v < 0) {}
};

[[gnu::noinline, gnu::cold]] inline std::string join_message(std::initializer_list<MessagePart> parts) {
    std::string out;
    for (const MessagePart& p : parts) {
        if (p.text) {
            out += p.text;
            continue;
        }
        if (p.negative) out += '-';
        out += std::to_string(p.magnitude);
    }
    return out;
}

/// Bad construction parameter or incompatible merge: std::invalid_argument.
[[noreturn]] inline void throw_invalid_argument(const std::string& message) {
    throw_as<std::invalid_argument>(message);
}

}  // namespace detail
TALLY_END_NAMESPACE
