// ember's CUDA kernels and their host wrappers. Host arrays in and out: each call copies
// its inputs to the device, runs, and copies the result back. Portable to CUDA 11.8 and
// sm_37 (no newer intrinsics; double atomicAdd emulated below sm_60).
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "ember/cuda.h"
#include "ember/deterministic.h"

namespace ember {
namespace cuda {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("ember.cuda: ") + what + ": " + cudaGetErrorString(err));
}

void require_device() {
  if (!is_available())
    throw std::runtime_error("ember.cuda: no CUDA device is usable: " + unavailable_reason());
}

// Device memory owned for the duration of one call.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(int64_t count) : count_(count) {
    if (count_ > 0) check(cudaMalloc(&ptr_, sizeof(T) * count_), "cudaMalloc");
  }
  DeviceBuffer(const T* host, int64_t count) : DeviceBuffer(count) {
    if (count_ > 0)
      check(cudaMemcpy(ptr_, host, sizeof(T) * count_, cudaMemcpyHostToDevice), "copy to device");
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return static_cast<T*>(ptr_); }
  void to_host(T* host) const {
    if (count_ > 0)
      check(cudaMemcpy(host, ptr_, sizeof(T) * count_, cudaMemcpyDeviceToHost), "copy to host");
  }

 private:
  void* ptr_ = nullptr;
  int64_t count_;
};

int blocks_for(int64_t n, int threads) {
  return static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 65535));
}

void check_launch(const char* kernel) {
  check(cudaGetLastError(), kernel);
  check(cudaDeviceSynchronize(), kernel);
}

template <typename T>
__global__ void binary_kernel(int op, const T* a, const T* b, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    T x = a[i], y = b[i];
    out[i] = op == 0 ? x + y : op == 1 ? x - y : op == 2 ? x * y : x / y;
  }
}

template <typename T>
__device__ T unary_value(int op, T v) {
  switch (op) {
    case 0: return v > T(0) ? v : (v != v ? v : T(0));
    // ::exp etc.: the CUDA math overloads, not ember's array functions of the same name.
    case 1: return ::exp(v);
    case 2: return ::log(v);
    case 3: return ::tanh(v);
    default: return v >= T(0) ? T(1) / (T(1) + ::exp(-v)) : ::exp(v) / (T(1) + ::exp(v));
  }
}

template <typename T>
__global__ void unary_kernel(int op, const T* x, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = unary_value(op, x[i]);
}

// One block per (outer, inner) output when inner == 1 (tree reduction in shared memory);
// otherwise one thread per output walking the reduced axis (coalesced over inner).
// Both use a fixed order, so results are reproducible.
template <typename T, bool IsMax>
__global__ void reduce_rows_kernel(const T* x, T* out, int64_t len) {
  extern __shared__ unsigned char smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);
  const T* row = x + blockIdx.x * len;
  T acc = IsMax ? row[0] : T(0);
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
    T v = row[i];
    acc = IsMax ? ((v > acc || v != v) ? v : acc) : acc + v;
  }
  smem[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      T o = smem[threadIdx.x + s], m = smem[threadIdx.x];
      smem[threadIdx.x] = IsMax ? ((o > m || o != o) ? o : m) : m + o;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = smem[0];
}

template <typename T, bool IsMax>
__global__ void reduce_strided_kernel(const T* x, T* out, int64_t outer, int64_t len,
                                      int64_t inner) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < outer * inner;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = t / inner, i = t % inner;
    const T* base = x + o * len * inner + i;
    T acc = IsMax ? base[0] : T(0);
    for (int64_t l = 0; l < len; ++l) {
      T v = base[l * inner];
      acc = IsMax ? ((v > acc || v != v) ? v : acc) : acc + v;
    }
    out[t] = acc;
  }
}

constexpr int kTile = 16;

template <typename T>
__global__ void matmul_kernel(const T* a, const T* b, T* c, int64_t m, int64_t k, int64_t n) {
  __shared__ T as[kTile][kTile];
  __shared__ T bs[kTile][kTile];
  const int64_t row = blockIdx.y * int64_t(kTile) + threadIdx.y;
  const int64_t col = blockIdx.x * int64_t(kTile) + threadIdx.x;
  T acc = 0;
  for (int64_t p0 = 0; p0 < k; p0 += kTile) {
    as[threadIdx.y][threadIdx.x] =
        (row < m && p0 + threadIdx.x < k) ? a[row * k + p0 + threadIdx.x] : T(0);
    bs[threadIdx.y][threadIdx.x] =
        (col < n && p0 + threadIdx.y < k) ? b[(p0 + threadIdx.y) * n + col] : T(0);
    __syncthreads();
    for (int p = 0; p < kTile; ++p) acc += as[threadIdx.y][p] * bs[p][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) c[row * n + col] = acc;
}

__device__ void atomic_add(float* addr, float v) { atomicAdd(addr, v); }

__device__ void atomic_add(double* addr, double v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 600
  atomicAdd(addr, v);
#else
  auto* bits = reinterpret_cast<unsigned long long*>(addr);
  unsigned long long old = *bits, assumed;
  do {
    assumed = old;
    old = atomicCAS(bits, assumed,
                    __double_as_longlong(v + __longlong_as_double(static_cast<long long>(assumed))));
  } while (assumed != old);
#endif
}

template <typename T>
__global__ void index_add_kernel(T* out, int64_t cols, const int64_t* index, const T* src,
                                 int64_t nidx) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < nidx * cols;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = t / cols, j = t % cols;
    atomic_add(out + index[i] * cols + j, src[t]);
  }
}

// Every host wrapper returns before allocating or launching when there is no element to
// compute: a grid of zero blocks is an invalid launch configuration, not a no-op.
template <typename T>
void binary_impl(BinaryOp op, const T* a, const T* b, T* out, int64_t n) {
  require_device();
  if (n <= 0) return;
  DeviceBuffer<T> da(a, n), db(b, n), dout(n);
  binary_kernel<<<blocks_for(n, 256), 256>>>(static_cast<int>(op), da.get(), db.get(), dout.get(), n);
  check_launch("binary kernel");
  dout.to_host(out);
}

template <typename T>
void unary_impl(UnaryOp op, const T* x, T* out, int64_t n) {
  require_device();
  if (n <= 0) return;
  DeviceBuffer<T> dx(x, n), dout(n);
  unary_kernel<<<blocks_for(n, 256), 256>>>(static_cast<int>(op), dx.get(), dout.get(), n);
  check_launch("unary kernel");
  dout.to_host(out);
}

template <typename T, bool IsMax>
void reduce_impl(const T* x, T* out, int64_t outer, int64_t len, int64_t inner) {
  require_device();
  if (outer * inner <= 0) return;  // no output element
  if (len <= 0) {
    if (IsMax) throw std::invalid_argument("ember.cuda: max of an empty axis has no identity");
    std::fill(out, out + outer * inner, T(0));  // the sum of nothing, as numpy gives it
    return;
  }
  DeviceBuffer<T> dx(x, outer * len * inner), dout(outer * inner);
  if (inner == 1 && outer <= 65535) {
    const int threads = 256;
    reduce_rows_kernel<T, IsMax><<<static_cast<int>(outer), threads, threads * sizeof(T)>>>(
        dx.get(), dout.get(), len);
  } else {
    reduce_strided_kernel<T, IsMax><<<blocks_for(outer * inner, 256), 256>>>(
        dx.get(), dout.get(), outer, len, inner);
  }
  check_launch("reduction kernel");
  dout.to_host(out);
}

template <typename T>
void matmul_impl(const T* a, const T* b, T* out, int64_t m, int64_t k, int64_t n) {
  require_device();
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    std::fill(out, out + m * n, T(0));  // (m x 0) @ (0 x n): zeros, no kernel
    return;
  }
  DeviceBuffer<T> da(a, m * k), db(b, k * n), dc(m * n);
  dim3 block(kTile, kTile);
  dim3 grid(static_cast<unsigned>((n + kTile - 1) / kTile), static_cast<unsigned>((m + kTile - 1) / kTile));
  matmul_kernel<<<grid, block>>>(da.get(), db.get(), dc.get(), m, k, n);
  check_launch("matmul kernel");
  dc.to_host(out);
}

template <typename T>
void index_add_impl(T* out, int64_t rows, int64_t cols, const int64_t* index, const T* source,
                    int64_t nidx) {
  alert_not_deterministic("index_add (CUDA, atomicAdd)");
  require_device();
  for (int64_t i = 0; i < nidx; ++i)
    if (index[i] < 0 || index[i] >= rows) throw std::out_of_range("index_add: index out of range");
  if (nidx * cols <= 0) return;  // nothing to add: out is unchanged
  DeviceBuffer<T> dout(out, rows * cols), dsrc(source, nidx * cols);
  DeviceBuffer<int64_t> didx(index, nidx);
  index_add_kernel<<<blocks_for(nidx * cols, 256), 256>>>(dout.get(), cols, didx.get(), dsrc.get(), nidx);
  check_launch("index_add kernel");
  dout.to_host(out);
}

}  // namespace

int device_count() {
  int count = 0;
  // Without a driver or GPU the runtime reports an error here instead of failing to load.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error for later calls
    return 0;
  }
  return count;
}

bool is_available() { return device_count() > 0; }

std::string unavailable_reason() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(err);
  }
  return count > 0 ? "" : "no CUDA devices found";
}

void binary(BinaryOp op, const float* a, const float* b, float* out, int64_t n) { binary_impl(op, a, b, out, n); }
void binary(BinaryOp op, const double* a, const double* b, double* out, int64_t n) { binary_impl(op, a, b, out, n); }
void unary(UnaryOp op, const float* x, float* out, int64_t n) { unary_impl(op, x, out, n); }
void unary(UnaryOp op, const double* x, double* out, int64_t n) { unary_impl(op, x, out, n); }
void sum_axis(const float* x, float* out, int64_t o, int64_t l, int64_t i) { reduce_impl<float, false>(x, out, o, l, i); }
void sum_axis(const double* x, double* out, int64_t o, int64_t l, int64_t i) { reduce_impl<double, false>(x, out, o, l, i); }
void max_axis(const float* x, float* out, int64_t o, int64_t l, int64_t i) { reduce_impl<float, true>(x, out, o, l, i); }
void max_axis(const double* x, double* out, int64_t o, int64_t l, int64_t i) { reduce_impl<double, true>(x, out, o, l, i); }
void matmul(const float* a, const float* b, float* out, int64_t m, int64_t k, int64_t n) { matmul_impl(a, b, out, m, k, n); }
void matmul(const double* a, const double* b, double* out, int64_t m, int64_t k, int64_t n) { matmul_impl(a, b, out, m, k, n); }
void index_add(float* out, int64_t rows, int64_t cols, const int64_t* index, const float* source, int64_t nidx) {
  index_add_impl(out, rows, cols, index, source, nidx);
}
void index_add(double* out, int64_t rows, int64_t cols, const int64_t* index, const double* source, int64_t nidx) {
  index_add_impl(out, rows, cols, index, source, nidx);
}

}  // namespace cuda
}  // namespace ember
