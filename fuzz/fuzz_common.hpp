// Shared body of the fuzz targets. For any input bytes, S::deserialize must
// either throw tally::FormatError or return a summary that answers queries,
// re-serializes, and decodes again to the same bytes. Any other exception, a
// crash, a leak or UB (ASan/UBSan) is a finding.
//
// Allocation bound: a decoder must check every length against the bytes
// present before it allocates, and allocate what an empty summary with large
// parameters needs only on first use. So while a decode runs (armed by
// AllocationBound, which deserialize_one uses around both decodes), the
// largest single operator new must stay within
//     max(64 KiB, 16 x input bytes);
// above it the target prints the sizes and aborts (a libFuzzer crash). This
// header replaces the global operator new/delete to record that size: include
// it from exactly one translation unit per fuzz target. Targets with their
// own decode call (not deserialize_one) wrap it in tally::fuzz::bounded().
#pragma once

#include <tally/core/serialize.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <span>
#include <utility>
#include <vector>

namespace tally::fuzz {

inline constexpr std::size_t allocation_floor = 64 * 1024;
inline constexpr std::size_t allocation_factor = 16;

/// The bound for a decode of `input_bytes` bytes.
constexpr std::size_t allocation_limit(std::size_t input_bytes) noexcept {
    const std::size_t scaled = input_bytes > SIZE_MAX / allocation_factor ? SIZE_MAX : input_bytes * allocation_factor;
    return scaled > allocation_floor ? scaled : allocation_floor;
}

struct AllocationRecord {
    bool armed;
    std::size_t largest;
};
// Constant-initialized: safe to touch from inside operator new.
inline thread_local AllocationRecord allocation_record{false, 0};

inline void note_allocation(std::size_t n) noexcept {
    AllocationRecord& r = allocation_record;
    if (r.armed && n > r.largest) r.largest = n;
}

/// Arms the record for one decode of `input_bytes` bytes; on destruction
/// (normal return or a FormatError unwinding) checks the largest allocation
/// against allocation_limit and aborts with a message when it is over.
class AllocationBound {
  public:
    AllocationBound(const char* what, std::size_t input_bytes) noexcept : what_(what), input_(input_bytes) {
        allocation_record = {true, 0};
    }
    AllocationBound(const AllocationBound&) = delete;
    AllocationBound& operator=(const AllocationBound&) = delete;
    ~AllocationBound() {
        const std::size_t largest = allocation_record.largest;
        allocation_record = {false, 0};
        if (largest > allocation_limit(input_)) {
            std::fprintf(stderr,
                         "tally fuzz: %s of %zu input bytes made a single allocation of %zu bytes, over the bound "
                         "max(64 KiB, 16 x input) = %zu\n",
                         what_, input_, largest, allocation_limit(input_));
            std::abort();
        }
    }

  private:
    const char* what_;
    std::size_t input_;
};

/// Runs `decode()` under an AllocationBound for `input_bytes` and returns its result.
template <class F>
decltype(auto) bounded(const char* what, std::size_t input_bytes, F&& decode) {
    const AllocationBound bound(what, input_bytes);
    return std::forward<F>(decode)();
}

template <class S, class Query>
int deserialize_one(const std::uint8_t* data, std::size_t size, Query&& query) {
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    try {
        S s = bounded("deserialize", size, [&] { return S::deserialize(bytes); });
        query(s);
        const std::vector<std::byte> again = s.serialize();
        const S back = bounded("deserialize (round trip)", again.size(),
                               [&] { return S::deserialize(std::span<const std::byte>(again)); });
        if (back.serialize() != again) __builtin_trap();  // round trip must be byte-stable
    } catch (const tally::FormatError&) {
    }
    return 0;
}

namespace detail {
inline void* allocate(std::size_t n) noexcept {
    note_allocation(n);
    return std::malloc(n != 0 ? n : 1);
}
inline void* allocate_aligned(std::size_t n, std::align_val_t al) noexcept {
    note_allocation(n);
    const std::size_t a = static_cast<std::size_t>(al) < sizeof(void*) ? sizeof(void*) : static_cast<std::size_t>(al);
    void* p = nullptr;
    return posix_memalign(&p, a, n != 0 ? n : 1) == 0 ? p : nullptr;
}
inline void* checked(void* p) {
    if (p == nullptr) throw std::bad_alloc();
    return p;
}
}  // namespace detail

}  // namespace tally::fuzz

// Replacement allocation functions ([new.delete]): every form routes to
// malloc/free (which the sanitizers still watch) after recording the size.
void* operator new(std::size_t n) {
    return tally::fuzz::detail::checked(tally::fuzz::detail::allocate(n));
}
void* operator new[](std::size_t n) {
    return tally::fuzz::detail::checked(tally::fuzz::detail::allocate(n));
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    return tally::fuzz::detail::allocate(n);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
    return tally::fuzz::detail::allocate(n);
}
void* operator new(std::size_t n, std::align_val_t a) {
    return tally::fuzz::detail::checked(tally::fuzz::detail::allocate_aligned(n, a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
    return tally::fuzz::detail::checked(tally::fuzz::detail::allocate_aligned(n, a));
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return tally::fuzz::detail::allocate_aligned(n, a);
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return tally::fuzz::detail::allocate_aligned(n, a);
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete[](void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    std::free(p);
}
