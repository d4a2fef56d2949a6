// Errors raised by the distributed runtime: every failure names the operation and,
// where known, the ranks that did not take part.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "ember/distributed/export.h"

namespace ember::distributed {

class EMBER_DIST_API DistributedError : public std::runtime_error {
 public:
  DistributedError(const std::string& op, const std::string& message,
                   std::vector<int> missing_ranks = {});
  const std::string& op() const noexcept { return op_; }
  const std::vector<int>& missing_ranks() const noexcept { return missing_ranks_; }

 private:
  std::string op_;
  std::vector<int> missing_ranks_;
};

// The operation could not complete before its deadline.
class EMBER_DIST_API TimeoutError : public DistributedError {
 public:
  using DistributedError::DistributedError;
};

// Renders "[1, 3]" for error messages.
EMBER_DIST_API std::string format_ranks(const std::vector<int>& ranks);

}  // namespace ember::distributed
