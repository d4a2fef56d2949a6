// Executes a validated model with ember's CPU kernels. Every intermediate tensor comes
// from the caching allocator, so repeated inferences reuse the same blocks.
#include <cstring>
#include <exception>
#include <stdexcept>

#include <ember/checked.h>
#include <ember/kernels.h>

#include "caching_allocator.h"
#include "model.h"

namespace ember_lite {

namespace {

// One intermediate buffer from the global allocator, returned to it on scope exit.
class Buffer {
 public:
  Buffer() = default;
  // count floats; the loader has bounded every count by EL_MAX_BUFFER_BYTES, and the
  // checked conversion keeps a count that somehow is not from wrapping to a small block.
  explicit Buffer(int64_t count) {
    const std::optional<size_t> bytes = ember::checked_bytes(count, sizeof(float));
    data_ = bytes ? static_cast<float*>(global_allocator().allocate(*bytes)) : nullptr;
  }
  ~Buffer() { global_allocator().free(data_); }
  Buffer(Buffer&& other) noexcept : data_(other.data_) { other.data_ = nullptr; }
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      global_allocator().free(data_);
      data_ = other.data_;
      other.data_ = nullptr;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  float* get() const { return data_; }

 private:
  float* data_ = nullptr;
};

// Adds or multiplies a constant that has either the full activation shape or the shape
// of one sample (repeated over the batch).
template <typename Kernel>
void apply_constant(Kernel kernel, const float* x, const Tensor& constant, float* out,
                    int64_t total) {
  const int64_t block = static_cast<int64_t>(constant.data.size());
  for (int64_t start = 0; start < total; start += block) {
    kernel(x + start, constant.data.data(), out + start, block);
  }
}

}  // namespace

el_status run_model(const Model& model, const float* input, float* output, std::string& error) {
  try {
    const float* current = input;  // activation being read; input or owned.get()
    Buffer owned;
    for (const Op& op : model.ops) {
      const int64_t in_count = numel(op.input_shape);
      const int64_t out_count = numel(op.output_shape);
      if (op.code == OpCode::kFlatten || op.code == OpCode::kReshape) {
        continue;  // row-major data is unchanged; only the shape (already known) differs
      }
      Buffer next(out_count);
      if (next.get() == nullptr) {
        error = "out of memory allocating " + std::to_string(out_count) + " floats";
        return EL_ERR_OUT_OF_MEMORY;
      }
      const float* w = op.tensors[0] >= 0 ? model.tensors[op.tensors[0]].data.data() : nullptr;
      const float* b = op.tensors[1] >= 0 ? model.tensors[op.tensors[1]].data.data() : nullptr;
      switch (op.code) {
        case OpCode::kLinear: {
          const int64_t in_features = op.input_shape.back();
          const int64_t out_features = op.output_shape.back();
          const int64_t rows = in_count / in_features;
          ember::matmul(current, w, next.get(), rows, in_features, out_features);
          if (b != nullptr) {
            for (int64_t r = 0; r < rows; ++r) {
              float* row = next.get() + r * out_features;
              ember::add(row, b, row, out_features);
            }
          }
          break;
        }
        case OpCode::kRelu:
          ember::relu(current, next.get(), in_count);
          break;
        case OpCode::kExp:
          ember::exp(current, next.get(), in_count);
          break;
        case OpCode::kSoftmax: {
          const int64_t cols = op.input_shape.back();
          ember::softmax(current, next.get(), in_count / cols, cols);
          break;
        }
        case OpCode::kConv2d: {
          const Shape& in = op.input_shape;
          const Shape& weight = model.tensors[op.tensors[0]].shape;
          ember::conv2d(current, w, b, next.get(), in[0], in[1], in[2], in[3], weight[0],
                        weight[2], weight[3], op.params[0], op.params[1]);
          break;
        }
        case OpCode::kAdd:
          apply_constant(
              [](const float* x, const float* c, float* o, int64_t n) { ember::add(x, c, o, n); },
              current, model.tensors[op.tensors[0]], next.get(), in_count);
          break;
        case OpCode::kMul:
          apply_constant(
              [](const float* x, const float* c, float* o, int64_t n) { ember::mul(x, c, o, n); },
              current, model.tensors[op.tensors[0]], next.get(), in_count);
          break;
        default:
          error = "internal error: opcode " + std::to_string(static_cast<uint32_t>(op.code)) +
                  " passed validation but has no kernel";
          return EL_ERR_INTERNAL;
      }
      owned = std::move(next);  // frees the previous intermediate back to the cache
      current = owned.get();
    }
    std::memcpy(output, current, sizeof(float) * static_cast<size_t>(numel(model.output_shape)));
    return EL_OK;
  } catch (const std::bad_alloc&) {
    error = "out of memory in a kernel";
    return EL_ERR_OUT_OF_MEMORY;
  } catch (const std::length_error& exc) {
    error = std::string("kernel scratch space: ") + exc.what();
    return EL_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& exc) {
    error = std::string("kernel error: ") + exc.what();
    return EL_ERR_INTERNAL;
  }
}

}  // namespace ember_lite
