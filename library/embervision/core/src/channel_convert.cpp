#include "image_buffer.h"

#include <cstring>

namespace embervision {

int channels_for_mode(ImageMode mode) {
  switch (mode) {
    case ImageMode::GRAY: return 1;
    case ImageMode::GRAY_ALPHA: return 2;
    case ImageMode::RGB: return 3;
    case ImageMode::RGBA: return 4;
    default: return 0;
  }
}

void check_pixel_limit(uint64_t width, uint64_t height, uint64_t max_pixels) {
  if (width == 0 || height == 0) {
    throw ImageDecodeError("image has zero width or height");
  }
  // Even without a caller limit, keep width * height * 8 bytes (16-bit RGBA)
  // far from size_t overflow.
  if (width * height > (uint64_t(1) << 56)) {
    throw ImageDecodeError("image of " + std::to_string(width) + "x" + std::to_string(height) +
                           " pixels is too large to decode");
  }
  if (max_pixels != 0 && width * height > max_pixels) {
    throw ImageDecodeError("image of " + std::to_string(width) + "x" + std::to_string(height) +
                           " pixels exceeds the limit of " + std::to_string(max_pixels) +
                           " pixels (possible decompression bomb; raise max_pixels to allow it)");
  }
}

namespace {

// Pillow's fixed-point ITU-R 601 luma: (299 R + 587 G + 114 B) / 1000, rounded.
template <typename T>
T luma(uint64_t r, uint64_t g, uint64_t b) {
  return static_cast<T>((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
}

template <typename T>
void convert_pixels(const T* src, int src_c, T* dst, int dst_c, size_t count) {
  const T opaque = static_cast<T>(~T(0));
  const bool src_color = src_c >= 3;
  const bool src_alpha = src_c == 2 || src_c == 4;
  for (size_t i = 0; i < count; ++i, src += src_c, dst += dst_c) {
    T gray;
    T rgb[3];
    if (src_color) {
      rgb[0] = src[0];
      rgb[1] = src[1];
      rgb[2] = src[2];
      gray = luma<T>(src[0], src[1], src[2]);
    } else {
      gray = src[0];
      rgb[0] = rgb[1] = rgb[2] = src[0];
    }
    const T alpha = src_alpha ? src[src_c - 1] : opaque;
    switch (dst_c) {
      case 1: dst[0] = gray; break;
      case 2: dst[0] = gray; dst[1] = alpha; break;
      case 3: std::memcpy(dst, rgb, sizeof(rgb)); break;
      default: std::memcpy(dst, rgb, sizeof(rgb)); dst[3] = alpha; break;
    }
  }
}

}  // namespace

ImageBuffer convert_channels(const ImageBuffer& src, int dst_channels) {
  ImageBuffer dst;
  dst.height = src.height;
  dst.width = src.width;
  dst.channels = dst_channels;
  dst.bit_depth = src.bit_depth;
  dst.pixels.resize(dst.row_bytes() * size_t(dst.height));
  const size_t count = size_t(src.width) * size_t(src.height);
  if (src.bit_depth == 16) {
    convert_pixels(reinterpret_cast<const uint16_t*>(src.pixels.data()), src.channels,
                   reinterpret_cast<uint16_t*>(dst.pixels.data()), dst_channels, count);
  } else {
    convert_pixels(src.pixels.data(), src.channels, dst.pixels.data(), dst_channels, count);
  }
  return dst;
}

}  // namespace embervision
