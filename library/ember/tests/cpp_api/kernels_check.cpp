// ember's kernels through the C interface (ember/c_api.h), checked against plain loops:
// matmul (every tile edge, both blockings, threaded), conv1d/conv2d, softmax, elementwise
// with broadcasting, reductions, index_add with racing repeated indices, FFT round trips
// (mixed radix and Bluestein lengths) and the error path. Built from the core's sources for
// every configuration CI tests (GNU paths, EMBER_PORTABLE_ONLY, sanitizers, clang, mingw
// under wine); only the C interface is used, so it links a DLL the way any front end does.
//
//   kernels_check [--dump FILE | --overflow]
//
// Prints one line per check and "kernels_check: N failure(s)"; exits 1 on any failure.
// --dump writes the float results of the deterministic checks to FILE as raw bytes, so
// two builds can be compared bit for bit. --overflow hands ember_matmul an input one
// element shorter than its shape claims: the negative control of the sanitizer builds,
// where AddressSanitizer must stop the read inside libember.
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ember/c_api.h"

namespace {

int failures = 0;
std::vector<unsigned char> dump;

void check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
  if (!ok) ++failures;
}

template <typename T>
void record(const std::vector<T>& values) {
  const auto* p = reinterpret_cast<const unsigned char*>(values.data());
  dump.insert(dump.end(), p, p + values.size() * sizeof(T));
}

template <typename T> ember_dtype dtype_of();
template <> ember_dtype dtype_of<float>() { return EMBER_FLOAT32; }
template <> ember_dtype dtype_of<double>() { return EMBER_FLOAT64; }
template <> ember_dtype dtype_of<std::complex<double>>() { return EMBER_COMPLEX128; }
template <> ember_dtype dtype_of<int64_t>() { return EMBER_INT64; }

// An ember_array over a std::vector, C-contiguous; keeps its shape and strides alive.
struct Array {
  std::vector<int64_t> shape, strides;
  ember_array a{};

  template <typename T>
  Array(std::vector<T>& data, std::vector<int64_t> dims, const char* name)
      : shape(std::move(dims)), strides(shape.size()) {
    int64_t stride = sizeof(T);
    for (size_t d = shape.size(); d-- > 0;) {
      strides[d] = stride;
      stride *= shape[d];
    }
    a.data = data.data();
    a.dtype = dtype_of<T>();
    a.ndim = static_cast<int>(shape.size());
    a.shape = shape.data();
    a.strides = strides.data();
    a.itemsize = sizeof(T);
    a.writable = 1;
    a.name = name;
    a.format = "";
  }
  const ember_array* operator&() const { return &a; }
};

// Deterministic inputs: small integers (exact in any summation order) or fractions.
template <typename T>
std::vector<T> values(int64_t n, int seed, bool integers) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = (i * (2 * seed + 7) + seed * 13) % 17 - 8;
    v[static_cast<size_t>(i)] = integers ? T(r) : T(std::sin(0.37 * double(i) + seed)) * T(1.5);
  }
  return v;
}

template <typename T>
bool close(T got, double want, double tol) {
  return std::fabs(double(got) - want) <= tol * (1.0 + std::fabs(want));
}

template <typename T>
const char* tname() { return sizeof(T) == 4 ? "float32" : "float64"; }

template <typename T>
void check_matmul(int64_t m, int64_t k, int64_t n, bool integers) {
  std::vector<T> a = values<T>(m * k, 1, integers), b = values<T>(k * n, 2, integers);
  std::vector<T> c(static_cast<size_t>(m * n), T(-99));
  const ember_status st = ember_matmul(&Array(a, {m, k}, "a"), &Array(b, {k, n}, "b"), &Array(c, {m, n}, "out"));
  bool ok = st == EMBER_OK;
  const double tol = sizeof(T) == 4 ? 1e-5 : 1e-12;
  for (int64_t i = 0; ok && i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0, mag = 0;
      for (int64_t p = 0; p < k; ++p) {
        s += double(a[i * k + p]) * double(b[p * n + j]);
        mag += std::fabs(double(a[i * k + p]) * double(b[p * n + j]));
      }
      const double got = c[i * n + j];
      // Integer inputs are exact in any order; fractions within k roundings of the sum.
      if (integers ? got != s : std::fabs(got - s) > tol * (1 + mag)) {
        ok = false;
        break;
      }
    }
  if (!integers) record(c);
  check(ok, std::string("matmul ") + tname<T>() + " " + std::to_string(m) + "x" + std::to_string(k) + "x" +
                std::to_string(n) + (integers ? " (exact)" : ""));
}

template <typename T>
void check_conv2d(int64_t n, int64_t c, int64_t h, int64_t w, int64_t co, int64_t kh, int64_t kw, int64_t stride,
                  int64_t pad, bool with_bias) {
  const int64_t oh = (h + 2 * pad - kh) / stride + 1, ow = (w + 2 * pad - kw) / stride + 1;
  std::vector<T> x = values<T>(n * c * h * w, 3, false), wt = values<T>(co * c * kh * kw, 4, false);
  std::vector<T> bias = values<T>(co, 5, false), out(static_cast<size_t>(n * co * oh * ow));
  Array bias_arr(bias, {co}, "bias");
  const ember_status st = ember_conv2d(&Array(x, {n, c, h, w}, "input"), &Array(wt, {co, c, kh, kw}, "weight"),
                                       with_bias ? &bias_arr : nullptr, &Array(out, {n, co, oh, ow}, "out"), stride,
                                       pad);
  bool ok = st == EMBER_OK;
  for (int64_t b = 0; ok && b < n; ++b)
    for (int64_t o = 0; o < co; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          double s = with_bias ? double(bias[o]) : 0.0;
          for (int64_t ci = 0; ci < c; ++ci)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t iy = y * stride - pad + i, ix = xo * stride - pad + j;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                s += double(x[((b * c + ci) * h + iy) * w + ix]) * double(wt[((o * c + ci) * kh + i) * kw + j]);
              }
          if (!close(out[((b * co + o) * oh + y) * ow + xo], s, sizeof(T) == 4 ? 1e-4 : 1e-11)) ok = false;
        }
  record(out);
  check(ok, std::string("conv2d ") + tname<T>() + " stride " + std::to_string(stride) + " pad " +
                std::to_string(pad) + (with_bias ? " bias" : ""));
}

void check_conv1d() {
  const int64_t n = 2, c = 3, l = 19, co = 4, k = 5, stride = 2, pad = 2;
  const int64_t ol = (l + 2 * pad - k) / stride + 1;
  std::vector<double> x = values<double>(n * c * l, 6, false), w = values<double>(co * c * k, 7, false);
  std::vector<double> out(static_cast<size_t>(n * co * ol));
  const ember_status st = ember_conv1d(&Array(x, {n, c, l}, "input"), &Array(w, {co, c, k}, "weight"), nullptr,
                                       &Array(out, {n, co, ol}, "out"), stride, pad);
  bool ok = st == EMBER_OK;
  for (int64_t b = 0; ok && b < n; ++b)
    for (int64_t o = 0; o < co; ++o)
      for (int64_t t = 0; t < ol; ++t) {
        double s = 0;
        for (int64_t ci = 0; ci < c; ++ci)
          for (int64_t j = 0; j < k; ++j) {
            const int64_t ix = t * stride - pad + j;
            if (ix >= 0 && ix < l) s += x[(b * c + ci) * l + ix] * w[(o * c + ci) * k + j];
          }
        if (!close(out[(b * co + o) * ol + t], s, 1e-12)) ok = false;
      }
  record(out);
  check(ok, "conv1d float64 stride 2 pad 2");
}

void check_softmax_and_elementwise() {
  const int64_t rows = 33, cols = 700;  // enough rows to split across threads
  std::vector<float> x = values<float>(rows * cols, 8, false), p(static_cast<size_t>(rows * cols));
  bool ok = ember_softmax(&Array(x, {rows, cols}, "x"), &Array(p, {rows, cols}, "out")) == EMBER_OK;
  for (int64_t r = 0; ok && r < rows; ++r) {
    double mx = x[r * cols], s = 0;
    for (int64_t j = 0; j < cols; ++j) mx = std::fmax(mx, x[r * cols + j]);
    for (int64_t j = 0; j < cols; ++j) s += std::exp(double(x[r * cols + j]) - mx);
    for (int64_t j = 0; j < cols; ++j)
      if (!close(p[r * cols + j], std::exp(double(x[r * cols + j]) - mx) / s, 1e-5)) ok = false;
  }
  record(p);
  check(ok, "softmax float32");

  // out[i, j] = a[i, j] * row[j]: b broadcast over the rows through a zero stride.
  std::vector<double> a = values<double>(rows * cols, 9, false), row = values<double>(cols, 10, false);
  std::vector<double> out(static_cast<size_t>(rows * cols));
  Array b(row, {rows, cols}, "b");
  b.strides[0] = 0;
  ok = ember_binary("mul", &Array(a, {rows, cols}, "a"), &b, &Array(out, {rows, cols}, "out")) == EMBER_OK;
  for (int64_t i = 0; ok && i < rows * cols; ++i)
    if (out[i] != a[i] * row[i % cols]) ok = false;
  check(ok, "binary mul with broadcasting");

  const char* unary_ops[] = {"relu", "exp", "log", "tanh", "sigmoid"};
  for (const char* op : unary_ops) {
    std::vector<double> y(a.size());
    std::vector<double> in = a;
    if (std::string(op) == "log")
      for (double& v : in) v = std::fabs(v) + 0.25;
    ok = ember_unary(op, &Array(in, {rows * cols}, "x"), &Array(y, {rows * cols}, "out")) == EMBER_OK;
    for (size_t i = 0; ok && i < in.size(); ++i) {
      const double v = in[i];
      const std::string name(op);
      const double want = name == "relu"  ? (v > 0 ? v : 0.0)
                          : name == "exp" ? std::exp(v)
                          : name == "log" ? std::log(v)
                          : name == "tanh" ? std::tanh(v)
                                           : 1.0 / (1.0 + std::exp(-v));
      if (!close(y[i], want, 1e-14)) ok = false;
    }
    record(y);
    check(ok, std::string("unary ") + op);
  }
}

template <typename T>
void check_reductions() {
  const int64_t outer = 5, len = 3001, inner = 7, n = outer * len * inner;
  std::vector<T> x = values<T>(n, 11, false), s(static_cast<size_t>(outer * inner)), mx(s.size());
  bool ok = ember_reduce_axis("sum", &Array(x, {outer, len, inner}, "x"), &Array(s, {outer, inner}, "out"), outer,
                              len, inner) == EMBER_OK &&
            ember_reduce_axis("max", &Array(x, {outer, len, inner}, "x"), &Array(mx, {outer, inner}, "out"), outer,
                              len, inner) == EMBER_OK;
  for (int64_t o = 0; ok && o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double want = 0, want_max = -1e300;
      for (int64_t l = 0; l < len; ++l) {
        want += x[(o * len + l) * inner + i];
        want_max = std::fmax(want_max, x[(o * len + l) * inner + i]);
      }
      if (!close(s[o * inner + i], want, sizeof(T) == 4 ? 1e-4 : 1e-12) || mx[o * inner + i] != T(want_max))
        ok = false;
    }
  record(s);
  record(mx);
  check(ok, std::string("sum_axis/max_axis ") + tname<T>());

  // The deterministic mode fixes the combine order: the same bits for every thread count.
  ember_set_deterministic(1);
  double total = 0, again = 0, biggest = 0, want = 0;
  ok = ember_reduce_all("sum", &Array(x, {n}, "x"), &total) == EMBER_OK &&
       ember_reduce_all("max", &Array(x, {n}, "x"), &biggest) == EMBER_OK;
  ember_set_num_threads(1);
  ok = ok && ember_reduce_all("sum", &Array(x, {n}, "x"), &again) == EMBER_OK;
  ember_set_num_threads(4);
  ember_set_deterministic(0);
  double want_max = -1e300;
  for (T v : x) {
    want += v;
    want_max = std::fmax(want_max, double(v));
  }
  record(std::vector<double>{total, biggest});
  check(ok && close(total, want, sizeof(T) == 4 ? 1e-4 : 1e-12) && total == again && biggest == want_max,
        std::string("sum_all/max_all ") + tname<T>() + " (deterministic, 1 and 4 threads)");
}

template <typename T>
void check_index_add() {
  // 20000 additions into 6 rows race across the threads; small integers keep every order exact.
  const int64_t rows = 6, cols = 24, nidx = 20000;
  std::vector<T> out(static_cast<size_t>(rows * cols), T(0)), src = values<T>(nidx * cols, 12, true);
  std::vector<int64_t> index(static_cast<size_t>(nidx));
  for (int64_t i = 0; i < nidx; ++i) index[i] = (i * 5) % rows;
  bool ok = ember_index_add(&Array(out, {rows, cols}, "out"), &Array(index, {nidx}, "index"),
                            &Array(src, {nidx, cols}, "source")) == EMBER_OK;
  std::vector<double> want(out.size(), 0.0);
  for (int64_t i = 0; i < nidx; ++i)
    for (int64_t j = 0; j < cols; ++j) want[index[i] * cols + j] += src[i * cols + j];
  for (size_t i = 0; ok && i < out.size(); ++i) ok = double(out[i]) == want[i];
  record(out);
  check(ok, std::string("index_add ") + tname<T>() + " with repeated indices");
}

void check_fft() {
  using cd = std::complex<double>;
  const double pi = 3.14159265358979323846;
  // Radix 2/3/4/5, small odd primes, and Bluestein lengths (large prime factors).
  for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 12, 16, 30, 64, 97, 128, 210, 1000, 1021, 4099}) {
    const int64_t rows = 3;
    std::vector<cd> x(static_cast<size_t>(rows * n)), spec(x.size()), back(x.size());
    for (int64_t i = 0; i < rows * n; ++i) x[i] = cd(std::sin(0.3 * i), std::cos(0.7 * i) - 0.25);
    bool ok = ember_fft_c2c(&Array(x, {rows, n}, "x"), &Array(spec, {rows, n}, "out"), 1, 1.0) == EMBER_OK &&
              ember_fft_c2c(&Array(spec, {rows, n}, "x"), &Array(back, {rows, n}, "out"), 0, 1.0 / n) == EMBER_OK;
    double err = 0;
    for (size_t i = 0; i < x.size(); ++i) err = std::fmax(err, std::abs(back[i] - x[i]));
    if (n <= 256) {  // and against the O(n^2) definition
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < n; ++k) {
          cd s = 0;
          for (int64_t j = 0; j < n; ++j) s += x[r * n + j] * std::polar(1.0, -2 * pi * double(j * k % n) / n);
          err = std::fmax(err, std::abs(spec[r * n + k] - s) / std::sqrt(double(n)));
        }
    }
    record(spec);
    check(ok && err < 1e-10, "fft c2c forward/inverse n=" + std::to_string(n));

    std::vector<double> real(static_cast<size_t>(rows * n)), real_back(real.size());
    for (int64_t i = 0; i < rows * n; ++i) real[i] = std::cos(0.11 * i * i) + 0.5;
    std::vector<cd> half(static_cast<size_t>(rows * (n / 2 + 1)));
    ok = ember_fft_r2c(&Array(real, {rows, n}, "x"), &Array(half, {rows, n / 2 + 1}, "out"), 1.0) == EMBER_OK &&
         ember_fft_c2r(&Array(half, {rows, n / 2 + 1}, "x"), &Array(real_back, {rows, n}, "out"), 1.0 / n) ==
             EMBER_OK;
    err = 0;
    for (size_t i = 0; i < real.size(); ++i) err = std::fmax(err, std::fabs(real_back[i] - real[i]));
    if (n <= 256) {  // the half spectrum against the definition
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k <= n / 2; ++k) {
          cd s = 0;
          for (int64_t j = 0; j < n; ++j) s += real[r * n + j] * std::polar(1.0, -2 * pi * double(j * k % n) / n);
          err = std::fmax(err, std::abs(half[r * (n / 2 + 1) + k] - s) / std::sqrt(double(n)));
        }
    }
    record(half);
    check(ok && err < 1e-10, "fft r2c/c2r round trip n=" + std::to_string(n));
  }
}

void check_errors() {
  std::vector<float> a(6), b(6), c(4);
  const ember_status st = ember_matmul(&Array(a, {2, 3}, "a"), &Array(b, {2, 3}, "b"), &Array(c, {2, 2}, "out"));
  check(st == EMBER_INVALID_ARGUMENT && std::string(ember_last_error()) == "matmul: shape mismatch",
        "a C++ exception inside the library becomes EMBER_INVALID_ARGUMENT (got " + std::to_string(st) + ": '" +
            ember_last_error() + "')");
  ember_set_deterministic(1);
  std::vector<float> out(2), src(2, 1.0f);
  std::vector<int64_t> idx = {0};
  const ember_status nd = ember_index_add(&Array(out, {1, 2}, "out"), &Array(idx, {1}, "index"),
                                          &Array(src, {1, 2}, "source"));
  ember_set_deterministic(0);
  check(nd == EMBER_RUNTIME_ERROR, "index_add refuses in deterministic mode");
}

}  // namespace

int main(int argc, char** argv) {
  const char* dump_path = nullptr;
  if (argc == 3 && std::string(argv[1]) == "--dump") {
    dump_path = argv[2];
  } else if (argc == 2 && std::string(argv[1]) == "--overflow") {
    std::vector<float> a(3 * 4 - 1), b(4 * 2, 1.0f), c(3 * 2);
    Array short_a(a, {3, 4}, "a");
    std::printf("matmul over a short buffer: status %d\n", ember_matmul(&short_a, &Array(b, {4, 2}, "b"),
                                                                         &Array(c, {3, 2}, "out")));
    return 0;
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: %s [--dump FILE | --overflow]\n", argv[0]);
    return 2;
  }
  // More threads than this machine's cores: the pool's hand-off paths all run.
  check(ember_set_num_threads(4) == EMBER_OK && ember_get_num_threads() == 4, "set_num_threads(4)");

  // Tile edges of every micro-kernel (MR 4/6/12, NR 8..32), k across the 256 blocking,
  // m across the 96-row blocks, and sizes large enough to run threaded.
  const int64_t shapes[][3] = {{1, 1, 1}, {5, 3, 7}, {37, 29, 41}, {13, 300, 33}, {97, 64, 130}, {200, 257, 96}};
  for (const auto& s : shapes) {
    check_matmul<float>(s[0], s[1], s[2], true);
    check_matmul<float>(s[0], s[1], s[2], false);
    check_matmul<double>(s[0], s[1], s[2], true);
    check_matmul<double>(s[0], s[1], s[2], false);
  }
  check_matmul<float>(4, 0, 3, true);  // k = 0: out is zeros

  check_conv2d<float>(2, 3, 11, 9, 5, 3, 3, 1, 1, true);
  check_conv2d<double>(1, 2, 12, 12, 3, 4, 2, 2, 0, false);
  check_conv1d();
  check_softmax_and_elementwise();
  check_reductions<float>();
  check_reductions<double>();
  check_index_add<float>();
  check_index_add<double>();
  check_fft();
  check_errors();

  if (dump_path != nullptr) {
    std::FILE* f = std::fopen(dump_path, "wb");
    const bool written = f != nullptr && std::fwrite(dump.data(), 1, dump.size(), f) == dump.size();
    if (f != nullptr) std::fclose(f);
    check(written, std::string("write ") + dump_path);
  }
  std::printf("kernels_check: %d failure(s)\n", failures);
  return failures == 0 ? 0 : 1;
}
