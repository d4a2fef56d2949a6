// PNG decoding and encoding on libpng.
#pragma once

#include "image_buffer.h"

namespace embervision {

bool looks_like_png(const uint8_t* data, size_t size);

// Decodes any PNG (gray, gray+alpha, RGB, RGBA, palette; 1-16 bits, interlaced).
// Palette images expand to RGB (RGBA when the palette has transparency); samples
// are 8 or 16 bits. Throws ImageDecodeError on corrupt or truncated data.
ImageBuffer decode_png(const uint8_t* data, size_t size, ImageMode mode, uint64_t max_pixels);

// Encodes 1-4 channel, 8- or 16-bit pixels; compression_level is zlib's 0-9.
EncodedBytes encode_png(const uint8_t* pixels, int height, int width, int channels,
                        int bit_depth, int compression_level);

const char* libpng_version();

}  // namespace embervision
