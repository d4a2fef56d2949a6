// libjpeg's default error handler calls exit(); ours longjmps back instead. As with
// PNG, the functions that hold a setjmp point are C-style (nothing with a destructor
// alive in them) and the C++ owners live in their callers.

#include "jpeg_codec.h"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>
#include <jerror.h>

namespace embervision {
namespace {

struct JpegErrorState {
  jpeg_error_mgr pub;  // first member: libjpeg casts cinfo->err to this struct
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void on_jpeg_error(j_common_ptr cinfo) {
  JpegErrorState* err = reinterpret_cast<JpegErrorState*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Level -1 is a "corrupt data" warning; we refuse such data rather than return
// partly invented pixels. Trace messages (level >= 0) are ignored.
void on_jpeg_message(j_common_ptr cinfo, int msg_level) {
  if (msg_level < 0) on_jpeg_error(cinfo);
}

void install_error_handler(JpegErrorState* err) {
  jpeg_std_error(&err->pub);
  err->pub.error_exit = on_jpeg_error;
  err->pub.emit_message = on_jpeg_message;
  err->message[0] = '\0';
}

// Memory destination that grows a malloc'ed buffer.
struct MemoryDestination {
  jpeg_destination_mgr pub;
  uint8_t* buffer;
  size_t capacity;
  size_t size;  // final size, set by term_destination
};

void dest_init(j_compress_ptr cinfo) {
  MemoryDestination* dest = reinterpret_cast<MemoryDestination*>(cinfo->dest);
  dest->capacity = 65536;
  dest->buffer = static_cast<uint8_t*>(std::malloc(dest->capacity));
  if (!dest->buffer) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 0);
  dest->pub.next_output_byte = dest->buffer;
  dest->pub.free_in_buffer = dest->capacity;
}

boolean dest_grow(j_compress_ptr cinfo) {
  MemoryDestination* dest = reinterpret_cast<MemoryDestination*>(cinfo->dest);
  // libjpeg calls this only when the buffer is completely full.
  const size_t used = dest->capacity;
  uint8_t* grown = static_cast<uint8_t*>(std::realloc(dest->buffer, dest->capacity * 2));
  if (!grown) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 1);
  dest->buffer = grown;
  dest->capacity *= 2;
  dest->pub.next_output_byte = dest->buffer + used;
  dest->pub.free_in_buffer = dest->capacity - used;
  return TRUE;
}

void dest_term(j_compress_ptr cinfo) {
  MemoryDestination* dest = reinterpret_cast<MemoryDestination*>(cinfo->dest);
  dest->size = dest->capacity - dest->pub.free_in_buffer;
}

struct JpegHeader {
  JDIMENSION width;
  JDIMENSION height;
  int components;  // components of the output colour space
  int cmyk;        // output is CMYK and must be converted to RGB
  int inverted;    // Adobe CMYK: stored values are inverted (255 = no ink)
};

int read_jpeg_header(j_decompress_ptr cinfo, JpegErrorState* err, const uint8_t* data,
                     size_t size, JpegHeader* header) {
  if (setjmp(err->jump)) return 1;
  jpeg_mem_src(cinfo, const_cast<unsigned char*>(data), static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  header->cmyk = 0;
  header->inverted = 0;
  if (cinfo->num_components == 1) {
    cinfo->out_color_space = JCS_GRAYSCALE;
  } else if (cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK) {
    cinfo->out_color_space = JCS_CMYK;
    header->cmyk = 1;
    header->inverted = cinfo->saw_Adobe_marker ? 1 : 0;
  } else {
    cinfo->out_color_space = JCS_RGB;
  }
  header->width = cinfo->image_width;
  header->height = cinfo->image_height;
  return 0;
}

int start_jpeg_decompress(j_decompress_ptr cinfo, JpegErrorState* err, int* components) {
  if (setjmp(err->jump)) return 1;
  jpeg_start_decompress(cinfo);
  *components = cinfo->output_components;
  return 0;
}

int read_jpeg_rows(j_decompress_ptr cinfo, JpegErrorState* err, uint8_t* pixels, size_t row_bytes) {
  if (setjmp(err->jump)) return 1;
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = pixels + row_bytes * cinfo->output_scanline;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_decompress(cinfo);
  return 0;
}

int write_jpeg_all(j_compress_ptr cinfo, JpegErrorState* err, MemoryDestination* dest,
                   const uint8_t* pixels, int height, int width, int channels, int quality) {
  if (setjmp(err->jump)) return 1;
  cinfo->dest = &dest->pub;
  cinfo->image_width = static_cast<JDIMENSION>(width);
  cinfo->image_height = static_cast<JDIMENSION>(height);
  cinfo->input_components = channels;
  cinfo->in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(cinfo);
  jpeg_set_quality(cinfo, quality, TRUE);
  jpeg_start_compress(cinfo, TRUE);
  const size_t row_bytes = size_t(width) * channels;
  while (cinfo->next_scanline < cinfo->image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels) + row_bytes * cinfo->next_scanline;
    jpeg_write_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_compress(cinfo);
  return 0;
}

// jpeg_create_* can fail (out of memory, library mismatch) through error_exit too.
int create_decompress(j_decompress_ptr cinfo, JpegErrorState* err) {
  if (setjmp(err->jump)) return 1;
  jpeg_create_decompress(cinfo);
  return 0;
}

int create_compress(j_compress_ptr cinfo, JpegErrorState* err) {
  if (setjmp(err->jump)) return 1;
  jpeg_create_compress(cinfo);
  return 0;
}

struct DecompressGuard {
  jpeg_decompress_struct* cinfo;
  ~DecompressGuard() { jpeg_destroy_decompress(cinfo); }
};

struct CompressGuard {
  jpeg_compress_struct* cinfo;
  MemoryDestination* dest;
  ~CompressGuard() {
    jpeg_destroy_compress(cinfo);
    std::free(dest->buffer);
  }
};

// CMYK -> RGB as Pillow does: R = (255 - C) * (255 - K) / 255, rounded.
void cmyk_to_rgb(const uint8_t* src, uint8_t* dst, size_t count, bool inverted) {
  for (size_t i = 0; i < count; ++i, src += 4, dst += 3) {
    const unsigned k = inverted ? src[3] : 255u - src[3];
    for (int c = 0; c < 3; ++c) {
      const unsigned v = inverted ? src[c] : 255u - src[c];
      const unsigned t = v * k + 128;
      dst[c] = static_cast<uint8_t>((t + (t >> 8)) >> 8);
    }
  }
}

}  // namespace

bool looks_like_jpeg(const uint8_t* data, size_t size) {
  return size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
}

const char* libjpeg_version() {
#ifdef LIBJPEG_TURBO_VERSION
#define EMBERVISION_STR2(x) #x
#define EMBERVISION_STR(x) EMBERVISION_STR2(x)
  return "libjpeg-turbo " EMBERVISION_STR(LIBJPEG_TURBO_VERSION);
#else
  return "libjpeg";
#endif
}

ImageBuffer decode_jpeg(const uint8_t* data, size_t size, ImageMode mode, uint64_t max_pixels) {
  if (!looks_like_jpeg(data, size)) {
    throw ImageDecodeError("not a JPEG file (missing SOI marker)");
  }
  jpeg_decompress_struct cinfo;
  JpegErrorState err;
  std::memset(&cinfo, 0, sizeof(cinfo));
  install_error_handler(&err);
  cinfo.err = &err.pub;
  const int created = create_decompress(&cinfo, &err);
  DecompressGuard guard{&cinfo};
  if (created != 0) throw ImageDecodeError(std::string("cannot start JPEG decoder: ") + err.message);

  JpegHeader header{};
  if (read_jpeg_header(&cinfo, &err, data, size, &header) != 0) {
    throw ImageDecodeError(std::string("invalid JPEG: ") + err.message);
  }
  check_pixel_limit(header.width, header.height, max_pixels);
  int components = 0;
  if (start_jpeg_decompress(&cinfo, &err, &components) != 0) {
    throw ImageDecodeError(std::string("invalid JPEG: ") + err.message);
  }

  ImageBuffer raw;
  raw.height = static_cast<int>(cinfo.output_height);
  raw.width = static_cast<int>(cinfo.output_width);
  raw.channels = components;
  raw.bit_depth = 8;
  raw.pixels.resize(raw.row_bytes() * raw.height);
  if (read_jpeg_rows(&cinfo, &err, raw.pixels.data(), raw.row_bytes()) != 0) {
    throw ImageDecodeError(std::string("invalid JPEG: ") + err.message);
  }

  ImageBuffer image;
  if (header.cmyk) {
    image.height = raw.height;
    image.width = raw.width;
    image.channels = 3;
    image.pixels.resize(image.row_bytes() * image.height);
    cmyk_to_rgb(raw.pixels.data(), image.pixels.data(), size_t(raw.width) * raw.height,
                header.inverted != 0);
  } else {
    image = std::move(raw);
  }
  const int want_channels = channels_for_mode(mode);
  if (want_channels != 0 && want_channels != image.channels) {
    return convert_channels(image, want_channels);
  }
  return image;
}

EncodedBytes encode_jpeg(const uint8_t* pixels, int height, int width, int channels, int quality) {
  if (channels != 1 && channels != 3) throw ImageEncodeError("JPEG needs 1 (gray) or 3 (RGB) channels");
  if (height < 1 || width < 1 || height > 65500 || width > 65500) {
    throw ImageEncodeError("JPEG needs 1..65500 pixels per side");
  }
  if (quality < 1 || quality > 100) throw ImageEncodeError("quality must be in 1..100");
  jpeg_compress_struct cinfo;
  JpegErrorState err;
  MemoryDestination dest;
  std::memset(&cinfo, 0, sizeof(cinfo));
  std::memset(&dest, 0, sizeof(dest));
  dest.pub.init_destination = dest_init;
  dest.pub.empty_output_buffer = dest_grow;
  dest.pub.term_destination = dest_term;
  install_error_handler(&err);
  cinfo.err = &err.pub;
  const int created = create_compress(&cinfo, &err);
  CompressGuard guard{&cinfo, &dest};
  if (created != 0) throw ImageEncodeError(std::string("cannot start JPEG encoder: ") + err.message);
  if (write_jpeg_all(&cinfo, &err, &dest, pixels, height, width, channels, quality) != 0) {
    throw ImageEncodeError(std::string("JPEG encoding failed: ") + err.message);
  }
  return EncodedBytes(dest.buffer, dest.buffer + dest.size);
}

}  // namespace embervision
