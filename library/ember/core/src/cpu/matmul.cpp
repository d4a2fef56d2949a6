// matmul: picks the widest GEMM kernel the running CPU supports (checked once, at run time).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ember/kernels.h"

namespace ember {
namespace detail {
void gemm_generic(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n);
void gemm_generic(const double* a, const double* b, double* c, int64_t m, int64_t k, int64_t n);
#if defined(EMBER_HAVE_AVX2_KERNELS)
void gemm_avx2(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n);
void gemm_avx2(const double* a, const double* b, double* c, int64_t m, int64_t k, int64_t n);
void gemm_avx512(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n);
void gemm_avx512(const double* a, const double* b, double* c, int64_t m, int64_t k, int64_t n);
#endif

namespace {
enum class Isa { Generic, Avx2, Avx512 };

Isa detect_isa() {
#if defined(EMBER_HAVE_AVX2_KERNELS)
  __builtin_cpu_init();
  // EMBER_GEMM_ISA=generic|avx2 caps the choice (for testing the narrower kernels).
  const char* cap = std::getenv("EMBER_GEMM_ISA");
  const std::string limit = cap ? cap : "";
  if (limit == "generic") return Isa::Generic;
  if (limit != "avx2" && __builtin_cpu_supports("avx512f")) return Isa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
#endif
  return Isa::Generic;
}

template <typename T>
void matmul_dispatch(const T* a, const T* b, T* out, int64_t m, int64_t k, int64_t n) {
  static const Isa isa = detect_isa();
#if defined(EMBER_HAVE_AVX2_KERNELS)
  if (isa == Isa::Avx512) return gemm_avx512(a, b, out, m, k, n);
  if (isa == Isa::Avx2) return gemm_avx2(a, b, out, m, k, n);
#endif
  (void)isa;
  gemm_generic(a, b, out, m, k, n);
}
}  // namespace
}  // namespace detail

void matmul(const float* a, const float* b, float* out, int64_t m, int64_t k, int64_t n) {
  detail::matmul_dispatch(a, b, out, m, k, n);
}
void matmul(const double* a, const double* b, double* out, int64_t m, int64_t k, int64_t n) {
  detail::matmul_dispatch(a, b, out, m, k, n);
}

}  // namespace ember
