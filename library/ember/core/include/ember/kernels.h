// ember compute kernels: contiguous row-major arrays behind raw pointers.
//
// Every function is safe to call from several threads at once; large inputs are split
// across ember's own thread pool (see threading.h).
#pragma once

#include <cstdint>

#include "ember/export.h"

namespace ember {

// ---- elementwise, same length --------------------------------------------------------
EMBER_API void add(const float* a, const float* b, float* out, int64_t n);
EMBER_API void add(const double* a, const double* b, double* out, int64_t n);
EMBER_API void sub(const float* a, const float* b, float* out, int64_t n);
EMBER_API void sub(const double* a, const double* b, double* out, int64_t n);
EMBER_API void mul(const float* a, const float* b, float* out, int64_t n);
EMBER_API void mul(const double* a, const double* b, double* out, int64_t n);
EMBER_API void div(const float* a, const float* b, float* out, int64_t n);
EMBER_API void div(const double* a, const double* b, double* out, int64_t n);

EMBER_API void relu(const float* x, float* out, int64_t n);
EMBER_API void relu(const double* x, double* out, int64_t n);
EMBER_API void exp(const float* x, float* out, int64_t n);
EMBER_API void exp(const double* x, double* out, int64_t n);
EMBER_API void log(const float* x, float* out, int64_t n);
EMBER_API void log(const double* x, double* out, int64_t n);
EMBER_API void tanh(const float* x, float* out, int64_t n);
EMBER_API void tanh(const double* x, double* out, int64_t n);
EMBER_API void sigmoid(const float* x, float* out, int64_t n);
EMBER_API void sigmoid(const double* x, double* out, int64_t n);

// ---- elementwise with broadcasting ---------------------------------------------------
enum class BinaryOp { Add, Sub, Mul, Div };
enum class UnaryOp { Relu, Exp, Log, Tanh, Sigmoid };

// out (contiguous, shape[ndim]) = a op b, where a and b are read through element strides
// (a stride of 0 broadcasts that dimension).
EMBER_API void binary_strided(BinaryOp op, const float* a, const int64_t* a_strides,
                              const float* b, const int64_t* b_strides, float* out,
                              const int64_t* shape, int ndim);
EMBER_API void binary_strided(BinaryOp op, const double* a, const int64_t* a_strides,
                              const double* b, const int64_t* b_strides, double* out,
                              const int64_t* shape, int ndim);
EMBER_API void unary(UnaryOp op, const float* x, float* out, int64_t n);
EMBER_API void unary(UnaryOp op, const double* x, double* out, int64_t n);

// ---- reductions ----------------------------------------------------------------------
// Reduce x viewed as [outer, len, inner] over the middle axis into out[outer, inner].
EMBER_API void sum_axis(const float* x, float* out, int64_t outer, int64_t len, int64_t inner);
EMBER_API void sum_axis(const double* x, double* out, int64_t outer, int64_t len, int64_t inner);
EMBER_API void max_axis(const float* x, float* out, int64_t outer, int64_t len, int64_t inner);
EMBER_API void max_axis(const double* x, double* out, int64_t outer, int64_t len, int64_t inner);
// Sum of all n elements. Multithreaded; the combine order is fixed (bitwise reproducible
// for any thread count) when ember::is_deterministic(), otherwise it follows thread timing.
EMBER_API float sum_all(const float* x, int64_t n);
EMBER_API double sum_all(const double* x, int64_t n);
EMBER_API float max_all(const float* x, int64_t n);
EMBER_API double max_all(const double* x, int64_t n);

// ---- linear algebra and neural-network ops ------------------------------------------
// out[m,n] = a[m,k] @ b[k,n]
EMBER_API void matmul(const float* a, const float* b, float* out, int64_t m, int64_t k, int64_t n);
EMBER_API void matmul(const double* a, const double* b, double* out, int64_t m, int64_t k,
                      int64_t n);

// softmax along the last axis of x[rows, cols]
EMBER_API void softmax(const float* x, float* out, int64_t rows, int64_t cols);
EMBER_API void softmax(const double* x, double* out, int64_t rows, int64_t cols);

// NCL input, weight [c_out, c_in, k], out (n, c_out, ol); bias may be null.
EMBER_API void conv1d(const float* input, const float* weight, const float* bias, float* out,
                      int64_t n, int64_t c_in, int64_t l, int64_t c_out, int64_t k,
                      int64_t stride, int64_t padding);
EMBER_API void conv1d(const double* input, const double* weight, const double* bias,
                      double* out, int64_t n, int64_t c_in, int64_t l, int64_t c_out,
                      int64_t k, int64_t stride, int64_t padding);

// NCHW input, weight [c_out, c_in, kh, kw], out (n, c_out, oh, ow); bias may be null.
EMBER_API void conv2d(const float* input, const float* weight, const float* bias, float* out,
                      int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t c_out, int64_t kh,
                      int64_t kw, int64_t stride, int64_t padding);
EMBER_API void conv2d(const double* input, const double* weight, const double* bias,
                      double* out, int64_t n, int64_t c_in, int64_t h, int64_t w,
                      int64_t c_out, int64_t kh, int64_t kw, int64_t stride, int64_t padding);

// Output length of a convolution along one axis; throws std::invalid_argument for a
// stride < 1, a padding < 0 or too large, or a kernel larger than the padded input.
EMBER_API int64_t conv_out_size(int64_t in, int64_t k, int64_t stride, int64_t padding);

// out[index[i], :] += source[i, :] for out[rows, cols], source[nidx, cols].
// Threads race on repeated indices (atomic adds), so the summation order is not fixed:
// throws ember::NondeterministicError when ember::is_deterministic().
EMBER_API void index_add(float* out, int64_t rows, int64_t cols, const int64_t* index,
                         const float* source, int64_t nidx);
EMBER_API void index_add(double* out, int64_t rows, int64_t cols, const int64_t* index,
                         const double* source, int64_t nidx);

// ---- threads -------------------------------------------------------------------------
// Largest thread count set_num_threads accepts (EMBER_NUM_THREADS is clamped to it).
constexpr int kMaxThreads = 4096;
// Starts the pool's threads at once. Throws std::invalid_argument when n is outside
// 1..kMaxThreads, and std::runtime_error (naming the system's reason) when the threads
// cannot be started; the previous count then stays in force.
EMBER_API void set_num_threads(int n);
EMBER_API int get_num_threads();

}  // namespace ember
