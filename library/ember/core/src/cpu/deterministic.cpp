#include "ember/deterministic.h"

#include <atomic>

namespace ember {
namespace {
std::atomic<bool> g_deterministic{false};
}

void set_deterministic(bool on) { g_deterministic.store(on); }
bool is_deterministic() { return g_deterministic.load(); }

void alert_not_deterministic(const char* op) {
  if (is_deterministic()) throw NondeterministicError(op);
}

}  // namespace ember
