#include "fft_plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

namespace ember {
namespace fft {
namespace detail {
namespace {

// Odd primes up to this size get their own O(p^2) butterfly; beyond it Bluestein may win.
constexpr int kMaxGenericRadix = 31;
constexpr int kMaxRadix = 64;

std::vector<int> factorize(int64_t n) {
  std::vector<int> f;
  while (n % 4 == 0) { f.push_back(4); n /= 4; }
  if (n % 2 == 0) { f.push_back(2); n /= 2; }
  for (int64_t p = 3; p * p <= n; p += 2)
    while (n % p == 0) { f.push_back(static_cast<int>(std::min<int64_t>(p, 1 << 30))); n /= p; }
  if (n > 1) f.push_back(n > (1 << 30) ? (1 << 30) : static_cast<int>(n));
  return f;
}

int64_t largest_factor(int64_t n) {
  int64_t largest = 1;
  for (int64_t p = 2; p * p <= n; ++p)
    while (n % p == 0) { largest = p; n /= p; }
  return std::max(largest, n);
}

// Smallest 2^a 3^b 5^c >= n.
int64_t good_size(int64_t n) {
  int64_t best = 1;
  while (best < n) best *= 2;
  for (int64_t f5 = 1; f5 < best; f5 *= 5)
    for (int64_t f35 = f5; f35 < best; f35 *= 3) {
      int64_t v = f35;
      while (v < n) v *= 2;
      best = std::min(best, v);
    }
  return best;
}

// j*j mod m without overflow, also on 32-bit targets that lack a 128-bit integer.
int64_t square_mod(int64_t j, int64_t m) {
  if (j < (int64_t(1) << 31)) return (j * j) % m;
  uint64_t result = 0, a = static_cast<uint64_t>(j % m), b = a;
  const uint64_t um = static_cast<uint64_t>(m);
  while (b) {
    if (b & 1) result = (result + a) % um;
    a = (a * 2) % um;
    b >>= 1;
  }
  return static_cast<int64_t>(result);
}

// Rough operation count of a mixed-radix transform of length n.
double mixed_radix_cost(int64_t n) {
  double cost = 0;
  for (int f : factorize(n)) cost += (f <= 5 ? f : 1.5 * f);
  return cost * static_cast<double>(n);
}

}  // namespace

cpx unit_root(int64_t idx, int64_t n) {
  idx %= n;
  if (idx < 0) idx += n;
  // long double keeps the angle's rounding error below double's ulp.
  const long double angle = -2.0L * 3.141592653589793238462643383279502884L *
                            static_cast<long double>(idx) / static_cast<long double>(n);
  return {static_cast<double>(std::cos(angle)), static_cast<double>(std::sin(angle))};
}

Plan::Plan(int64_t n) : n_(n) {
  if (n < 1) throw std::invalid_argument("fft: length must be >= 1");
  const int64_t big = largest_factor(n);
  if (big > kMaxGenericRadix) {
    const int64_t m = good_size(2 * n - 1);
    if (big > kMaxRadix || 3.0 * mixed_radix_cost(m) < mixed_radix_cost(n)) {
      bluestein_ = true;
      m_ = m;
      sub_ = get_plan(m);
      chirp_.resize(n);
      for (int64_t j = 0; j < n; ++j) {
        // j^2 mod 2n is exact in integers, so the chirp stays accurate for large j.
        const int64_t j2 = square_mod(j, 2 * n);
        chirp_[j] = unit_root(j2, 2 * n);
      }
      kernel_.assign(m, cpx{0, 0});
      kernel_[0] = conj(chirp_[0]);
      for (int64_t j = 1; j < n; ++j) kernel_[j] = kernel_[m - j] = conj(chirp_[j]);
      std::vector<cpx> scratch(sub_->scratch_size());
      sub_->execute(kernel_.data(), scratch.data(), true, 1.0 / static_cast<double>(m));
      return;
    }
  }
  int64_t l = 1;
  for (int p : factorize(n)) {
    Stage st;
    st.radix = p;
    st.l = l;
    st.m_next = n / (l * p);
    st.twiddle_offset = static_cast<int64_t>(twiddles_.size());
    for (int64_t k = 0; k < l; ++k)
      for (int s = 1; s < p; ++s) twiddles_.push_back(unit_root(s * k, l * p));
    st.root_offset = static_cast<int64_t>(roots_.size());
    if (p > 5) {
      for (int r = 0; r < p; ++r) {
        cpx w = unit_root(r, p);
        roots_.push_back(w.re);
        roots_.push_back(-w.im);  // sin(2*pi*r/p)
      }
    }
    stages_.push_back(st);
    l *= p;
  }
}

int64_t Plan::scratch_size() const {
  if (bluestein_) return 2 * m_ + sub_->scratch_size();
  return n_;
}

namespace {

// Multiplication by -i (forward) or +i (backward).
template <bool Fwd>
inline cpx rot90(cpx z) {
  return Fwd ? cpx{z.im, -z.re} : cpx{-z.im, z.re};
}

template <bool Fwd>
inline cpx twiddle(const cpx* tw, int64_t i) {
  return Fwd ? tw[i] : conj(tw[i]);
}

// One Stockham stage of radix p: in[q' + m1*s + m*k] -> out[q' + m1*k + m1*l*t], where
// m = m1*p, after multiplying input s of column k by w_{l*p}^{s*k}.
template <bool Fwd>
void pass2(int64_t l, int64_t m1, const cpx* tw, const cpx* in, cpx* out) {
  const int64_t m = 2 * m1;
  for (int64_t k = 0; k < l; ++k) {
    const cpx* src = in + m * k;
    cpx* dst = out + m1 * k;
    if (k == 0) {
      for (int64_t q = 0; q < m1; ++q) {
        cpx a0 = src[q], a1 = src[q + m1];
        dst[q] = a0 + a1;
        dst[q + m1 * l] = a0 - a1;
      }
      continue;
    }
    const cpx w1 = twiddle<Fwd>(tw, k);
    for (int64_t q = 0; q < m1; ++q) {
      cpx a0 = src[q], a1 = src[q + m1] * w1;
      dst[q] = a0 + a1;
      dst[q + m1 * l] = a0 - a1;
    }
  }
}

template <bool Fwd>
void pass3(int64_t l, int64_t m1, const cpx* tw, const cpx* in, cpx* out) {
  const int64_t m = 3 * m1, ol = m1 * l;
  const double h = 0.86602540378443864676;  // sqrt(3)/2
  for (int64_t k = 0; k < l; ++k) {
    const cpx* src = in + m * k;
    cpx* dst = out + m1 * k;
    const cpx w1 = k ? twiddle<Fwd>(tw, 2 * k) : cpx{1, 0};
    const cpx w2 = k ? twiddle<Fwd>(tw, 2 * k + 1) : cpx{1, 0};
    for (int64_t q = 0; q < m1; ++q) {
      cpx a0 = src[q], a1 = src[q + m1], a2 = src[q + 2 * m1];
      if (k) { a1 = a1 * w1; a2 = a2 * w2; }
      cpx t1 = a1 + a2;
      cpx t2 = a0 - t1 * 0.5;
      cpx t3 = rot90<Fwd>(a1 - a2) * h;
      dst[q] = a0 + t1;
      dst[q + ol] = t2 + t3;
      dst[q + 2 * ol] = t2 - t3;
    }
  }
}

template <bool Fwd>
void pass4(int64_t l, int64_t m1, const cpx* tw, const cpx* in, cpx* out) {
  const int64_t m = 4 * m1, ol = m1 * l;
  for (int64_t k = 0; k < l; ++k) {
    const cpx* src = in + m * k;
    cpx* dst = out + m1 * k;
    if (k == 0) {
      for (int64_t q = 0; q < m1; ++q) {
        cpx a0 = src[q], a1 = src[q + m1], a2 = src[q + 2 * m1], a3 = src[q + 3 * m1];
        cpx s02 = a0 + a2, d02 = a0 - a2, s13 = a1 + a3, d13 = rot90<Fwd>(a1 - a3);
        dst[q] = s02 + s13;
        dst[q + ol] = d02 + d13;
        dst[q + 2 * ol] = s02 - s13;
        dst[q + 3 * ol] = d02 - d13;
      }
      continue;
    }
    const cpx w1 = twiddle<Fwd>(tw, 3 * k), w2 = twiddle<Fwd>(tw, 3 * k + 1),
              w3 = twiddle<Fwd>(tw, 3 * k + 2);
    for (int64_t q = 0; q < m1; ++q) {
      cpx a0 = src[q], a1 = src[q + m1] * w1, a2 = src[q + 2 * m1] * w2,
          a3 = src[q + 3 * m1] * w3;
      cpx s02 = a0 + a2, d02 = a0 - a2, s13 = a1 + a3, d13 = rot90<Fwd>(a1 - a3);
      dst[q] = s02 + s13;
      dst[q + ol] = d02 + d13;
      dst[q + 2 * ol] = s02 - s13;
      dst[q + 3 * ol] = d02 - d13;
    }
  }
}

template <bool Fwd>
void pass5(int64_t l, int64_t m1, const cpx* tw, const cpx* in, cpx* out) {
  const int64_t m = 5 * m1, ol = m1 * l;
  const double c1 = 0.30901699437494742410, c2 = -0.80901699437494742410;  // cos(2pi/5), cos(4pi/5)
  const double s1 = 0.95105651629515357212, s2 = 0.58778525229247312917;   // sin(2pi/5), sin(4pi/5)
  for (int64_t k = 0; k < l; ++k) {
    const cpx* src = in + m * k;
    cpx* dst = out + m1 * k;
    cpx w[4] = {{1, 0}, {1, 0}, {1, 0}, {1, 0}};
    if (k)
      for (int s = 0; s < 4; ++s) w[s] = twiddle<Fwd>(tw, 4 * k + s);
    for (int64_t q = 0; q < m1; ++q) {
      cpx a0 = src[q], a1 = src[q + m1], a2 = src[q + 2 * m1], a3 = src[q + 3 * m1],
          a4 = src[q + 4 * m1];
      if (k) { a1 = a1 * w[0]; a2 = a2 * w[1]; a3 = a3 * w[2]; a4 = a4 * w[3]; }
      cpx p14 = a1 + a4, m14 = a1 - a4, p23 = a2 + a3, m23 = a2 - a3;
      cpx c_1 = a0 + p14 * c1 + p23 * c2;
      cpx c_2 = a0 + p14 * c2 + p23 * c1;
      cpx s_1 = rot90<Fwd>(m14 * s1 + m23 * s2);
      cpx s_2 = rot90<Fwd>(m14 * s2 - m23 * s1);
      dst[q] = a0 + p14 + p23;
      dst[q + ol] = c_1 + s_1;
      dst[q + 4 * ol] = c_1 - s_1;
      dst[q + 2 * ol] = c_2 + s_2;
      dst[q + 3 * ol] = c_2 - s_2;
    }
  }
}

// Any odd radix p, pairing inputs s and p-s so each output pair shares its sums.
template <bool Fwd>
void pass_generic(int p, int64_t l, int64_t m1, const cpx* tw, const double* roots,
                  const cpx* in, cpx* out) {
  const int64_t m = p * m1, ol = m1 * l;
  const int half = (p - 1) / 2;
  cpx a[kMaxRadix], sum[kMaxRadix], dif[kMaxRadix];
  for (int64_t k = 0; k < l; ++k) {
    const cpx* src = in + m * k;
    cpx* dst = out + m1 * k;
    for (int64_t q = 0; q < m1; ++q) {
      a[0] = src[q];
      for (int s = 1; s < p; ++s) {
        a[s] = src[q + s * m1];
        if (k) a[s] = a[s] * twiddle<Fwd>(tw, (p - 1) * k + s - 1);
      }
      cpx y0 = a[0];
      for (int s = 1; s <= half; ++s) {
        sum[s] = a[s] + a[p - s];
        dif[s] = a[s] - a[p - s];
        y0 = y0 + sum[s];
      }
      dst[q] = y0;
      for (int t = 1; t <= half; ++t) {
        cpx c = a[0], sn{0, 0};
        for (int s = 1; s <= half; ++s) {
          const int r = static_cast<int>((static_cast<int64_t>(s) * t) % p);
          c = c + sum[s] * roots[2 * r];
          sn = sn + dif[s] * roots[2 * r + 1];
        }
        cpx rs = rot90<Fwd>(sn);
        dst[q + t * ol] = c + rs;
        dst[q + (p - t) * ol] = c - rs;
      }
    }
  }
}

}  // namespace

template <bool Fwd>
void Plan::run_stages(cpx* data, cpx* scratch) const {
  cpx* in = data;
  cpx* out = scratch;
  for (const Stage& st : stages_) {
    const cpx* tw = twiddles_.data() + st.twiddle_offset;
    switch (st.radix) {
      case 2: pass2<Fwd>(st.l, st.m_next, tw, in, out); break;
      case 3: pass3<Fwd>(st.l, st.m_next, tw, in, out); break;
      case 4: pass4<Fwd>(st.l, st.m_next, tw, in, out); break;
      case 5: pass5<Fwd>(st.l, st.m_next, tw, in, out); break;
      default:
        pass_generic<Fwd>(st.radix, st.l, st.m_next, tw, roots_.data() + st.root_offset, in,
                          out);
    }
    std::swap(in, out);
  }
  if (in != data) std::memcpy(data, in, sizeof(cpx) * n_);
}

template <bool Fwd>
void Plan::run_bluestein(cpx* data, cpx* scratch) const {
  // Backward = conj(forward(conj(x))), so only the forward chirp is stored.
  cpx* u = scratch;
  cpx* sub_scratch = scratch + m_;
  for (int64_t j = 0; j < n_; ++j) u[j] = (Fwd ? data[j] : conj(data[j])) * chirp_[j];
  std::fill(u + n_, u + m_, cpx{0, 0});
  sub_->execute(u, sub_scratch, true, 1.0);
  for (int64_t j = 0; j < m_; ++j) u[j] = u[j] * kernel_[j];
  sub_->execute(u, sub_scratch, false, 1.0);
  for (int64_t k = 0; k < n_; ++k) {
    cpx v = u[k] * chirp_[k];
    data[k] = Fwd ? v : conj(v);
  }
}

void Plan::execute(cpx* data, cpx* scratch, bool forward, double scale) const {
  if (bluestein_) {
    forward ? run_bluestein<true>(data, scratch) : run_bluestein<false>(data, scratch);
  } else {
    forward ? run_stages<true>(data, scratch) : run_stages<false>(data, scratch);
  }
  if (scale != 1.0)
    for (int64_t i = 0; i < n_; ++i) data[i] = data[i] * scale;
}

RealPlan::RealPlan(int64_t n) : n_(n) {
  if (n < 1) throw std::invalid_argument("fft: length must be >= 1");
  if (n % 2 == 0) {
    plan_ = get_plan(n / 2);
    twiddles_.resize(n / 2 + 1);
    for (int64_t k = 0; k <= n / 2; ++k) twiddles_[k] = unit_root(k, n);
  } else {
    plan_ = get_plan(n);
  }
}

int64_t RealPlan::scratch_size() const { return plan_->size() + plan_->scratch_size(); }

void RealPlan::forward(const double* in, cpx* out, cpx* scratch, double scale) const {
  cpx* z = scratch;
  cpx* rest = scratch + plan_->size();
  if (n_ % 2 == 1) {
    for (int64_t j = 0; j < n_; ++j) z[j] = {in[j], 0.0};
    plan_->execute(z, rest, true, scale);
    std::memcpy(out, z, sizeof(cpx) * (n_ / 2 + 1));
    return;
  }
  const int64_t h = n_ / 2;
  // Even and odd samples as the real and imaginary parts of one half-length transform.
  std::memcpy(z, in, sizeof(double) * n_);
  plan_->execute(z, rest, true, 1.0);
  const double half = 0.5 * scale;
  for (int64_t k = 0; k <= h; ++k) {
    const cpx zk = z[k == h ? 0 : k];
    const cpx zc = conj(z[k == 0 ? 0 : h - k]);
    const cpx e = zk + zc;
    const cpx d = zk - zc;
    const cpx o = {d.im, -d.re};  // (zk - zc) / i
    out[k] = (e + twiddles_[k] * o) * half;
  }
}

void RealPlan::backward(const cpx* in, double* out, cpx* scratch, double scale) const {
  cpx* z = scratch;
  cpx* rest = scratch + plan_->size();
  if (n_ % 2 == 1) {
    z[0] = {in[0].re, 0.0};
    for (int64_t k = 1; k <= n_ / 2; ++k) {
      z[k] = in[k];
      z[n_ - k] = conj(in[k]);
    }
    plan_->execute(z, rest, false, scale);
    for (int64_t j = 0; j < n_; ++j) out[j] = z[j].re;
    return;
  }
  const int64_t h = n_ / 2;
  for (int64_t k = 0; k < h; ++k) {
    cpx xk = in[k], xc = conj(in[h - k]);
    if (k == 0) { xk.im = 0; xc = {in[h].re, 0.0}; }
    const cpx e = xk + xc;
    const cpx wo = (xk - xc) * conj(twiddles_[k]);
    z[k] = (e + cpx{-wo.im, wo.re}) * scale;  // e + i*wo
  }
  plan_->execute(z, rest, false, 1.0);
  std::memcpy(out, z, sizeof(double) * n_);
}

namespace {
constexpr size_t kMaxCachedPlans = 64;
std::mutex g_cache_mu;
std::map<int64_t, std::shared_ptr<const Plan>>& plan_cache() {
  static auto* cache = new std::map<int64_t, std::shared_ptr<const Plan>>();
  return *cache;
}
std::map<int64_t, std::shared_ptr<const RealPlan>>& real_plan_cache() {
  static auto* cache = new std::map<int64_t, std::shared_ptr<const RealPlan>>();
  return *cache;
}

template <typename P>
std::shared_ptr<const P> cached(std::map<int64_t, std::shared_ptr<const P>>& cache, int64_t n) {
  {
    std::lock_guard<std::mutex> lock(g_cache_mu);
    auto it = cache.find(n);
    if (it != cache.end()) return it->second;
  }
  // Built outside the lock: a plan may need sub-plans from the same cache.
  auto plan = std::make_shared<const P>(n);
  std::lock_guard<std::mutex> lock(g_cache_mu);
  if (cache.size() >= kMaxCachedPlans) cache.clear();
  return cache.emplace(n, plan).first->second;
}
}  // namespace

std::shared_ptr<const Plan> get_plan(int64_t n) { return cached(plan_cache(), n); }
std::shared_ptr<const RealPlan> get_real_plan(int64_t n) { return cached(real_plan_cache(), n); }

int64_t cache_size() {
  std::lock_guard<std::mutex> lock(g_cache_mu);
  return static_cast<int64_t>(plan_cache().size() + real_plan_cache().size());
}
void clear_cache() {
  std::lock_guard<std::mutex> lock(g_cache_mu);
  plan_cache().clear();
  real_plan_cache().clear();
}

}  // namespace detail
}  // namespace fft
}  // namespace ember
