// Checked access to numpy arrays from the bindings: the Python layer hands over arrays of
// the right dtype and layout, and these checks turn a mistake into a Python exception.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>

namespace ember_python {

namespace py = pybind11;

template <typename T>
bool has_dtype(const py::array& a) {
  return a.dtype().is(py::dtype::of<T>());
}

inline void require_contiguous(const py::array& a, const char* name) {
  if (!(a.flags() & py::array::c_style))
    throw std::invalid_argument(std::string(name) + ": array must be C-contiguous");
}

template <typename T>
const T* in_ptr(const py::array& a, const char* name) {
  if (!has_dtype<T>(a)) throw std::invalid_argument(std::string(name) + ": unexpected dtype");
  require_contiguous(a, name);
  return static_cast<const T*>(a.data());
}

template <typename T>
T* out_ptr(py::array& a, const char* name) {
  if (!has_dtype<T>(a)) throw std::invalid_argument(std::string(name) + ": unexpected dtype");
  require_contiguous(a, name);
  if (!a.writeable()) throw std::invalid_argument(std::string(name) + ": array is read-only");
  return static_cast<T*>(a.mutable_data());
}

// Calls fn(T{}) with T = float or double according to the array's dtype.
template <typename Fn>
auto dispatch_float(const py::array& a, Fn&& fn) {
  if (has_dtype<float>(a)) return fn(float{});
  if (has_dtype<double>(a)) return fn(double{});
  throw std::invalid_argument("ember kernels take float32 or float64 arrays, got " +
                              std::string(py::str(a.dtype())));
}

}  // namespace ember_python
