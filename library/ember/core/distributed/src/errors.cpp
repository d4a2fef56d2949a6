#include "ember/distributed/errors.h"

#include <utility>

namespace ember::distributed {

DistributedError::DistributedError(const std::string& op, const std::string& message,
                                   std::vector<int> missing_ranks)
    : std::runtime_error(op.empty() ? message : op + ": " + message),
      op_(op),
      missing_ranks_(std::move(missing_ranks)) {}

std::string format_ranks(const std::vector<int>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(ranks[i]);
  }
  return out + "]";
}

}  // namespace ember::distributed
