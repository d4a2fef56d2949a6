// Overflow-checked size arithmetic, shared by ember's kernels and C API and by ember-lite's
// model loader and runner.
//
// Sizes in ember are int64_t element counts; allocations take size_t bytes, which is 32 bits
// on armv7 and other 32-bit targets. Every product of dimensions and every count-to-bytes
// conversion goes through these, so that a size which does not fit is an error and never a
// wrapped (small) buffer that a kernel then writes past. Plain C++17, no compiler builtins:
// the header must compile with MSVC too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

namespace ember {

// a * b, or nullopt when the exact product does not fit in T (any integer type).
template <typename T>
constexpr std::optional<T> checked_mul(T a, T b) {
  static_assert(std::is_integral<T>::value, "checked_mul takes integers");
  constexpr T hi = std::numeric_limits<T>::max();
  constexpr T lo = std::numeric_limits<T>::min();
  if (a == 0 || b == 0) return T(0);
  if constexpr (std::is_unsigned<T>::value) {
    if (a > hi / b) return std::nullopt;
  } else {
    if (a > 0 ? (b > 0 ? a > hi / b : b < lo / a) : (b > 0 ? a < lo / b : b < hi / a)) return std::nullopt;
  }
  return static_cast<T>(a * b);
}

// a + b, or nullopt when the exact sum does not fit in T.
template <typename T>
constexpr std::optional<T> checked_add(T a, T b) {
  static_assert(std::is_integral<T>::value, "checked_add takes integers");
  if constexpr (std::is_unsigned<T>::value) {
    if (a > std::numeric_limits<T>::max() - b) return std::nullopt;
  } else {
    if (b > 0 ? a > std::numeric_limits<T>::max() - b : a < std::numeric_limits<T>::min() - b) return std::nullopt;
  }
  return static_cast<T>(a + b);
}

// Product of n non-negative dimensions, or nullopt if one is negative or the product
// overflows int64_t. An empty list (a scalar) has one element.
inline std::optional<int64_t> checked_numel(const int64_t* dims, int n) {
  int64_t count = 1;
  bool zero = false;
  for (int i = 0; i < n; ++i) {
    if (dims[i] < 0) return std::nullopt;
    if (dims[i] == 0) zero = true;
    // Keep multiplying past a zero so that a shape like (0, 2^62, 2^62) is still refused:
    // a kernel may size scratch space from the other dimensions.
    const std::optional<int64_t> next = checked_mul<int64_t>(count, dims[i] == 0 ? 1 : dims[i]);
    if (!next) return std::nullopt;
    count = *next;
  }
  return zero ? 0 : count;
}

// count elements of elem_size bytes as a size_t byte count, or nullopt when count is
// negative or the bytes do not fit in size_t (the case that truncates on 32-bit targets).
inline std::optional<size_t> checked_bytes(int64_t count, size_t elem_size) {
  if (count < 0) return std::nullopt;
  if (static_cast<uint64_t>(count) > static_cast<uint64_t>(std::numeric_limits<size_t>::max())) return std::nullopt;
  return checked_mul<size_t>(static_cast<size_t>(count), elem_size);
}

}  // namespace ember
