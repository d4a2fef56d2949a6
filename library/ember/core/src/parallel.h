// ember's internal thread pool: a fixed set of std::threads that run chunked loops.
#pragma once

#include <cstdint>
#include <functional>

namespace ember {
namespace detail {

// Runs fn(chunk) for chunk in [0, nchunks) on the pool (the caller takes part too).
// Chunks are claimed dynamically, so which thread runs a chunk varies from call to call.
// Called from inside a pool task, it runs serially (no nested parallelism).
void parallel_chunks(int64_t nchunks, const std::function<void(int64_t)>& fn);

// Splits [begin, end) into at most get_num_threads() contiguous ranges of at least `grain`
// elements and runs fn(lo, hi) on each; runs inline when the range is small.
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

int num_threads();

}  // namespace detail
}  // namespace ember
