// The CUDA entry points of a build without CUDA: no devices, and every op says why it
// cannot run (c_api.cpp checks compiled() first, so these messages are a last resort).
#include "cuda/cuda_transforms.h"

namespace embervision {
namespace cuda {
namespace {
const char* const kNoCuda = "embervision was built without CUDA";
}  // namespace

bool compiled() { return false; }
const char* arch_list() { return ""; }
int device_count() { return 0; }

const char* resize(int, const void*, void*, size_t, const AxisTable*, const AxisTable*) { return kNoCuda; }
const char* crop(int, const void*, void*, size_t, int, int, long long, long long, int, int) { return kNoCuda; }
const char* flip(int, const void*, void*, size_t, int, int, bool) { return kNoCuda; }
const char* normalize(int, const void*, void*, size_t, size_t, size_t, const double*, const double*) {
  return kNoCuda;
}
const char* convert(int, int, const void*, void*, size_t) { return kNoCuda; }

}  // namespace cuda
}  // namespace embervision
