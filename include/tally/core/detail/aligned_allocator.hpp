// tally/core/detail/aligned_allocator.hpp: a std::allocator whose blocks start
// on a cache line, for register arrays that vector kernels stream through
// (a 32-byte load that straddles two lines costs two cache accesses).
#pragma once

#include "../../detail/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <new>

#include "../platform.hpp"

TALLY_BEGIN_NAMESPACE
namespace detail {

template <class T>
struct CacheAlignedAllocator {
    using value_type = T;
    static constexpr std::align_val_t alignment{cache_line_size > alignof(T) ? cache_line_size : alignof(T)};

    CacheAlignedAllocator() noexcept = default;
    template <class U>
    CacheAlignedAllocator(const CacheAlignedAllocator<U>&) noexcept {}  // NOLINT: rebinding is implicit

    // std::vector asks for at most max_size() elements, so n * sizeof(T) does not wrap.
    [[nodiscard]] T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), alignment)); }
    void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, alignment); }
    [[nodiscard]] std::size_t max_size() const noexcept { return PTRDIFF_MAX / sizeof(T); }

    friend bool operator==(const CacheAlignedAllocator&, const CacheAlignedAllocator&) noexcept { return true; }
};

}  // namespace detail
TALLY_END_NAMESPACE
