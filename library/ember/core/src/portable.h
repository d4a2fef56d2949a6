// Compile-time choice between GNU extensions (GCC, Clang, mingw) and plain C++17 for the
// few places where ember's kernels use them, so that MSVC builds the same sources.
//
//   EMBER_HAVE_GNU_VECTORS   __attribute__((vector_size)) types in the GEMM micro-kernel
//   EMBER_HAVE_GNU_ATOMICS   __atomic_* builtins on plain memory (index_add)
//
// Both are 1 on GCC/Clang and 0 elsewhere. -DEMBER_PORTABLE_ONLY (CMake option
// EMBER_PORTABLE_ONLY=ON) forces the plain C++ paths on any compiler: CI builds and tests
// the core that way on Linux, which is what an MSVC build compiles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>

#if !defined(EMBER_PORTABLE_ONLY) && (defined(__GNUC__) || defined(__clang__))
#  define EMBER_HAVE_GNU_VECTORS 1
#  define EMBER_HAVE_GNU_ATOMICS 1
#else
#  define EMBER_HAVE_GNU_VECTORS 0
#  define EMBER_HAVE_GNU_ATOMICS 0
#endif

// `__restrict` is spelled the same by GCC, Clang and MSVC; anything else gets nothing.
#if defined(__GNUC__) || defined(__clang__) || defined(_MSC_VER)
#  define EMBER_RESTRICT __restrict
#else
#  define EMBER_RESTRICT
#endif

namespace ember {
namespace detail {

#if !EMBER_HAVE_GNU_ATOMICS
// Plain C++17 has no atomic operation on memory it does not own as std::atomic
// (std::atomic_ref is C++20), so the fallback serialises updates through a small table of
// mutexes picked by address: adds to one element always take the same lock.
inline std::mutex& atomic_stripe(const void* addr) {
  static std::mutex stripes[64];
  const auto key = reinterpret_cast<std::uintptr_t>(addr);
  return stripes[(key >> 3) % 64];
}
#endif

// *addr += value, atomically with respect to other atomic_add calls on the same address.
// T is float or double; Bits an unsigned integer of the same size (the GNU path swaps the
// bits with a compare-and-swap loop, so racing adds land in any order but none is lost).
template <typename T, typename Bits>
inline void atomic_add(T* addr, T value) {
  static_assert(sizeof(T) == sizeof(Bits), "bit width");
#if EMBER_HAVE_GNU_ATOMICS
  Bits* bits = reinterpret_cast<Bits*>(addr);
  Bits expected = __atomic_load_n(bits, __ATOMIC_RELAXED);
  for (;;) {
    T cur;
    std::memcpy(&cur, &expected, sizeof(T));
    T next = cur + value;
    Bits desired;
    std::memcpy(&desired, &next, sizeof(T));
    if (__atomic_compare_exchange_n(bits, &expected, desired, true, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
      return;
  }
#else
  std::lock_guard<std::mutex> lock(atomic_stripe(addr));
  *addr += value;
#endif
}

}  // namespace detail
}  // namespace ember
