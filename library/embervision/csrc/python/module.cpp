// embervision._C: the Python face of libembervision's codecs and transforms. Each function
// parses its arguments, describes its arrays (PEP 3118 buffers, as numpy exports them) as
// ev_array and calls embervision's C interface (embervision/c_api.h) with the GIL released;
// the checks, the dtype dispatch and the CUDA kernels live in the core. This file is compiled
// once per Python, so it stays plain: the CPython C API and that C header, no C++ standard
// library, no exceptions. The Python layer (io.py, transforms.py) allocates the outputs.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "embervision/c_api.h"

#define EV_METHOD(name, fn, doc) \
  { name, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(fn)), METH_VARARGS | METH_KEYWORDS, doc }

namespace {

// Raises the Python exception for a failed call; returns nullptr for the caller to return.
PyObject* raise_status(ev_status status) {
  PyObject* type = status == EV_INVALID_ARGUMENT ? PyExc_ValueError
                   : status == EV_OUT_OF_MEMORY  ? PyExc_MemoryError
                                                 : PyExc_RuntimeError;
  PyErr_SetString(type, ev_last_error());
  return nullptr;
}

PyObject* done(ev_status status) {
  if (status != EV_OK) return raise_status(status);
  Py_RETURN_NONE;
}

char** keywords(const char* const* names) { return const_cast<char**>(names); }

// An array argument described as an ev_array; the buffer, and so the data, is held until
// the Array goes away.
class Array {
 public:
  Array() = default;
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;
  ~Array() {
    if (held_) PyBuffer_Release(&view_);
  }

  // false with a Python exception set when `object` exports no buffer.
  bool get(PyObject* object, const char* name) {
    if (PyObject_GetBuffer(object, &view_, PyBUF_RECORDS_RO) != 0) return false;
    held_ = true;
    for (int d = 0; d < view_.ndim; ++d) {
      shape_[d] = static_cast<int64_t>(view_.shape[d]);
      strides_[d] = static_cast<int64_t>(view_.strides[d]);
    }
    array_.data = view_.buf;
    array_.format = view_.format ? view_.format : "B";
    array_.dtype = dtype(array_.format, view_.itemsize);
    array_.ndim = view_.ndim;
    array_.shape = shape_;
    array_.strides = strides_;
    array_.itemsize = static_cast<int64_t>(view_.itemsize);
    array_.writable = view_.readonly ? 0 : 1;
    array_.name = name;
    return true;
  }
  const ev_array* ptr() const { return &array_; }

 private:
  // The PEP 3118 format code, as numpy writes it, as one of embervision's element types.
  static ev_dtype dtype(const char* f, Py_ssize_t size) {
    if (*f == '@' || *f == '=' || *f == '<') ++f;
    if (strcmp(f, "B") == 0 && size == 1) return EV_UINT8;
    if (strcmp(f, "H") == 0 && size == 2) return EV_UINT16;
    if (strcmp(f, "f") == 0 && size == 4) return EV_FLOAT32;
    if (strcmp(f, "d") == 0 && size == 8) return EV_FLOAT64;
    return EV_DTYPE_OTHER;
  }

  Py_buffer view_{};
  bool held_ = false;
  int64_t shape_[PyBUF_MAX_NDIM] = {};
  int64_t strides_[PyBUF_MAX_NDIM] = {};
  ev_array array_{};
};

// --- decoded pixels: an (H, W, C) buffer owned by the core, seen by numpy without a copy ----

struct Pixels {
  PyObject_HEAD
  ev_image* image;
  Py_ssize_t shape[3];
  Py_ssize_t strides[3];
};

void pixels_dealloc(PyObject* self) {
  ev_image_free(reinterpret_cast<Pixels*>(self)->image);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

int pixels_getbuffer(PyObject* self, Py_buffer* view, int flags) {
  Pixels* p = reinterpret_cast<Pixels*>(self);
  if (p->image == nullptr) {  // made from Python rather than by a decoder
    PyErr_SetString(PyExc_BufferError, "Pixels holds no image");
    return -1;
  }
  const bool wide = p->image->bit_depth == 16;
  view->buf = p->image->data;
  Py_INCREF(self);
  view->obj = self;
  view->itemsize = wide ? 2 : 1;
  view->len = p->shape[0] * p->shape[1] * p->shape[2] * view->itemsize;
  view->readonly = 0;
  view->ndim = 3;
  view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(wide ? "H" : "B") : nullptr;
  view->shape = (flags & PyBUF_ND) == PyBUF_ND ? p->shape : nullptr;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? p->strides : nullptr;
  view->suboffsets = nullptr;
  view->internal = nullptr;
  return 0;
}

PyType_Slot pixels_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(pixels_dealloc)},
    {Py_bf_getbuffer, reinterpret_cast<void*>(pixels_getbuffer)},
    {Py_tp_doc, const_cast<char*>("Decoded (H, W, C) pixels; numpy.asarray() views them without a copy.")},
    {0, nullptr},
};
PyType_Spec pixels_spec = {"embervision._C.Pixels", sizeof(Pixels), 0, Py_TPFLAGS_DEFAULT, pixels_slots};
PyTypeObject* pixels_type = nullptr;

PyObject* wrap_image(ev_image* image) {
  Pixels* p = PyObject_New(Pixels, pixels_type);
  if (p == nullptr) {
    ev_image_free(image);
    return nullptr;
  }
  p->image = image;
  const Py_ssize_t item = image->bit_depth == 16 ? 2 : 1;
  p->shape[0] = static_cast<Py_ssize_t>(image->height);
  p->shape[1] = static_cast<Py_ssize_t>(image->width);
  p->shape[2] = static_cast<Py_ssize_t>(image->channels);
  p->strides[2] = item;
  p->strides[1] = item * p->shape[2];
  p->strides[0] = p->strides[1] * p->shape[1];
  return reinterpret_cast<PyObject*>(p);
}

// --- image IO -------------------------------------------------------------------------------

using DecodeFn = ev_status (*)(const void*, size_t, int, uint64_t, ev_image**);

// (data, mode, max_pixels) -> Pixels
PyObject* decode_with(PyObject* args, PyObject* kwargs, const char* format, DecodeFn fn) {
  static const char* const kw[] = {"data", "mode", "max_pixels", nullptr};
  Py_buffer data;
  int mode;
  unsigned long long max_pixels;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, keywords(kw), &data, &mode, &max_pixels)) return nullptr;
  ev_image* image = nullptr;
  ev_status status;
  Py_BEGIN_ALLOW_THREADS
  status = fn(data.buf, static_cast<size_t>(data.len), mode, max_pixels, &image);
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&data);
  return status == EV_OK ? wrap_image(image) : raise_status(status);
}
PyObject* decode_png(PyObject*, PyObject* args, PyObject* kwargs) {
  return decode_with(args, kwargs, "y*iK:decode_png", ev_decode_png);
}
PyObject* decode_jpeg(PyObject*, PyObject* args, PyObject* kwargs) {
  return decode_with(args, kwargs, "y*iK:decode_jpeg", ev_decode_jpeg);
}

using EncodeFn = ev_status (*)(const ev_array*, int, ev_bytes**);

// (array, level) -> bytes
PyObject* encode_with(PyObject* args, PyObject* kwargs, const char* format, const char* const* kw, EncodeFn fn) {
  PyObject* image;
  int level;
  Array va;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, keywords(kw), &image, &level) || !va.get(image, "array"))
    return nullptr;
  ev_bytes* bytes = nullptr;
  ev_status status;
  Py_BEGIN_ALLOW_THREADS
  status = fn(va.ptr(), level, &bytes);
  Py_END_ALLOW_THREADS
  if (status != EV_OK) return raise_status(status);
  PyObject* result =
      PyBytes_FromStringAndSize(reinterpret_cast<const char*>(bytes->data), static_cast<Py_ssize_t>(bytes->size));
  ev_bytes_free(bytes);
  return result;
}
const char* const kPngArgs[] = {"array", "compression_level", nullptr};
const char* const kJpegArgs[] = {"array", "quality", nullptr};
PyObject* encode_png(PyObject*, PyObject* args, PyObject* kwargs) {
  return encode_with(args, kwargs, "Oi:encode_png", kPngArgs, ev_encode_png);
}
PyObject* encode_jpeg(PyObject*, PyObject* args, PyObject* kwargs) {
  return encode_with(args, kwargs, "Oi:encode_jpeg", kJpegArgs, ev_encode_jpeg);
}

// --- transforms: (x, out, ..., cuda) ---------------------------------------------------------

int device_of(int cuda) { return cuda ? EV_CUDA : EV_CPU; }

PyObject* resize(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* const kw[] = {"x", "out", "interpolation", "antialias", "cuda", nullptr};
  PyObject *x, *out;
  int interpolation, antialias, cuda;
  Array vx, vo;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOipp:resize", keywords(kw), &x, &out, &interpolation, &antialias,
                                   &cuda) ||
      !vx.get(x, "x") || !vo.get(out, "out"))
    return nullptr;
  ev_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ev_resize(vx.ptr(), vo.ptr(), interpolation, antialias, device_of(cuda));
  Py_END_ALLOW_THREADS
  return done(status);
}

PyObject* crop(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* const kw[] = {"x", "out", "top", "left", "cuda", nullptr};
  PyObject *x, *out;
  long long top, left;
  int cuda;
  Array vx, vo;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOLLp:crop", keywords(kw), &x, &out, &top, &left, &cuda) ||
      !vx.get(x, "x") || !vo.get(out, "out"))
    return nullptr;
  ev_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ev_crop(vx.ptr(), vo.ptr(), top, left, device_of(cuda));
  Py_END_ALLOW_THREADS
  return done(status);
}

PyObject* flip(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* const kw[] = {"x", "out", "horizontal", "cuda", nullptr};
  PyObject *x, *out;
  int horizontal, cuda;
  Array vx, vo;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOpp:flip", keywords(kw), &x, &out, &horizontal, &cuda) ||
      !vx.get(x, "x") || !vo.get(out, "out"))
    return nullptr;
  ev_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ev_flip(vx.ptr(), vo.ptr(), horizontal, device_of(cuda));
  Py_END_ALLOW_THREADS
  return done(status);
}

PyObject* normalize(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* const kw[] = {"x", "out", "mean", "std", "cuda", nullptr};
  PyObject *x, *out, *mean, *std;
  int cuda;
  Array vx, vo, vm, vs;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOp:normalize", keywords(kw), &x, &out, &mean, &std, &cuda) ||
      !vx.get(x, "x") || !vo.get(out, "out") || !vm.get(mean, "mean") || !vs.get(std, "std"))
    return nullptr;
  ev_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ev_normalize(vx.ptr(), vo.ptr(), vm.ptr(), vs.ptr(), device_of(cuda));
  Py_END_ALLOW_THREADS
  return done(status);
}

PyObject* convert_dtype(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* const kw[] = {"x", "out", "cuda", nullptr};
  PyObject *x, *out;
  int cuda;
  Array vx, vo;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOp:convert_dtype", keywords(kw), &x, &out, &cuda) ||
      !vx.get(x, "x") || !vo.get(out, "out"))
    return nullptr;
  ev_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ev_convert_dtype(vx.ptr(), vo.ptr(), device_of(cuda));
  Py_END_ALLOW_THREADS
  return done(status);
}

// --- build facts ----------------------------------------------------------------------------

PyObject* libpng_version(PyObject*, PyObject*) { return PyUnicode_FromString(ev_libpng_version()); }
PyObject* libjpeg_version(PyObject*, PyObject*) { return PyUnicode_FromString(ev_libjpeg_version()); }
PyObject* cuda_device_count(PyObject*, PyObject*) { return PyLong_FromLong(ev_cuda_device_count()); }
PyObject* cuda_arch_list(PyObject*, PyObject*) { return PyUnicode_FromString(ev_cuda_arch_list()); }

PyMethodDef methods[] = {
    EV_METHOD("decode_png", decode_png, "decode_png(data, mode, max_pixels) -> Pixels"),
    EV_METHOD("decode_jpeg", decode_jpeg, "decode_jpeg(data, mode, max_pixels) -> Pixels"),
    EV_METHOD("encode_png", encode_png, "encode_png(array, compression_level) -> bytes; uint8 or uint16 (H, W, C)"),
    EV_METHOD("encode_jpeg", encode_jpeg, "encode_jpeg(array, quality) -> bytes; uint8 (H, W, C)"),
    EV_METHOD("resize", resize, "resize(x, out, interpolation, antialias, cuda): (N, C, H, W) into out's size"),
    EV_METHOD("crop", crop, "crop(x, out, top, left, cuda): out's window at (top, left), 0 outside x"),
    EV_METHOD("flip", flip, "flip(x, out, horizontal, cuda)"),
    EV_METHOD("normalize", normalize, "normalize(x, out, mean, std, cuda): (x - mean[c]) / std[c]"),
    EV_METHOD("convert_dtype", convert_dtype, "convert_dtype(x, out, cuda): x rescaled to out's dtype"),
    {"libpng_version", libpng_version, METH_NOARGS, "The libpng version the core was built with."},
    {"libjpeg_version", libjpeg_version, METH_NOARGS, "The libjpeg version the core was built with."},
    {"cuda_device_count", cuda_device_count, METH_NOARGS, "Usable CUDA devices (0 without a driver or GPU)."},
    {"cuda_arch_list", cuda_arch_list, METH_NOARGS, "The fatbin's archs, comma-separated; '' on a CPU build."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", "embervision native core: PNG/JPEG codecs and image transforms",
                          -1, methods, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__C(void) {
  pixels_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&pixels_spec));
  if (pixels_type == nullptr) return nullptr;
  PyObject* m = PyModule_Create(&module_def);
  if (m == nullptr) return nullptr;
  if (PyModule_AddObject(m, "built_with_cuda", PyBool_FromLong(ev_cuda_compiled())) != 0 ||
      PyModule_AddStringConstant(m, "variant", ev_variant()) != 0) {
    Py_DECREF(m);
    return nullptr;
  }
  Py_INCREF(pixels_type);
  if (PyModule_AddObject(m, "Pixels", reinterpret_cast<PyObject*>(pixels_type)) != 0) {
    Py_DECREF(pixels_type);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
