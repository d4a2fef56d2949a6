// GEMM for the compiler's baseline instruction set (SSE2 on x86-64, NEON on arm64).
#define EMBER_GEMM_NS generic
#define EMBER_VEC_BYTES 16
#include "gemm_kernel.inc"

namespace ember {
namespace detail {
void gemm_generic(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
  generic::gemm(a, b, c, m, k, n);
}
void gemm_generic(const double* a, const double* b, double* c, int64_t m, int64_t k, int64_t n) {
  generic::gemm(a, b, c, m, k, n);
}
}  // namespace detail
}  // namespace ember
