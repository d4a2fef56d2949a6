#pragma once

#include <pybind11/pybind11.h>

namespace ember_python {
void bind_kernels(pybind11::module_& m);
void bind_fft(pybind11::module_& m);
void bind_cuda(pybind11::module_& m);
}  // namespace ember_python
