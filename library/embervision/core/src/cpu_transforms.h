// CPU image transforms over a batch of planes (N*C planes of H x W, C-contiguous).
#pragma once

#include <cstddef>
#include <cstdint>

#include "resample_table.h"

namespace embervision {

// Resamples every plane: `cols` along the width first, then `rows` along the height,
// rounding integer samples after each pass as Pillow does. Output is
// rows.out_size x cols.out_size per plane.
template <typename T>
void resize_planes(const T* in, T* out, size_t planes, int in_h, int in_w,
                   const ResampleTable& rows, const ResampleTable& cols);

// Copies the window [top, top+out_h) x [left, left+out_w); pixels outside the input are 0.
template <typename T>
void crop_planes(const T* in, T* out, size_t planes, int in_h, int in_w, int top, int left,
                 int out_h, int out_w);

template <typename T>
void flip_planes(const T* in, T* out, size_t planes, int h, int w, bool horizontal);

// out = (in - mean[c]) / std[c], computed in T (float32 stays float32 as in torchvision).
template <typename T>
void normalize_planes(const T* in, T* out, size_t batch, size_t channels, size_t plane_size,
                      const double* mean, const double* std);

}  // namespace embervision
