// GEMM for x86-64 CPUs with AVX-512F. Built with -mavx512f -mfma; only called after a
// run-time CPU check, so the library still runs on any x86-64 CPU.
#define EMBER_GEMM_NS avx512
#define EMBER_VEC_BYTES 64
#include "gemm_kernel.inc"

namespace ember {
namespace detail {
void gemm_avx512(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
  avx512::gemm(a, b, c, m, k, n);
}
void gemm_avx512(const double* a, const double* b, double* c, int64_t m, int64_t k, int64_t n) {
  avx512::gemm(a, b, c, m, k, n);
}
}  // namespace detail
}  // namespace ember
