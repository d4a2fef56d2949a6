// What both of ember's extensions (ember._C, ember._distributed) need beyond Python.h: a
// method-table entry for functions taking keywords, and array arguments seen through PEP 3118
// with their element type named by ember's C interface. Plain C API, no C++ standard library:
// this is compiled once per Python.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "ember/c_api.h"

#define EMBER_METHOD(name, fn, doc) \
  { name, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(fn)), METH_VARARGS | METH_KEYWORDS, doc }

namespace ember_python {

// A buffer argument (numpy arrays export a strided one), held until the Buffer goes away.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (held_) PyBuffer_Release(&view_);
  }

  // false with a Python exception set when `object` exports no buffer.
  bool get(PyObject* object) {
    if (PyObject_GetBuffer(object, &view_, PyBUF_RECORDS_RO) != 0) return false;
    held_ = true;
    return true;
  }

  const Py_buffer& view() const { return view_; }
  const char* format() const { return view_.format ? view_.format : "B"; }

  // The PEP 3118 format code, as numpy writes it, as one of ember's element types.
  ember_dtype dtype() const {
    const char* f = format();
    if (*f == '@' || *f == '=' || *f == '<') ++f;
    const Py_ssize_t size = view_.itemsize;
    if (strcmp(f, "f") == 0 && size == 4) return EMBER_FLOAT32;
    if (strcmp(f, "d") == 0 && size == 8) return EMBER_FLOAT64;
    if (strcmp(f, "Zd") == 0 && size == 16) return EMBER_COMPLEX128;
    if ((strcmp(f, "l") == 0 || strcmp(f, "q") == 0) && size == 8) return EMBER_INT64;
    if ((strcmp(f, "i") == 0 || strcmp(f, "l") == 0) && size == 4) return EMBER_INT32;
    return EMBER_DTYPE_OTHER;
  }

 private:
  Py_buffer view_{};
  bool held_ = false;
};

}  // namespace ember_python
