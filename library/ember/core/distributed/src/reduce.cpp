// Element-wise reduction kernels for the four supported dtypes.
#include <algorithm>
#include <cstring>

#include "ember/distributed/errors.h"
#include "ember/distributed/process_group.h"

namespace ember::distributed {
namespace {

template <typename T>
void reduce_typed(T* dst, const T* src, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      for (size_t i = 0; i < n; ++i) dst[i] += src[i];
      return;
    case ReduceOp::kMax:
      for (size_t i = 0; i < n; ++i) dst[i] = std::max(dst[i], src[i]);
      return;
    case ReduceOp::kMin:
      for (size_t i = 0; i < n; ++i) dst[i] = std::min(dst[i], src[i]);
      return;
  }
  throw DistributedError("reduce", "unknown reduce op");
}

template <typename T>
void divide_typed(T* data, size_t n, int64_t divisor) {
  const T d = static_cast<T>(divisor);
  for (size_t i = 0; i < n; ++i) data[i] /= d;
}

}  // namespace

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
  }
  throw DistributedError("dtype", "unknown dtype");
}

void reduce_into(void* dst, const void* src, size_t count, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kFloat32:
      return reduce_typed(static_cast<float*>(dst), static_cast<const float*>(src), count, op);
    case DType::kFloat64:
      return reduce_typed(static_cast<double*>(dst), static_cast<const double*>(src), count, op);
    case DType::kInt32:
      return reduce_typed(static_cast<int32_t*>(dst), static_cast<const int32_t*>(src), count, op);
    case DType::kInt64:
      return reduce_typed(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), count, op);
  }
  throw DistributedError("reduce", "unknown dtype");
}

void divide(void* data, size_t count, DType dtype, int64_t divisor) {
  switch (dtype) {
    case DType::kFloat32:
      return divide_typed(static_cast<float*>(data), count, divisor);
    case DType::kFloat64:
      return divide_typed(static_cast<double*>(data), count, divisor);
    case DType::kInt32:
      return divide_typed(static_cast<int32_t*>(data), count, divisor);
    case DType::kInt64:
      return divide_typed(static_cast<int64_t*>(data), count, divisor);
  }
  throw DistributedError("divide", "unknown dtype");
}

}  // namespace ember::distributed
