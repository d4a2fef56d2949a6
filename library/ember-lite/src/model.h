// In-memory form of a validated ember-lite model (see FORMAT.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ember_lite.h"

namespace ember_lite {

constexpr int kMaxRank = 6;

enum class OpCode : uint32_t {
  kLinear = 1,
  kRelu = 2,
  kSoftmax = 3,
  kConv2d = 4,
  kAdd = 5,
  kMul = 6,
  kExp = 7,
  kFlatten = 8,
  kReshape = 9,
};

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& shape);

struct Tensor {
  Shape shape;
  std::vector<float> data;
};

struct Op {
  OpCode code;
  int32_t tensors[4];
  int64_t params[8];
  Shape input_shape;   // activation shape before the op (validated)
  Shape output_shape;  // and after it
};

struct Model {
  Shape input_shape;
  Shape output_shape;
  std::vector<Tensor> tensors;
  std::vector<Op> ops;
};

// Result of a load: status EL_OK and a model, or an error code and message.
struct LoadResult {
  el_status status = EL_OK;
  std::string message;
};

// Parse and validate every rule of FORMAT.md; fills model only on success.
LoadResult parse_model(const uint8_t* data, size_t size, Model& model);

// Run a validated model. input/output hold numel(input_shape)/numel(output_shape) floats.
el_status run_model(const Model& model, const float* input, float* output, std::string& error);

}  // namespace ember_lite
