// ember._C: the bindings of libember's kernels, FFT and CUDA backend.
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "ember/deterministic.h"
#include "ember/kernels.h"
#include "ember/version.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "ember's native kernels (libember)";
  m.attr("__version__") = EMBER_VERSION_STRING;
  m.def("set_num_threads", &ember::set_num_threads, "Threads used by ember's CPU kernels.");
  m.def("get_num_threads", &ember::get_num_threads);
  m.def("set_deterministic", &ember::set_deterministic);
  m.def("is_deterministic", &ember::is_deterministic);
  ember_python::bind_kernels(m);
  ember_python::bind_fft(m);
  ember_python::bind_cuda(m);
}
