// The merge-laws template every MergeableSummary instantiates.
//
//   check_merge_laws(empty, a, b, c, same)      commutative, associative,
//                                               empty is identity, round trip
//   check_incompatible_merge(target, other)     throws invalid_argument, target unchanged
//   check_truncations_throw<S>(bytes)           every strict prefix -> FormatError
//   check_corruptions_safe<S>(bytes, seed)      flipped bytes -> FormatError or a valid S
//
// `same(x, y)` says whether two summaries answer every query alike; for
// deterministic summaries with a canonical encoding, `same_bytes` compares
// their serialized bytes, the strictest check there is.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <vector>

#include <tally/core/serialize.hpp>
#include <tally/core/summary.hpp>

#include "catch.hpp"
#include "test_support.hpp"

namespace tally::test {

struct SameBytes {
    template <class S>
    bool operator()(const S& x, const S& y) const {
        return x.serialize() == y.serialize();
    }
};
inline constexpr SameBytes same_bytes{};

template <MergeableSummary S, class Same = SameBytes>
void check_merge_laws(const S& empty, const S& a, const S& b, const S& c, Same same = {}) {
    REQUIRE(a.mergeable_with(b));
    REQUIRE(b.mergeable_with(a));
    REQUIRE(a.mergeable_with(empty));

    // commutative
    CHECK(same(merged(a, b), merged(b, a)));
    // associative
    CHECK(same(merged(merged(a, b), c), merged(a, merged(b, c))));
    // empty is the identity, on either side
    CHECK(same(merged(a, empty), a));
    CHECK(same(merged(empty, a), a));
    // merge returns *this
    S x = a;
    CHECK(&x.merge(b) == &x);
    // round trip answers alike and re-encodes to the same bytes
    for (const S* s : {&empty, &a, &b, &c}) {
        const std::vector<std::byte> bytes = s->serialize();
        const S back = S::deserialize(std::span<const std::byte>(bytes));
        CHECK(same(back, *s));
        CHECK(back.serialize() == bytes);
    }
}

/// Merging `other` into `target` must throw std::invalid_argument and leave
/// `target` byte-for-byte unchanged.
template <MergeableSummary S>
void check_incompatible_merge(S target, const S& other) {
    CHECK_FALSE(target.mergeable_with(other));
    const auto before = target.serialize();
    CHECK_THROWS_AS(target.merge(other), std::invalid_argument);
    CHECK(target.serialize() == before);
}

/// Every strict prefix of a valid encoding, and the encoding with one extra
/// byte, must raise FormatError.
template <MergeableSummary S>
void check_truncations_throw(const std::vector<std::byte>& bytes) {
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        INFO("prefix length " << n << " of " << bytes.size());
        CHECK_THROWS_AS(S::deserialize(std::span<const std::byte>(bytes.data(), n)), FormatError);
    }
    std::vector<std::byte> longer = bytes;
    longer.push_back(std::byte{0});
    CHECK_THROWS_AS(S::deserialize(std::span<const std::byte>(longer)), FormatError);
}

/// Random single-byte corruptions either raise FormatError or decode to a
/// summary that serializes again without error (never UB; the sanitizer
/// builds make this meaningful).
template <MergeableSummary S>
void check_corruptions_safe(const std::vector<std::byte>& bytes, std::uint64_t seed, int trials = 2000) {
    Rng rng(seed);
    for (int t = 0; t < trials && !bytes.empty(); ++t) {
        std::vector<std::byte> bad = bytes;
        const auto pos = rng.below(bad.size());
        bad[pos] ^= static_cast<std::byte>(1 + rng.below(255));
        try {
            const S s = S::deserialize(std::span<const std::byte>(bad));
            (void)s.serialize();
        } catch (const FormatError&) {
        }
    }
}

}  // namespace tally::test
