// Separable resampling weights shared by the CPU and CUDA resize.
#pragma once

#include <vector>

namespace embervision {

enum class Interpolation : int { NEAREST = 0, BILINEAR = 1 };

// For every output index along one axis: the first input index it reads, how many
// inputs it reads, and their normalised weights (row-major, `taps` per output,
// zero-padded). Pixel centres sit at i + 0.5 (align_corners=False).
struct ResampleTable {
  int in_size = 0;
  int out_size = 0;
  int taps = 0;
  std::vector<int> start;
  std::vector<int> count;
  std::vector<double> weights;
};

// NEAREST reads input floor((o + 0.5) * in/out) (Pillow NEAREST, torch "nearest-exact").
// BILINEAR uses the triangle filter; with antialias its support widens by the
// downscale factor (Pillow's BILINEAR), without it only the two nearest inputs are
// read (torch interpolate(mode="bilinear", align_corners=False, antialias=False)).
ResampleTable make_resample_table(int in_size, int out_size, Interpolation mode, bool antialias);

}  // namespace embervision
