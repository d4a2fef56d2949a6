// embervision/c_api.h: argument checks and dtype dispatch in front of the codecs and the
// CPU/CUDA transforms; C++ exceptions become an ev_status plus the thread's last error.
#include "embervision/c_api.h"

#include <climits>
#include <new>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpu_transforms.h"
#include "cuda/cuda_transforms.h"
#include "image_buffer.h"
#include "jpeg_codec.h"
#include "png_codec.h"
#include "resample_table.h"

#ifndef EMBERVISION_VARIANT
#define EMBERVISION_VARIANT "cpu"
#endif

namespace {

using namespace embervision;

thread_local std::string last_error;

[[noreturn]] void fail(const std::string& message) { throw std::invalid_argument(message); }

// The exception types keep the Python exception types the pybind11 layer gave them:
// decode/encode errors and logic errors are ValueError, bad_alloc is MemoryError, the rest
// (CUDA) RuntimeError.
template <typename Body>
ev_status guarded(Body&& body) noexcept {
  try {
    body();
    return EV_OK;
  } catch (const ImageDecodeError& e) {
    last_error = e.what();
    return EV_INVALID_ARGUMENT;
  } catch (const ImageEncodeError& e) {
    last_error = e.what();
    return EV_INVALID_ARGUMENT;
  } catch (const std::logic_error& e) {  // invalid_argument, length_error, domain_error
    last_error = e.what();
    return EV_INVALID_ARGUMENT;
  } catch (const std::bad_alloc&) {
    last_error = "out of memory";
    return EV_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    last_error = e.what();
    return EV_RUNTIME_ERROR;
  } catch (...) {
    last_error = "unknown C++ exception in embervision";
    return EV_RUNTIME_ERROR;
  }
}

int64_t numel(const ev_array& a) {
  int64_t n = 1;
  for (int d = 0; d < a.ndim; ++d) n *= a.shape[d];
  return n;
}

// C order, by the rule numpy and PEP 3118 use: dimensions of extent 1 may have any stride.
bool c_contiguous(const ev_array& a) {
  if (a.strides == nullptr || numel(a) == 0) return true;
  int64_t expected = a.itemsize;
  for (int d = a.ndim - 1; d >= 0; --d) {
    if (a.shape[d] > 1 && a.strides[d] != expected) return false;
    expected *= a.shape[d];
  }
  return true;
}

std::string format_of(const ev_array& a) { return a.format && *a.format ? a.format : "?"; }

void check_layout(const ev_array& a, bool output) {
  if (!c_contiguous(a)) fail(std::string(a.name) + ": array must be C-contiguous");
  if (output && !a.writable) fail(std::string(a.name) + ": array is read-only");
}

// The transforms' element types, as the CUDA kernels number them.
int transform_dtype(const ev_array& a) {
  switch (a.dtype) {
    case EV_UINT8: return cuda::UINT8;
    case EV_FLOAT32: return cuda::FLOAT32;
    case EV_FLOAT64: return cuda::FLOAT64;
    default:
      fail("transforms take uint8, float32 or float64 arrays, got '" + format_of(a) + "' for " + a.name);
  }
}

// (N, C, H, W) of a batch argument.
struct Batch {
  size_t n, c;
  int h, w;
  size_t planes() const { return n * c; }
};

Batch batch_of(const ev_array& a, bool output) {
  if (a.ndim != 4) fail("expected an (N, C, H, W) array");
  for (int d = 0; d < 4; ++d) {
    if (a.shape[d] < 0 || (d >= 2 && a.shape[d] > INT_MAX)) fail(std::string(a.name) + ": image too large");
  }
  check_layout(a, output);
  return {size_t(a.shape[0]), size_t(a.shape[1]), int(a.shape[2]), int(a.shape[3])};
}

// x and out of one transform: same element type, same N and C.
std::pair<Batch, Batch> batches(const ev_array& x, const ev_array& out) {
  const Batch in = batch_of(x, false), o = batch_of(out, true);
  if (transform_dtype(x) != transform_dtype(out)) fail("out must have the dtype of x");
  if (in.n != o.n || in.c != o.c) fail("out must have the batch size and channels of x");
  return {in, o};
}

void require_cuda() {
  if (!cuda::compiled()) {
    throw std::runtime_error(std::string("device='cuda' requested but this embervision build (") +
                             EMBERVISION_VARIANT + ") has no CUDA kernels");
  }
  if (cuda::device_count() == 0) {
    throw std::runtime_error("device='cuda' requested but no CUDA device is usable (no GPU or no driver)");
  }
}

void check_cuda_result(const char* error) {
  if (error) throw std::runtime_error(std::string("CUDA error: ") + error);
}

bool on_cuda(int device) {
  if (device != EV_CPU && device != EV_CUDA) fail("unknown device");
  if (device == EV_CUDA) require_cuda();
  return device == EV_CUDA;
}

// Dispatches fn(T*) on a transform dtype.
template <typename Fn>
void dispatch(int dtype, Fn&& fn) {
  if (dtype == cuda::UINT8) return fn(static_cast<uint8_t*>(nullptr));
  if (dtype == cuda::FLOAT32) return fn(static_cast<float*>(nullptr));
  return fn(static_cast<double*>(nullptr));
}

// Float copy of a resample table for the device, which keeps it alive while in use.
struct DeviceTable {
  std::vector<float> weights;
  cuda::AxisTable axis;
  explicit DeviceTable(const ResampleTable& t) : weights(t.weights.begin(), t.weights.end()) {
    axis = {t.in_size, t.out_size, t.taps, t.start.data(), t.count.data(), weights.data()};
  }
};

// The decoded pixels behind an ev_image handed out to a front end.
struct OwnedImage {
  ev_image image;  // first member: ev_image_free casts back
  PixelVector pixels;
};

struct OwnedBytes {
  ev_bytes bytes;  // first member: ev_bytes_free casts back
  EncodedBytes data;
};

using Decoder = ImageBuffer (*)(const uint8_t*, size_t, ImageMode, uint64_t);

ev_status decode_with(Decoder decoder, const void* data, size_t size, int mode, uint64_t max_pixels,
                      ev_image** out) {
  return guarded([&] {
    if (mode < 0 || mode > 4) fail("unknown image mode");
    ImageBuffer decoded = decoder(static_cast<const uint8_t*>(data), size, static_cast<ImageMode>(mode), max_pixels);
    auto* owned = new OwnedImage{};
    owned->pixels = std::move(decoded.pixels);
    owned->image = {owned->pixels.data(), decoded.height, decoded.width, decoded.channels, decoded.bit_depth};
    *out = &owned->image;
  });
}

// An (H, W, C) image argument of an encoder.
void check_image(const ev_array& a, const char* what) {
  if (a.ndim != 3) fail(std::string(what) + " expects an (H, W, C) array");
  if (a.shape[0] > INT_MAX || a.shape[1] > INT_MAX || a.shape[2] > INT_MAX) fail(std::string(what) + ": image too large");
  check_layout(a, false);
}

ev_bytes* hand_out(EncodedBytes&& data) {
  auto* owned = new OwnedBytes{};
  owned->data = std::move(data);
  owned->bytes = {owned->data.data(), owned->data.size()};
  return &owned->bytes;
}

}  // namespace

extern "C" {

const char* ev_last_error(void) { return last_error.c_str(); }

// --- image IO -------------------------------------------------------------------------------

ev_status ev_decode_png(const void* data, size_t size, int mode, uint64_t max_pixels, ev_image** out) {
  return decode_with(&decode_png, data, size, mode, max_pixels, out);
}

ev_status ev_decode_jpeg(const void* data, size_t size, int mode, uint64_t max_pixels, ev_image** out) {
  return decode_with(&decode_jpeg, data, size, mode, max_pixels, out);
}

void ev_image_free(ev_image* image) { delete reinterpret_cast<OwnedImage*>(image); }

ev_status ev_encode_png(const ev_array* image, int compression_level, ev_bytes** out) {
  return guarded([&] {
    check_image(*image, "encode_png");
    if (image->dtype != EV_UINT8 && image->dtype != EV_UINT16) {
      fail("encode_png needs uint8 or uint16 pixels, got '" + format_of(*image) + "'");
    }
    *out = hand_out(encode_png(static_cast<const uint8_t*>(image->data), int(image->shape[0]), int(image->shape[1]),
                               int(image->shape[2]), image->dtype == EV_UINT16 ? 16 : 8, compression_level));
  });
}

ev_status ev_encode_jpeg(const ev_array* image, int quality, ev_bytes** out) {
  return guarded([&] {
    check_image(*image, "encode_jpeg");
    if (image->dtype != EV_UINT8) fail("encode_jpeg needs uint8 pixels, got '" + format_of(*image) + "'");
    *out = hand_out(encode_jpeg(static_cast<const uint8_t*>(image->data), int(image->shape[0]),
                                int(image->shape[1]), int(image->shape[2]), quality));
  });
}

void ev_bytes_free(ev_bytes* bytes) { delete reinterpret_cast<OwnedBytes*>(bytes); }

const char* ev_libpng_version(void) { return libpng_version(); }
const char* ev_libjpeg_version(void) { return libjpeg_version(); }

// --- transforms -----------------------------------------------------------------------------

ev_status ev_resize(const ev_array* x, const ev_array* out, int interpolation, int antialias, int device) {
  return guarded([&] {
    Batch in{}, o{};
    std::tie(in, o) = batches(*x, *out);
    if (o.h < 1 || o.w < 1) fail("output size must be positive");
    if (in.h < 1 || in.w < 1) fail("cannot resize an empty image");
    if (interpolation != 0 && interpolation != 1) fail("unknown interpolation");
    const auto mode = static_cast<Interpolation>(interpolation);
    const ResampleTable rows = make_resample_table(in.h, o.h, mode, antialias != 0);
    const ResampleTable cols = make_resample_table(in.w, o.w, mode, antialias != 0);
    const int dtype = transform_dtype(*x);
    if (on_cuda(device)) {
      if (in.planes() == 0) return;  // a kernel launch of zero blocks is an error
      const DeviceTable r(rows), c(cols);
      check_cuda_result(cuda::resize(dtype, x->data, out->data, in.planes(), &r.axis, &c.axis));
      return;
    }
    dispatch(dtype, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      resize_planes(static_cast<const T*>(x->data), static_cast<T*>(out->data), in.planes(), in.h, in.w, rows, cols);
    });
  });
}

ev_status ev_crop(const ev_array* x, const ev_array* out, int64_t top, int64_t left, int device) {
  return guarded([&] {
    Batch in{}, o{};
    std::tie(in, o) = batches(*x, *out);
    if (o.h < 1 || o.w < 1) fail("crop size must be positive");
    // A window wholly outside the image is all zeros; clamp its offset so int arithmetic holds.
    const auto clamp = [](int64_t v, int64_t size, int64_t extent) {
      return v < -extent ? -extent : (v > size ? size : v);
    };
    top = clamp(top, in.h, o.h);
    left = clamp(left, in.w, o.w);
    const int dtype = transform_dtype(*x);
    if (on_cuda(device)) {
      check_cuda_result(cuda::crop(dtype, x->data, out->data, in.planes(), in.h, in.w, top, left, o.h, o.w));
      return;
    }
    dispatch(dtype, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      crop_planes(static_cast<const T*>(x->data), static_cast<T*>(out->data), in.planes(), in.h, in.w, int(top),
                  int(left), o.h, o.w);
    });
  });
}

ev_status ev_flip(const ev_array* x, const ev_array* out, int horizontal, int device) {
  return guarded([&] {
    Batch in{}, o{};
    std::tie(in, o) = batches(*x, *out);
    if (in.h != o.h || in.w != o.w) fail("out must have the shape of x");
    const int dtype = transform_dtype(*x);
    if (on_cuda(device)) {
      check_cuda_result(cuda::flip(dtype, x->data, out->data, in.planes(), in.h, in.w, horizontal != 0));
      return;
    }
    dispatch(dtype, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      flip_planes(static_cast<const T*>(x->data), static_cast<T*>(out->data), in.planes(), in.h, in.w,
                  horizontal != 0);
    });
  });
}

ev_status ev_normalize(const ev_array* x, const ev_array* out, const ev_array* mean, const ev_array* std,
                       int device) {
  return guarded([&] {
    Batch in{}, o{};
    std::tie(in, o) = batches(*x, *out);
    if (in.h != o.h || in.w != o.w) fail("out must have the shape of x");
    const int dtype = transform_dtype(*x);
    if (dtype == cuda::UINT8) fail("normalize needs a float32 or float64 input");
    for (const ev_array* a : {mean, std}) {
      if (a->dtype != EV_FLOAT64 || a->ndim != 1) fail(std::string(a->name) + ": expected a 1-D float64 array");
      check_layout(*a, false);
    }
    if (size_t(mean->shape[0]) != in.c || size_t(std->shape[0]) != in.c) {
      fail("mean and std need one value per channel");
    }
    const auto* m = static_cast<const double*>(mean->data);
    const auto* s = static_cast<const double*>(std->data);
    for (size_t c = 0; c < in.c; ++c) {
      if (s[c] == 0.0) fail("std must not contain zeros");
    }
    const size_t plane = size_t(in.h) * in.w;
    if (on_cuda(device)) {
      check_cuda_result(cuda::normalize(dtype, x->data, out->data, in.n, in.c, plane, m, s));
      return;
    }
    if (dtype == cuda::FLOAT32) {
      normalize_planes(static_cast<const float*>(x->data), static_cast<float*>(out->data), in.n, in.c, plane, m, s);
    } else {
      normalize_planes(static_cast<const double*>(x->data), static_cast<double*>(out->data), in.n, in.c, plane, m, s);
    }
  });
}

ev_status ev_convert_dtype(const ev_array* x, const ev_array* out, int device) {
  return guarded([&] {
    const int in_dtype = transform_dtype(*x), out_dtype = transform_dtype(*out);
    check_layout(*x, false);
    check_layout(*out, true);
    if (numel(*x) != numel(*out)) fail("out must have as many elements as x");
    // The CPU conversion is numpy's (transforms.convert_dtype, every integer type); the
    // core holds the device kernel.
    if (device != EV_CUDA) fail("convert_dtype: the core converts on device='cuda' only");
    require_cuda();
    check_cuda_result(cuda::convert(in_dtype, out_dtype, x->data, out->data, size_t(numel(*x))));
  });
}

// --- build facts ----------------------------------------------------------------------------

int ev_cuda_compiled(void) { return cuda::compiled() ? 1 : 0; }
int ev_cuda_device_count(void) { return cuda::device_count(); }
const char* ev_cuda_arch_list(void) { return cuda::arch_list(); }
const char* ev_variant(void) { return EMBERVISION_VARIANT; }

}  // extern "C"
