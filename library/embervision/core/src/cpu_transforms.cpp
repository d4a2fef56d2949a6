#include "cpu_transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "parallel_for.h"

namespace embervision {
namespace {

// float32 and uint8 accumulate in float (7 significant digits are plenty for a
// handful of [0, 255] terms and let the loops vectorise twice as wide); float64
// accumulates in double.
template <typename T>
using Accumulator = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
T from_accumulator(Accumulator<T> v) {
  using A = Accumulator<T>;
  if constexpr (std::is_integral_v<T>) {
    // Clamp first; then truncating v + 0.5 is round-half-up without a floor() call
    // (which baseline x86-64 cannot inline).
    const A hi = A(std::numeric_limits<T>::max());
    return static_cast<T>(static_cast<int>(std::min(std::max(v, A(0)), hi) + A(0.5)));
  } else {
    return static_cast<T>(v);
  }
}

// Resamples each row of a height x in_w plane to t.out_size samples.
template <typename T>
void resample_horizontal(const T* in, T* out, int height, int in_w, const ResampleTable& t,
                         const Accumulator<T>* weights) {
  const int out_w = t.out_size;
  for (int y = 0; y < height; ++y) {
    const T* src = in + size_t(y) * in_w;
    T* dst = out + size_t(y) * out_w;
    if (t.taps == 1) {  // nearest: a pure gather, exact for every dtype
      for (int x = 0; x < out_w; ++x) dst[x] = src[t.start[x]];
      continue;
    }
    for (int x = 0; x < out_w; ++x) {
      const Accumulator<T>* w = weights + size_t(x) * t.taps;
      const T* s = src + t.start[x];
      Accumulator<T> acc = 0;
      for (int k = 0; k < t.count[x]; ++k) acc += Accumulator<T>(s[k]) * w[k];
      dst[x] = from_accumulator<T>(acc);
    }
  }
}

// Resamples each column of a t.in_size x width plane; rows are read whole so the
// inner loop runs over contiguous memory.
template <typename T>
void resample_vertical(const T* in, T* out, int width, const ResampleTable& t,
                       const Accumulator<T>* weights) {
  if (t.taps == 1) {
    for (int y = 0; y < t.out_size; ++y) {
      std::memcpy(out + size_t(y) * width, in + size_t(t.start[y]) * width, size_t(width) * sizeof(T));
    }
    return;
  }
  std::vector<Accumulator<T>> acc(width);
  for (int y = 0; y < t.out_size; ++y) {
    std::fill(acc.begin(), acc.end(), Accumulator<T>(0));
    const Accumulator<T>* w = weights + size_t(y) * t.taps;
    for (int k = 0; k < t.count[y]; ++k) {
      const T* src = in + size_t(t.start[y] + k) * width;
      const Accumulator<T> wk = w[k];
      for (int x = 0; x < width; ++x) acc[x] += Accumulator<T>(src[x]) * wk;
    }
    T* dst = out + size_t(y) * width;
    for (int x = 0; x < width; ++x) dst[x] = from_accumulator<T>(acc[x]);
  }
}

}  // namespace

template <typename T>
void resize_planes(const T* in, T* out, size_t planes, int in_h, int in_w,
                   const ResampleTable& rows, const ResampleTable& cols) {
  const int out_h = rows.out_size, out_w = cols.out_size;
  // A same-size axis is the identity for both filters; skip it as Pillow does.
  const bool horizontal = out_w != in_w;
  const bool vertical = out_h != in_h;
  const size_t in_plane = size_t(in_h) * in_w, out_plane = size_t(out_h) * out_w;
  const std::vector<Accumulator<T>> row_w(rows.weights.begin(), rows.weights.end());
  const std::vector<Accumulator<T>> col_w(cols.weights.begin(), cols.weights.end());
  parallel_for(planes, planes * (in_plane + out_plane) * 4, [&](size_t begin, size_t end) {
    std::vector<T> tmp;
    if (horizontal && vertical) tmp.resize(size_t(in_h) * out_w);
    for (size_t p = begin; p < end; ++p) {
      const T* src = in + p * in_plane;
      T* dst = out + p * out_plane;
      if (horizontal && vertical) {
        resample_horizontal(src, tmp.data(), in_h, in_w, cols, col_w.data());
        resample_vertical(tmp.data(), dst, out_w, rows, row_w.data());
      } else if (horizontal) {
        resample_horizontal(src, dst, in_h, in_w, cols, col_w.data());
      } else if (vertical) {
        resample_vertical(src, dst, in_w, rows, row_w.data());
      } else {
        std::memcpy(dst, src, in_plane * sizeof(T));
      }
    }
  });
}

template <typename T>
void crop_planes(const T* in, T* out, size_t planes, int in_h, int in_w, int top, int left,
                 int out_h, int out_w) {
  const size_t in_plane = size_t(in_h) * in_w, out_plane = size_t(out_h) * out_w;
  // Columns of the window that fall inside the input, in output coordinates.
  const int x0 = std::clamp(-left, 0, out_w);
  const int x1 = std::clamp(in_w - left, x0, out_w);
  parallel_for(planes, planes * out_plane, [&](size_t begin, size_t end) {
    for (size_t p = begin; p < end; ++p) {
      T* dst = out + p * out_plane;
      for (int y = 0; y < out_h; ++y) {
        T* row = dst + size_t(y) * out_w;
        const int sy = top + y;
        if (sy < 0 || sy >= in_h || x0 == x1) {
          std::fill(row, row + out_w, T(0));
          continue;
        }
        const T* src = in + p * in_plane + size_t(sy) * in_w;
        std::fill(row, row + x0, T(0));
        std::memcpy(row + x0, src + (left + x0), size_t(x1 - x0) * sizeof(T));
        std::fill(row + x1, row + out_w, T(0));
      }
    }
  });
}

template <typename T>
void flip_planes(const T* in, T* out, size_t planes, int h, int w, bool horizontal) {
  const size_t plane = size_t(h) * w;
  parallel_for(planes, planes * plane, [&](size_t begin, size_t end) {
    for (size_t p = begin; p < end; ++p) {
      for (int y = 0; y < h; ++y) {
        const int sy = horizontal ? y : h - 1 - y;
        const T* src = in + p * plane + size_t(sy) * w;
        T* dst = out + p * plane + size_t(y) * w;
        if (horizontal) {
          std::reverse_copy(src, src + w, dst);
        } else {
          std::memcpy(dst, src, size_t(w) * sizeof(T));
        }
      }
    }
  });
}

template <typename T>
void normalize_planes(const T* in, T* out, size_t batch, size_t channels, size_t plane_size,
                      const double* mean, const double* std) {
  parallel_for(batch * channels, batch * channels * plane_size, [&](size_t begin, size_t end) {
    for (size_t p = begin; p < end; ++p) {
      const T m = static_cast<T>(mean[p % channels]);
      const T s = static_cast<T>(std[p % channels]);
      const T* src = in + p * plane_size;
      T* dst = out + p * plane_size;
      for (size_t i = 0; i < plane_size; ++i) dst[i] = (src[i] - m) / s;
    }
  });
}

#define EMBERVISION_INSTANTIATE(T)                                                          \
  template void resize_planes<T>(const T*, T*, size_t, int, int, const ResampleTable&,      \
                                 const ResampleTable&);                                     \
  template void crop_planes<T>(const T*, T*, size_t, int, int, int, int, int, int);         \
  template void flip_planes<T>(const T*, T*, size_t, int, int, bool);

EMBERVISION_INSTANTIATE(uint8_t)
EMBERVISION_INSTANTIATE(float)
EMBERVISION_INSTANTIATE(double)
template void normalize_planes<float>(const float*, float*, size_t, size_t, size_t, const double*,
                                      const double*);
template void normalize_planes<double>(const double*, double*, size_t, size_t, size_t,
                                       const double*, const double*);

}  // namespace embervision
