// Decoded pixels in HWC order, shared by the PNG and JPEG codecs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace embervision {

// Thrown for corrupt, truncated or unsupported image data; surfaces as ValueError.
class ImageDecodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown when encoding fails (bad input shape or library failure); surfaces as ValueError.
class ImageEncodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Channel layout a decoder should produce; UNCHANGED keeps the file's own.
enum class ImageMode : int { UNCHANGED = 0, GRAY = 1, GRAY_ALPHA = 2, RGB = 3, RGBA = 4 };

// Leaves new elements uninitialised: a decoder overwrites every byte, and a header
// that lies about its size then costs address space, not touched memory.
template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  using std::allocator<T>::allocator;
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

using PixelVector = std::vector<uint8_t, DefaultInitAllocator<uint8_t>>;

struct ImageBuffer {
  int height = 0;
  int width = 0;
  int channels = 0;
  int bit_depth = 8;  // 8 (uint8 samples) or 16 (host-endian uint16 samples)
  PixelVector pixels;

  size_t bytes_per_sample() const { return bit_depth == 16 ? 2 : 1; }
  size_t row_bytes() const { return size_t(width) * size_t(channels) * bytes_per_sample(); }
};

// Raw bytes produced by an encoder.
using EncodedBytes = std::vector<uint8_t>;

// Number of channels a mode asks for, or 0 for UNCHANGED.
int channels_for_mode(ImageMode mode);

// Converts between gray / gray+alpha / RGB / RGBA the way Pillow's convert() does
// (ITU-R 601 luma for RGB->gray, opaque alpha added, alpha dropped).
ImageBuffer convert_channels(const ImageBuffer& src, int dst_channels);

// Refuses images whose pixel count exceeds the caller's limit (decompression bombs).
void check_pixel_limit(uint64_t width, uint64_t height, uint64_t max_pixels);

}  // namespace embervision
