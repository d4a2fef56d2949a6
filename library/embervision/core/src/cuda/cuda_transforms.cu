// CUDA kernels for resize, crop, flip, normalize and convert_dtype. They follow the CPU
// code exactly (same resample tables, horizontal pass then vertical, integer rounding
// after each pass; the same crop window; numpy's convert_dtype formulas); resize weights
// are float on the device. Written for CUDA 11.8+ and sm_37+.

#include "cuda/cuda_transforms.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <vector>

namespace embervision {
namespace cuda {
namespace {

// Device allocation freed on scope exit (also on the early error returns).
struct DeviceBuffer {
  void* ptr = nullptr;
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
};

#define EV_CUDA_TRY(expr)                          \
  do {                                             \
    cudaError_t ev_status_ = (expr);               \
    if (ev_status_ != cudaSuccess) {               \
      return cudaGetErrorString(ev_status_);       \
    }                                              \
  } while (0)

const char* upload(DeviceBuffer& buf, const void* host, size_t bytes) {
  EV_CUDA_TRY(cudaMalloc(&buf.ptr, bytes ? bytes : 1));
  if (host && bytes) EV_CUDA_TRY(cudaMemcpy(buf.ptr, host, bytes, cudaMemcpyHostToDevice));
  return nullptr;
}

template <typename T>
struct Accumulator {
  using type = float;
};
template <>
struct Accumulator<double> {
  using type = double;
};

template <typename T>
__device__ T from_accumulator(typename Accumulator<T>::type v) {
  if constexpr (std::is_integral<T>::value) {
    v = floorf(v + 0.5f);
    v = v < 0.f ? 0.f : (v > 255.f ? 255.f : v);
    return static_cast<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

struct DeviceAxis {
  int in_size, out_size, taps;
  const int* start;
  const int* count;
  const float* weights;
};

// One thread per output sample of a row: reads along the width.
template <typename T>
__global__ void resample_rows(const T* in, T* out, size_t lines, DeviceAxis a) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= lines * a.out_size) return;
  const size_t line = i / a.out_size;
  const int x = static_cast<int>(i % a.out_size);
  const T* src = in + line * a.in_size + a.start[x];
  const float* w = a.weights + size_t(x) * a.taps;
  typename Accumulator<T>::type acc = 0;
  for (int k = 0; k < a.count[x]; ++k) acc += static_cast<typename Accumulator<T>::type>(src[k]) * w[k];
  out[i] = from_accumulator<T>(acc);
}

// One thread per output sample: reads down the height of a plane `width` wide.
template <typename T>
__global__ void resample_cols(const T* in, T* out, size_t planes, int width, DeviceAxis a) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  const size_t out_plane = size_t(a.out_size) * width;
  if (i >= planes * out_plane) return;
  const size_t p = i / out_plane;
  const int y = static_cast<int>((i % out_plane) / width);
  const int x = static_cast<int>(i % width);
  const T* src = in + p * size_t(a.in_size) * width + size_t(a.start[y]) * width + x;
  const float* w = a.weights + size_t(y) * a.taps;
  typename Accumulator<T>::type acc = 0;
  for (int k = 0; k < a.count[y]; ++k) acc += static_cast<typename Accumulator<T>::type>(src[size_t(k) * width]) * w[k];
  out[i] = from_accumulator<T>(acc);
}

template <typename T>
__global__ void flip_kernel(const T* in, T* out, size_t total, int h, int w, bool horizontal) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= total) return;
  const size_t plane = size_t(h) * w;
  const size_t p = i / plane;
  const int y = static_cast<int>((i % plane) / w);
  const int x = static_cast<int>(i % w);
  const int sx = horizontal ? w - 1 - x : x;
  const int sy = horizontal ? y : h - 1 - y;
  out[i] = in[p * plane + size_t(sy) * w + sx];
}

template <typename T>
__global__ void crop_kernel(const T* in, T* out, size_t total, int in_h, int in_w, long long top,
                            long long left, int out_h, int out_w) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= total) return;
  const size_t out_plane = size_t(out_h) * out_w;
  const size_t p = i / out_plane;
  const long long sy = top + static_cast<long long>((i % out_plane) / out_w);
  const long long sx = left + static_cast<long long>(i % out_w);
  const bool inside = sy >= 0 && sy < in_h && sx >= 0 && sx < in_w;
  out[i] = inside ? in[p * size_t(in_h) * in_w + size_t(sy) * in_w + size_t(sx)] : T(0);
}

// torchvision's convert_image_dtype as transforms.convert_dtype computes it in numpy:
// uint8 -> float divides in the float type; float -> uint8 multiplies by 255.999 in the
// float type and truncates (saturating outside [0, 1]); float -> float rounds to nearest.
template <typename In, typename Out>
__device__ Out convert_value(In v) {
  if constexpr (std::is_same<In, Out>::value) {
    return v;
  } else if constexpr (std::is_integral<In>::value) {
    return static_cast<Out>(v) / static_cast<Out>(255);
  } else if constexpr (std::is_integral<Out>::value) {
    const In scaled = v * static_cast<In>(255.0 + 1.0 - 1e-3);
    return static_cast<Out>(scaled <= In(0) ? In(0) : (scaled >= In(255) ? In(255) : scaled));
  } else {
    return static_cast<Out>(v);
  }
}

template <typename In, typename Out>
__global__ void convert_kernel(const In* in, Out* out, size_t total) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < total) out[i] = convert_value<In, Out>(in[i]);
}

template <typename T>
__global__ void normalize_kernel(const T* in, T* out, size_t total, size_t channels,
                                 size_t plane_size, const T* mean, const T* std) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= total) return;
  const size_t c = (i / plane_size) % channels;
  out[i] = (in[i] - mean[c]) / std[c];
}

constexpr int kThreads = 256;

unsigned blocks_for(size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

const char* upload_axis(const AxisTable* t, DeviceBuffer bufs[3], DeviceAxis* out) {
  const char* err;
  if ((err = upload(bufs[0], t->start, sizeof(int) * t->out_size))) return err;
  if ((err = upload(bufs[1], t->count, sizeof(int) * t->out_size))) return err;
  if ((err = upload(bufs[2], t->weights, sizeof(float) * size_t(t->out_size) * t->taps))) return err;
  *out = DeviceAxis{t->in_size, t->out_size, t->taps, static_cast<const int*>(bufs[0].ptr),
                    static_cast<const int*>(bufs[1].ptr), static_cast<const float*>(bufs[2].ptr)};
  return nullptr;
}

template <typename T>
const char* resize_typed(const T* in, T* out, size_t planes, const AxisTable* rows,
                         const AxisTable* cols) {
  const int in_h = rows->in_size, out_h = rows->out_size;
  const int in_w = cols->in_size, out_w = cols->out_size;
  const size_t in_count = planes * in_h * in_w, out_count = planes * out_h * out_w;
  const char* err;
  DeviceBuffer d_in, d_tmp, d_out, row_bufs[3], col_bufs[3];
  DeviceAxis row_axis{}, col_axis{};
  if ((err = upload(d_in, in, sizeof(T) * in_count))) return err;
  if ((err = upload(d_out, nullptr, sizeof(T) * out_count))) return err;
  if ((err = upload_axis(rows, row_bufs, &row_axis))) return err;
  if ((err = upload_axis(cols, col_bufs, &col_axis))) return err;
  const T* src = static_cast<const T*>(d_in.ptr);
  T* dst = static_cast<T*>(d_out.ptr);
  const bool horizontal = out_w != in_w, vertical = out_h != in_h;
  if (horizontal && vertical) {
    if ((err = upload(d_tmp, nullptr, sizeof(T) * planes * in_h * out_w))) return err;
    T* tmp = static_cast<T*>(d_tmp.ptr);
    resample_rows<T><<<blocks_for(planes * in_h * out_w), kThreads>>>(src, tmp, planes * in_h, col_axis);
    resample_cols<T><<<blocks_for(out_count), kThreads>>>(tmp, dst, planes, out_w, row_axis);
  } else if (horizontal) {
    resample_rows<T><<<blocks_for(out_count), kThreads>>>(src, dst, planes * in_h, col_axis);
  } else if (vertical) {
    resample_cols<T><<<blocks_for(out_count), kThreads>>>(src, dst, planes, out_w, row_axis);
  } else {
    EV_CUDA_TRY(cudaMemcpy(dst, src, sizeof(T) * in_count, cudaMemcpyDeviceToDevice));
  }
  EV_CUDA_TRY(cudaGetLastError());
  EV_CUDA_TRY(cudaMemcpy(out, dst, sizeof(T) * out_count, cudaMemcpyDeviceToHost));
  return nullptr;
}

template <typename T>
const char* flip_typed(const T* in, T* out, size_t planes, int h, int w, bool horizontal) {
  const size_t total = planes * size_t(h) * w;
  const char* err;
  DeviceBuffer d_in, d_out;
  if ((err = upload(d_in, in, sizeof(T) * total))) return err;
  if ((err = upload(d_out, nullptr, sizeof(T) * total))) return err;
  if (total) {
    flip_kernel<T><<<blocks_for(total), kThreads>>>(static_cast<const T*>(d_in.ptr),
                                                  static_cast<T*>(d_out.ptr), total, h, w, horizontal);
  }
  EV_CUDA_TRY(cudaGetLastError());
  EV_CUDA_TRY(cudaMemcpy(out, d_out.ptr, sizeof(T) * total, cudaMemcpyDeviceToHost));
  return nullptr;
}

template <typename T>
const char* crop_typed(const T* in, T* out, size_t planes, int in_h, int in_w, long long top, long long left,
                       int out_h, int out_w) {
  const size_t in_count = planes * size_t(in_h) * in_w, total = planes * size_t(out_h) * out_w;
  const char* err;
  DeviceBuffer d_in, d_out;
  if ((err = upload(d_in, in, sizeof(T) * in_count))) return err;
  if ((err = upload(d_out, nullptr, sizeof(T) * total))) return err;
  if (total) {
    crop_kernel<T><<<blocks_for(total), kThreads>>>(static_cast<const T*>(d_in.ptr), static_cast<T*>(d_out.ptr),
                                                  total, in_h, in_w, top, left, out_h, out_w);
  }
  EV_CUDA_TRY(cudaGetLastError());
  EV_CUDA_TRY(cudaMemcpy(out, d_out.ptr, sizeof(T) * total, cudaMemcpyDeviceToHost));
  return nullptr;
}

template <typename In, typename Out>
const char* convert_typed(const In* in, Out* out, size_t count) {
  const char* err;
  DeviceBuffer d_in, d_out;
  if ((err = upload(d_in, in, sizeof(In) * count))) return err;
  if ((err = upload(d_out, nullptr, sizeof(Out) * count))) return err;
  if (count) {
    convert_kernel<In, Out><<<blocks_for(count), kThreads>>>(static_cast<const In*>(d_in.ptr),
                                                            static_cast<Out*>(d_out.ptr), count);
  }
  EV_CUDA_TRY(cudaGetLastError());
  EV_CUDA_TRY(cudaMemcpy(out, d_out.ptr, sizeof(Out) * count, cudaMemcpyDeviceToHost));
  return nullptr;
}

template <typename In>
const char* convert_from(const In* in, int out_dtype, void* out, size_t count) {
  switch (out_dtype) {
    case UINT8: return convert_typed(in, static_cast<uint8_t*>(out), count);
    case FLOAT32: return convert_typed(in, static_cast<float*>(out), count);
    case FLOAT64: return convert_typed(in, static_cast<double*>(out), count);
  }
  return "unsupported dtype";
}

template <typename T>
const char* normalize_typed(const T* in, T* out, size_t batch, size_t channels, size_t plane_size,
                            const double* mean, const double* std) {
  const size_t total = batch * channels * plane_size;
  std::vector<T> mean_t(mean, mean + channels), std_t(std, std + channels);
  const char* err;
  DeviceBuffer d_in, d_out, d_mean, d_std;
  if ((err = upload(d_in, in, sizeof(T) * total))) return err;
  if ((err = upload(d_out, nullptr, sizeof(T) * total))) return err;
  if ((err = upload(d_mean, mean_t.data(), sizeof(T) * channels))) return err;
  if ((err = upload(d_std, std_t.data(), sizeof(T) * channels))) return err;
  if (total) {
    normalize_kernel<T><<<blocks_for(total), kThreads>>>(
        static_cast<const T*>(d_in.ptr), static_cast<T*>(d_out.ptr), total, channels, plane_size,
        static_cast<const T*>(d_mean.ptr), static_cast<const T*>(d_std.ptr));
  }
  EV_CUDA_TRY(cudaGetLastError());
  EV_CUDA_TRY(cudaMemcpy(out, d_out.ptr, sizeof(T) * total, cudaMemcpyDeviceToHost));
  return nullptr;
}

}  // namespace

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver / no device" status
    return 0;
  }
  return count;
}

const char* resize(int dtype, const void* in, void* out, size_t planes, const AxisTable* rows,
                   const AxisTable* cols) {
  switch (dtype) {
    case UINT8: return resize_typed(static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out), planes, rows, cols);
    case FLOAT32: return resize_typed(static_cast<const float*>(in), static_cast<float*>(out), planes, rows, cols);
    case FLOAT64: return resize_typed(static_cast<const double*>(in), static_cast<double*>(out), planes, rows, cols);
  }
  return "unsupported dtype";
}

const char* crop(int dtype, const void* in, void* out, size_t planes, int in_h, int in_w, long long top,
                 long long left, int out_h, int out_w) {
  switch (dtype) {
    case UINT8: return crop_typed(static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out), planes, in_h, in_w, top, left, out_h, out_w);
    case FLOAT32: return crop_typed(static_cast<const float*>(in), static_cast<float*>(out), planes, in_h, in_w, top, left, out_h, out_w);
    case FLOAT64: return crop_typed(static_cast<const double*>(in), static_cast<double*>(out), planes, in_h, in_w, top, left, out_h, out_w);
  }
  return "unsupported dtype";
}

const char* convert(int in_dtype, int out_dtype, const void* in, void* out, size_t count) {
  switch (in_dtype) {
    case UINT8: return convert_from(static_cast<const uint8_t*>(in), out_dtype, out, count);
    case FLOAT32: return convert_from(static_cast<const float*>(in), out_dtype, out, count);
    case FLOAT64: return convert_from(static_cast<const double*>(in), out_dtype, out, count);
  }
  return "unsupported dtype";
}

const char* flip(int dtype, const void* in, void* out, size_t planes, int h, int w, bool horizontal) {
  switch (dtype) {
    case UINT8: return flip_typed(static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out), planes, h, w, horizontal);
    case FLOAT32: return flip_typed(static_cast<const float*>(in), static_cast<float*>(out), planes, h, w, horizontal);
    case FLOAT64: return flip_typed(static_cast<const double*>(in), static_cast<double*>(out), planes, h, w, horizontal);
  }
  return "unsupported dtype";
}

const char* normalize(int dtype, const void* in, void* out, size_t batch, size_t channels,
                      size_t plane_size, const double* mean, const double* std) {
  switch (dtype) {
    case FLOAT32: return normalize_typed(static_cast<const float*>(in), static_cast<float*>(out), batch, channels, plane_size, mean, std);
    case FLOAT64: return normalize_typed(static_cast<const double*>(in), static_cast<double*>(out), batch, channels, plane_size, mean, std);
  }
  return "normalize needs a float32 or float64 input";
}

}  // namespace cuda
}  // namespace embervision
