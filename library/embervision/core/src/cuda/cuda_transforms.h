// Host entry points of the CUDA transforms. Plain types only, so this header is
// shared by nvcc (cuda_transforms.cu) and the host compiler (c_api.cpp). Pointers
// are host memory; each call copies to the device, runs and copies back.
// Every function returns nullptr on success or a static error message. A CPU build
// links cuda_stub.cpp instead: no devices, and every call says so.
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

// Whether the kernels are compiled in, and the fatbin's archs ("sm_50,sm_60"; "" without).
bool compiled();
const char* arch_list();

// Number of usable devices; 0 when there is no driver or no GPU.
int device_count();

const char* resize(int dtype, const void* in, void* out, size_t planes, const AxisTable* rows,
                   const AxisTable* cols);

// The window [top, top+out_h) x [left, left+out_w) of every plane; 0 outside the input.
const char* crop(int dtype, const void* in, void* out, size_t planes, int in_h, int in_w, long long top,
                 long long left, int out_h, int out_w);

const char* flip(int dtype, const void* in, void* out, size_t planes, int h, int w, bool horizontal);

const char* normalize(int dtype, const void* in, void* out, size_t batch, size_t channels,
                      size_t plane_size, const double* mean, const double* std);

// count elements from in_dtype to out_dtype with torchvision's convert_image_dtype rules
// (uint8 -> float: v / 255; float -> uint8: trunc(v * 255.999), saturated; float casts).
const char* convert(int in_dtype, int out_dtype, const void* in, void* out, size_t count);

}  // namespace cuda
}  // namespace embervision
