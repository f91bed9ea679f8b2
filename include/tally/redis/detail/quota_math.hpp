// tally/redis/detail/quota_math.hpp: the exact integer arithmetic behind the
// Redis scripts' arguments (rates per microsecond in lowest terms, the limits
// Lua doubles keep exact), key prefixing, and a script error reply in words.
#pragma once

#include "../../detail/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "../../detail/primitives.hpp"
#include "../../detail/throw.hpp"

TALLY_BEGIN_NAMESPACE
namespace redis {
namespace protocol {
namespace detail {

inline std::uint64_t gcd(std::uint64_t a, std::uint64_t b) noexcept {
    while (b != 0) {
        const std::uint64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

inline constexpr std::uint64_t exact_limit = std::uint64_t{1} << 53;  // Lua doubles are exact below
inline constexpr std::uint64_t max_cost_sent = std::uint64_t{1} << 41; // > every cap, exact in Lua

// prefix + key, after checking the key's length against max_bytes.
inline std::string prefixed_key(const char* who, std::string_view prefix, std::string_view key, std::size_t max_bytes) {
    tally::detail::check_range(who, "key length", key.size(), std::size_t{0}, max_bytes);
    std::string k;
    k.reserve(prefix.size() + key.size());
    k.append(prefix);
    k.append(key);
    return k;
}

// 1000 * num / den in lowest terms: the rate per microsecond, for scripts
// that read Redis TIME (microseconds). Refused unless x * y < 2^53.
struct MicroRate {
    std::uint64_t x = 1, y = 1;
};
inline MicroRate micro_rate(const char* who, const char* what, std::uint64_t num, std::uint64_t den,
                            const std::string& describe) {
    const std::uint64_t a = 1000 * num;  // num <= 2^40
    const std::uint64_t g = gcd(a, den);
    MicroRate r{a / g, den / g};
    if (static_cast<tally::detail::uint128>(r.x) * r.y >= exact_limit) {
        tally::detail::throw_invalid_argument(
            std::string(who) + ": " + describe + " is out of range: " + what + " per microsecond in lowest terms is " +
            std::to_string(r.x) + "/" + std::to_string(r.y) +
            ", and numerator x denominator must be below 2^53 for the Redis script to stay exact "
            "(Lua numbers are doubles); a window of whole microseconds with a round limit fits");
    }
    return r;
}

// A script's error reply text in words (a foreign value names its key, made printable).
inline std::string script_error_text(std::string_view str, std::span<const std::string_view> keys) {
    if (str.rfind("TALLYFOREIGN ", 0) == 0 || str.find("TALLYFOREIGN ") != std::string::npos) {
        const auto at = str.find("TALLYFOREIGN ") + 13;
        std::size_t i = 0, p = at;
        while (p < str.size() && str[p] >= '0' && str[p] <= '9') i = i * 10 + static_cast<std::size_t>(str[p++] - '0');
        std::string key = (i >= 1 && i <= keys.size()) ? std::string(keys[i - 1]) : std::string("?");
        for (auto& ch : key)
            if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f) ch = '?';
        const auto rest = str.find(' ', at);
        return "foreign value: key \"" + key + "\"" + (rest == std::string::npos ? std::string() : std::string(str.substr(rest))) +
           " (not a tally state; delete it or change Options::key_prefix)";
    }
    return "Redis error: " + std::string(str);
}

}  // namespace detail
}  // namespace protocol
}  // namespace redis
TALLY_END_NAMESPACE
