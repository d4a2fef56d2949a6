// Public FFT entry points: batches of contiguous rows, split across the thread pool.
#include "ember/fft.h"

#include <vector>

#include "fft_plan.h"
#include "../parallel.h"

namespace ember {
namespace fft {
namespace detail {
int64_t cache_size();
void clear_cache();
}  // namespace detail

namespace {
// Rows per task such that each task does at least ~64k points of work.
int64_t row_grain(int64_t n) { return std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(n, 1)); }
}  // namespace

void c2c(const cdouble* in, cdouble* out, int64_t n, int64_t howmany, bool forward,
         double scale) {
  if (n <= 0 || howmany <= 0) return;
  auto plan = detail::get_plan(n);
  auto* src = reinterpret_cast<const detail::cpx*>(in);
  auto* dst = reinterpret_cast<detail::cpx*>(out);
  ember::detail::parallel_for(0, howmany, row_grain(n), [&](int64_t lo, int64_t hi) {
    std::vector<detail::cpx> scratch(plan->scratch_size());
    for (int64_t r = lo; r < hi; ++r) {
      if (src != dst) std::copy(src + r * n, src + (r + 1) * n, dst + r * n);
      plan->execute(dst + r * n, scratch.data(), forward, scale);
    }
  });
}

void r2c(const double* in, cdouble* out, int64_t n, int64_t howmany, double scale) {
  if (n <= 0 || howmany <= 0) return;
  auto plan = detail::get_real_plan(n);
  auto* dst = reinterpret_cast<detail::cpx*>(out);
  const int64_t nout = n / 2 + 1;
  ember::detail::parallel_for(0, howmany, row_grain(n), [&](int64_t lo, int64_t hi) {
    std::vector<detail::cpx> scratch(plan->scratch_size());
    for (int64_t r = lo; r < hi; ++r) plan->forward(in + r * n, dst + r * nout, scratch.data(), scale);
  });
}

void c2r(const cdouble* in, double* out, int64_t n, int64_t howmany, double scale) {
  if (n <= 0 || howmany <= 0) return;
  auto plan = detail::get_real_plan(n);
  auto* src = reinterpret_cast<const detail::cpx*>(in);
  const int64_t nin = n / 2 + 1;
  ember::detail::parallel_for(0, howmany, row_grain(n), [&](int64_t lo, int64_t hi) {
    std::vector<detail::cpx> scratch(plan->scratch_size());
    for (int64_t r = lo; r < hi; ++r) plan->backward(src + r * nin, out + r * n, scratch.data(), scale);
  });
}

int64_t plan_cache_size() { return detail::cache_size(); }
void clear_plan_cache() { detail::clear_cache(); }

}  // namespace fft
}  // namespace ember
