// Elementwise ops, contiguous and broadcast (strided), split across the pool.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "ember/kernels.h"
#include "../parallel.h"

namespace ember {
namespace {

constexpr int64_t kGrain = 1 << 15;

template <typename T>
struct Binary {
  template <BinaryOp op>
  static void run(const T* __restrict a, int64_t sa, const T* __restrict b, int64_t sb,
                  T* __restrict out, int64_t n) {
    // Separate loops for the unit-stride and broadcast-scalar cases let the compiler
    // vectorize each of them.
    auto apply = [](T x, T y) {
      if constexpr (op == BinaryOp::Add) return x + y;
      if constexpr (op == BinaryOp::Sub) return x - y;
      if constexpr (op == BinaryOp::Mul) return x * y;
      if constexpr (op == BinaryOp::Div) return x / y;
    };
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < n; ++i) out[i] = apply(a[i], b[i]);
    } else if (sa == 1 && sb == 0) {
      const T y = b[0];
      for (int64_t i = 0; i < n; ++i) out[i] = apply(a[i], y);
    } else if (sa == 0 && sb == 1) {
      const T x = a[0];
      for (int64_t i = 0; i < n; ++i) out[i] = apply(x, b[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = apply(a[i * sa], b[i * sb]);
    }
  }

  static void dispatch(BinaryOp op, const T* a, int64_t sa, const T* b, int64_t sb, T* out,
                       int64_t n) {
    switch (op) {
      case BinaryOp::Add: return run<BinaryOp::Add>(a, sa, b, sb, out, n);
      case BinaryOp::Sub: return run<BinaryOp::Sub>(a, sa, b, sb, out, n);
      case BinaryOp::Mul: return run<BinaryOp::Mul>(a, sa, b, sb, out, n);
      case BinaryOp::Div: return run<BinaryOp::Div>(a, sa, b, sb, out, n);
    }
  }
};

template <typename T>
void binary_contiguous(BinaryOp op, const T* a, const T* b, T* out, int64_t n) {
  detail::parallel_for(0, n, kGrain, [&](int64_t lo, int64_t hi) {
    Binary<T>::dispatch(op, a + lo, 1, b + lo, 1, out + lo, hi - lo);
  });
}

template <typename T>
void binary_strided_impl(BinaryOp op, const T* a, const int64_t* a_strides, const T* b,
                         const int64_t* b_strides, T* out, const int64_t* shape, int ndim) {
  if (ndim == 0) {
    Binary<T>::dispatch(op, a, 1, b, 1, out, 1);
    return;
  }
  const int64_t inner = shape[ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d < ndim - 1; ++d) rows *= shape[d];
  if (inner == 0 || rows == 0) return;
  const int64_t grain_rows = std::max<int64_t>(1, kGrain / inner);
  detail::parallel_for(0, rows, grain_rows, [&](int64_t lo, int64_t hi) {
    // Decompose the first row index of this range into per-dimension coordinates once,
    // then step them like an odometer.
    std::vector<int64_t> idx(ndim > 1 ? ndim - 1 : 1, 0);
    int64_t r = lo;
    for (int d = ndim - 2; d >= 0; --d) {
      idx[d] = r % shape[d];
      r /= shape[d];
    }
    for (int64_t row = lo; row < hi; ++row) {
      int64_t oa = 0, ob = 0;
      for (int d = 0; d < ndim - 1; ++d) {
        oa += idx[d] * a_strides[d];
        ob += idx[d] * b_strides[d];
      }
      Binary<T>::dispatch(op, a + oa, a_strides[ndim - 1], b + ob, b_strides[ndim - 1],
                          out + row * inner, inner);
      for (int d = ndim - 2; d >= 0; --d) {
        if (++idx[d] < shape[d]) break;
        idx[d] = 0;
      }
    }
  });
}

template <typename T>
void unary_impl(UnaryOp op, const T* __restrict x, T* __restrict out, int64_t n) {
  detail::parallel_for(0, n, kGrain, [&](int64_t lo, int64_t hi) {
    switch (op) {
      case UnaryOp::Relu:
        for (int64_t i = lo; i < hi; ++i) out[i] = x[i] > T(0) ? x[i] : (x[i] != x[i] ? x[i] : T(0));
        break;
      case UnaryOp::Exp:
        for (int64_t i = lo; i < hi; ++i) out[i] = std::exp(x[i]);
        break;
      case UnaryOp::Log:
        for (int64_t i = lo; i < hi; ++i) out[i] = std::log(x[i]);
        break;
      case UnaryOp::Tanh:
        for (int64_t i = lo; i < hi; ++i) out[i] = std::tanh(x[i]);
        break;
      case UnaryOp::Sigmoid:
        // Written so that neither branch overflows exp for large |x|.
        for (int64_t i = lo; i < hi; ++i) {
          T v = x[i];
          if (v >= T(0)) {
            out[i] = T(1) / (T(1) + std::exp(-v));
          } else {
            T e = std::exp(v);
            out[i] = e / (T(1) + e);
          }
        }
        break;
    }
  });
}

}  // namespace

#define EMBER_BINARY(name, OP)                                                       \
  void name(const float* a, const float* b, float* out, int64_t n) {                 \
    binary_contiguous<float>(BinaryOp::OP, a, b, out, n);                            \
  }                                                                                  \
  void name(const double* a, const double* b, double* out, int64_t n) {              \
    binary_contiguous<double>(BinaryOp::OP, a, b, out, n);                           \
  }
EMBER_BINARY(add, Add)
EMBER_BINARY(sub, Sub)
EMBER_BINARY(mul, Mul)
EMBER_BINARY(div, Div)
#undef EMBER_BINARY

#define EMBER_UNARY(name, OP)                                                                   \
  void name(const float* x, float* out, int64_t n) { unary_impl<float>(UnaryOp::OP, x, out, n); } \
  void name(const double* x, double* out, int64_t n) { unary_impl<double>(UnaryOp::OP, x, out, n); }
EMBER_UNARY(relu, Relu)
EMBER_UNARY(exp, Exp)
EMBER_UNARY(log, Log)
EMBER_UNARY(tanh, Tanh)
EMBER_UNARY(sigmoid, Sigmoid)
#undef EMBER_UNARY

void unary(UnaryOp op, const float* x, float* out, int64_t n) { unary_impl(op, x, out, n); }
void unary(UnaryOp op, const double* x, double* out, int64_t n) { unary_impl(op, x, out, n); }

void binary_strided(BinaryOp op, const float* a, const int64_t* a_strides, const float* b,
                    const int64_t* b_strides, float* out, const int64_t* shape, int ndim) {
  binary_strided_impl(op, a, a_strides, b, b_strides, out, shape, ndim);
}
void binary_strided(BinaryOp op, const double* a, const int64_t* a_strides, const double* b,
                    const int64_t* b_strides, double* out, const int64_t* shape, int ndim) {
  binary_strided_impl(op, a, a_strides, b, b_strides, out, shape, ndim);
}

}  // namespace ember
