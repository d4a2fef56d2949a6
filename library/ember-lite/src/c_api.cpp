// The C API: the only boundary callers see. No C++ exception crosses it.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include <ember/kernels.h>

#include "caching_allocator.h"
#include "ember_lite.h"
#include "model.h"

struct el_model {
  ember_lite::Model model;
};

namespace {

thread_local std::string last_error;

int record(int status, const std::string& message, char* errbuf = nullptr, size_t errbuf_len = 0) {
  last_error = status == EL_OK ? std::string() : std::string(el_status_name(status)) + ": " + message;
  if (errbuf != nullptr && errbuf_len > 0) {
    std::snprintf(errbuf, errbuf_len, "%s", last_error.c_str());
  }
  return status;
}

int copy_shape(const ember_lite::Shape& shape, int64_t* dims, int max_dims) {
  for (int i = 0; i < max_dims && i < static_cast<int>(shape.size()); ++i) dims[i] = shape[i];
  return static_cast<int>(shape.size());
}

int load_from_bytes(const uint8_t* data, size_t size, el_model** model, char* errbuf,
                    size_t errbuf_len) {
  try {
    auto loaded = std::unique_ptr<el_model>(new el_model());
    const ember_lite::LoadResult result = ember_lite::parse_model(data, size, loaded->model);
    if (result.status != EL_OK) return record(result.status, result.message, errbuf, errbuf_len);
    *model = loaded.release();
    return record(EL_OK, "", errbuf, errbuf_len);
  } catch (const std::bad_alloc&) {
    return record(EL_ERR_OUT_OF_MEMORY, "out of memory while loading the model", errbuf, errbuf_len);
  } catch (const std::exception& exc) {
    return record(EL_ERR_INTERNAL, exc.what(), errbuf, errbuf_len);
  }
}

}  // namespace

extern "C" {

const char* el_status_name(int status) {
  switch (status) {
    case EL_OK: return "EL_OK";
    case EL_ERR_INVALID_ARGUMENT: return "EL_ERR_INVALID_ARGUMENT";
    case EL_ERR_IO: return "EL_ERR_IO";
    case EL_ERR_TRUNCATED: return "EL_ERR_TRUNCATED";
    case EL_ERR_BAD_MAGIC: return "EL_ERR_BAD_MAGIC";
    case EL_ERR_UNSUPPORTED_VERSION: return "EL_ERR_UNSUPPORTED_VERSION";
    case EL_ERR_CHECKSUM: return "EL_ERR_CHECKSUM";
    case EL_ERR_MALFORMED: return "EL_ERR_MALFORMED";
    case EL_ERR_BAD_OPCODE: return "EL_ERR_BAD_OPCODE";
    case EL_ERR_SHAPE: return "EL_ERR_SHAPE";
    case EL_ERR_OUT_OF_MEMORY: return "EL_ERR_OUT_OF_MEMORY";
    case EL_ERR_INTERNAL: return "EL_ERR_INTERNAL";
    case EL_ERR_TOO_LARGE: return "EL_ERR_TOO_LARGE";
    default: return "EL_ERR_UNKNOWN";
  }
}

int el_model_load_buffer(const void* data, size_t size, el_model** model, char* errbuf,
                         size_t errbuf_len) {
  if (model == nullptr) {
    return record(EL_ERR_INVALID_ARGUMENT, "model out-pointer is NULL", errbuf, errbuf_len);
  }
  *model = nullptr;
  if (data == nullptr) return record(EL_ERR_INVALID_ARGUMENT, "buffer is NULL", errbuf, errbuf_len);
  return load_from_bytes(static_cast<const uint8_t*>(data), size, model, errbuf, errbuf_len);
}

int el_model_load(const char* path, el_model** model, char* errbuf, size_t errbuf_len) {
  if (model == nullptr) {
    return record(EL_ERR_INVALID_ARGUMENT, "model out-pointer is NULL", errbuf, errbuf_len);
  }
  *model = nullptr;
  if (path == nullptr) return record(EL_ERR_INVALID_ARGUMENT, "path is NULL", errbuf, errbuf_len);
  try {
    std::ifstream file(path, std::ios::binary);
    if (!file) return record(EL_ERR_IO, std::string("cannot open ") + path, errbuf, errbuf_len);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)),
                               std::istreambuf_iterator<char>());
    if (file.bad()) return record(EL_ERR_IO, std::string("cannot read ") + path, errbuf, errbuf_len);
    // An empty vector's data() may be NULL; the parser then reports a truncated file.
    static const uint8_t empty = 0;
    return load_from_bytes(bytes.empty() ? &empty : bytes.data(), bytes.size(), model, errbuf,
                           errbuf_len);
  } catch (const std::bad_alloc&) {
    return record(EL_ERR_OUT_OF_MEMORY, std::string("out of memory reading ") + path, errbuf, errbuf_len);
  }
}

void el_model_free(el_model* model) { delete model; }

int el_model_run(const el_model* model, const float* input, size_t input_len, float* output,
                 size_t output_len) {
  if (model == nullptr || input == nullptr || output == nullptr) {
    return record(EL_ERR_INVALID_ARGUMENT, "model, input and output must not be NULL");
  }
  const size_t expected_in = static_cast<size_t>(ember_lite::numel(model->model.input_shape));
  const size_t expected_out = static_cast<size_t>(ember_lite::numel(model->model.output_shape));
  if (input_len != expected_in) {
    return record(EL_ERR_INVALID_ARGUMENT, "input has " + std::to_string(input_len) +
                                               " elements, the model takes " + std::to_string(expected_in));
  }
  if (output_len != expected_out) {
    return record(EL_ERR_INVALID_ARGUMENT, "output has room for " + std::to_string(output_len) +
                                               " elements, the model produces " + std::to_string(expected_out));
  }
  std::string error;
  const el_status status = ember_lite::run_model(model->model, input, output, error);
  return record(status, error);
}

int el_model_input_shape(const el_model* model, int64_t* dims, int max_dims) {
  if (model == nullptr || (dims == nullptr && max_dims > 0)) return -1;
  return copy_shape(model->model.input_shape, dims, max_dims);
}

int el_model_output_shape(const el_model* model, int64_t* dims, int max_dims) {
  if (model == nullptr || (dims == nullptr && max_dims > 0)) return -1;
  return copy_shape(model->model.output_shape, dims, max_dims);
}

size_t el_model_input_numel(const el_model* model) {
  return model == nullptr ? 0 : static_cast<size_t>(ember_lite::numel(model->model.input_shape));
}

size_t el_model_output_numel(const el_model* model) {
  return model == nullptr ? 0 : static_cast<size_t>(ember_lite::numel(model->model.output_shape));
}

int el_model_num_ops(const el_model* model) {
  return model == nullptr ? 0 : static_cast<int>(model->model.ops.size());
}

const char* el_last_error(void) { return last_error.c_str(); }

int el_set_num_threads(int n) {
  try {
    ember::set_num_threads(n);
    return record(EL_OK, "");
  } catch (const std::invalid_argument& exc) {
    return record(EL_ERR_INVALID_ARGUMENT, exc.what());
  } catch (const std::exception& exc) {
    return record(EL_ERR_OUT_OF_MEMORY, exc.what());  // the system refused the threads
  }
}
int el_get_num_threads(void) { return ember::get_num_threads(); }

void el_allocator_set_enabled(int enabled) { ember_lite::global_allocator().set_enabled(enabled != 0); }
int el_allocator_enabled(void) { return ember_lite::global_allocator().enabled() ? 1 : 0; }
void el_allocator_set_max_cached_bytes(uint64_t max_bytes) {
  ember_lite::global_allocator().set_max_cached_bytes(max_bytes);
}
uint64_t el_allocator_release(void) { return ember_lite::global_allocator().release(); }

void el_allocator_get_stats(el_allocator_stats* out) {
  if (out == nullptr) return;
  const ember_lite::AllocatorStats s = ember_lite::global_allocator().stats();
  std::memset(out, 0, sizeof *out);
  out->alloc_requests = s.alloc_requests;
  out->free_requests = s.free_requests;
  out->cache_hits = s.cache_hits;
  out->cache_misses = s.cache_misses;
  out->system_mallocs = s.system_mallocs;
  out->system_frees = s.system_frees;
  out->evictions = s.evictions;
  out->releases = s.releases;
  out->cached_bytes = s.cached_bytes;
  out->peak_cached_bytes = s.peak_cached_bytes;
  out->live_bytes = s.live_bytes;
  out->max_cached_bytes = s.max_cached_bytes;
  out->enabled = s.enabled ? 1 : 0;
}

void el_allocator_reset_stats(void) { ember_lite::global_allocator().reset_stats(); }
void* el_allocator_alloc(size_t nbytes) { return ember_lite::global_allocator().allocate(nbytes); }
void el_allocator_free(void* ptr) { ember_lite::global_allocator().free(ptr); }

}  // extern "C"
