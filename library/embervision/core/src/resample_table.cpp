#include "resample_table.h"

#include <algorithm>
#include <cmath>

namespace embervision {
namespace {

double triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

}  // namespace

ResampleTable make_resample_table(int in_size, int out_size, Interpolation mode, bool antialias) {
  ResampleTable table;
  table.in_size = in_size;
  table.out_size = out_size;
  const double scale = double(in_size) / double(out_size);

  if (mode == Interpolation::NEAREST) {
    table.taps = 1;
    table.start.resize(out_size);
    table.count.assign(out_size, 1);
    table.weights.assign(out_size, 1.0);
    // floor((o + 0.5) * in / out) in exact integer arithmetic, so ties such as
    // 7.5 * 12/30 = 3 land on the mathematically right pixel.
    for (int o = 0; o < out_size; ++o) {
      const long long i = (2LL * o + 1) * in_size / (2LL * out_size);
      table.start[o] = static_cast<int>(std::min<long long>(i, in_size - 1));
    }
    return table;
  }

  // Downscaling with antialias stretches the filter over `filter_scale` inputs so
  // every input contributes; upscaling never stretches it.
  const double filter_scale = antialias ? std::max(scale, 1.0) : 1.0;
  const double support = 1.0 * filter_scale;
  const double inv_filter_scale = 1.0 / filter_scale;
  table.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  table.start.resize(out_size);
  table.count.resize(out_size);
  table.weights.assign(size_t(out_size) * table.taps, 0.0);
  for (int o = 0; o < out_size; ++o) {
    const double center = (o + 0.5) * scale;  // in input pixel units, edges at integers
    int first = static_cast<int>(std::floor(center - support + 0.5));
    int last = static_cast<int>(std::floor(center + support + 0.5));  // exclusive
    first = std::max(first, 0);
    last = std::min(last, in_size);
    last = std::min(last, first + table.taps);
    double* w = &table.weights[size_t(o) * table.taps];
    double total = 0.0;
    for (int i = first; i < last; ++i) {
      // distance between input centre i + 0.5 and the sample point
      w[i - first] = triangle((i + 0.5 - center) * inv_filter_scale);
      total += w[i - first];
    }
    if (total > 0.0) {
      for (int k = 0; k < last - first; ++k) w[k] /= total;
    } else {
      // Can only happen for a degenerate table; fall back to the nearest input.
      first = std::min(std::max(static_cast<int>(center), 0), in_size - 1);
      last = first + 1;
      w[0] = 1.0;
    }
    table.start[o] = first;
    table.count[o] = last - first;
  }
  return table;
}

}  // namespace embervision
