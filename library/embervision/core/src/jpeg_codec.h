// JPEG decoding and encoding on libjpeg(-turbo).
#pragma once

#include "image_buffer.h"

namespace embervision {

bool looks_like_jpeg(const uint8_t* data, size_t size);

// Decodes baseline and progressive JPEG to 8-bit gray or RGB (CMYK/YCCK converted to
// RGB). libjpeg's "corrupt data" warnings, including premature end of data, are
// treated as errors: a damaged file raises ImageDecodeError instead of returning
// grey-filled pixels.
ImageBuffer decode_jpeg(const uint8_t* data, size_t size, ImageMode mode, uint64_t max_pixels);

// Encodes 1-channel (gray) or 3-channel (RGB) 8-bit pixels at quality 1-100.
EncodedBytes encode_jpeg(const uint8_t* pixels, int height, int width, int channels, int quality);

const char* libjpeg_version();

}  // namespace embervision
