// Bindings of the CPU kernels. Shapes come from the arrays; the GIL is released while a
// kernel runs.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "array_access.h"
#include "bindings.h"
#include "op_names.h"
#include "ember/kernels.h"

namespace ember_python {
namespace {

// Element strides of a (possibly broadcast, zero-stride) view.
std::vector<int64_t> element_strides(const py::array& a) {
  std::vector<int64_t> s(a.ndim());
  for (py::ssize_t d = 0; d < a.ndim(); ++d) {
    if (a.strides(d) % a.itemsize() != 0)
      throw std::invalid_argument("binary op: misaligned strides");
    s[d] = a.strides(d) / a.itemsize();
  }
  return s;
}

// out = a op b, where a and b are views already broadcast to out's shape.
void binary(const std::string& name, const py::array& a, const py::array& b, py::array& out) {
  const auto op = binary_op(name);
  if (a.ndim() != out.ndim() || b.ndim() != out.ndim())
    throw std::invalid_argument("binary op: operands must be broadcast to the output shape");
  for (py::ssize_t d = 0; d < out.ndim(); ++d)
    if (a.shape(d) != out.shape(d) || b.shape(d) != out.shape(d))
      throw std::invalid_argument("binary op: operands must be broadcast to the output shape");
  dispatch_float(out, [&](auto tag) {
    using T = decltype(tag);
    if (!has_dtype<T>(a) || !has_dtype<T>(b)) throw std::invalid_argument("binary op: mixed dtypes");
    T* o = out_ptr<T>(out, "out");
    const T* pa = static_cast<const T*>(a.data());
    const T* pb = static_cast<const T*>(b.data());
    const bool contiguous = (a.flags() & py::array::c_style) && (b.flags() & py::array::c_style);
    if (contiguous) {
      const int64_t n = out.size();
      py::gil_scoped_release nogil;
      switch (op) {
        case ember::BinaryOp::Add: ember::add(pa, pb, o, n); break;
        case ember::BinaryOp::Sub: ember::sub(pa, pb, o, n); break;
        case ember::BinaryOp::Mul: ember::mul(pa, pb, o, n); break;
        case ember::BinaryOp::Div: ember::div(pa, pb, o, n); break;
      }
      return;
    }
    std::vector<int64_t> sa = element_strides(a), sb = element_strides(b);
    std::vector<int64_t> shape(out.shape(), out.shape() + out.ndim());
    py::gil_scoped_release nogil;
    ember::binary_strided(op, pa, sa.data(), pb, sb.data(), o, shape.data(),
                          static_cast<int>(shape.size()));
  });
}

void unary(const std::string& name, const py::array& x, py::array& out) {
  const auto op = unary_op(name);
  if (x.size() != out.size()) throw std::invalid_argument("unary op: size mismatch");
  dispatch_float(x, [&](auto tag) {
    using T = decltype(tag);
    const T* px = in_ptr<T>(x, "x");
    T* o = out_ptr<T>(out, "out");
    const int64_t n = x.size();
    py::gil_scoped_release nogil;
    ember::unary(op, px, o, n);
  });
}

// x viewed as [outer, len, inner] -> out[outer, inner]
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
      ember::sum_axis(px, o, outer, len, inner);
    } else if (name == "max") {
      ember::max_axis(px, o, outer, len, inner);
    } else {
      throw std::invalid_argument("unknown reduction: " + name);
    }
  });
}

double reduce_all(const std::string& name, const py::array& x) {
  return dispatch_float(x, [&](auto tag) -> double {
    using T = decltype(tag);
    const T* px = in_ptr<T>(x, "x");
    const int64_t n = x.size();
    py::gil_scoped_release nogil;
    if (name == "sum") return ember::sum_all(px, n);
    if (name == "max") return ember::max_all(px, n);
    throw std::invalid_argument("unknown reduction: " + name);
  });
}

void matmul(const py::array& a, const py::array& b, py::array& out) {
  if (a.ndim() != 2 || b.ndim() != 2 || out.ndim() != 2)
    throw std::invalid_argument("matmul: 2-D arrays expected");
  const int64_t m = a.shape(0), k = a.shape(1), n = b.shape(1);
  if (b.shape(0) != k || out.shape(0) != m || out.shape(1) != n)
    throw std::invalid_argument("matmul: shape mismatch");
  dispatch_float(a, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = in_ptr<T>(a, "a");
    const T* pb = in_ptr<T>(b, "b");
    T* o = out_ptr<T>(out, "out");
    py::gil_scoped_release nogil;
    ember::matmul(pa, pb, o, m, k, n);
  });
}

void softmax(const py::array& x, py::array& out) {
  if (x.ndim() != 2 || out.size() != x.size()) throw std::invalid_argument("softmax: 2-D array expected");
  dispatch_float(x, [&](auto tag) {
    using T = decltype(tag);
    const T* px = in_ptr<T>(x, "x");
    T* o = out_ptr<T>(out, "out");
    const int64_t rows = x.shape(0), cols = x.shape(1);
    py::gil_scoped_release nogil;
    ember::softmax(px, o, rows, cols);
  });
}

void conv2d(const py::array& x, const py::array& w, const py::object& bias, py::array& out,
            int64_t stride, int64_t padding) {
  if (x.ndim() != 4 || w.ndim() != 4 || out.ndim() != 4)
    throw std::invalid_argument("conv2d: input (N,C,H,W) and weight (O,C,kh,kw) expected");
  if (w.shape(1) != x.shape(1)) throw std::invalid_argument("conv2d: channel mismatch");
  dispatch_float(x, [&](auto tag) {
    using T = decltype(tag);
    const T* px = in_ptr<T>(x, "input");
    const T* pw = in_ptr<T>(w, "weight");
    const T* pb = nullptr;
    if (!bias.is_none()) {
      py::array b = bias.cast<py::array>();
      if (b.size() != w.shape(0)) throw std::invalid_argument("conv2d: bias size mismatch");
      pb = in_ptr<T>(b, "bias");
    }
    T* o = out_ptr<T>(out, "out");
    const int64_t n = x.shape(0), c = x.shape(1), h = x.shape(2), wd = x.shape(3);
    const int64_t co = w.shape(0), kh = w.shape(2), kw = w.shape(3);
    if (out.shape(0) != n || out.shape(1) != co ||
        out.shape(2) != ember::conv_out_size(h, kh, stride, padding) ||
        out.shape(3) != ember::conv_out_size(wd, kw, stride, padding))
      throw std::invalid_argument("conv2d: output shape mismatch");
    py::gil_scoped_release nogil;
    ember::conv2d(px, pw, pb, o, n, c, h, wd, co, kh, kw, stride, padding);
  });
}

void conv1d(const py::array& x, const py::array& w, const py::object& bias, py::array& out,
            int64_t stride, int64_t padding) {
  if (x.ndim() != 3 || w.ndim() != 3 || out.ndim() != 3)
    throw std::invalid_argument("conv1d: input (N,C,L) and weight (O,C,k) expected");
  if (w.shape(1) != x.shape(1)) throw std::invalid_argument("conv1d: channel mismatch");
  dispatch_float(x, [&](auto tag) {
    using T = decltype(tag);
    const T* px = in_ptr<T>(x, "input");
    const T* pw = in_ptr<T>(w, "weight");
    const T* pb = nullptr;
    if (!bias.is_none()) {
      py::array b = bias.cast<py::array>();
      if (b.size() != w.shape(0)) throw std::invalid_argument("conv1d: bias size mismatch");
      pb = in_ptr<T>(b, "bias");
    }
    T* o = out_ptr<T>(out, "out");
    const int64_t n = x.shape(0), c = x.shape(1), l = x.shape(2), co = w.shape(0), k = w.shape(2);
    if (out.shape(0) != n || out.shape(1) != co ||
        out.shape(2) != ember::conv_out_size(l, k, stride, padding))
      throw std::invalid_argument("conv1d: output shape mismatch");
    py::gil_scoped_release nogil;
    ember::conv1d(px, pw, pb, o, n, c, l, co, k, stride, padding);
  });
}

// out[index[i], :] += source[i, :] in place; out is (rows, cols), source (len(index), cols).
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
    ember::index_add(o, rows, cols, idx, src, n);
  });
}

}  // namespace

void bind_kernels(py::module_& m) {
  m.def("binary", &binary, py::arg("op"), py::arg("a"), py::arg("b"), py::arg("out"));
  m.def("unary", &unary, py::arg("op"), py::arg("x"), py::arg("out"));
  m.def("reduce_axis", &reduce_axis);
  m.def("reduce_all", &reduce_all);
  m.def("matmul", &matmul);
  m.def("softmax", &softmax);
  m.def("conv1d", &conv1d);
  m.def("conv2d", &conv2d);
  m.def("index_add", &index_add);
}

}  // namespace ember_python
