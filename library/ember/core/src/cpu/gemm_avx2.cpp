// GEMM for x86-64 CPUs with AVX2 and FMA. Built with -mavx2 -mfma; only called after a
// run-time CPU check, so the library still runs on any x86-64 CPU.
#define EMBER_GEMM_NS avx2
#define EMBER_VEC_BYTES 32
#include "gemm_kernel.inc"

namespace ember {
namespace detail {
void gemm_avx2(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
  avx2::gemm(a, b, c, m, k, n);
}
void gemm_avx2(const double* a, const double* b, double* c, int64_t m, int64_t k, int64_t n) {
  avx2::gemm(a, b, c, m, k, n);
}
}  // namespace detail
}  // namespace ember
