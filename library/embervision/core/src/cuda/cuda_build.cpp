// Facts about a CUDA build that the C++ compiler can report without CUDA headers.
#include "cuda/cuda_transforms.h"

#ifndef EMBERVISION_CUDA_ARCHS
#error "EMBERVISION_CUDA_ARCHS (comma-separated sm_XY list) must be defined for CUDA builds"
#endif

namespace embervision {
namespace cuda {

bool compiled() { return true; }
const char* arch_list() { return EMBERVISION_CUDA_ARCHS; }

}  // namespace cuda
}  // namespace embervision
