// ember's CUDA backend. Present in every build: on a build without CUDA,
// compiled_with_cuda() is false and every op throws std::runtime_error.
// The ops take and return host memory; device buffers live only for the call.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ember/export.h"
#include "ember/kernels.h"

namespace ember {
namespace cuda {

EMBER_API bool compiled_with_cuda();
// The SASS targets compiled in, e.g. {"sm_75", "sm_80"}; empty on CPU builds.
EMBER_API std::vector<std::string> arch_list();
// Devices usable now (0 when there is no driver, no GPU, or a CPU build). Never throws.
EMBER_API int device_count();
EMBER_API bool is_available();
// Why is_available() is false, in words ("" when it is true).
EMBER_API std::string unavailable_reason();

EMBER_API void binary(BinaryOp op, const float* a, const float* b, float* out, int64_t n);
EMBER_API void binary(BinaryOp op, const double* a, const double* b, double* out, int64_t n);
EMBER_API void unary(UnaryOp op, const float* x, float* out, int64_t n);
EMBER_API void unary(UnaryOp op, const double* x, double* out, int64_t n);
EMBER_API void sum_axis(const float* x, float* out, int64_t outer, int64_t len, int64_t inner);
EMBER_API void sum_axis(const double* x, double* out, int64_t outer, int64_t len, int64_t inner);
EMBER_API void max_axis(const float* x, float* out, int64_t outer, int64_t len, int64_t inner);
EMBER_API void max_axis(const double* x, double* out, int64_t outer, int64_t len, int64_t inner);
EMBER_API void matmul(const float* a, const float* b, float* out, int64_t m, int64_t k, int64_t n);
EMBER_API void matmul(const double* a, const double* b, double* out, int64_t m, int64_t k,
                      int64_t n);
// atomicAdd scatter: nondeterministic, throws when ember::is_deterministic().
EMBER_API void index_add(float* out, int64_t rows, int64_t cols, const int64_t* index,
                         const float* source, int64_t nidx);
EMBER_API void index_add(double* out, int64_t rows, int64_t cols, const int64_t* index,
                         const double* source, int64_t nidx);

}  // namespace cuda
}  // namespace ember
