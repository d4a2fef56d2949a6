// The CUDA API of a build without CUDA: reports no devices, and every op says why it
// cannot run.
#include <stdexcept>

#include "ember/cuda.h"

namespace ember {
namespace cuda {
namespace {
[[noreturn]] void no_cuda() {
  throw std::runtime_error(
      "ember was built without CUDA (a CPU build); install a CUDA variant of ember to use "
      "device='cuda'");
}
}  // namespace

bool compiled_with_cuda() { return false; }
std::vector<std::string> arch_list() { return {}; }
int device_count() { return 0; }
bool is_available() { return false; }
std::string unavailable_reason() { return "ember was built without CUDA"; }

void binary(BinaryOp, const float*, const float*, float*, int64_t) { no_cuda(); }
void binary(BinaryOp, const double*, const double*, double*, int64_t) { no_cuda(); }
void unary(UnaryOp, const float*, float*, int64_t) { no_cuda(); }
void unary(UnaryOp, const double*, double*, int64_t) { no_cuda(); }
void sum_axis(const float*, float*, int64_t, int64_t, int64_t) { no_cuda(); }
void sum_axis(const double*, double*, int64_t, int64_t, int64_t) { no_cuda(); }
void max_axis(const float*, float*, int64_t, int64_t, int64_t) { no_cuda(); }
void max_axis(const double*, double*, int64_t, int64_t, int64_t) { no_cuda(); }
void matmul(const float*, const float*, float*, int64_t, int64_t, int64_t) { no_cuda(); }
void matmul(const double*, const double*, double*, int64_t, int64_t, int64_t) { no_cuda(); }
void index_add(float*, int64_t, int64_t, const int64_t*, const float*, int64_t) { no_cuda(); }
void index_add(double*, int64_t, int64_t, const int64_t*, const double*, int64_t) { no_cuda(); }

}  // namespace cuda
}  // namespace ember
