// Parser and validator for the .elm format. Every read is bounds-checked against the
// buffer and every size computation is overflow-checked, because the input is untrusted.
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>

#include <ember/checked.h>

#include "crc32.h"
#include "model.h"

namespace ember_lite {

namespace {

constexpr uint8_t kMagic[8] = {'E', 'M', 'B', 'L', 'I', 'T', 'E', 0};
constexpr uint64_t kHeaderSize = 128;
constexpr uint64_t kOpRecordSize = 96;
constexpr uint64_t kTensorRecordSize = 80;
constexpr uint64_t kAlignment = 64;
constexpr uint32_t kMaxOps = 1024;
constexpr uint32_t kMaxTensors = 4096;
constexpr uint32_t kDtypeFloat32 = 1;
constexpr int64_t kMaxNumel = std::numeric_limits<int32_t>::max();
constexpr uint64_t kMaxBufferBytes = EL_MAX_BUFFER_BYTES;
static_assert(kMaxBufferBytes <= std::numeric_limits<uint32_t>::max() / 2,
              "the limit must leave room in a 32-bit size_t");

// Little-endian reads, independent of the host's byte order.
uint32_t read_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t read_u64(const uint8_t* p) {
  return static_cast<uint64_t>(read_u32(p)) | (static_cast<uint64_t>(read_u32(p + 4)) << 32);
}
int32_t read_i32(const uint8_t* p) {
  const uint32_t u = read_u32(p);
  int32_t v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}
int64_t read_i64(const uint8_t* p) {
  const uint64_t u = read_u64(p);
  int64_t v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}
float read_f32(const uint8_t* p) {
  const uint32_t u = read_u32(p);
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

LoadResult fail(el_status status, const std::string& message) {
  return LoadResult{status, message};
}

std::string shape_str(const Shape& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

// Reads rank + dims (dims has kMaxRank slots); checks the rules for a shape.
bool read_shape(const uint8_t* dims_ptr, uint32_t rank, Shape& shape, std::string& why) {
  if (rank < 1 || rank > static_cast<uint32_t>(kMaxRank)) {
    why = "rank " + std::to_string(rank) + " is outside 1..6";
    return false;
  }
  shape.clear();
  int64_t count = 1;
  for (int i = 0; i < kMaxRank; ++i) {
    const int64_t dim = read_i64(dims_ptr + 8 * i);
    if (static_cast<uint32_t>(i) < rank) {
      if (dim < 1 || dim > kMaxNumel) {
        why = "dimension " + std::to_string(i) + " is " + std::to_string(dim);
        return false;
      }
      const std::optional<int64_t> product = ember::checked_mul(count, dim);
      if (!product || (count = *product) > kMaxNumel) {
        why = "more than 2^31-1 elements";
        return false;
      }
      shape.push_back(dim);
    } else if (dim != 0) {
      why = "unused dimension slot " + std::to_string(i) + " is not 0";
      return false;
    }
  }
  return true;
}

Shape drop_batch(const Shape& shape) { return Shape(shape.begin() + 1, shape.end()); }

// Product of the shape, or nullopt when it overflows int64.
std::optional<int64_t> checked_count(const Shape& shape) {
  return ember::checked_numel(shape.data(), static_cast<int>(shape.size()));
}

// nullopt when `count` floats fit the buffer limit, else the refusal (EL_ERR_TOO_LARGE) with
// the bytes needed and the limit named. count is nullopt when it overflowed int64 already.
std::optional<LoadResult> over_limit(const std::string& what, std::optional<int64_t> count) {
  const std::optional<int64_t> bytes = count ? ember::checked_mul<int64_t>(*count, 4) : std::nullopt;
  if (bytes && static_cast<uint64_t>(*bytes) <= kMaxBufferBytes) return std::nullopt;
  const std::string needed = bytes ? std::to_string(*bytes) + " bytes" : "more than 2^63 bytes";
  return fail(EL_ERR_TOO_LARGE, what + " needs " + needed + ", over the EL_MAX_BUFFER_BYTES limit of " +
                                    std::to_string(kMaxBufferBytes) + " (1 GiB, FORMAT.md \"Size limit\")");
}

// Checks one op against the current activation shape and computes its output shape.
LoadResult check_op(size_t index, Op& op, const Model& model, const Shape& in, Shape& out) {
  const std::string where = "op " + std::to_string(index) + ": ";
  auto tensor_shape = [&](int slot) -> const Shape* {
    const int32_t t = op.tensors[slot];
    return t < 0 ? nullptr : &model.tensors[static_cast<size_t>(t)].shape;
  };
  auto require_unused = [&](int first_tensor, int first_param) -> LoadResult {
    for (int s = first_tensor; s < 4; ++s) {
      if (op.tensors[s] != -1) {
        return fail(EL_ERR_MALFORMED, where + "tensor slot " + std::to_string(s) + " must be -1");
      }
    }
    for (int p = first_param; p < 8; ++p) {
      if (op.params[p] != 0) {
        return fail(EL_ERR_MALFORMED, where + "parameter " + std::to_string(p) + " must be 0");
      }
    }
    return LoadResult{};
  };
  auto shape_error = [&](const std::string& what) {
    return fail(EL_ERR_SHAPE, where + what + " (input shape " + shape_str(in) + ")");
  };

  LoadResult unused;
  switch (op.code) {
    case OpCode::kLinear: {
      if ((unused = require_unused(2, 0)).status != EL_OK) return unused;
      const Shape* w = tensor_shape(0);
      const Shape* b = tensor_shape(1);
      if (w == nullptr) return fail(EL_ERR_MALFORMED, where + "linear needs a weight tensor");
      if (w->size() != 2) return shape_error("linear weight must be 2-D, is " + shape_str(*w));
      if (in.size() < 2) return shape_error("linear input must have rank >= 2");
      if (in.back() != (*w)[0]) {
        return shape_error("linear weight " + shape_str(*w) + " does not take " +
                           std::to_string(in.back()) + " features");
      }
      if (b != nullptr && (b->size() != 1 || (*b)[0] != (*w)[1])) {
        return shape_error("linear bias " + shape_str(*b) + " does not match weight " +
                           shape_str(*w));
      }
      out = in;
      out.back() = (*w)[1];
      break;
    }
    case OpCode::kRelu:
    case OpCode::kSoftmax:
    case OpCode::kExp:
      if ((unused = require_unused(0, 0)).status != EL_OK) return unused;
      out = in;
      break;
    case OpCode::kConv2d: {
      if ((unused = require_unused(2, 2)).status != EL_OK) return unused;
      const Shape* w = tensor_shape(0);
      const Shape* b = tensor_shape(1);
      const int64_t stride = op.params[0];
      const int64_t padding = op.params[1];
      if (w == nullptr) return fail(EL_ERR_MALFORMED, where + "conv2d needs a weight tensor");
      if (stride < 1 || stride > 1024) {
        return fail(EL_ERR_MALFORMED, where + "conv2d stride " + std::to_string(stride));
      }
      if (padding < 0 || padding > 1024) {
        return fail(EL_ERR_MALFORMED, where + "conv2d padding " + std::to_string(padding));
      }
      if (in.size() != 4) return shape_error("conv2d input must be 4-D NCHW");
      if (w->size() != 4) return shape_error("conv2d weight must be 4-D, is " + shape_str(*w));
      if ((*w)[1] != in[1]) {
        return shape_error("conv2d weight " + shape_str(*w) + " expects " +
                           std::to_string((*w)[1]) + " input channels");
      }
      if (b != nullptr && (b->size() != 1 || (*b)[0] != (*w)[0])) {
        return shape_error("conv2d bias " + shape_str(*b) + " does not match weight " +
                           shape_str(*w));
      }
      // Every term is bounded (dims <= 2^31-1, padding <= 1024): no overflow here.
      const int64_t oh_span = in[2] + 2 * padding - (*w)[2];
      const int64_t ow_span = in[3] + 2 * padding - (*w)[3];
      if (oh_span < 0 || ow_span < 0) {
        return shape_error("conv2d kernel " + shape_str(*w) + " is larger than the padded input");
      }
      out = Shape{in[0], (*w)[0], oh_span / stride + 1, ow_span / stride + 1};
      // ember's conv2d lowers each image to a (c_in*kh*kw) x (out_h*out_w) im2col buffer;
      // on a 32-bit target its byte count used to wrap to a small allocation.
      const Shape col{(*w)[1] * (*w)[2] * (*w)[3], out[2], out[3]};  // weight numel bounds the first
      if (auto refused = over_limit(where + "conv2d's im2col buffer " + shape_str(col), checked_count(col))) {
        return *refused;
      }
      break;
    }
    case OpCode::kAdd:
    case OpCode::kMul: {
      if ((unused = require_unused(1, 0)).status != EL_OK) return unused;
      const Shape* c = tensor_shape(0);
      if (c == nullptr) return fail(EL_ERR_MALFORMED, where + "add/mul needs a constant tensor");
      if (*c != in && !(in.size() > 1 && *c == drop_batch(in))) {
        return shape_error("constant " + shape_str(*c) + " does not broadcast");
      }
      out = in;
      break;
    }
    case OpCode::kFlatten: {
      if ((unused = require_unused(0, 1)).status != EL_OK) return unused;
      const int64_t start = op.params[0];
      if (start < 1 || start >= static_cast<int64_t>(in.size())) {
        return shape_error("flatten start_dim " + std::to_string(start) + " is out of range");
      }
      out.assign(in.begin(), in.begin() + start);
      int64_t rest = 1;
      for (size_t i = static_cast<size_t>(start); i < in.size(); ++i) rest *= in[i];
      out.push_back(rest);
      break;
    }
    case OpCode::kReshape: {
      if ((unused = require_unused(0, 8)).status != EL_OK) return unused;
      const int64_t rank = op.params[0];
      if (rank < 1 || rank > kMaxRank) {
        return fail(EL_ERR_MALFORMED, where + "reshape rank " + std::to_string(rank));
      }
      for (int64_t p = rank + 1; p < 8; ++p) {
        if (op.params[p] != 0) {
          return fail(EL_ERR_MALFORMED, where + "reshape parameter " + std::to_string(p) +
                                            " must be 0");
        }
      }
      int inferred = -1;
      int64_t known = 1;
      out.clear();
      for (int64_t i = 0; i < rank; ++i) {
        const int64_t dim = op.params[1 + i];
        if (dim == -1 && inferred < 0) {
          inferred = static_cast<int>(i);
        } else if (dim < 1 || dim > kMaxNumel) {
          return shape_error("reshape dimension " + std::to_string(dim));
        } else {
          known *= dim;
          if (known > kMaxNumel) return shape_error("reshape has too many elements");
        }
        out.push_back(dim);
      }
      const int64_t total = numel(in);
      if (inferred >= 0) {
        if (total % known != 0) return shape_error("reshape cannot infer the -1 dimension");
        out[static_cast<size_t>(inferred)] = total / known;
      } else if (known != total) {
        return shape_error("reshape to " + shape_str(out) + " changes the element count");
      }
      break;
    }
    default:
      return fail(EL_ERR_BAD_OPCODE, where + "unknown opcode " +
                                         std::to_string(static_cast<uint32_t>(op.code)));
  }
  const std::optional<int64_t> count = checked_count(out);
  if (!count || *count > kMaxNumel) return shape_error("output has more than 2^31-1 elements");
  if (auto refused = over_limit(where + "output " + shape_str(out), count)) return *refused;
  return LoadResult{};
}

}  // namespace

int64_t numel(const Shape& shape) {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  return count;
}

LoadResult parse_model(const uint8_t* data, size_t size, Model& model) {
  if (data == nullptr) return fail(EL_ERR_INVALID_ARGUMENT, "model buffer is NULL");
  if (size < kHeaderSize) {
    return fail(EL_ERR_TRUNCATED, "file is " + std::to_string(size) +
                                      " bytes, shorter than the 128-byte header");
  }
  if (std::memcmp(data, kMagic, sizeof kMagic) != 0) {
    return fail(EL_ERR_BAD_MAGIC, "not an ember-lite model (magic is not \"EMBLITE\\0\")");
  }
  const uint32_t version = read_u32(data + 8);
  if (version != EL_FORMAT_VERSION) {
    return fail(EL_ERR_UNSUPPORTED_VERSION,
                "format version " + std::to_string(version) + " is not supported (this runtime reads version " +
                    std::to_string(EL_FORMAT_VERSION) + ")");
  }
  const uint32_t header_size = read_u32(data + 12);
  if (header_size != kHeaderSize) {
    return fail(EL_ERR_MALFORMED, "header_size is " + std::to_string(header_size) + ", expected 128");
  }
  const uint64_t file_size = read_u64(data + 16);
  if (file_size > size) {
    return fail(EL_ERR_TRUNCATED, "file is truncated: header says " + std::to_string(file_size) +
                                      " bytes, " + std::to_string(size) + " present");
  }
  if (file_size < size) {
    return fail(EL_ERR_MALFORMED, std::to_string(size - file_size) +
                                      " unexpected bytes after the end of the model");
  }
  if (file_size < kHeaderSize + 4) return fail(EL_ERR_MALFORMED, "file_size is too small");
  const uint32_t stored_crc = read_u32(data + file_size - 4);
  const uint32_t actual_crc = crc32(data, static_cast<size_t>(file_size - 4));
  if (stored_crc != actual_crc) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "checksum mismatch: stored CRC32 0x%08x, computed 0x%08x",
                  stored_crc, actual_crc);
    return fail(EL_ERR_CHECKSUM, buf);
  }

  // Header fields: every offset is fixed by the counts, so any disagreement is corruption
  // that happened before the CRC was computed (a buggy writer).
  const uint32_t num_ops = read_u32(data + 24);
  const uint32_t num_tensors = read_u32(data + 28);
  const uint64_t op_table_offset = read_u64(data + 32);
  const uint64_t tensor_table_offset = read_u64(data + 40);
  const uint64_t payload_offset = read_u64(data + 48);
  const uint64_t payload_size = read_u64(data + 56);
  const uint32_t input_rank = read_u32(data + 64);
  const uint32_t flags = read_u32(data + 68);
  const uint64_t reserved = read_u64(data + 120);
  if (num_ops < 1 || num_ops > kMaxOps) {
    return fail(EL_ERR_MALFORMED, "num_ops " + std::to_string(num_ops) + " is outside 1..1024");
  }
  if (num_tensors > kMaxTensors) {
    return fail(EL_ERR_MALFORMED, "num_tensors " + std::to_string(num_tensors) + " exceeds 4096");
  }
  if (flags != 0 || reserved != 0) return fail(EL_ERR_MALFORMED, "reserved header fields are not 0");
  const uint64_t expected_tensor_table = kHeaderSize + kOpRecordSize * num_ops;
  const uint64_t tables_end = expected_tensor_table + kTensorRecordSize * num_tensors;
  const uint64_t expected_payload = (tables_end + kAlignment - 1) / kAlignment * kAlignment;
  if (op_table_offset != kHeaderSize) {
    return fail(EL_ERR_MALFORMED, "op_table_offset is " + std::to_string(op_table_offset) + ", expected 128");
  }
  if (tensor_table_offset != expected_tensor_table) {
    return fail(EL_ERR_MALFORMED, "tensor_table_offset is " + std::to_string(tensor_table_offset) +
                                      ", expected " + std::to_string(expected_tensor_table));
  }
  if (payload_offset != expected_payload) {
    return fail(EL_ERR_MALFORMED, "payload_offset is " + std::to_string(payload_offset) +
                                      ", expected " + std::to_string(expected_payload));
  }
  if (payload_size % kAlignment != 0) {
    return fail(EL_ERR_MALFORMED, "payload_size is not a multiple of 64");
  }
  // payload_offset is bounded (< 1 MiB) by the limits above, so this sum cannot wrap
  // unless payload_size is absurd, which the comparison with file_size then catches.
  if (payload_size > file_size || payload_offset + payload_size + 4 != file_size) {
    return fail(EL_ERR_MALFORMED, "payload_offset + payload_size + 4 != file_size");
  }

  Model parsed;
  std::string why;
  if (!read_shape(data + 72, input_rank, parsed.input_shape, why)) {
    return fail(EL_ERR_SHAPE, "input shape: " + why);
  }
  if (auto refused = over_limit("input " + shape_str(parsed.input_shape), checked_count(parsed.input_shape))) {
    return *refused;
  }

  const uint8_t* payload = data + payload_offset;
  parsed.tensors.resize(num_tensors);
  for (uint32_t t = 0; t < num_tensors; ++t) {
    const uint8_t* rec = data + tensor_table_offset + kTensorRecordSize * t;
    const std::string where = "tensor " + std::to_string(t) + ": ";
    const uint32_t dtype = read_u32(rec);
    const uint32_t rank = read_u32(rec + 4);
    const uint64_t offset = read_u64(rec + 56);
    const uint64_t nbytes = read_u64(rec + 64);
    if (dtype != kDtypeFloat32) {
      return fail(EL_ERR_MALFORMED, where + "dtype " + std::to_string(dtype) + " is not float32 (1)");
    }
    if (read_u64(rec + 72) != 0) return fail(EL_ERR_MALFORMED, where + "reserved field is not 0");
    Tensor& tensor = parsed.tensors[t];
    if (!read_shape(rec + 8, rank, tensor.shape, why)) return fail(EL_ERR_MALFORMED, where + why);
    const uint64_t count = static_cast<uint64_t>(numel(tensor.shape));
    if (nbytes != 4 * count) {
      return fail(EL_ERR_MALFORMED, where + "nbytes " + std::to_string(nbytes) + " != 4 x " +
                                        std::to_string(count) + " elements");
    }
    if (offset % kAlignment != 0) return fail(EL_ERR_MALFORMED, where + "data_offset is not 64-aligned");
    if (offset > payload_size || nbytes > payload_size - offset) {
      return fail(EL_ERR_MALFORMED, where + "data lies outside the payload");
    }
    if (auto refused = over_limit(where + shape_str(tensor.shape), static_cast<int64_t>(count))) return *refused;
    tensor.data.resize(static_cast<size_t>(count));
    const uint8_t* src = payload + offset;
    for (uint64_t i = 0; i < count; ++i) tensor.data[i] = read_f32(src + 4 * i);
  }

  parsed.ops.resize(num_ops);
  Shape current = parsed.input_shape;
  for (uint32_t i = 0; i < num_ops; ++i) {
    const uint8_t* rec = data + op_table_offset + kOpRecordSize * i;
    const std::string where = "op " + std::to_string(i) + ": ";
    Op& op = parsed.ops[i];
    const uint32_t code = read_u32(rec);
    if (code < static_cast<uint32_t>(OpCode::kLinear) || code > static_cast<uint32_t>(OpCode::kReshape)) {
      return fail(EL_ERR_BAD_OPCODE, where + "unknown opcode " + std::to_string(code));
    }
    op.code = static_cast<OpCode>(code);
    if (read_u32(rec + 4) != 0 || read_u64(rec + 88) != 0) {
      return fail(EL_ERR_MALFORMED, where + "reserved fields are not 0");
    }
    for (int s = 0; s < 4; ++s) {
      op.tensors[s] = read_i32(rec + 8 + 4 * s);
      if (op.tensors[s] < -1 || op.tensors[s] >= static_cast<int64_t>(num_tensors)) {
        return fail(EL_ERR_MALFORMED, where + "tensor index " + std::to_string(op.tensors[s]) +
                                          " is out of range");
      }
    }
    for (int p = 0; p < 8; ++p) op.params[p] = read_i64(rec + 24 + 8 * p);
    Shape next;
    const LoadResult checked = check_op(i, op, parsed, current, next);
    if (checked.status != EL_OK) return checked;
    op.input_shape = current;
    op.output_shape = next;
    current = std::move(next);
  }
  parsed.output_shape = current;
  model = std::move(parsed);
  return LoadResult{};
}

}  // namespace ember_lite
