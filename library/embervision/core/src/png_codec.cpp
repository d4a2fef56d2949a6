// libpng reports errors by longjmp. Every function below that calls libpng and
// holds a setjmp point is written C-style: no object with a destructor is alive in
// it, and the callbacks never throw, so the jump unwinds nothing that C++ owns.
// C++ owners (vectors, RAII guards) live only in the callers, above the setjmp frame.

#include "png_codec.h"

#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace embervision {
namespace {

constexpr size_t kMessageSize = 256;

// Plain state shared with libpng callbacks (trivially destructible).
struct PngIo {
  const uint8_t* data;
  size_t size;
  size_t pos;
  uint8_t* out;  // encoder output, malloc'ed and grown with realloc
  size_t out_size;
  size_t out_capacity;
  char message[kMessageSize];
};

void store_message(PngIo* io, const char* prefix, const char* msg) {
  std::snprintf(io->message, kMessageSize, "%s%s", prefix, msg ? msg : "unknown error");
}

void on_png_error(png_structp png, png_const_charp msg) {
  store_message(static_cast<PngIo*>(png_get_error_ptr(png)), "", msg);
  png_longjmp(png, 1);
}

// Warnings (bad ancillary CRCs, unknown chunks) do not stop decoding.
void on_png_warning(png_structp, png_const_charp) {}

void read_from_memory(png_structp png, png_bytep out, size_t length) {
  PngIo* io = static_cast<PngIo*>(png_get_io_ptr(png));
  if (length > io->size - io->pos) {
    png_error(png, "PNG data is truncated (unexpected end of data)");
  }
  std::memcpy(out, io->data + io->pos, length);
  io->pos += length;
}

void write_to_memory(png_structp png, png_bytep data, size_t length) {
  PngIo* io = static_cast<PngIo*>(png_get_io_ptr(png));
  if (io->out_size + length > io->out_capacity) {
    size_t capacity = io->out_capacity ? io->out_capacity : 4096;
    while (capacity < io->out_size + length) capacity *= 2;
    uint8_t* grown = static_cast<uint8_t*>(std::realloc(io->out, capacity));
    if (!grown) png_error(png, "out of memory while encoding PNG");
    io->out = grown;
    io->out_capacity = capacity;
  }
  std::memcpy(io->out + io->out_size, data, length);
  io->out_size += length;
}

void flush_nothing(png_structp) {}

struct PngHeader {
  png_uint_32 width;
  png_uint_32 height;
  int channels;   // after the transforms set up by setup_png_transforms
  int bit_depth;  // 8 or 16 after transforms
};

// Reads the chunks up to the image data. Returns 0 on success, 1 when libpng
// reported an error (message in io).
int read_png_info(png_structp png, png_infop info, png_uint_32* width, png_uint_32* height) {
  if (setjmp(png_jmpbuf(png))) return 1;
  png_read_info(png, info);
  *width = png_get_image_width(png, info);
  *height = png_get_image_height(png, info);
  return 0;
}

// Installs the expansion transforms. Runs only after the caller has checked the
// image size: png_read_update_info allocates (and zeroes) row buffers.
int setup_png_transforms(png_structp png, png_infop info, int want_alpha, PngHeader* header) {
  if (setjmp(png_jmpbuf(png))) return 1;
  const int color_type = png_get_color_type(png, info);
  const int bit_depth = png_get_bit_depth(png, info);
  const int has_trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
  if (color_type == PNG_COLOR_TYPE_PALETTE) {
    png_set_palette_to_rgb(png);
    if (has_trns) png_set_tRNS_to_alpha(png);
  } else {
    if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    // A gray/RGB tRNS colour key becomes alpha only when the caller asked for alpha,
    // as Pillow's convert("LA"/"RGBA") does.
    if (has_trns && want_alpha) png_set_tRNS_to_alpha(png);
  }
  if (bit_depth == 16) png_set_swap(png);  // PNG is big-endian; numpy wants host order
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  header->width = png_get_image_width(png, info);
  header->height = png_get_image_height(png, info);
  header->channels = png_get_channels(png, info);
  header->bit_depth = png_get_bit_depth(png, info);
  return 0;
}

int read_png_rows(png_structp png, png_infop info, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return 1;
  png_read_image(png, rows);
  png_read_end(png, info);
  return 0;
}

int write_png_all(png_structp png, png_infop info, png_bytepp rows, png_uint_32 width,
                  png_uint_32 height, int color_type, int bit_depth, int level) {
  if (setjmp(png_jmpbuf(png))) return 1;
  png_set_IHDR(png, info, width, height, bit_depth, color_type, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(png, level);
  png_write_info(png, info);
  if (bit_depth == 16) png_set_swap(png);
  png_write_image(png, rows);
  png_write_end(png, info);
  return 0;
}

// Owns the libpng structs for the C++ callers; destroys them on every exit path.
struct PngReadGuard {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngReadGuard() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

struct PngWriteGuard {
  png_structp png = nullptr;
  png_infop info = nullptr;
  PngIo* io = nullptr;
  ~PngWriteGuard() {
    png_destroy_write_struct(&png, info ? &info : nullptr);
    if (io) std::free(io->out);
  }
};

}  // namespace

bool looks_like_png(const uint8_t* data, size_t size) {
  return size >= 8 && png_sig_cmp(const_cast<png_bytep>(data), 0, 8) == 0;
}

const char* libpng_version() { return PNG_LIBPNG_VER_STRING; }

ImageBuffer decode_png(const uint8_t* data, size_t size, ImageMode mode, uint64_t max_pixels) {
  if (!looks_like_png(data, size)) {
    throw ImageDecodeError("not a PNG file (bad signature)");
  }
  PngIo io{};
  io.data = data;
  io.size = size;
  PngReadGuard guard;
  guard.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &io, on_png_error, on_png_warning);
  if (!guard.png) throw std::bad_alloc();
  guard.info = png_create_info_struct(guard.png);
  if (!guard.info) throw std::bad_alloc();
  png_set_read_fn(guard.png, &io, read_from_memory);
  // Decoding must not stop at libpng's default user limits (1e6 px per side); the
  // caller's max_pixels is the real bound.
  png_set_user_limits(guard.png, 0x7fffffff, 0x7fffffff);
  // libpng 1.6 treats "not enough image data" and similar as benign on read and
  // zero-fills the rest of the image; a truncated or damaged stream must fail instead.
  png_set_benign_errors(guard.png, 0);

  const int want_channels = channels_for_mode(mode);
  const int want_alpha = want_channels == 2 || want_channels == 4;
  png_uint_32 width = 0, height = 0;
  if (read_png_info(guard.png, guard.info, &width, &height) != 0) {
    throw ImageDecodeError(std::string("invalid PNG: ") + io.message);
  }
  check_pixel_limit(width, height, max_pixels);
  PngHeader header{};
  if (setup_png_transforms(guard.png, guard.info, want_alpha, &header) != 0) {
    throw ImageDecodeError(std::string("invalid PNG: ") + io.message);
  }

  ImageBuffer image;
  image.height = static_cast<int>(header.height);
  image.width = static_cast<int>(header.width);
  image.channels = header.channels;
  image.bit_depth = header.bit_depth;
  const size_t row_bytes = image.row_bytes();
  if (png_get_rowbytes(guard.png, guard.info) != row_bytes) {
    throw ImageDecodeError("invalid PNG: unexpected row size after expansion");
  }
  image.pixels.resize(row_bytes * image.height);
  std::vector<png_bytep> rows(image.height);
  for (int y = 0; y < image.height; ++y) rows[y] = image.pixels.data() + row_bytes * y;
  if (read_png_rows(guard.png, guard.info, rows.data()) != 0) {
    throw ImageDecodeError(std::string("invalid PNG: ") + io.message);
  }
  if (want_channels != 0 && want_channels != image.channels) {
    return convert_channels(image, want_channels);
  }
  return image;
}

EncodedBytes encode_png(const uint8_t* pixels, int height, int width, int channels,
                        int bit_depth, int compression_level) {
  static const int color_types[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                                    PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA};
  if (channels < 1 || channels > 4) throw ImageEncodeError("PNG needs 1 to 4 channels");
  if (bit_depth != 8 && bit_depth != 16) throw ImageEncodeError("PNG needs 8- or 16-bit samples");
  if (height < 1 || width < 1) throw ImageEncodeError("PNG needs a non-empty image");
  if (compression_level < 0 || compression_level > 9) {
    throw ImageEncodeError("compression_level must be in 0..9");
  }
  PngIo io{};
  PngWriteGuard guard;
  guard.io = &io;
  guard.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &io, on_png_error, on_png_warning);
  if (!guard.png) throw std::bad_alloc();
  guard.info = png_create_info_struct(guard.png);
  if (!guard.info) throw std::bad_alloc();
  png_set_write_fn(guard.png, &io, write_to_memory, flush_nothing);

  const size_t row_bytes = size_t(width) * channels * (bit_depth / 8);
  std::vector<png_bytep> rows(height);
  for (int y = 0; y < height; ++y) rows[y] = const_cast<uint8_t*>(pixels) + row_bytes * y;
  if (write_png_all(guard.png, guard.info, rows.data(), width, height, color_types[channels - 1],
                    bit_depth, compression_level) != 0) {
    throw ImageEncodeError(std::string("PNG encoding failed: ") + io.message);
  }
  return EncodedBytes(io.out, io.out + io.out_size);
}

}  // namespace embervision
