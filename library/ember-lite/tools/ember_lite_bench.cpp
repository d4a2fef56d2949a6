// ember-lite-bench: malloc calls and time per inference with the caching allocator on
// and off, measured in one process so the two are comparable.
//
//   ember-lite-bench model.elm [rounds] [iterations_per_round]
//
// Prints one JSON object. malloc is counted by interposing glibc's malloc family in this
// executable (every call in the process, the runtime's own and the kernels', goes through
// it), so the counts do not depend on the allocator's own bookkeeping.
#include <atomic>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ember_lite.h"

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);
}

namespace {
std::atomic<uint64_t> malloc_calls{0};
std::atomic<uint64_t> free_calls{0};
}  // namespace

extern "C" {
void* malloc(size_t n) {
  malloc_calls.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(n);
}
void* calloc(size_t count, size_t n) {
  malloc_calls.fetch_add(1, std::memory_order_relaxed);
  return __libc_calloc(count, n);
}
void* realloc(void* p, size_t n) {
  malloc_calls.fetch_add(1, std::memory_order_relaxed);
  return __libc_realloc(p, n);
}
void* memalign(size_t alignment, size_t n) {
  malloc_calls.fetch_add(1, std::memory_order_relaxed);
  return __libc_memalign(alignment, n);
}
void* aligned_alloc(size_t alignment, size_t n) { return memalign(alignment, n); }
int posix_memalign(void** out, size_t alignment, size_t n) {
  void* p = memalign(alignment, n);
  if (p == nullptr) return 12;  // ENOMEM
  *out = p;
  return 0;
}
void free(void* p) {
  if (p != nullptr) free_calls.fetch_add(1, std::memory_order_relaxed);
  __libc_free(p);
}
}

namespace {

struct ModeResult {
  double seconds_per_inference;  // median over rounds
  double mallocs_per_inference;  // steady state (after warm-up)
  double frees_per_inference;
  el_allocator_stats stats;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s model.elm [rounds] [iterations_per_round]\n", argv[0]);
    return 2;
  }
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  const int iterations = argc > 3 ? std::atoi(argv[3]) : 50;
  if (rounds < 1 || iterations < 1) return 2;
  el_model* model = nullptr;
  char errbuf[EL_ERRBUF_SIZE];
  if (el_model_load(argv[1], &model, errbuf, sizeof errbuf) != EL_OK) {
    std::fprintf(stderr, "error: %s\n", errbuf);
    return 3;
  }
  std::vector<float> input(el_model_input_numel(model));
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
  std::vector<float> output(el_model_output_numel(model));

  std::vector<double> times[2];
  uint64_t mallocs[2] = {0, 0}, frees[2] = {0, 0};
  ModeResult result[2];
  // Rounds alternate the two modes so drift in machine load hits both alike.
  for (int round = 0; round <= rounds; ++round) {
    for (int mode = 0; mode < 2; ++mode) {  // 0: caching on, 1: off
      el_allocator_set_enabled(mode == 0);
      if (el_model_run(model, input.data(), input.size(), output.data(), output.size()) != EL_OK) {
        std::fprintf(stderr, "error: %s\n", el_last_error());
        return 4;
      }  // warm-up: fills the cache (and ember's thread pool) before counting
      el_allocator_reset_stats();
      const uint64_t m0 = malloc_calls.load(), f0 = free_calls.load();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < iterations; ++i) {
        el_model_run(model, input.data(), input.size(), output.data(), output.size());
      }
      const auto stop = std::chrono::steady_clock::now();
      if (round == 0) continue;  // round 0 only warms up
      mallocs[mode] += malloc_calls.load() - m0;
      frees[mode] += free_calls.load() - f0;
      times[mode].push_back(std::chrono::duration<double>(stop - start).count() / iterations);
      el_allocator_get_stats(&result[mode].stats);
    }
  }
  const double total = static_cast<double>(rounds) * iterations;
  for (int mode = 0; mode < 2; ++mode) {
    result[mode].seconds_per_inference = median(times[mode]);
    result[mode].mallocs_per_inference = mallocs[mode] / total;
    result[mode].frees_per_inference = frees[mode] / total;
  }
  std::printf("{\"model\": \"%s\", \"ops\": %d, \"rounds\": %d, \"iterations_per_round\": %d, "
              "\"threads\": %d,\n",
              argv[1], el_model_num_ops(model), rounds, iterations, el_get_num_threads());
  const char* names[2] = {"caching", "plain"};
  for (int mode = 0; mode < 2; ++mode) {
    const auto& r = result[mode];
    std::printf(" \"%s\": {\"us_per_inference\": %.3f, \"mallocs_per_inference\": %.3f, "
                "\"frees_per_inference\": %.3f, \"allocator_requests_per_inference\": %.3f, "
                "\"allocator_system_mallocs_per_inference\": %.3f, \"cache_hits_last_round\": %llu},\n",
                names[mode], r.seconds_per_inference * 1e6, r.mallocs_per_inference,
                r.frees_per_inference, static_cast<double>(r.stats.alloc_requests) / iterations,
                static_cast<double>(r.stats.system_mallocs) / iterations,
                static_cast<unsigned long long>(r.stats.cache_hits));
  }
  std::printf(" \"time_ratio_plain_over_caching\": %.4f}\n",
              result[1].seconds_per_inference / result[0].seconds_per_inference);
  el_allocator_set_enabled(1);
  el_model_free(model);
  return 0;
}
