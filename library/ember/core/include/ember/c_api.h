/* ember's C interface: checked, dtype-dispatching entry points over strided arrays, plus the
 * library's settings and CUDA queries.
 *
 * Front ends describe their arrays as ember_array (data pointer, element type, shape, byte
 * strides) and call these; the checks (shapes, element types, layout, writability) and the
 * dispatch to the typed kernels of kernels.h, fft.h and cuda.h happen here, in the core.
 * ember's Python extension is a thin layer over this header, so it is the only code compiled
 * once per Python, and it needs neither the C++ standard library nor exceptions.
 *
 * Every fallible call returns an ember_status; on failure ember_last_error() holds the
 * calling thread's message until its next failing call. Every argument is checked before
 * anything is computed: a NULL pointer, a negative, overflowing or mismatched shape, an
 * itemsize that disagrees with the dtype, a stride < 1, a max over an empty axis or an
 * out-of-range thread count is an EMBER_INVALID_ARGUMENT, never a crash; a size that does
 * not fit the address space is EMBER_OUT_OF_MEMORY.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "ember/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits of the checks above. */
#define EMBER_MAX_NDIM 64     /* dimensions of an ember_array (PEP 3118's PyBUF_MAX_NDIM) */
#define EMBER_MAX_THREADS 4096 /* largest ember_set_num_threads() count */

typedef enum ember_status {
  EMBER_OK = 0,
  EMBER_INVALID_ARGUMENT = 1, /* a bad shape, dtype, layout or name (Python: ValueError) */
  EMBER_RUNTIME_ERROR = 2,    /* the operation failed, e.g. nondeterministic or no CUDA (RuntimeError) */
  EMBER_OUT_OF_MEMORY = 3
} ember_status;

typedef enum ember_dtype {
  EMBER_FLOAT32 = 0,
  EMBER_FLOAT64 = 1,
  EMBER_COMPLEX128 = 2,
  EMBER_INT32 = 3,
  EMBER_INT64 = 4,
  EMBER_DTYPE_OTHER = 5
} ember_dtype;

/* A borrowed n-d array. */
typedef struct ember_array {
  void* data;
  ember_dtype dtype;
  int ndim;
  const int64_t* shape;
  const int64_t* strides; /* in bytes */
  int64_t itemsize;
  int writable;
  const char* name;   /* for messages: "out", "weight", ... */
  const char* format; /* the front end's spelling of the element type, for messages */
} ember_array;

EMBER_API const char* ember_last_error(void);

/* op: "add", "sub", "mul", "div"; a and b are broadcast (zero-stride) views of out's shape. */
EMBER_API ember_status ember_binary(const char* op, const ember_array* a, const ember_array* b,
                                    const ember_array* out);
/* op: "relu", "exp", "log", "tanh", "sigmoid". */
EMBER_API ember_status ember_unary(const char* op, const ember_array* x, const ember_array* out);
/* op: "sum" or "max"; x viewed as [outer, len, inner] -> out[outer, inner]. A max with
 * len 0 (and outer * inner > 0) is EMBER_INVALID_ARGUMENT, as is ember_reduce_all's max of
 * an empty array: there is no identity to return. */
EMBER_API ember_status ember_reduce_axis(const char* op, const ember_array* x, const ember_array* out, int64_t outer,
                                         int64_t len, int64_t inner);
EMBER_API ember_status ember_reduce_all(const char* op, const ember_array* x, double* result);
EMBER_API ember_status ember_matmul(const ember_array* a, const ember_array* b, const ember_array* out);
EMBER_API ember_status ember_softmax(const ember_array* x, const ember_array* out);
/* bias may be NULL. */
EMBER_API ember_status ember_conv1d(const ember_array* x, const ember_array* weight, const ember_array* bias,
                                    const ember_array* out, int64_t stride, int64_t padding);
EMBER_API ember_status ember_conv2d(const ember_array* x, const ember_array* weight, const ember_array* bias,
                                    const ember_array* out, int64_t stride, int64_t padding);
/* out[index[i], :] += source[i, :]; out (R, C), index (N,) int64, source (N, C). */
EMBER_API ember_status ember_index_add(const ember_array* out, const ember_array* index, const ember_array* source);

/* FFT over the last axis of contiguous rows. */
EMBER_API ember_status ember_fft_c2c(const ember_array* x, const ember_array* out, int forward, double scale);
EMBER_API ember_status ember_fft_r2c(const ember_array* x, const ember_array* out, double scale);
EMBER_API ember_status ember_fft_c2r(const ember_array* x, const ember_array* out, double scale);
EMBER_API int64_t ember_fft_plan_cache_size(void);
EMBER_API void ember_fft_clear_plan_cache(void);

/* The CUDA backend on host arrays (EMBER_RUNTIME_ERROR on a CPU build). */
EMBER_API ember_status ember_cuda_binary(const char* op, const ember_array* a, const ember_array* b,
                                         const ember_array* out);
EMBER_API ember_status ember_cuda_unary(const char* op, const ember_array* x, const ember_array* out);
EMBER_API ember_status ember_cuda_reduce_axis(const char* op, const ember_array* x, const ember_array* out,
                                              int64_t outer, int64_t len, int64_t inner);
EMBER_API ember_status ember_cuda_matmul(const ember_array* a, const ember_array* b, const ember_array* out);
EMBER_API ember_status ember_cuda_index_add(const ember_array* out, const ember_array* index,
                                            const ember_array* source);
EMBER_API int ember_cuda_compiled(void);
/* The fatbin's architectures, comma-separated ("sm_50,sm_60"); "" on a CPU build. */
EMBER_API const char* ember_cuda_arch_list(void);
EMBER_API int ember_cuda_device_count(void);
EMBER_API int ember_cuda_is_available(void);
/* Why CUDA is unavailable ("" when it is available); valid until the thread's next call. */
EMBER_API const char* ember_cuda_unavailable_reason(void);

/* Settings. ember_set_num_threads starts the threads at once: EMBER_INVALID_ARGUMENT for n
 * outside 1..EMBER_MAX_THREADS, EMBER_RUNTIME_ERROR (with the system's reason) when the
 * threads cannot be started; on either the previous count stays in force. */
EMBER_API ember_status ember_set_num_threads(int n);
EMBER_API int ember_get_num_threads(void);
EMBER_API void ember_set_deterministic(int on);
EMBER_API int ember_is_deterministic(void);

#ifdef __cplusplus
}
#endif
