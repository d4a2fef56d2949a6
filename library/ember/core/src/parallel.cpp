#include "parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#if !defined(_WIN32)
#include <pthread.h>
#endif

#include "ember/kernels.h"

namespace ember {
namespace detail {
namespace {

thread_local bool t_inside_pool_task = false;

int default_threads() {
  if (const char* env = std::getenv("EMBER_NUM_THREADS")) {
    const long n = std::strtol(env, nullptr, 10);
    if (n > 0) return static_cast<int>(std::min<long>(n, kMaxThreads));
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(std::min<unsigned>(hw, kMaxThreads));
}

// One job at a time; workers sleep on a condition variable between jobs. A worker joins a
// job only while it is posted, and the caller waits just for the workers that joined: a
// worker that is slow to wake (a loaded machine) never delays the caller, it simply finds
// no job and goes back to sleep.
class ThreadPool {
 public:
  // Throws std::runtime_error when the system refuses a thread. The workers already started
  // are stopped and joined first: leaving them parked on wake_ made the member destructors
  // wait in pthread_cond_destroy forever.
  explicit ThreadPool(int nworkers) {
    try {
      workers_.reserve(static_cast<size_t>(nworkers));
      for (int i = 0; i < nworkers; ++i) workers_.emplace_back([this] { worker_loop(); });
    } catch (const std::system_error& e) {
      const size_t started = workers_.size();
      stop_and_join();
      throw std::runtime_error("could not start " + std::to_string(nworkers + 1) + " threads: the system refused " +
                               "thread " + std::to_string(started + 2) + " (" + e.what() + ")");
    } catch (...) {
      stop_and_join();
      throw;
    }
  }
  ~ThreadPool() { stop_and_join(); }
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void run(int64_t nchunks, const std::function<void(int64_t)>& fn) {
    std::lock_guard<std::mutex> serial(run_mu_);  // one job at a time across callers
    std::atomic<int64_t> next{0};
    std::exception_ptr error;
    std::mutex error_mu;
    std::function<void()> work = [&] {
      for (int64_t c = next.fetch_add(1); c < nchunks; c = next.fetch_add(1)) {
        try {
          fn(c);
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mu);
          if (!error) error = std::current_exception();
        }
      }
    };
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &work;
      ++generation_;
    }
    wake_.notify_all();
    t_inside_pool_task = true;
    work();
    t_inside_pool_task = false;
    {
      // Every chunk is claimed; wait for the workers still running theirs, then withdraw
      // the job under the same lock so that no late worker can pick it up.
      std::unique_lock<std::mutex> lock(mu_);
      done_.wait(lock, [&] { return active_ == 0; });
      job_ = nullptr;
    }
    if (error) std::rethrow_exception(error);
  }

 private:
  void stop_and_join() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  void worker_loop() {
    t_inside_pool_task = true;
    uint64_t seen = 0;
    for (;;) {
      std::function<void()>* job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return stop_ || (job_ != nullptr && generation_ != seen); });
        if (stop_) return;
        seen = generation_;
        job = job_;
        ++active_;
      }
      (*job)();
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (--active_ == 0) done_.notify_all();
      }
    }
  }

  std::vector<std::thread> workers_;
  std::mutex run_mu_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::function<void()>* job_ = nullptr;
  int active_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

std::mutex g_pool_mu;
std::atomic<int> g_num_threads{0};
// Heap-allocated and never destroyed: worker threads may still be parked at exit.
std::shared_ptr<ThreadPool>& g_pool = *new std::shared_ptr<ThreadPool>();

int requested_threads() {
  int n = g_num_threads.load();
  if (n == 0) {
    n = default_threads();
    int expected = 0;
    g_num_threads.compare_exchange_strong(expected, n);
    n = g_num_threads.load();
  }
  return n;
}

#if !defined(_WIN32)
// A forked child has none of the parent's worker threads: forget the pool there (leaking
// its memory) so the child builds a fresh one instead of waiting forever.
void forget_pool_in_child() {
  // Moving into a leaked holder drops the reference without running the destructor,
  // which would wait for threads that do not exist in this process.
  new std::shared_ptr<ThreadPool>(std::move(g_pool));
}
struct AtForkRegistration {
  AtForkRegistration() { pthread_atfork(nullptr, nullptr, forget_pool_in_child); }
} g_atfork_registration;
#endif

// A caller keeps its pool alive while it runs, even if set_num_threads swaps the global one.
// nullptr when the threads cannot be started (a default from EMBER_NUM_THREADS or the core
// count that this process may not create): the count drops to 1 and loops run on the
// caller, rather than every kernel failing. set_num_threads reports the failure instead.
std::shared_ptr<ThreadPool> pool_for(int nthreads) {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  if (!g_pool || g_pool->size() != nthreads) {
    try {
      g_pool = std::make_shared<ThreadPool>(nthreads - 1);
    } catch (const std::runtime_error&) {
      g_num_threads.store(1);
      return nullptr;
    }
  }
  return g_pool;
}

}  // namespace

int num_threads() { return requested_threads(); }

void parallel_chunks(int64_t nchunks, const std::function<void(int64_t)>& fn) {
  int nt = requested_threads();
  if (nchunks <= 1 || nt <= 1 || t_inside_pool_task) {
    for (int64_t c = 0; c < nchunks; ++c) fn(c);
    return;
  }
  if (const std::shared_ptr<ThreadPool> pool = pool_for(nt)) {
    pool->run(nchunks, fn);
    return;
  }
  for (int64_t c = 0; c < nchunks; ++c) fn(c);
}

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  int64_t total = end - begin;
  if (total <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t nchunks = std::min<int64_t>(requested_threads(), (total + grain - 1) / grain);
  if (nchunks <= 1 || t_inside_pool_task) {
    fn(begin, end);
    return;
  }
  int64_t step = (total + nchunks - 1) / nchunks;
  parallel_chunks(nchunks, [&](int64_t c) {
    int64_t lo = begin + c * step;
    int64_t hi = std::min(end, lo + step);
    if (lo < hi) fn(lo, hi);
  });
}

}  // namespace detail

void set_num_threads(int n) {
  if (n < 1 || n > kMaxThreads) {
    throw std::invalid_argument("set_num_threads: " + std::to_string(n) + " is outside 1.." +
                                std::to_string(kMaxThreads));
  }
  // Start the threads now, so that a failure is reported to the caller who asked for them
  // and the previous setting stays in force.
  std::lock_guard<std::mutex> lock(detail::g_pool_mu);
  if (n > 1 && (!detail::g_pool || detail::g_pool->size() != n)) {
    try {
      detail::g_pool = std::make_shared<detail::ThreadPool>(n - 1);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error("set_num_threads(" + std::to_string(n) + "): " + e.what() +
                               "; the thread count stays at " + std::to_string(detail::requested_threads()));
    }
  }
  detail::g_num_threads.store(n);
}

int get_num_threads() { return detail::requested_threads(); }

}  // namespace ember
