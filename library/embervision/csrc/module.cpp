// Python bindings: embervision._C. The Python layer (io.py, transforms.py) checks
// arguments and shapes; these functions take C-contiguous arrays of one dtype.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "cpu_transforms.h"
#include "image_buffer.h"
#include "jpeg_codec.h"
#include "png_codec.h"
#include "resample_table.h"
#ifdef EMBERVISION_WITH_CUDA
#include "cuda/cuda_transforms.h"
#endif

namespace py = pybind11;
using namespace embervision;

namespace {

// Hands the decoded buffer to numpy without a copy; the capsule frees it.
py::array to_numpy(ImageBuffer&& image) {
  auto* owned = new PixelVector(std::move(image.pixels));
  py::capsule owner(owned, [](void* p) { delete static_cast<PixelVector*>(p); });
  const std::vector<py::ssize_t> shape{image.height, image.width, image.channels};
  if (image.bit_depth == 16) {
    return py::array_t<uint16_t>(shape, reinterpret_cast<uint16_t*>(owned->data()), owner);
  }
  return py::array_t<uint8_t>(shape, owned->data(), owner);
}

using Decoder = ImageBuffer (*)(const uint8_t*, size_t, ImageMode, uint64_t);

py::array decode_with(Decoder decoder, const py::buffer& data, int mode, uint64_t max_pixels) {
  py::buffer_info info = data.request();
  if (info.ndim != 1 || info.itemsize != 1 || info.strides[0] != 1) {
    throw py::value_error("encoded image must be a contiguous 1-D buffer of bytes");
  }
  if (mode < 0 || mode > 4) throw py::value_error("unknown image mode");
  ImageBuffer image;
  {
    py::gil_scoped_release release;
    image = decoder(static_cast<const uint8_t*>(info.ptr), size_t(info.size),
                    static_cast<ImageMode>(mode), max_pixels);
  }
  return to_numpy(std::move(image));
}

template <typename T>
py::bytes encode_png_array(const py::array_t<T, py::array::c_style>& array, int level) {
  if (array.ndim() != 3) throw py::value_error("encode_png expects an (H, W, C) array");
  EncodedBytes bytes;
  {
    py::gil_scoped_release release;
    bytes = encode_png(reinterpret_cast<const uint8_t*>(array.data()), int(array.shape(0)),
                       int(array.shape(1)), int(array.shape(2)), int(sizeof(T) * 8), level);
  }
  return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

py::bytes encode_jpeg_array(const py::array_t<uint8_t, py::array::c_style>& array, int quality) {
  if (array.ndim() != 3) throw py::value_error("encode_jpeg expects an (H, W, C) array");
  EncodedBytes bytes;
  {
    py::gil_scoped_release release;
    bytes = encode_jpeg(array.data(), int(array.shape(0)), int(array.shape(1)),
                        int(array.shape(2)), quality);
  }
  return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

template <typename T>
using Batch = py::array_t<T, py::array::c_style>;

// (N, C, H, W) dimensions of a batch argument.
struct BatchShape {
  size_t n, c;
  int h, w;
  size_t planes() const { return n * c; }
};

template <typename T>
BatchShape batch_shape(const Batch<T>& x) {
  if (x.ndim() != 4) throw py::value_error("expected an (N, C, H, W) array");
  return {size_t(x.shape(0)), size_t(x.shape(1)), int(x.shape(2)), int(x.shape(3))};
}

std::pair<ResampleTable, ResampleTable> resize_tables(const BatchShape& s, int out_h, int out_w,
                                                      int interpolation, bool antialias) {
  if (out_h < 1 || out_w < 1) throw py::value_error("output size must be positive");
  if (s.h < 1 || s.w < 1) throw py::value_error("cannot resize an empty image");
  if (interpolation != 0 && interpolation != 1) throw py::value_error("unknown interpolation");
  const auto mode = static_cast<Interpolation>(interpolation);
  return {make_resample_table(s.h, out_h, mode, antialias),
          make_resample_table(s.w, out_w, mode, antialias)};
}

template <typename T>
py::array resize_cpu(const Batch<T>& x, int out_h, int out_w, int interpolation, bool antialias) {
  const BatchShape s = batch_shape(x);
  auto tables = resize_tables(s, out_h, out_w, interpolation, antialias);
  Batch<T> out({py::ssize_t(s.n), py::ssize_t(s.c), py::ssize_t(out_h), py::ssize_t(out_w)});
  T* dst = out.mutable_data();
  {
    py::gil_scoped_release release;
    resize_planes(x.data(), dst, s.planes(), s.h, s.w, tables.first, tables.second);
  }
  return std::move(out);
}

template <typename T>
py::array crop_cpu(const Batch<T>& x, int top, int left, int out_h, int out_w) {
  const BatchShape s = batch_shape(x);
  if (out_h < 1 || out_w < 1) throw py::value_error("crop size must be positive");
  Batch<T> out({py::ssize_t(s.n), py::ssize_t(s.c), py::ssize_t(out_h), py::ssize_t(out_w)});
  T* dst = out.mutable_data();
  {
    py::gil_scoped_release release;
    crop_planes(x.data(), dst, s.planes(), s.h, s.w, top, left, out_h, out_w);
  }
  return std::move(out);
}

template <typename T>
py::array flip_cpu(const Batch<T>& x, bool horizontal) {
  const BatchShape s = batch_shape(x);
  Batch<T> out({py::ssize_t(s.n), py::ssize_t(s.c), py::ssize_t(s.h), py::ssize_t(s.w)});
  T* dst = out.mutable_data();
  {
    py::gil_scoped_release release;
    flip_planes(x.data(), dst, s.planes(), s.h, s.w, horizontal);
  }
  return std::move(out);
}

void check_mean_std(const BatchShape& s, const std::vector<double>& mean,
                    const std::vector<double>& std) {
  if (mean.size() != s.c || std.size() != s.c) {
    throw py::value_error("mean and std need one value per channel");
  }
  for (double v : std) {
    if (v == 0.0) throw py::value_error("std must not contain zeros");
  }
}

template <typename T>
py::array normalize_cpu(const Batch<T>& x, const std::vector<double>& mean,
                        const std::vector<double>& std) {
  const BatchShape s = batch_shape(x);
  check_mean_std(s, mean, std);
  Batch<T> out({py::ssize_t(s.n), py::ssize_t(s.c), py::ssize_t(s.h), py::ssize_t(s.w)});
  T* dst = out.mutable_data();
  {
    py::gil_scoped_release release;
    normalize_planes(x.data(), dst, s.n, s.c, size_t(s.h) * s.w, mean.data(), std.data());
  }
  return std::move(out);
}

#ifdef EMBERVISION_WITH_CUDA
template <typename T>
constexpr int cuda_dtype() {
  return std::is_same<T, uint8_t>::value ? cuda::UINT8
         : std::is_same<T, float>::value ? cuda::FLOAT32
                                         : cuda::FLOAT64;
}

void check_cuda_result(const char* error) {
  if (error) throw std::runtime_error(std::string("CUDA error: ") + error);
}

void require_cuda_device() {
  if (cuda::device_count() == 0) {
    throw std::runtime_error(
        "device='cuda' requested but no CUDA device is usable (no GPU or no driver)");
  }
}

// Float copy of a table for the device, which keeps it alive while in use.
struct DeviceTable {
  std::vector<float> weights;
  cuda::AxisTable axis;
  explicit DeviceTable(const ResampleTable& t) : weights(t.weights.begin(), t.weights.end()) {
    axis = {t.in_size, t.out_size, t.taps, t.start.data(), t.count.data(), weights.data()};
  }
};

template <typename T>
py::array resize_cuda(const Batch<T>& x, int out_h, int out_w, int interpolation, bool antialias) {
  require_cuda_device();
  const BatchShape s = batch_shape(x);
  auto tables = resize_tables(s, out_h, out_w, interpolation, antialias);
  DeviceTable rows(tables.first), cols(tables.second);
  Batch<T> out({py::ssize_t(s.n), py::ssize_t(s.c), py::ssize_t(out_h), py::ssize_t(out_w)});
  T* dst = out.mutable_data();
  const char* error;
  {
    py::gil_scoped_release release;
    error = cuda::resize(cuda_dtype<T>(), x.data(), dst, s.planes(), &rows.axis, &cols.axis);
  }
  check_cuda_result(error);
  return std::move(out);
}

template <typename T>
py::array flip_cuda(const Batch<T>& x, bool horizontal) {
  require_cuda_device();
  const BatchShape s = batch_shape(x);
  Batch<T> out({py::ssize_t(s.n), py::ssize_t(s.c), py::ssize_t(s.h), py::ssize_t(s.w)});
  T* dst = out.mutable_data();
  const char* error;
  {
    py::gil_scoped_release release;
    error = cuda::flip(cuda_dtype<T>(), x.data(), dst, s.planes(), s.h, s.w, horizontal);
  }
  check_cuda_result(error);
  return std::move(out);
}

template <typename T>
py::array normalize_cuda(const Batch<T>& x, const std::vector<double>& mean,
                         const std::vector<double>& std) {
  require_cuda_device();
  const BatchShape s = batch_shape(x);
  check_mean_std(s, mean, std);
  Batch<T> out({py::ssize_t(s.n), py::ssize_t(s.c), py::ssize_t(s.h), py::ssize_t(s.w)});
  T* dst = out.mutable_data();
  const char* error;
  {
    py::gil_scoped_release release;
    error = cuda::normalize(cuda_dtype<T>(), x.data(), dst, s.n, s.c, size_t(s.h) * s.w,
                            mean.data(), std.data());
  }
  check_cuda_result(error);
  return std::move(out);
}
#endif

template <typename T>
void bind_transforms(py::module_& m, const std::string& suffix) {
  m.def(("resize_" + suffix).c_str(), &resize_cpu<T>, py::arg("x"), py::arg("height"),
        py::arg("width"), py::arg("interpolation"), py::arg("antialias"));
  m.def(("crop_" + suffix).c_str(), &crop_cpu<T>, py::arg("x"), py::arg("top"), py::arg("left"),
        py::arg("height"), py::arg("width"));
  m.def(("flip_" + suffix).c_str(), &flip_cpu<T>, py::arg("x"), py::arg("horizontal"));
#ifdef EMBERVISION_WITH_CUDA
  m.def(("cuda_resize_" + suffix).c_str(), &resize_cuda<T>, py::arg("x"), py::arg("height"),
        py::arg("width"), py::arg("interpolation"), py::arg("antialias"));
  m.def(("cuda_flip_" + suffix).c_str(), &flip_cuda<T>, py::arg("x"), py::arg("horizontal"));
#endif
}

template <typename T>
void bind_normalize(py::module_& m, const std::string& suffix) {
  m.def(("normalize_" + suffix).c_str(), &normalize_cpu<T>, py::arg("x"), py::arg("mean"),
        py::arg("std"));
#ifdef EMBERVISION_WITH_CUDA
  m.def(("cuda_normalize_" + suffix).c_str(), &normalize_cuda<T>, py::arg("x"), py::arg("mean"),
        py::arg("std"));
#endif
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "embervision native core: PNG/JPEG codecs and image transforms";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ImageDecodeError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const ImageEncodeError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  m.def("decode_png", [](const py::buffer& data, int mode, uint64_t max_pixels) {
    return decode_with(&decode_png, data, mode, max_pixels);
  }, py::arg("data"), py::arg("mode"), py::arg("max_pixels"));
  m.def("decode_jpeg", [](const py::buffer& data, int mode, uint64_t max_pixels) {
    return decode_with(&decode_jpeg, data, mode, max_pixels);
  }, py::arg("data"), py::arg("mode"), py::arg("max_pixels"));
  m.def("encode_png_uint8", &encode_png_array<uint8_t>, py::arg("array"), py::arg("compression_level"));
  m.def("encode_png_uint16", &encode_png_array<uint16_t>, py::arg("array"), py::arg("compression_level"));
  m.def("encode_jpeg", &encode_jpeg_array, py::arg("array"), py::arg("quality"));
  m.def("libpng_version", &libpng_version);
  m.def("libjpeg_version", &libjpeg_version);

  bind_transforms<uint8_t>(m, "uint8");
  bind_transforms<float>(m, "float32");
  bind_transforms<double>(m, "float64");
  bind_normalize<float>(m, "float32");
  bind_normalize<double>(m, "float64");

#ifdef EMBERVISION_WITH_CUDA
  m.attr("built_with_cuda") = true;
  m.def("cuda_device_count", &cuda::device_count);
#else
  m.attr("built_with_cuda") = false;
  m.def("cuda_device_count", []() { return 0; });
#endif
  m.attr("variant") = EMBERVISION_VARIANT;
}
