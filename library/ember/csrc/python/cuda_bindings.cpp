// Bindings of the CUDA backend (host arrays in and out). On a CPU build the functions
// exist and raise RuntimeError.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "array_access.h"
#include "bindings.h"
#include "op_names.h"
#include "ember/cuda.h"

namespace ember_python {
namespace {

void binary(const std::string& name, const py::array& a, const py::array& b, py::array& out) {
  if (a.size() != out.size() || b.size() != out.size())
    throw std::invalid_argument("cuda binary op: size mismatch");
  dispatch_float(out, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = in_ptr<T>(a, "a");
    const T* pb = in_ptr<T>(b, "b");
    T* o = out_ptr<T>(out, "out");
    const int64_t n = out.size();
    py::gil_scoped_release nogil;
    ember::cuda::binary(binary_op(name), pa, pb, o, n);
  });
}

void unary(const std::string& name, const py::array& x, py::array& out) {
  dispatch_float(x, [&](auto tag) {
    using T = decltype(tag);
    const T* px = in_ptr<T>(x, "x");
    T* o = out_ptr<T>(out, "out");
    const int64_t n = x.size();
    py::gil_scoped_release nogil;
    ember::cuda::unary(unary_op(name), px, o, n);
  });
}

void reduce_axis(const std::string& name, const py::array& x, py::array& out, int64_t outer,
                 int64_t len, int64_t inner) {
  if (outer * len * inner != x.size() || outer * inner != out.size())
    throw std::invalid_argument("reduce: shape mismatch");
  dispatch_float(x, [&](auto tag) {
    using T = decltype(tag);
    const T* px = in_ptr<T>(x, "x");
    T* o = out_ptr<T>(out, "out");
    py::gil_scoped_release nogil;
    if (name == "sum") {
      ember::cuda::sum_axis(px, o, outer, len, inner);
    } else if (name == "max") {
      ember::cuda::max_axis(px, o, outer, len, inner);
    } else {
      throw std::invalid_argument("unknown reduction: " + name);
    }
  });
}

void matmul(const py::array& a, const py::array& b, py::array& out) {
  if (a.ndim() != 2 || b.ndim() != 2 || out.ndim() != 2 || a.shape(1) != b.shape(0) ||
      out.shape(0) != a.shape(0) || out.shape(1) != b.shape(1))
    throw std::invalid_argument("cuda matmul: shape mismatch");
  dispatch_float(a, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = in_ptr<T>(a, "a");
    const T* pb = in_ptr<T>(b, "b");
    T* o = out_ptr<T>(out, "out");
    const int64_t m = a.shape(0), k = a.shape(1), n = b.shape(1);
    py::gil_scoped_release nogil;
    ember::cuda::matmul(pa, pb, o, m, k, n);
  });
}

void index_add(py::array& out, const py::array& index, const py::array& source) {
  if (out.ndim() != 2 || source.ndim() != 2 || index.ndim() != 1 ||
      source.shape(0) != index.shape(0) || source.shape(1) != out.shape(1))
    throw std::invalid_argument("index_add: out (R,C), index (N,), source (N,C) expected");
  const int64_t* idx = in_ptr<int64_t>(index, "index");
  dispatch_float(out, [&](auto tag) {
    using T = decltype(tag);
    T* o = out_ptr<T>(out, "out");
    const T* src = in_ptr<T>(source, "source");
    const int64_t rows = out.shape(0), cols = out.shape(1), n = index.shape(0);
    py::gil_scoped_release nogil;
    ember::cuda::index_add(o, rows, cols, idx, src, n);
  });
}

}  // namespace

void bind_cuda(py::module_& m) {
  m.def("cuda_compiled", &ember::cuda::compiled_with_cuda);
  m.def("cuda_arch_list", &ember::cuda::arch_list);
  m.def("cuda_device_count", &ember::cuda::device_count);
  m.def("cuda_is_available", &ember::cuda::is_available);
  m.def("cuda_unavailable_reason", &ember::cuda::unavailable_reason);
  m.def("cuda_binary", &binary);
  m.def("cuda_unary", &unary);
  m.def("cuda_reduce_axis", &reduce_axis);
  m.def("cuda_matmul", &matmul);
  m.def("cuda_index_add", &index_add);
}

}  // namespace ember_python
