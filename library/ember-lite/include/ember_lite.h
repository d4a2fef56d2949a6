/* ember-lite: the ember mobile runtime, C API.
 *
 * Loads an ember-lite model file (.elm, layout in FORMAT.md), runs it on float32
 * input with ember's CPU kernels, and exposes the CPU caching allocator that holds
 * the runtime's intermediate tensors. No Python or C++ runtime is needed by callers.
 */
#ifndef EMBER_LITE_H
#define EMBER_LITE_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#  if defined(EMBER_LITE_BUILDING)
#    define EL_API __declspec(dllexport)
#  elif defined(EMBER_LITE_SHARED)
#    define EL_API __declspec(dllimport)
#  else
#    define EL_API
#  endif
#else
#  define EL_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define EL_VERSION_MAJOR 1
#define EL_VERSION_MINOR 7
#define EL_VERSION_PATCH 0
/* The one model-file format version this runtime reads. */
#define EL_FORMAT_VERSION 1
/* Size an error buffer should have so that no message is cut. */
#define EL_ERRBUF_SIZE 256
/* The largest single buffer a model may need, in bytes (1 GiB): the input, every op's
 * output, every constant tensor and every kernel's scratch space (a conv2d's im2col buffer
 * of c_in*kh*kw x out_h*out_w floats). A model that needs more is refused at load time with
 * EL_ERR_TOO_LARGE, on every target alike, so that no size can wrap a 32-bit size_t. */
#define EL_MAX_BUFFER_BYTES 1073741824ull

typedef enum el_status {
  EL_OK = 0,
  EL_ERR_INVALID_ARGUMENT = 1, /* null pointer, wrong buffer length ... */
  EL_ERR_IO = 2,               /* file cannot be opened or read */
  EL_ERR_TRUNCATED = 3,        /* fewer bytes than the header says */
  EL_ERR_BAD_MAGIC = 4,        /* not an ember-lite model file */
  EL_ERR_UNSUPPORTED_VERSION = 5,
  EL_ERR_CHECKSUM = 6,         /* CRC32 does not match the content */
  EL_ERR_MALFORMED = 7,        /* offsets, sizes, reserved fields or tables are invalid */
  EL_ERR_BAD_OPCODE = 8,
  EL_ERR_SHAPE = 9,            /* tensor shapes do not fit the ops */
  EL_ERR_OUT_OF_MEMORY = 10,
  EL_ERR_INTERNAL = 11,
  EL_ERR_TOO_LARGE = 12        /* a buffer the model needs exceeds EL_MAX_BUFFER_BYTES */
} el_status;

typedef struct el_model el_model;

/* Name of a status code, e.g. "EL_ERR_CHECKSUM". Never NULL. */
EL_API const char* el_status_name(int status);

/* Load and fully validate a model. On failure *model is set to NULL, the message is
 * written to errbuf (if errbuf and errbuf_len > 0, always NUL-terminated) and kept
 * for el_last_error(). */
EL_API int el_model_load(const char* path, el_model** model, char* errbuf, size_t errbuf_len);
EL_API int el_model_load_buffer(const void* data, size_t size, el_model** model,
                                char* errbuf, size_t errbuf_len);
EL_API void el_model_free(el_model* model);

/* Run the model: input_len and output_len are counts of float32 elements and must equal
 * the model's input and output element counts. Safe to call from several threads. */
EL_API int el_model_run(const el_model* model, const float* input, size_t input_len,
                        float* output, size_t output_len);

/* Shapes: rank returned, dims copied into dims[0..min(rank,max_dims)). */
EL_API int el_model_input_shape(const el_model* model, int64_t* dims, int max_dims);
EL_API int el_model_output_shape(const el_model* model, int64_t* dims, int max_dims);
EL_API size_t el_model_input_numel(const el_model* model);
EL_API size_t el_model_output_numel(const el_model* model);
EL_API int el_model_num_ops(const el_model* model);

/* Message of the last failed call on this thread ("" if none). */
EL_API const char* el_last_error(void);

/* Threads used by ember's kernels, started at once: EL_ERR_INVALID_ARGUMENT for n outside
 * 1..4096, EL_ERR_OUT_OF_MEMORY (with the system's reason in el_last_error) when the
 * threads cannot be started; on either the previous count stays in force. */
EL_API int el_set_num_threads(int n);
EL_API int el_get_num_threads(void);

/* ---- CPU caching allocator (process-wide, used for every intermediate tensor) ----
 * Requests are rounded up to a power of two (at least 64 bytes); a freed block goes to
 * its bucket's free list unless that would take the cache above max_cached_bytes, in
 * which case it is freed. Defaults: enabled, max_cached_bytes = 64 MiB. Switched off,
 * every request is one malloc and every free one free (the cache is dropped). */
typedef struct el_allocator_stats {
  uint64_t alloc_requests;   /* allocate() calls */
  uint64_t free_requests;    /* free() calls */
  uint64_t cache_hits;       /* allocations served from the cache */
  uint64_t cache_misses;     /* allocations that had to call malloc while caching was on */
  uint64_t system_mallocs;   /* malloc calls made by the allocator (on or off) */
  uint64_t system_frees;     /* free calls made by the allocator */
  uint64_t evictions;        /* frees not cached because the cache was full */
  uint64_t releases;         /* el_allocator_release() calls */
  uint64_t cached_bytes;     /* bytes held in the cache now */
  uint64_t peak_cached_bytes;
  uint64_t live_bytes;       /* bytes handed out and not yet freed (bucket sizes) */
  uint64_t max_cached_bytes; /* the current bound */
  int32_t enabled;
  int32_t reserved;
} el_allocator_stats;

EL_API void el_allocator_set_enabled(int enabled);
EL_API int el_allocator_enabled(void);
/* Bound on cached bytes; lowering it evicts what no longer fits. */
EL_API void el_allocator_set_max_cached_bytes(uint64_t max_bytes);
/* Free all cached (unused) memory; returns the number of bytes freed. */
EL_API uint64_t el_allocator_release(void);
EL_API void el_allocator_get_stats(el_allocator_stats* stats);
/* Zero the counters (not the cache contents or the gauges). */
EL_API void el_allocator_reset_stats(void);
/* Direct access, for tests and for callers who want their buffers cached too. */
EL_API void* el_allocator_alloc(size_t nbytes);
EL_API void el_allocator_free(void* ptr);

#ifdef __cplusplus
}
#endif
#endif /* EMBER_LITE_H */
