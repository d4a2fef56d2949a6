// Calls ember's C++ API and checks the results against plain loops; exits non-zero and says
// which check failed otherwise.
#include <cmath>
#include <complex>
#include <cstdio>
#include <vector>

#include "ember/ember.h"

namespace {
int failures = 0;

void check(bool ok, const char* what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what);
  if (!ok) ++failures;
}

bool close(double a, double b, double tol) { return std::fabs(a - b) <= tol * (1 + std::fabs(b)); }
}  // namespace

int main() {
  ember::set_num_threads(2);
  check(ember::get_num_threads() == 2, "set_num_threads/get_num_threads");

  std::vector<float> a = {1, 2, 3, 4}, b = {10, 20, 30, 40}, out(4);
  ember::add(a.data(), b.data(), out.data(), 4);
  check(out[0] == 11 && out[3] == 44, "add");
  ember::mul(a.data(), b.data(), out.data(), 4);
  check(out[1] == 40 && out[2] == 90, "mul");
  std::vector<float> x = {-1, 0.5f, -2, 3};
  ember::relu(x.data(), out.data(), 4);
  check(out[0] == 0 && out[1] == 0.5f && out[3] == 3, "relu");
  ember::exp(x.data(), out.data(), 4);
  check(close(out[3], std::exp(3.0), 1e-6), "exp");

  // matmul against a triple loop, odd sizes
  const int64_t m = 37, k = 29, n = 41;
  std::vector<float> ma(m * k), mb(k * n), mc(m * n);
  for (int64_t i = 0; i < m * k; ++i) ma[i] = static_cast<float>((i * 7) % 13) - 6;
  for (int64_t i = 0; i < k * n; ++i) mb[i] = static_cast<float>((i * 5) % 11) - 5;
  ember::matmul(ma.data(), mb.data(), mc.data(), m, k, n);
  bool mm_ok = true;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += double(ma[i * k + p]) * mb[p * n + j];
      mm_ok = mm_ok && close(mc[i * n + j], s, 1e-5);
    }
  check(mm_ok, "matmul");

  std::vector<float> logits = {1, 2, 3, 1, 1, 1}, probs(6);
  ember::softmax(logits.data(), probs.data(), 2, 3);
  check(close(probs[0] + probs[1] + probs[2], 1.0, 1e-6) && close(probs[4], 1.0 / 3, 1e-6), "softmax");

  // conv2d: 1x1x3x3 input of ones, 2x2 kernel of ones, padding 0 -> every output is 4 (+ bias)
  std::vector<float> img(9, 1.0f), w(4, 1.0f), bias = {0.5f}, conv(4);
  ember::conv2d(img.data(), w.data(), bias.data(), conv.data(), 1, 1, 3, 3, 1, 2, 2, 1, 0);
  check(conv[0] == 4.5f && conv[3] == 4.5f, "conv2d");

  // FFT of an impulse is all ones; inverse brings it back
  std::vector<std::complex<double>> sig(12, 0.0), spec(12);
  sig[0] = 1.0;
  ember::fft::c2c(sig.data(), spec.data(), 12, 1, true, 1.0);
  bool fft_ok = true;
  for (auto v : spec) fft_ok = fft_ok && close(v.real(), 1.0, 1e-12) && std::fabs(v.imag()) < 1e-12;
  check(fft_ok, "fft::c2c");

  ember::set_deterministic(true);
  bool threw = false;
  try {
    std::vector<float> dst(2, 0.0f), src(2, 1.0f);
    int64_t idx[1] = {0};
    ember::index_add(dst.data(), 1, 2, idx, src.data(), 1);
  } catch (const ember::NondeterministicError&) {
    threw = true;
  }
  check(threw, "index_add refuses in deterministic mode");
  ember::set_deterministic(false);

  check(!ember::cuda::compiled_with_cuda() || !ember::cuda::arch_list().empty(), "cuda arch list");
  std::printf("ember %s: %d failure(s)\n", EMBER_VERSION_STRING, failures);
  return failures == 0 ? 0 : 1;
}
