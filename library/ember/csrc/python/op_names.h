// The op names the Python layer uses, mapped to libember's enums.
#pragma once

#include <stdexcept>
#include <string>

#include "ember/kernels.h"

namespace ember_python {

inline ember::BinaryOp binary_op(const std::string& name) {
  if (name == "add") return ember::BinaryOp::Add;
  if (name == "sub") return ember::BinaryOp::Sub;
  if (name == "mul") return ember::BinaryOp::Mul;
  if (name == "div") return ember::BinaryOp::Div;
  throw std::invalid_argument("unknown binary op: " + name);
}

inline ember::UnaryOp unary_op(const std::string& name) {
  if (name == "relu") return ember::UnaryOp::Relu;
  if (name == "exp") return ember::UnaryOp::Exp;
  if (name == "log") return ember::UnaryOp::Log;
  if (name == "tanh") return ember::UnaryOp::Tanh;
  if (name == "sigmoid") return ember::UnaryOp::Sigmoid;
  throw std::invalid_argument("unknown unary op: " + name);
}

}  // namespace ember_python
