// Facts about a CUDA build that the C++ compiler can report without CUDA headers.
#include <sstream>

#include "ember/cuda.h"

#ifndef EMBER_CUDA_ARCHS
#error "EMBER_CUDA_ARCHS (comma-separated sm_XY list) must be defined for CUDA builds"
#endif

namespace ember {
namespace cuda {

bool compiled_with_cuda() { return true; }

std::vector<std::string> arch_list() {
  std::vector<std::string> archs;
  std::stringstream list(EMBER_CUDA_ARCHS);
  std::string arch;
  while (std::getline(list, arch, ','))
    if (!arch.empty()) archs.push_back(arch);
  return archs;
}

}  // namespace cuda
}  // namespace ember
