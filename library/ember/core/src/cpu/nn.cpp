// softmax and convolutions (im2col followed by the packed GEMM).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ember/checked.h"
#include "ember/deterministic.h"
#include "ember/kernels.h"
#include "../parallel.h"
#include "../portable.h"

namespace ember {
namespace {

template <typename T>
void softmax_impl(const T* x, T* out, int64_t rows, int64_t cols) {
  if (cols <= 0) return;
  const int64_t grain = std::max<int64_t>(1, (1 << 14) / cols);
  detail::parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T* xr = x + r * cols;
      T* orow = out + r * cols;
      T m = xr[0];
      for (int64_t j = 1; j < cols; ++j) m = std::max(m, xr[j]);
      T s = 0;
      for (int64_t j = 0; j < cols; ++j) {
        orow[j] = std::exp(xr[j] - m);
        s += orow[j];
      }
      const T inv = T(1) / s;
      for (int64_t j = 0; j < cols; ++j) orow[j] *= inv;
    }
  });
}

// in + 2 * padding, checked: padding comes from the caller and may be anything.
int64_t padded_extent(int64_t in, int64_t padding) {
  const std::optional<int64_t> twice = checked_mul<int64_t>(padding, 2);
  const std::optional<int64_t> total = twice ? checked_add<int64_t>(in, *twice) : std::nullopt;
  if (!total) throw std::invalid_argument("conv: padding " + std::to_string(padding) + " is too large");
  return *total;
}

void check_conv_args(int64_t in, int64_t k, int64_t stride, int64_t padding) {
  if (stride < 1) throw std::invalid_argument("conv: stride must be >= 1, got " + std::to_string(stride));
  if (padding < 0) throw std::invalid_argument("conv: padding must be >= 0, got " + std::to_string(padding));
  if (in < 0 || k < 1) {
    throw std::invalid_argument("conv: input size " + std::to_string(in) + " and kernel size " +
                                std::to_string(k) + " must be >= 0 and >= 1");
  }
  if (padded_extent(in, padding) < k) {
    throw std::invalid_argument("conv: kernel size " + std::to_string(k) + " is larger than the padded input (" +
                                std::to_string(in) + " + 2 x " + std::to_string(padding) + ")");
  }
}

// Elements of the im2col buffer, kdim x spatial, as a size_t that really holds them: on a
// 32-bit target the int64 product used to be truncated to a small buffer that im2col
// then wrote far past.
size_t col_elements(int64_t kdim, int64_t spatial, size_t elem_size) {
  const std::optional<int64_t> count = checked_mul<int64_t>(kdim, spatial);
  if (!count || !checked_bytes(*count, elem_size)) {
    throw std::length_error("conv: the im2col buffer of " + std::to_string(kdim) + " x " + std::to_string(spatial) +
                            " elements does not fit in this platform's address space");
  }
  return static_cast<size_t>(*count);
}

// col[(c, ki, kj), (oy, ox)] for one image; zeros where the window leaves the input.
template <typename T>
void im2col(const T* img, int64_t c_in, int64_t h, int64_t w, int64_t kh, int64_t kw,
            int64_t stride, int64_t pad_y, int64_t pad_x, int64_t oh, int64_t ow, T* col) {
  for (int64_t c = 0; c < c_in; ++c)
    for (int64_t ki = 0; ki < kh; ++ki)
      for (int64_t kj = 0; kj < kw; ++kj) {
        T* dst = col + ((c * kh + ki) * kw + kj) * oh * ow;
        for (int64_t oy = 0; oy < oh; ++oy) {
          const int64_t iy = oy * stride - pad_y + ki;
          T* drow = dst + oy * ow;
          if (iy < 0 || iy >= h) {
            std::fill(drow, drow + ow, T(0));
            continue;
          }
          const T* srow = img + (c * h + iy) * w;
          for (int64_t ox = 0; ox < ow; ++ox) {
            const int64_t ix = ox * stride - pad_x + kj;
            drow[ox] = (ix >= 0 && ix < w) ? srow[ix] : T(0);
          }
        }
      }
}

template <typename T>
void conv2d_impl(const T* input, const T* weight, const T* bias, T* out, int64_t n,
                 int64_t c_in, int64_t h, int64_t w, int64_t c_out, int64_t kh, int64_t kw,
                 int64_t stride, int64_t padding, bool one_dimensional = false) {
  // A 1-D convolution is a 2-D one over an image of height 1 that is never padded in y.
  const int64_t pad_y = one_dimensional ? 0 : padding;
  check_conv_args(h, kh, stride, pad_y);
  check_conv_args(w, kw, stride, padding);
  const int64_t oh = conv_out_size(h, kh, stride, pad_y);
  const int64_t ow = conv_out_size(w, kw, stride, padding);
  if (n <= 0 || c_out <= 0) return;  // nothing to write: no scratch buffer either
  const int64_t kdim = c_in * kh * kw;  // weight's element count / c_out: fits
  const std::optional<int64_t> spatial_checked = checked_mul<int64_t>(oh, ow);
  if (!spatial_checked) throw std::length_error("conv: output of " + std::to_string(oh) + " x " +
                                                std::to_string(ow) + " positions is too large");
  const int64_t spatial = *spatial_checked;
  std::vector<T> col(col_elements(kdim, spatial, sizeof(T)));
  for (int64_t b = 0; b < n; ++b) {
    im2col(input + b * c_in * h * w, c_in, h, w, kh, kw, stride, pad_y, padding, oh, ow,
           col.data());
    T* ob = out + b * c_out * spatial;
    matmul(weight, col.data(), ob, c_out, kdim, spatial);
    if (bias != nullptr)
      for (int64_t co = 0; co < c_out; ++co)
        for (int64_t s = 0; s < spatial; ++s) ob[co * spatial + s] += bias[co];
  }
}

// Atomic add (GNU builtins or a portable fallback, see portable.h): racing threads may add
// in any order.
template <typename T, typename Bits>
void atomic_add(T* addr, T value) {
  detail::atomic_add<T, Bits>(addr, value);
}

template <typename T, typename Bits>
void index_add_impl(T* out, int64_t rows, int64_t cols, const int64_t* index, const T* source,
                    int64_t nidx) {
  alert_not_deterministic("index_add");
  for (int64_t i = 0; i < nidx; ++i)
    if (index[i] < 0 || index[i] >= rows) throw std::out_of_range("index_add: index out of range");
  detail::parallel_for(0, nidx, std::max<int64_t>(1, 4096 / std::max<int64_t>(cols, 1)),
                       [&](int64_t lo, int64_t hi) {
                         for (int64_t i = lo; i < hi; ++i) {
                           T* dst = out + index[i] * cols;
                           const T* src = source + i * cols;
                           for (int64_t j = 0; j < cols; ++j) atomic_add<T, Bits>(dst + j, src[j]);
                         }
                       });
}

}  // namespace

int64_t conv_out_size(int64_t in, int64_t k, int64_t stride, int64_t padding) {
  check_conv_args(in, k, stride, padding);
  return (padded_extent(in, padding) - k) / stride + 1;
}

void softmax(const float* x, float* out, int64_t rows, int64_t cols) {
  softmax_impl(x, out, rows, cols);
}
void softmax(const double* x, double* out, int64_t rows, int64_t cols) {
  softmax_impl(x, out, rows, cols);
}

void conv2d(const float* input, const float* weight, const float* bias, float* out, int64_t n,
            int64_t c_in, int64_t h, int64_t w, int64_t c_out, int64_t kh, int64_t kw,
            int64_t stride, int64_t padding) {
  conv2d_impl(input, weight, bias, out, n, c_in, h, w, c_out, kh, kw, stride, padding);
}
void conv2d(const double* input, const double* weight, const double* bias, double* out,
            int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t c_out, int64_t kh,
            int64_t kw, int64_t stride, int64_t padding) {
  conv2d_impl(input, weight, bias, out, n, c_in, h, w, c_out, kh, kw, stride, padding);
}

void conv1d(const float* input, const float* weight, const float* bias, float* out, int64_t n,
            int64_t c_in, int64_t l, int64_t c_out, int64_t k, int64_t stride, int64_t padding) {
  conv2d_impl(input, weight, bias, out, n, c_in, 1, l, c_out, 1, k, stride, padding, true);
}
void conv1d(const double* input, const double* weight, const double* bias, double* out,
            int64_t n, int64_t c_in, int64_t l, int64_t c_out, int64_t k, int64_t stride,
            int64_t padding) {
  conv2d_impl(input, weight, bias, out, n, c_in, 1, l, c_out, 1, k, stride, padding, true);
}

void index_add(float* out, int64_t rows, int64_t cols, const int64_t* index,
               const float* source, int64_t nidx) {
  index_add_impl<float, uint32_t>(out, rows, cols, index, source, nidx);
}
void index_add(double* out, int64_t rows, int64_t cols, const int64_t* index,
               const double* source, int64_t nidx) {
  index_add_impl<double, uint64_t>(out, rows, cols, index, source, nidx);
}

}  // namespace ember
