// Bindings of the FFT: batches of contiguous rows (the Python layer moves the transformed
// axis last).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <complex>

#include "array_access.h"
#include "bindings.h"
#include "ember/fft.h"

namespace ember_python {
namespace {

using cdouble = std::complex<double>;

int64_t last_dim(const py::array& a) { return a.ndim() == 0 ? 1 : a.shape(a.ndim() - 1); }

void c2c(const py::array& x, py::array& out, bool forward, double scale) {
  const cdouble* in = in_ptr<cdouble>(x, "x");
  cdouble* o = out_ptr<cdouble>(out, "out");
  if (x.size() != out.size()) throw std::invalid_argument("fft: size mismatch");
  const int64_t n = last_dim(x);
  const int64_t howmany = n ? x.size() / n : 0;
  py::gil_scoped_release nogil;
  ember::fft::c2c(in, o, n, howmany, forward, scale);
}

void r2c(const py::array& x, py::array& out, double scale) {
  const double* in = in_ptr<double>(x, "x");
  cdouble* o = out_ptr<cdouble>(out, "out");
  const int64_t n = last_dim(x);
  const int64_t howmany = n ? x.size() / n : 0;
  if (out.size() != howmany * (n / 2 + 1)) throw std::invalid_argument("rfft: output size mismatch");
  py::gil_scoped_release nogil;
  ember::fft::r2c(in, o, n, howmany, scale);
}

void c2r(const py::array& x, py::array& out, double scale) {
  const cdouble* in = in_ptr<cdouble>(x, "x");
  double* o = out_ptr<double>(out, "out");
  const int64_t n = last_dim(out);
  const int64_t howmany = n ? out.size() / n : 0;
  if (x.size() != howmany * (n / 2 + 1)) throw std::invalid_argument("irfft: input size mismatch");
  py::gil_scoped_release nogil;
  ember::fft::c2r(in, o, n, howmany, scale);
}

}  // namespace

void bind_fft(py::module_& m) {
  m.def("fft_c2c", &c2c, py::arg("x"), py::arg("out"), py::arg("forward"), py::arg("scale"));
  m.def("fft_r2c", &r2c, py::arg("x"), py::arg("out"), py::arg("scale"));
  m.def("fft_c2r", &c2r, py::arg("x"), py::arg("out"), py::arg("scale"));
  m.def("fft_plan_cache_size", &ember::fft::plan_cache_size);
  m.def("fft_clear_plan_cache", &ember::fft::clear_plan_cache);
}

}  // namespace ember_python
