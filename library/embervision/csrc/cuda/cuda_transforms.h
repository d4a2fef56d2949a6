// Host entry points of the CUDA transforms. Plain types only, so this header is
// shared by nvcc (cuda_transforms.cu) and the host compiler (module.cpp). Pointers
// are host memory; each call copies to the device, runs and copies back.
// Every function returns nullptr on success or a static error message.
#pragma once

#include <cstddef>

namespace embervision {
namespace cuda {

enum DType : int { UINT8 = 0, FLOAT32 = 1, FLOAT64 = 2 };

// One axis of a resample table (see resample_table.h) with float weights.
struct AxisTable {
  int in_size;
  int out_size;
  int taps;
  const int* start;
  const int* count;
  const float* weights;
};

// Number of usable devices; 0 when there is no driver or no GPU.
int device_count();

const char* resize(int dtype, const void* in, void* out, size_t planes, const AxisTable* rows,
                   const AxisTable* cols);

const char* flip(int dtype, const void* in, void* out, size_t planes, int h, int w, bool horizontal);

const char* normalize(int dtype, const void* in, void* out, size_t batch, size_t channels,
                      size_t plane_size, const double* mean, const double* std);

}  // namespace cuda
}  // namespace embervision
