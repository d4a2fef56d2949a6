// FFT plans: a self-sorting (Stockham) mixed-radix transform, and Bluestein's algorithm
// on top of it for lengths with large prime factors.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace ember {
namespace fft {
namespace detail {

struct cpx {
  double re, im;
};

inline cpx operator+(cpx a, cpx b) { return {a.re + b.re, a.im + b.im}; }
inline cpx operator-(cpx a, cpx b) { return {a.re - b.re, a.im - b.im}; }
inline cpx operator*(cpx a, cpx b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
inline cpx operator*(cpx a, double s) { return {a.re * s, a.im * s}; }
inline cpx conj(cpx a) { return {a.re, -a.im}; }

// exp(-2*pi*i*idx/n), accurate to about an ulp for any idx.
cpx unit_root(int64_t idx, int64_t n);

// A complex transform of one length. Immutable once built, shared between threads.
class Plan {
 public:
  explicit Plan(int64_t n);
  int64_t size() const { return n_; }
  // Scratch (in complex elements) that execute() needs besides the data.
  int64_t scratch_size() const;
  // In-place transform of data[0..n); forward uses exp(-...), backward exp(+...);
  // the result is multiplied by scale.
  void execute(cpx* data, cpx* scratch, bool forward, double scale) const;

 private:
  struct Stage {
    int radix;
    int64_t l;       // transform length done before this stage
    int64_t m_next;  // number of interleaved sequences after this stage
    int64_t twiddle_offset;
    int64_t root_offset;  // cos/sin table for generic odd radices
  };
  template <bool Fwd> void run_stages(cpx* data, cpx* scratch) const;
  template <bool Fwd> void run_bluestein(cpx* data, cpx* scratch) const;

  int64_t n_;
  std::vector<Stage> stages_;
  std::vector<cpx> twiddles_;
  std::vector<double> roots_;  // pairs (cos, sin) for generic radices
  // Bluestein: chirp[j] = exp(-i*pi*j^2/n), kernel_ = FFT_m of the conjugate chirp / m.
  bool bluestein_ = false;
  int64_t m_ = 0;
  std::shared_ptr<const Plan> sub_;
  std::vector<cpx> chirp_, kernel_;
};

// Real transforms of one length: even lengths run a half-length complex transform.
class RealPlan {
 public:
  explicit RealPlan(int64_t n);
  int64_t scratch_size() const;
  // in: n reals; out: n/2+1 coefficients.
  void forward(const double* in, cpx* out, cpx* scratch, double scale) const;
  // in: n/2+1 coefficients; out: n reals (unnormalized inverse times scale).
  void backward(const cpx* in, double* out, cpx* scratch, double scale) const;

 private:
  int64_t n_;
  std::shared_ptr<const Plan> plan_;  // length n/2 (even n) or n (odd n)
  std::vector<cpx> twiddles_;         // exp(-2*pi*i*k/n), k in [0, n/2]
};

std::shared_ptr<const Plan> get_plan(int64_t n);
std::shared_ptr<const RealPlan> get_real_plan(int64_t n);

}  // namespace detail
}  // namespace fft
}  // namespace ember
