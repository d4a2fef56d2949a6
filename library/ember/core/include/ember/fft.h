// Fast Fourier transforms of any length: mixed radix (2, 3, 4, 5 and small odd primes)
// and Bluestein's algorithm for lengths with a large prime factor. Plans (twiddles) are
// cached per length.
#pragma once

#include <complex>
#include <cstdint>

#include "ember/export.h"

namespace ember {
namespace fft {

using cdouble = std::complex<double>;

// `howmany` contiguous rows of length n: out = scale * DFT(in), with exp(-2*pi*i*j*k/n)
// when forward, exp(+...) otherwise. in and out may alias.
EMBER_API void c2c(const cdouble* in, cdouble* out, int64_t n, int64_t howmany, bool forward,
                   double scale);
// Real rows of length n -> first n/2+1 coefficients of each row's forward DFT, scaled.
EMBER_API void r2c(const double* in, cdouble* out, int64_t n, int64_t howmany, double scale);
// Hermitian rows (n/2+1 coefficients each) -> real rows of length n (unnormalized inverse,
// times scale). The imaginary parts of the DC and (for even n) Nyquist terms are ignored.
EMBER_API void c2r(const cdouble* in, double* out, int64_t n, int64_t howmany, double scale);

// Number of cached plans (for tests) and a way to drop them.
EMBER_API int64_t plan_cache_size();
EMBER_API void clear_plan_cache();

}  // namespace fft
}  // namespace ember
