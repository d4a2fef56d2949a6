// ember-lite-demo: load a model, run it on an input file and compare with an expected
// output file written by ember.mobile (raw little-endian float32).
//
//   ember-lite-demo model.elm input.bin expected.bin [tolerance]
//
// Match rule: |got - expected| <= tolerance * max(1, |expected|) for every element
// (tolerance defaults to 1e-5). Exit codes: 0 match, 1 mismatch, 2 usage or file error,
// 3 model rejected, 4 run failed.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "ember_lite.h"

namespace {

bool read_floats(const char* path, std::vector<float>& out) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return false;
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(file)),
                                   std::istreambuf_iterator<char>());
  if (bytes.size() % 4 != 0) return false;
  out.resize(bytes.size() / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    const uint32_t u = static_cast<uint32_t>(bytes[4 * i]) | (static_cast<uint32_t>(bytes[4 * i + 1]) << 8) |
                       (static_cast<uint32_t>(bytes[4 * i + 2]) << 16) |
                       (static_cast<uint32_t>(bytes[4 * i + 3]) << 24);
    float f;
    static_assert(sizeof f == sizeof u, "float must be 32-bit");
    std::memcpy(&f, &u, sizeof f);
    out[i] = f;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    std::fprintf(stderr, "usage: %s model.elm input.bin expected.bin [tolerance]\n", argv[0]);
    return 2;
  }
  const double tolerance = argc == 5 ? std::strtod(argv[4], nullptr) : 1e-5;
  if (!(tolerance >= 0)) {
    std::fprintf(stderr, "tolerance must be a number >= 0\n");
    return 2;
  }
  el_model* model = nullptr;
  char errbuf[EL_ERRBUF_SIZE];
  if (el_model_load(argv[1], &model, errbuf, sizeof errbuf) != EL_OK) {
    std::fprintf(stderr, "error: %s\n", errbuf);
    return 3;
  }
  std::vector<float> input, expected;
  if (!read_floats(argv[2], input) || !read_floats(argv[3], expected)) {
    std::fprintf(stderr, "error: cannot read %s or %s as float32 data\n", argv[2], argv[3]);
    el_model_free(model);
    return 2;
  }
  std::vector<float> output(el_model_output_numel(model));
  if (expected.size() != output.size()) {
    std::fprintf(stderr, "error: expected file has %zu values, the model produces %zu\n",
                 expected.size(), output.size());
    el_model_free(model);
    return 2;
  }
  if (el_model_run(model, input.data(), input.size(), output.data(), output.size()) != EL_OK) {
    std::fprintf(stderr, "error: %s\n", el_last_error());
    el_model_free(model);
    return 4;
  }
  double max_abs = 0, max_rel = 0;
  size_t bad = 0;
  for (size_t i = 0; i < output.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(output[i]) - expected[i]);
    const double scale = std::fmax(1.0, std::fabs(static_cast<double>(expected[i])));
    max_abs = std::fmax(max_abs, diff);
    max_rel = std::fmax(max_rel, diff / scale);
    if (!(diff <= tolerance * scale)) ++bad;  // NaN counts as a mismatch
  }
  el_allocator_stats stats;
  el_allocator_get_stats(&stats);
  std::printf("ops=%d outputs=%zu max_abs_err=%.3g max_rel_err=%.3g tolerance=%.3g mismatches=%zu\n",
              el_model_num_ops(model), output.size(), max_abs, max_rel, tolerance, bad);
  std::printf("allocator: enabled=%d requests=%llu hits=%llu misses=%llu cached_bytes=%llu\n",
              stats.enabled, static_cast<unsigned long long>(stats.alloc_requests),
              static_cast<unsigned long long>(stats.cache_hits),
              static_cast<unsigned long long>(stats.cache_misses),
              static_cast<unsigned long long>(stats.cached_bytes));
  std::printf("%s\n", bad == 0 ? "MATCH" : "MISMATCH");
  el_model_free(model);
  return bad == 0 ? 0 : 1;
}
