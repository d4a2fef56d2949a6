// ember._C: the Python face of libember's kernels, FFT and CUDA backend. Each function
// parses its arguments, describes its arrays as ember_array and calls ember's C interface
// (ember/c_api.h) with the GIL released; the checks and the dtype dispatch live in the core.
// This file is compiled once per Python, so it stays plain: the CPython C API and that C
// header, no C++ standard library, no exceptions.
#include "buffer.h"
#include "ember/c_api.h"
#include "ember/version.h"

namespace {

// Raises the Python exception for a failed call; returns nullptr for the caller to return.
PyObject* raise_status(ember_status status) {
  PyObject* type = status == EMBER_INVALID_ARGUMENT ? PyExc_ValueError
                   : status == EMBER_OUT_OF_MEMORY  ? PyExc_MemoryError
                                                    : PyExc_RuntimeError;
  PyErr_SetString(type, ember_last_error());
  return nullptr;
}

PyObject* done(ember_status status) {
  if (status != EMBER_OK) return raise_status(status);
  Py_RETURN_NONE;
}

// An array argument described as an ember_array; the buffer, and so the data, is held
// until the Array goes away.
class Array {
 public:
  bool get(PyObject* object, const char* name) {
    if (!buffer_.get(object)) return false;
    const Py_buffer& view = buffer_.view();
    for (int d = 0; d < view.ndim; ++d) {
      shape_[d] = static_cast<int64_t>(view.shape[d]);
      strides_[d] = static_cast<int64_t>(view.strides[d]);
    }
    array_.data = view.buf;
    array_.format = buffer_.format();
    array_.dtype = buffer_.dtype();
    array_.ndim = view.ndim;
    array_.shape = shape_;
    array_.strides = strides_;
    array_.itemsize = static_cast<int64_t>(view.itemsize);
    array_.writable = view.readonly ? 0 : 1;
    array_.name = name;
    return true;
  }
  const ember_array* ptr() const { return &array_; }

 private:
  ember_python::Buffer buffer_;
  int64_t shape_[PyBUF_MAX_NDIM] = {};
  int64_t strides_[PyBUF_MAX_NDIM] = {};
  ember_array array_{};
};

char** keywords(const char* const* names) { return const_cast<char**>(names); }

// --- kernels ----------------------------------------------------------------------------

using BinaryFn = ember_status (*)(const char*, const ember_array*, const ember_array*, const ember_array*);

// (op, a, b, out)
PyObject* binary_with(PyObject* args, PyObject* kwargs, const char* format, BinaryFn fn) {
  static const char* const kw[] = {"op", "a", "b", "out", nullptr};
  const char* op;
  PyObject *a, *b, *out;
  Array va, vb, vo;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, keywords(kw), &op, &a, &b, &out) || !va.get(a, "a") ||
      !vb.get(b, "b") || !vo.get(out, "out"))
    return nullptr;
  ember_status status;
  Py_BEGIN_ALLOW_THREADS
  status = fn(op, va.ptr(), vb.ptr(), vo.ptr());
  Py_END_ALLOW_THREADS
  return done(status);
}
PyObject* binary(PyObject*, PyObject* args, PyObject* kwargs) {
  return binary_with(args, kwargs, "sOOO:binary", ember_binary);
}
PyObject* cuda_binary(PyObject*, PyObject* args, PyObject* kwargs) {
  return binary_with(args, kwargs, "sOOO:cuda_binary", ember_cuda_binary);
}

using UnaryFn = ember_status (*)(const char*, const ember_array*, const ember_array*);

// (op, x, out)
PyObject* unary_with(PyObject* args, PyObject* kwargs, const char* format, UnaryFn fn) {
  static const char* const kw[] = {"op", "x", "out", nullptr};
  const char* op;
  PyObject *x, *out;
  Array vx, vo;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, keywords(kw), &op, &x, &out) || !vx.get(x, "x") ||
      !vo.get(out, "out"))
    return nullptr;
  ember_status status;
  Py_BEGIN_ALLOW_THREADS
  status = fn(op, vx.ptr(), vo.ptr());
  Py_END_ALLOW_THREADS
  return done(status);
}
PyObject* unary(PyObject*, PyObject* args, PyObject* kwargs) {
  return unary_with(args, kwargs, "sOO:unary", ember_unary);
}
PyObject* cuda_unary(PyObject*, PyObject* args, PyObject* kwargs) {
  return unary_with(args, kwargs, "sOO:cuda_unary", ember_cuda_unary);
}

using ReduceFn = ember_status (*)(const char*, const ember_array*, const ember_array*, int64_t, int64_t, int64_t);

// (op, x, out, outer, len, inner)
PyObject* reduce_axis_with(PyObject* args, PyObject* kwargs, const char* format, ReduceFn fn) {
  static const char* const kw[] = {"op", "x", "out", "outer", "len", "inner", nullptr};
  const char* op;
  PyObject *x, *out;
  long long outer, len, inner;
  Array vx, vo;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, keywords(kw), &op, &x, &out, &outer, &len, &inner) ||
      !vx.get(x, "x") || !vo.get(out, "out"))
    return nullptr;
  ember_status status;
  Py_BEGIN_ALLOW_THREADS
  status = fn(op, vx.ptr(), vo.ptr(), outer, len, inner);
  Py_END_ALLOW_THREADS
  return done(status);
}
PyObject* reduce_axis(PyObject*, PyObject* args, PyObject* kwargs) {
  return reduce_axis_with(args, kwargs, "sOOLLL:reduce_axis", ember_reduce_axis);
}
PyObject* cuda_reduce_axis(PyObject*, PyObject* args, PyObject* kwargs) {
  return reduce_axis_with(args, kwargs, "sOOLLL:cuda_reduce_axis", ember_cuda_reduce_axis);
}

PyObject* reduce_all(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* const kw[] = {"op", "x", nullptr};
  const char* op;
  PyObject* x;
  Array vx;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "sO:reduce_all", keywords(kw), &op, &x) || !vx.get(x, "x"))
    return nullptr;
  double value = 0;
  ember_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_reduce_all(op, vx.ptr(), &value);
  Py_END_ALLOW_THREADS
  return status == EMBER_OK ? PyFloat_FromDouble(value) : raise_status(status);
}

using ThreeArrayFn = ember_status (*)(const ember_array*, const ember_array*, const ember_array*);

// (a, b, out) for matmul; (out, index, source) for index_add. kw names the three arrays.
PyObject* three_arrays(PyObject* args, PyObject* kwargs, const char* format, const char* const* kw, ThreeArrayFn fn) {
  PyObject *first, *second, *third;
  Array v1, v2, v3;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, keywords(kw), &first, &second, &third) ||
      !v1.get(first, kw[0]) || !v2.get(second, kw[1]) || !v3.get(third, kw[2]))
    return nullptr;
  ember_status status;
  Py_BEGIN_ALLOW_THREADS
  status = fn(v1.ptr(), v2.ptr(), v3.ptr());
  Py_END_ALLOW_THREADS
  return done(status);
}
const char* const kMatmulArgs[] = {"a", "b", "out", nullptr};
const char* const kIndexAddArgs[] = {"out", "index", "source", nullptr};
PyObject* matmul(PyObject*, PyObject* args, PyObject* kwargs) {
  return three_arrays(args, kwargs, "OOO:matmul", kMatmulArgs, ember_matmul);
}
PyObject* cuda_matmul(PyObject*, PyObject* args, PyObject* kwargs) {
  return three_arrays(args, kwargs, "OOO:cuda_matmul", kMatmulArgs, ember_cuda_matmul);
}
PyObject* index_add(PyObject*, PyObject* args, PyObject* kwargs) {
  return three_arrays(args, kwargs, "OOO:index_add", kIndexAddArgs, ember_index_add);
}
PyObject* cuda_index_add(PyObject*, PyObject* args, PyObject* kwargs) {
  return three_arrays(args, kwargs, "OOO:cuda_index_add", kIndexAddArgs, ember_cuda_index_add);
}

PyObject* softmax(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* const kw[] = {"x", "out", nullptr};
  PyObject *x, *out;
  Array vx, vo;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:softmax", keywords(kw), &x, &out) || !vx.get(x, "x") ||
      !vo.get(out, "out"))
    return nullptr;
  ember_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_softmax(vx.ptr(), vo.ptr());
  Py_END_ALLOW_THREADS
  return done(status);
}

using ConvFn = ember_status (*)(const ember_array*, const ember_array*, const ember_array*, const ember_array*, int64_t,
                                int64_t);

// (input, weight, bias or None, out, stride, padding)
PyObject* conv_with(PyObject* args, PyObject* kwargs, const char* format, ConvFn fn) {
  static const char* const kw[] = {"input", "weight", "bias", "out", "stride", "padding", nullptr};
  PyObject *x, *w, *bias, *out;
  long long stride, padding;
  Array vx, vw, vb, vo;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, keywords(kw), &x, &w, &bias, &out, &stride, &padding) ||
      !vx.get(x, "input") || !vw.get(w, "weight") || (bias != Py_None && !vb.get(bias, "bias")) ||
      !vo.get(out, "out"))
    return nullptr;
  const ember_array* pb = bias == Py_None ? nullptr : vb.ptr();
  ember_status status;
  Py_BEGIN_ALLOW_THREADS
  status = fn(vx.ptr(), vw.ptr(), pb, vo.ptr(), stride, padding);
  Py_END_ALLOW_THREADS
  return done(status);
}
PyObject* conv1d(PyObject*, PyObject* args, PyObject* kwargs) {
  return conv_with(args, kwargs, "OOOOLL:conv1d", ember_conv1d);
}
PyObject* conv2d(PyObject*, PyObject* args, PyObject* kwargs) {
  return conv_with(args, kwargs, "OOOOLL:conv2d", ember_conv2d);
}

// --- FFT --------------------------------------------------------------------------------

PyObject* fft_c2c(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* const kw[] = {"x", "out", "forward", "scale", nullptr};
  PyObject *x, *out;
  int forward;
  double scale;
  Array vx, vo;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOpd:fft_c2c", keywords(kw), &x, &out, &forward, &scale) ||
      !vx.get(x, "x") || !vo.get(out, "out"))
    return nullptr;
  ember_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_fft_c2c(vx.ptr(), vo.ptr(), forward, scale);
  Py_END_ALLOW_THREADS
  return done(status);
}

using RealFftFn = ember_status (*)(const ember_array*, const ember_array*, double);

// (x, out, scale) for the real transforms.
PyObject* real_fft_with(PyObject* args, PyObject* kwargs, const char* format, RealFftFn fn) {
  static const char* const kw[] = {"x", "out", "scale", nullptr};
  PyObject *x, *out;
  double scale;
  Array vx, vo;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, keywords(kw), &x, &out, &scale) || !vx.get(x, "x") ||
      !vo.get(out, "out"))
    return nullptr;
  ember_status status;
  Py_BEGIN_ALLOW_THREADS
  status = fn(vx.ptr(), vo.ptr(), scale);
  Py_END_ALLOW_THREADS
  return done(status);
}
PyObject* fft_r2c(PyObject*, PyObject* args, PyObject* kwargs) {
  return real_fft_with(args, kwargs, "OOd:fft_r2c", ember_fft_r2c);
}
PyObject* fft_c2r(PyObject*, PyObject* args, PyObject* kwargs) {
  return real_fft_with(args, kwargs, "OOd:fft_c2r", ember_fft_c2r);
}

// --- settings and queries ---------------------------------------------------------------

PyObject* set_num_threads(PyObject*, PyObject* arg) {
  const long n = PyLong_AsLong(arg);
  if (n == -1 && PyErr_Occurred()) return nullptr;
  if (n < -2147483647L || n > 2147483647L) {
    PyErr_SetString(PyExc_ValueError, "set_num_threads: thread count out of range");
    return nullptr;
  }
  return done(ember_set_num_threads(static_cast<int>(n)));
}
PyObject* get_num_threads(PyObject*, PyObject*) { return PyLong_FromLong(ember_get_num_threads()); }
PyObject* set_deterministic(PyObject*, PyObject* arg) {
  const int on = PyObject_IsTrue(arg);
  if (on < 0) return nullptr;
  ember_set_deterministic(on);
  Py_RETURN_NONE;
}
PyObject* is_deterministic(PyObject*, PyObject*) { return PyBool_FromLong(ember_is_deterministic()); }
PyObject* fft_plan_cache_size(PyObject*, PyObject*) { return PyLong_FromLongLong(ember_fft_plan_cache_size()); }
PyObject* fft_clear_plan_cache(PyObject*, PyObject*) {
  ember_fft_clear_plan_cache();
  Py_RETURN_NONE;
}
PyObject* cuda_compiled(PyObject*, PyObject*) { return PyBool_FromLong(ember_cuda_compiled()); }
PyObject* cuda_device_count(PyObject*, PyObject*) { return PyLong_FromLong(ember_cuda_device_count()); }
PyObject* cuda_is_available(PyObject*, PyObject*) { return PyBool_FromLong(ember_cuda_is_available()); }
PyObject* cuda_unavailable_reason(PyObject*, PyObject*) {
  return PyUnicode_FromString(ember_cuda_unavailable_reason());
}
PyObject* cuda_arch_list(PyObject*, PyObject*) {
  const char* joined = ember_cuda_arch_list();
  if (*joined == '\0') return PyList_New(0);
  PyObject* text = PyUnicode_FromString(joined);
  PyObject* sep = PyUnicode_FromString(",");
  PyObject* list = text && sep ? PyUnicode_Split(text, sep, -1) : nullptr;
  Py_XDECREF(text);
  Py_XDECREF(sep);
  return list;
}

PyMethodDef methods[] = {
    {"set_num_threads", set_num_threads, METH_O, "Threads used by ember's CPU kernels."},
    {"get_num_threads", get_num_threads, METH_NOARGS, "Threads used by ember's CPU kernels."},
    {"set_deterministic", set_deterministic, METH_O, "Switch deterministic algorithms on or off."},
    {"is_deterministic", is_deterministic, METH_NOARGS, "Whether deterministic algorithms are required."},
    EMBER_METHOD("binary", binary, "binary(op, a, b, out): out = a <op> b for add, sub, mul, div"),
    EMBER_METHOD("unary", unary, "unary(op, x, out): relu, exp, log, tanh or sigmoid"),
    EMBER_METHOD("reduce_axis", reduce_axis, "reduce_axis(op, x, out, outer, len, inner): sum or max over len"),
    EMBER_METHOD("reduce_all", reduce_all, "reduce_all(op, x) -> float: sum or max of every element"),
    EMBER_METHOD("matmul", matmul, "matmul(a, b, out): 2-D matrix product"),
    EMBER_METHOD("softmax", softmax, "softmax(x, out): row-wise softmax of a 2-D array"),
    EMBER_METHOD("conv1d", conv1d, "conv1d(input, weight, bias, out, stride, padding)"),
    EMBER_METHOD("conv2d", conv2d, "conv2d(input, weight, bias, out, stride, padding)"),
    EMBER_METHOD("index_add", index_add, "index_add(out, index, source): out[index[i]] += source[i]"),
    EMBER_METHOD("fft_c2c", fft_c2c, "fft_c2c(x, out, forward, scale): complex transform of each last-axis row"),
    EMBER_METHOD("fft_r2c", fft_r2c, "fft_r2c(x, out, scale): real-to-complex transform of each row"),
    EMBER_METHOD("fft_c2r", fft_c2r, "fft_c2r(x, out, scale): complex-to-real inverse of each row"),
    {"fft_plan_cache_size", fft_plan_cache_size, METH_NOARGS, "Plans held in the FFT plan cache."},
    {"fft_clear_plan_cache", fft_clear_plan_cache, METH_NOARGS, "Empties the FFT plan cache."},
    {"cuda_compiled", cuda_compiled, METH_NOARGS, "Whether libember was built with CUDA kernels."},
    {"cuda_arch_list", cuda_arch_list, METH_NOARGS, "The sm_XX architectures libember's fatbin holds."},
    {"cuda_device_count", cuda_device_count, METH_NOARGS, "Visible CUDA devices (0 without a driver)."},
    {"cuda_is_available", cuda_is_available, METH_NOARGS, "Whether a CUDA device can run ember's kernels."},
    {"cuda_unavailable_reason", cuda_unavailable_reason, METH_NOARGS, "Why CUDA is unavailable."},
    EMBER_METHOD("cuda_binary", cuda_binary, "cuda_binary(op, a, b, out)"),
    EMBER_METHOD("cuda_unary", cuda_unary, "cuda_unary(op, x, out)"),
    EMBER_METHOD("cuda_reduce_axis", cuda_reduce_axis, "cuda_reduce_axis(op, x, out, outer, len, inner)"),
    EMBER_METHOD("cuda_matmul", cuda_matmul, "cuda_matmul(a, b, out)"),
    EMBER_METHOD("cuda_index_add", cuda_index_add, "cuda_index_add(out, index, source)"),
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", "ember's native kernels (libember)", -1, methods,
                          nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__C(void) {
  PyObject* m = PyModule_Create(&module_def);
  if (m != nullptr && PyModule_AddStringConstant(m, "__version__", EMBER_VERSION_STRING) != 0) Py_CLEAR(m);
  return m;
}
