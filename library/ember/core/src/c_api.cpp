// ember/c_api.h: argument checks and dtype dispatch in front of the typed kernels; C++
// exceptions become an ember_status plus the thread's last error.
#include "ember/c_api.h"

#include <complex>
#include <initializer_list>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ember/checked.h"
#include "ember/cuda.h"
#include "ember/deterministic.h"
#include "ember/fft.h"
#include "ember/kernels.h"

namespace {

using cdouble = std::complex<double>;

static_assert(EMBER_MAX_THREADS == ember::kMaxThreads, "c_api.h and kernels.h disagree");

thread_local std::string last_error;
thread_local std::string last_reason;

[[noreturn]] void fail(const std::string& message) { throw std::invalid_argument(message); }

template <typename Body>
ember_status guarded(Body&& body) noexcept {
  try {
    body();
    return EMBER_OK;
  } catch (const std::invalid_argument& e) {
    last_error = e.what();
    return EMBER_INVALID_ARGUMENT;
  } catch (const std::bad_alloc&) {
    last_error = "out of memory";
    return EMBER_OUT_OF_MEMORY;
  } catch (const std::length_error& e) {
    // A size that does not fit the address space (thrown before anything is allocated).
    last_error = e.what();
    return EMBER_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    last_error = e.what();
    return EMBER_RUNTIME_ERROR;
  } catch (...) {
    last_error = "unknown C++ exception in ember";
    return EMBER_RUNTIME_ERROR;
  }
}

// Valid only after check_arrays(): the shape is then known to be non-negative and its
// product to fit in int64 (bytes included).
int64_t numel(const ember_array& a) {
  int64_t n = 1;
  for (int d = 0; d < a.ndim; ++d) n *= a.shape[d];
  return n;
}

const char* name_of(const ember_array& a) { return a.name != nullptr && *a.name ? a.name : "array"; }

int64_t size_of(ember_dtype dtype) {
  switch (dtype) {
    case EMBER_FLOAT32: return 4;
    case EMBER_FLOAT64: return 8;
    case EMBER_COMPLEX128: return 16;
    case EMBER_INT32: return 4;
    case EMBER_INT64: return 8;
    default: return 0;  // EMBER_DTYPE_OTHER: any itemsize; refused by the dtype checks later
  }
}

// The description itself, before any kernel reads a byte through it: a NULL pointer, a
// negative or overflowing shape, an itemsize that disagrees with the dtype (or is 0, which
// the stride arithmetic divides by) and a NULL data pointer are refused with a message.
void check_array(const ember_array* a, const char* role) {
  if (a == nullptr) fail(std::string(role) + ": NULL array");
  const std::string name = name_of(*a);
  if (a->ndim < 0 || a->ndim > EMBER_MAX_NDIM)
    fail(name + ": ndim " + std::to_string(a->ndim) + " is outside 0.." + std::to_string(EMBER_MAX_NDIM));
  if (a->ndim > 0 && a->shape == nullptr) fail(name + ": shape is NULL");
  const std::optional<int64_t> count = ember::checked_numel(a->shape, a->ndim);
  if (!count) {
    std::string dims;
    for (int d = 0; d < a->ndim; ++d) dims += (d ? ", " : "") + std::to_string(a->shape[d]);
    fail(name + ": shape (" + dims + ") has a negative dimension or more elements than int64 can count");
  }
  const int64_t expected = size_of(a->dtype);
  if (a->itemsize < 1 || (expected != 0 && a->itemsize != expected))
    fail(name + ": itemsize " + std::to_string(a->itemsize) + " does not match the dtype ('" +
         (a->format && *a->format ? a->format : "?") + "')");
  if (!ember::checked_mul<int64_t>(*count, a->itemsize))
    fail(name + ": " + std::to_string(*count) + " elements of " + std::to_string(a->itemsize) +
         " bytes exceed the address space");
  if (a->data == nullptr && *count > 0) fail(name + ": data is NULL");
}

void check_arrays(std::initializer_list<std::pair<const ember_array*, const char*>> arrays) {
  for (const auto& [array, role] : arrays) check_array(array, role);
}

const char* check_name(const char* name, const char* what) {
  if (name == nullptr) fail(std::string(what) + " is NULL");
  return name;
}

// C order, by the rule numpy and PEP 3118 use: dimensions of extent 1 may have any stride.
bool c_contiguous(const ember_array& a) {
  if (a.strides == nullptr || numel(a) == 0) return true;
  int64_t expected = a.itemsize;
  for (int d = a.ndim - 1; d >= 0; --d) {
    if (a.shape[d] > 1 && a.strides[d] != expected) return false;
    expected *= a.shape[d];
  }
  return true;
}

template <typename T> constexpr ember_dtype dtype_of();
template <> constexpr ember_dtype dtype_of<float>() { return EMBER_FLOAT32; }
template <> constexpr ember_dtype dtype_of<double>() { return EMBER_FLOAT64; }
template <> constexpr ember_dtype dtype_of<cdouble>() { return EMBER_COMPLEX128; }
template <> constexpr ember_dtype dtype_of<int64_t>() { return EMBER_INT64; }

std::string format_of(const ember_array& a) { return a.format && *a.format ? a.format : "?"; }

template <typename T>
const T* in(const ember_array& a) {
  if (a.dtype != dtype_of<T>()) fail(std::string(name_of(a)) + ": unexpected dtype (got '" + format_of(a) + "')");
  if (!c_contiguous(a)) fail(std::string(name_of(a)) + ": array must be C-contiguous");
  return static_cast<const T*>(a.data);
}

template <typename T>
T* out(const ember_array& a) {
  const T* p = in<T>(a);
  if (!a.writable) fail(std::string(name_of(a)) + ": array is read-only");
  return const_cast<T*>(p);
}

// Calls fn(T{}) with T = float or double according to a's element type.
template <typename Fn>
auto dispatch_float(const ember_array& a, Fn&& fn) {
  if (a.dtype == EMBER_FLOAT32) return fn(float{});
  if (a.dtype == EMBER_FLOAT64) return fn(double{});
  fail(std::string("ember kernels take float32 or float64 arrays, got '") + format_of(a) + "' for " + name_of(a));
}

ember::BinaryOp binary_op(const std::string& name) {
  if (name == "add") return ember::BinaryOp::Add;
  if (name == "sub") return ember::BinaryOp::Sub;
  if (name == "mul") return ember::BinaryOp::Mul;
  if (name == "div") return ember::BinaryOp::Div;
  fail("unknown binary op: " + name);
}

ember::UnaryOp unary_op(const std::string& name) {
  if (name == "relu") return ember::UnaryOp::Relu;
  if (name == "exp") return ember::UnaryOp::Exp;
  if (name == "log") return ember::UnaryOp::Log;
  if (name == "tanh") return ember::UnaryOp::Tanh;
  if (name == "sigmoid") return ember::UnaryOp::Sigmoid;
  fail("unknown unary op: " + name);
}

bool is_sum(const std::string& name) {
  if (name != "sum" && name != "max") fail("unknown reduction: " + name);
  return name == "sum";
}

// Element strides of a (possibly broadcast, zero-stride) view.
std::vector<int64_t> element_strides(const ember_array& a) {
  std::vector<int64_t> s(static_cast<size_t>(a.ndim));
  for (int d = 0; d < a.ndim; ++d) {
    if (a.strides[d] % a.itemsize != 0) fail("binary op: misaligned strides");
    s[static_cast<size_t>(d)] = a.strides[d] / a.itemsize;
  }
  return s;
}

// x viewed as [outer, len, inner] -> o [outer, inner]. A max over an empty axis has no
// value to return (numpy raises too); a sum over one is 0.
void check_reduce_shape(bool sum, const ember_array& x, const ember_array& o, int64_t outer, int64_t len,
                        int64_t inner) {
  const std::string view = "[" + std::to_string(outer) + ", " + std::to_string(len) + ", " + std::to_string(inner) + "]";
  if (outer < 0 || len < 0 || inner < 0) fail("reduce: negative extent in the view " + view);
  const std::optional<int64_t> kept = ember::checked_mul(outer, inner);
  const std::optional<int64_t> all = kept ? ember::checked_mul(*kept, len) : std::nullopt;
  if (!all || *all != numel(x) || *kept != numel(o))
    fail("reduce: the view " + view + " does not match x (" + std::to_string(numel(x)) + " elements) and out (" +
         std::to_string(numel(o)) + " elements)");
  if (!sum && len == 0 && *kept > 0) fail("max: zero-size reduction axis (len 0) has no identity");
}

void check_index_add(const ember_array& o, const ember_array& index, const ember_array& source) {
  if (o.ndim != 2 || source.ndim != 2 || index.ndim != 1 || source.shape[0] != index.shape[0] ||
      source.shape[1] != o.shape[1])
    fail("index_add: out (R,C), index (N,), source (N,C) expected");
}

void check_bias(const ember_array* bias, const ember_array& weight, const char* op) {
  if (bias != nullptr && numel(*bias) != weight.shape[0]) fail(std::string(op) + ": bias size mismatch");
}

// Before conv_out_size, which divides by the stride: a stride of 0 used to be SIGFPE.
void check_conv_params(const char* op, int64_t stride, int64_t padding) {
  if (stride < 1) fail(std::string(op) + ": stride must be >= 1, got " + std::to_string(stride));
  if (padding < 0) fail(std::string(op) + ": padding must be >= 0, got " + std::to_string(padding));
}

int64_t last_dim(const ember_array& a) { return a.ndim == 0 ? 1 : a.shape[a.ndim - 1]; }

}  // namespace

extern "C" {

const char* ember_last_error(void) { return last_error.c_str(); }

// --- kernels ----------------------------------------------------------------------------

ember_status ember_binary(const char* op_name, const ember_array* a, const ember_array* b, const ember_array* o) {
  return guarded([&] {
    const ember::BinaryOp op = binary_op(check_name(op_name, "binary op name"));
    check_arrays({{a, "a"}, {b, "b"}, {o, "out"}});
    if (a->ndim != o->ndim || b->ndim != o->ndim) fail("binary op: operands must be broadcast to the output shape");
    for (int d = 0; d < o->ndim; ++d)
      if (a->shape[d] != o->shape[d] || b->shape[d] != o->shape[d])
        fail("binary op: operands must be broadcast to the output shape");
    dispatch_float(*o, [&](auto tag) {
      using T = decltype(tag);
      if (a->dtype != o->dtype || b->dtype != o->dtype) fail("binary op: mixed dtypes");
      T* po = out<T>(*o);
      const T* pa = static_cast<const T*>(a->data);
      const T* pb = static_cast<const T*>(b->data);
      if (c_contiguous(*a) && c_contiguous(*b)) {
        const int64_t n = numel(*o);
        switch (op) {
          case ember::BinaryOp::Add: ember::add(pa, pb, po, n); break;
          case ember::BinaryOp::Sub: ember::sub(pa, pb, po, n); break;
          case ember::BinaryOp::Mul: ember::mul(pa, pb, po, n); break;
          case ember::BinaryOp::Div: ember::div(pa, pb, po, n); break;
        }
        return;
      }
      const std::vector<int64_t> sa = element_strides(*a), sb = element_strides(*b);
      const std::vector<int64_t> shape(o->shape, o->shape + o->ndim);
      ember::binary_strided(op, pa, sa.data(), pb, sb.data(), po, shape.data(), o->ndim);
    });
  });
}

ember_status ember_unary(const char* op_name, const ember_array* x, const ember_array* o) {
  return guarded([&] {
    const ember::UnaryOp op = unary_op(check_name(op_name, "unary op name"));
    check_arrays({{x, "x"}, {o, "out"}});
    if (numel(*x) != numel(*o)) fail("unary op: size mismatch");
    dispatch_float(*x, [&](auto tag) {
      using T = decltype(tag);
      ember::unary(op, in<T>(*x), out<T>(*o), numel(*x));
    });
  });
}

ember_status ember_reduce_axis(const char* op, const ember_array* x, const ember_array* o, int64_t outer,
                               int64_t len, int64_t inner) {
  return guarded([&] {
    const bool sum = is_sum(check_name(op, "reduction name"));
    check_arrays({{x, "x"}, {o, "out"}});
    check_reduce_shape(sum, *x, *o, outer, len, inner);
    dispatch_float(*x, [&](auto tag) {
      using T = decltype(tag);
      if (sum) {
        ember::sum_axis(in<T>(*x), out<T>(*o), outer, len, inner);
      } else {
        ember::max_axis(in<T>(*x), out<T>(*o), outer, len, inner);
      }
    });
  });
}

ember_status ember_reduce_all(const char* op, const ember_array* x, double* result) {
  return guarded([&] {
    const bool sum = is_sum(check_name(op, "reduction name"));
    check_arrays({{x, "x"}});
    if (result == nullptr) fail("reduce: result pointer is NULL");
    if (!sum && numel(*x) == 0) fail("max: zero-size array has no maximum");
    *result = dispatch_float(*x, [&](auto tag) -> double {
      using T = decltype(tag);
      return sum ? ember::sum_all(in<T>(*x), numel(*x)) : ember::max_all(in<T>(*x), numel(*x));
    });
  });
}

ember_status ember_matmul(const ember_array* a, const ember_array* b, const ember_array* o) {
  return guarded([&] {
    check_arrays({{a, "a"}, {b, "b"}, {o, "out"}});
    if (a->ndim != 2 || b->ndim != 2 || o->ndim != 2) fail("matmul: 2-D arrays expected");
    const int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
    if (b->shape[0] != k || o->shape[0] != m || o->shape[1] != n) fail("matmul: shape mismatch");
    dispatch_float(*a, [&](auto tag) {
      using T = decltype(tag);
      ember::matmul(in<T>(*a), in<T>(*b), out<T>(*o), m, k, n);
    });
  });
}

ember_status ember_softmax(const ember_array* x, const ember_array* o) {
  return guarded([&] {
    check_arrays({{x, "x"}, {o, "out"}});
    if (x->ndim != 2 || numel(*o) != numel(*x)) fail("softmax: 2-D array expected");
    dispatch_float(*x, [&](auto tag) {
      using T = decltype(tag);
      ember::softmax(in<T>(*x), out<T>(*o), x->shape[0], x->shape[1]);
    });
  });
}

ember_status ember_conv1d(const ember_array* x, const ember_array* w, const ember_array* bias, const ember_array* o,
                          int64_t stride, int64_t padding) {
  return guarded([&] {
    check_arrays({{x, "input"}, {w, "weight"}, {o, "out"}});
    if (bias != nullptr) check_array(bias, "bias");
    check_conv_params("conv1d", stride, padding);
    if (x->ndim != 3 || w->ndim != 3 || o->ndim != 3) fail("conv1d: input (N,C,L) and weight (O,C,k) expected");
    if (w->shape[1] != x->shape[1]) fail("conv1d: channel mismatch");
    check_bias(bias, *w, "conv1d");
    dispatch_float(*x, [&](auto tag) {
      using T = decltype(tag);
      const T* px = in<T>(*x);
      const T* pw = in<T>(*w);
      const T* pb = bias ? in<T>(*bias) : nullptr;
      T* po = out<T>(*o);
      const int64_t n = x->shape[0], c = x->shape[1], l = x->shape[2], co = w->shape[0], k = w->shape[2];
      if (o->shape[0] != n || o->shape[1] != co || o->shape[2] != ember::conv_out_size(l, k, stride, padding))
        fail("conv1d: output shape mismatch");
      ember::conv1d(px, pw, pb, po, n, c, l, co, k, stride, padding);
    });
  });
}

ember_status ember_conv2d(const ember_array* x, const ember_array* w, const ember_array* bias, const ember_array* o,
                          int64_t stride, int64_t padding) {
  return guarded([&] {
    check_arrays({{x, "input"}, {w, "weight"}, {o, "out"}});
    if (bias != nullptr) check_array(bias, "bias");
    check_conv_params("conv2d", stride, padding);
    if (x->ndim != 4 || w->ndim != 4 || o->ndim != 4) fail("conv2d: input (N,C,H,W) and weight (O,C,kh,kw) expected");
    if (w->shape[1] != x->shape[1]) fail("conv2d: channel mismatch");
    check_bias(bias, *w, "conv2d");
    dispatch_float(*x, [&](auto tag) {
      using T = decltype(tag);
      const T* px = in<T>(*x);
      const T* pw = in<T>(*w);
      const T* pb = bias ? in<T>(*bias) : nullptr;
      T* po = out<T>(*o);
      const int64_t n = x->shape[0], c = x->shape[1], h = x->shape[2], wd = x->shape[3];
      const int64_t co = w->shape[0], kh = w->shape[2], kw = w->shape[3];
      if (o->shape[0] != n || o->shape[1] != co || o->shape[2] != ember::conv_out_size(h, kh, stride, padding) ||
          o->shape[3] != ember::conv_out_size(wd, kw, stride, padding))
        fail("conv2d: output shape mismatch");
      ember::conv2d(px, pw, pb, po, n, c, h, wd, co, kh, kw, stride, padding);
    });
  });
}

ember_status ember_index_add(const ember_array* o, const ember_array* index, const ember_array* source) {
  return guarded([&] {
    check_arrays({{o, "out"}, {index, "index"}, {source, "source"}});
    check_index_add(*o, *index, *source);
    const int64_t* idx = in<int64_t>(*index);
    dispatch_float(*o, [&](auto tag) {
      using T = decltype(tag);
      ember::index_add(out<T>(*o), o->shape[0], o->shape[1], idx, in<T>(*source), index->shape[0]);
    });
  });
}

// --- FFT --------------------------------------------------------------------------------

ember_status ember_fft_c2c(const ember_array* x, const ember_array* o, int forward, double scale) {
  return guarded([&] {
    check_arrays({{x, "x"}, {o, "out"}});
    const cdouble* px = in<cdouble>(*x);
    cdouble* po = out<cdouble>(*o);
    if (numel(*x) != numel(*o)) fail("fft: size mismatch");
    const int64_t n = last_dim(*x);
    ember::fft::c2c(px, po, n, n ? numel(*x) / n : 0, forward != 0, scale);
  });
}

ember_status ember_fft_r2c(const ember_array* x, const ember_array* o, double scale) {
  return guarded([&] {
    check_arrays({{x, "x"}, {o, "out"}});
    const double* px = in<double>(*x);
    cdouble* po = out<cdouble>(*o);
    const int64_t n = last_dim(*x);
    const int64_t howmany = n ? numel(*x) / n : 0;
    if (numel(*o) != howmany * (n / 2 + 1)) fail("rfft: output size mismatch");
    ember::fft::r2c(px, po, n, howmany, scale);
  });
}

ember_status ember_fft_c2r(const ember_array* x, const ember_array* o, double scale) {
  return guarded([&] {
    check_arrays({{x, "x"}, {o, "out"}});
    const cdouble* px = in<cdouble>(*x);
    double* po = out<double>(*o);
    const int64_t n = last_dim(*o);
    const int64_t howmany = n ? numel(*o) / n : 0;
    if (numel(*x) != howmany * (n / 2 + 1)) fail("irfft: input size mismatch");
    ember::fft::c2r(px, po, n, howmany, scale);
  });
}

int64_t ember_fft_plan_cache_size(void) { return ember::fft::plan_cache_size(); }
void ember_fft_clear_plan_cache(void) { ember::fft::clear_plan_cache(); }

// --- CUDA (host arrays) -----------------------------------------------------------------

ember_status ember_cuda_binary(const char* op_name, const ember_array* a, const ember_array* b,
                               const ember_array* o) {
  return guarded([&] {
    const ember::BinaryOp op = binary_op(check_name(op_name, "binary op name"));
    check_arrays({{a, "a"}, {b, "b"}, {o, "out"}});
    if (numel(*a) != numel(*o) || numel(*b) != numel(*o)) fail("cuda binary op: size mismatch");
    dispatch_float(*o, [&](auto tag) {
      using T = decltype(tag);
      ember::cuda::binary(op, in<T>(*a), in<T>(*b), out<T>(*o), numel(*o));
    });
  });
}

ember_status ember_cuda_unary(const char* op_name, const ember_array* x, const ember_array* o) {
  return guarded([&] {
    const ember::UnaryOp op = unary_op(check_name(op_name, "unary op name"));
    check_arrays({{x, "x"}, {o, "out"}});
    if (numel(*x) != numel(*o)) fail("cuda unary op: size mismatch");
    dispatch_float(*x, [&](auto tag) {
      using T = decltype(tag);
      ember::cuda::unary(op, in<T>(*x), out<T>(*o), numel(*x));
    });
  });
}

ember_status ember_cuda_reduce_axis(const char* op, const ember_array* x, const ember_array* o, int64_t outer,
                                    int64_t len, int64_t inner) {
  return guarded([&] {
    const bool sum = is_sum(check_name(op, "reduction name"));
    check_arrays({{x, "x"}, {o, "out"}});
    check_reduce_shape(sum, *x, *o, outer, len, inner);
    dispatch_float(*x, [&](auto tag) {
      using T = decltype(tag);
      if (sum) {
        ember::cuda::sum_axis(in<T>(*x), out<T>(*o), outer, len, inner);
      } else {
        ember::cuda::max_axis(in<T>(*x), out<T>(*o), outer, len, inner);
      }
    });
  });
}

ember_status ember_cuda_matmul(const ember_array* a, const ember_array* b, const ember_array* o) {
  return guarded([&] {
    check_arrays({{a, "a"}, {b, "b"}, {o, "out"}});
    if (a->ndim != 2 || b->ndim != 2 || o->ndim != 2 || a->shape[1] != b->shape[0] || o->shape[0] != a->shape[0] ||
        o->shape[1] != b->shape[1])
      fail("cuda matmul: shape mismatch");
    dispatch_float(*a, [&](auto tag) {
      using T = decltype(tag);
      ember::cuda::matmul(in<T>(*a), in<T>(*b), out<T>(*o), a->shape[0], a->shape[1], b->shape[1]);
    });
  });
}

ember_status ember_cuda_index_add(const ember_array* o, const ember_array* index, const ember_array* source) {
  return guarded([&] {
    check_arrays({{o, "out"}, {index, "index"}, {source, "source"}});
    check_index_add(*o, *index, *source);
    const int64_t* idx = in<int64_t>(*index);
    dispatch_float(*o, [&](auto tag) {
      using T = decltype(tag);
      ember::cuda::index_add(out<T>(*o), o->shape[0], o->shape[1], idx, in<T>(*source), index->shape[0]);
    });
  });
}

int ember_cuda_compiled(void) { return ember::cuda::compiled_with_cuda() ? 1 : 0; }

const char* ember_cuda_arch_list(void) {
  static const std::string joined = [] {
    std::string s;
    for (const std::string& arch : ember::cuda::arch_list()) s += (s.empty() ? "" : ",") + arch;
    return s;
  }();
  return joined.c_str();
}

int ember_cuda_device_count(void) { return ember::cuda::device_count(); }
int ember_cuda_is_available(void) { return ember::cuda::is_available() ? 1 : 0; }
const char* ember_cuda_unavailable_reason(void) {
  last_reason = ember::cuda::unavailable_reason();
  return last_reason.c_str();
}

// --- settings ---------------------------------------------------------------------------

ember_status ember_set_num_threads(int n) {
  return guarded([&] { ember::set_num_threads(n); });
}
int ember_get_num_threads(void) { return ember::get_num_threads(); }
void ember_set_deterministic(int on) { ember::set_deterministic(on != 0); }
int ember_is_deterministic(void) { return ember::is_deterministic() ? 1 : 0; }

}  // extern "C"
