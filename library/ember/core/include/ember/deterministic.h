// Global switch for deterministic algorithms (like torch.set_deterministic).
#pragma once

#include <stdexcept>
#include <string>

#include "ember/export.h"

namespace ember {

EMBER_API void set_deterministic(bool on);
EMBER_API bool is_deterministic();

// Raised by an op that has no deterministic implementation while determinism is on.
class EMBER_API NondeterministicError : public std::runtime_error {
 public:
  explicit NondeterministicError(const std::string& op)
      : std::runtime_error(op + " does not have a deterministic implementation, but "
                                "set_deterministic(True) was called") {}
};

// Throws NondeterministicError naming `op` when determinism is on.
EMBER_API void alert_not_deterministic(const char* op);

}  // namespace ember
