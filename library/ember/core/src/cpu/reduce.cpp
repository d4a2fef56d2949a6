// Sum and max reductions. Sums accumulate in double (float32 inputs too) with pairwise
// blocks, which keeps the error close to numpy's pairwise summation.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "ember/deterministic.h"
#include "ember/kernels.h"
#include "../parallel.h"

namespace ember {
namespace {

// Fixed chunk size of the whole-array sum: independent of the thread count, so the
// deterministic result is bitwise the same for any number of threads.
constexpr int64_t kSumChunk = 1 << 16;
constexpr int64_t kGrain = 1 << 15;

template <typename T>
double pairwise_sum(const T* x, int64_t n) {
  if (n <= 256) {
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) acc[j] += static_cast<double>(x[i + j]);
    double s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; ++i) s += static_cast<double>(x[i]);
    return s;
  }
  int64_t half = (n / 2) & ~int64_t(7);
  return pairwise_sum(x, half) + pairwise_sum(x + half, n - half);
}

template <typename T>
inline T max_step(T m, T v) {
  // NaN wins, as in numpy.max.
  return (v > m || v != v) ? v : m;
}

template <typename T>
T max_contiguous(const T* x, int64_t n) {
  T m = x[0];
  for (int64_t i = 1; i < n; ++i) m = max_step(m, x[i]);
  return m;
}

template <typename T>
T sum_all_impl(const T* x, int64_t n) {
  if (n <= 0) return T(0);
  const int64_t nchunks = (n + kSumChunk - 1) / kSumChunk;
  auto chunk_sum = [&](int64_t c) {
    int64_t lo = c * kSumChunk;
    return pairwise_sum(x + lo, std::min(n, lo + kSumChunk) - lo);
  };
  if (is_deterministic()) {
    // Fixed chunks, combined pairwise in index order.
    std::vector<double> partial(nchunks);
    detail::parallel_chunks(nchunks, [&](int64_t c) { partial[c] = chunk_sum(c); });
    return static_cast<T>(pairwise_sum(partial.data(), nchunks));
  }
  // Chunks are claimed by whichever thread is free and added to one atomic accumulator as
  // they finish: no barrier and no buffer, but the floating-point combine order follows
  // thread timing.
  std::atomic<double> total{0.0};
  detail::parallel_chunks(nchunks, [&](int64_t c) {
    double s = chunk_sum(c);
    double cur = total.load(std::memory_order_relaxed);
    while (!total.compare_exchange_weak(cur, cur + s, std::memory_order_relaxed)) {
    }
  });
  return static_cast<T>(total.load());
}

template <typename T>
T max_all_impl(const T* x, int64_t n) {
  if (n <= 0) return -std::numeric_limits<T>::infinity();
  const int64_t nchunks = (n + kSumChunk - 1) / kSumChunk;
  std::vector<T> partial(nchunks);
  detail::parallel_chunks(nchunks, [&](int64_t c) {
    int64_t lo = c * kSumChunk;
    partial[c] = max_contiguous(x + lo, std::min(n, lo + kSumChunk) - lo);
  });
  return max_contiguous(partial.data(), nchunks);
}

// Reduction over the middle axis of [outer, len, inner]; each output element is computed by
// one thread in a fixed order, so these are always deterministic.
template <typename T>
void sum_axis_impl(const T* x, T* out, int64_t outer, int64_t len, int64_t inner) {
  if (inner == 1) {
    detail::parallel_for(0, outer, std::max<int64_t>(1, kGrain / std::max<int64_t>(len, 1)),
                         [&](int64_t lo, int64_t hi) {
                           for (int64_t o = lo; o < hi; ++o)
                             out[o] = static_cast<T>(pairwise_sum(x + o * len, len));
                         });
    return;
  }
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(len * inner, 1));
  detail::parallel_for(0, outer, grain, [&](int64_t lo, int64_t hi) {
    std::vector<double> acc(inner);
    for (int64_t o = lo; o < hi; ++o) {
      std::fill(acc.begin(), acc.end(), 0.0);
      const T* base = x + o * len * inner;
      for (int64_t l = 0; l < len; ++l) {
        const T* row = base + l * inner;
        for (int64_t i = 0; i < inner; ++i) acc[i] += static_cast<double>(row[i]);
      }
      for (int64_t i = 0; i < inner; ++i) out[o * inner + i] = static_cast<T>(acc[i]);
    }
  });
}

template <typename T>
void max_axis_impl(const T* x, T* out, int64_t outer, int64_t len, int64_t inner) {
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(len * inner, 1));
  detail::parallel_for(0, outer, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t o = lo; o < hi; ++o) {
      const T* base = x + o * len * inner;
      T* dst = out + o * inner;
      if (inner == 1) {
        dst[0] = max_contiguous(base, len);
        continue;
      }
      std::copy(base, base + inner, dst);
      for (int64_t l = 1; l < len; ++l) {
        const T* row = base + l * inner;
        for (int64_t i = 0; i < inner; ++i) dst[i] = max_step(dst[i], row[i]);
      }
    }
  });
}

}  // namespace

float sum_all(const float* x, int64_t n) { return sum_all_impl(x, n); }
double sum_all(const double* x, int64_t n) { return sum_all_impl(x, n); }
float max_all(const float* x, int64_t n) { return max_all_impl(x, n); }
double max_all(const double* x, int64_t n) { return max_all_impl(x, n); }

void sum_axis(const float* x, float* out, int64_t outer, int64_t len, int64_t inner) {
  sum_axis_impl(x, out, outer, len, inner);
}
void sum_axis(const double* x, double* out, int64_t outer, int64_t len, int64_t inner) {
  sum_axis_impl(x, out, outer, len, inner);
}
void max_axis(const float* x, float* out, int64_t outer, int64_t len, int64_t inner) {
  max_axis_impl(x, out, outer, len, inner);
}
void max_axis(const double* x, double* out, int64_t outer, int64_t len, int64_t inner) {
  max_axis_impl(x, out, outer, len, inner);
}

}  // namespace ember
