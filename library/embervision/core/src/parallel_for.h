// Splits [0, n) over a few threads; used for batches of independent image planes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace embervision {

// Runs fn(begin, end) over [0, n). Stays on the calling thread when the job is small
// (`work` is a rough element count), since starting threads costs more than it saves.
// An exception thrown by fn on any thread is rethrown here after all threads join.
template <typename Fn>
void parallel_for(size_t n, size_t work, Fn fn) {
  constexpr size_t kMinWorkPerThread = 1 << 16;
  size_t threads = std::max<size_t>(1, std::thread::hardware_concurrency());
  threads = std::min(threads, n);
  threads = std::min(threads, std::max<size_t>(1, work / kMinWorkPerThread));
  if (threads <= 1) {
    fn(size_t(0), n);
    return;
  }
  const size_t chunk = (n + threads - 1) / threads;
  std::vector<std::exception_ptr> errors(threads);
  auto run = [&](size_t t) {
    const size_t begin = std::min(n, t * chunk);
    const size_t end = std::min(n, begin + chunk);
    try {
      if (begin < end) fn(begin, end);
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(run, t);
  run(0);
  for (auto& thread : pool) thread.join();
  for (auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

}  // namespace embervision
