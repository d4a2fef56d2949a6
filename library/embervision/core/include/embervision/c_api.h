/* embervision's C interface: the PNG/JPEG codecs and the image transforms (CPU and CUDA)
 * of libembervision, checked and dtype-dispatched here, in the core.
 *
 * Front ends describe their arrays as ev_array (data pointer, element type, shape, byte
 * strides) and call these. embervision's Python extension is a thin layer over this header,
 * so it is the only code compiled once per Python, and it needs neither the C++ standard
 * library nor exceptions.
 *
 * Every fallible call returns an ev_status; on failure ev_last_error() holds the calling
 * thread's message until its next failing call. Corrupt or truncated image data and bad
 * arguments are EV_INVALID_ARGUMENT (Python: ValueError).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "embervision/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ev_status {
  EV_OK = 0,
  EV_INVALID_ARGUMENT = 1, /* bad shape, dtype, size, or corrupt image data (ValueError) */
  EV_RUNTIME_ERROR = 2,    /* the operation failed: no CUDA device, a CUDA error (RuntimeError) */
  EV_OUT_OF_MEMORY = 3
} ev_status;

typedef enum ev_dtype { EV_UINT8 = 0, EV_UINT16 = 1, EV_FLOAT32 = 2, EV_FLOAT64 = 3, EV_DTYPE_OTHER = 4 } ev_dtype;

typedef enum ev_device { EV_CPU = 0, EV_CUDA = 1 } ev_device;

/* A borrowed n-d array. */
typedef struct ev_array {
  void* data;
  ev_dtype dtype;
  int ndim;
  const int64_t* shape;
  const int64_t* strides; /* in bytes */
  int64_t itemsize;
  int writable;
  const char* name;   /* for messages: "x", "out", ... */
  const char* format; /* the front end's spelling of the element type, for messages */
} ev_array;

/* Decoded pixels, (height, width, channels) in C order: uint8 samples, or host-endian uint16
 * ones when bit_depth is 16. Owned by the core until ev_image_free. */
typedef struct ev_image {
  void* data;
  int64_t height;
  int64_t width;
  int64_t channels;
  int bit_depth;
} ev_image;

/* Encoded bytes, owned by the core until ev_bytes_free. */
typedef struct ev_bytes {
  const uint8_t* data;
  size_t size;
} ev_bytes;

EV_API const char* ev_last_error(void);

/* --- image IO -------------------------------------------------------------------------- */

/* mode: 0 unchanged, 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA. max_pixels 0: no limit. */
EV_API ev_status ev_decode_png(const void* data, size_t size, int mode, uint64_t max_pixels, ev_image** out);
EV_API ev_status ev_decode_jpeg(const void* data, size_t size, int mode, uint64_t max_pixels, ev_image** out);
EV_API void ev_image_free(ev_image* image);

/* image: (H, W, C) C-contiguous, uint8 or uint16 (PNG), uint8 (JPEG). */
EV_API ev_status ev_encode_png(const ev_array* image, int compression_level, ev_bytes** out);
EV_API ev_status ev_encode_jpeg(const ev_array* image, int quality, ev_bytes** out);
EV_API void ev_bytes_free(ev_bytes* bytes);

EV_API const char* ev_libpng_version(void);
EV_API const char* ev_libjpeg_version(void);

/* --- transforms ------------------------------------------------------------------------ */
/* x and out are C-contiguous (N, C, H, W) batches of one dtype (uint8, float32, float64);
 * out's shape is the result's. device is EV_CPU or EV_CUDA (host arrays either way). */

/* interpolation: 0 nearest, 1 bilinear. */
EV_API ev_status ev_resize(const ev_array* x, const ev_array* out, int interpolation, int antialias, int device);
/* The window of out's size at (top, left); pixels outside x are 0. */
EV_API ev_status ev_crop(const ev_array* x, const ev_array* out, int64_t top, int64_t left, int device);
EV_API ev_status ev_flip(const ev_array* x, const ev_array* out, int horizontal, int device);
/* mean, std: float64 arrays of one value per channel; x, out float32 or float64. */
EV_API ev_status ev_normalize(const ev_array* x, const ev_array* out, const ev_array* mean, const ev_array* std,
                              int device);
/* out = x rescaled to out's dtype as torchvision's convert_image_dtype: uint8 <-> float in [0, 1]
 * (float -> uint8 multiplies by 255.999 and truncates); float <-> float casts. Any shape, same
 * number of elements. */
EV_API ev_status ev_convert_dtype(const ev_array* x, const ev_array* out, int device);

/* --- build facts ----------------------------------------------------------------------- */

EV_API int ev_cuda_compiled(void);
/* Usable CUDA devices; 0 without a driver, a GPU, or on a CPU build. Never fails. */
EV_API int ev_cuda_device_count(void);
/* The fatbin's architectures, comma-separated ("sm_50,sm_60"); "" on a CPU build. */
EV_API const char* ev_cuda_arch_list(void);
/* The variant tag the core was built for: cpu, cu118, ... */
EV_API const char* ev_variant(void);

#ifdef __cplusplus
}
#endif
