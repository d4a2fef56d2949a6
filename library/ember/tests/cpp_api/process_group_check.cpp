// The TCP process group with its ranks as threads of one process, over loopback: a store
// server, one StoreClient and ProcessGroup per rank, then every collective (direct and ring
// allreduce, broadcast, allgather, reduce_scatter, barrier, send/recv) checked against
// values each rank can compute. One process, so ThreadSanitizer sees the store server, the
// clients and every rank's socket handling at once.
//
//   process_group_check [world_size]     (default 3)
//
// Prints "process_group_check: OK" and exits 0, or names the failed checks and exits 1.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives_checks.h"  // library/ember/windows
#include "ember/distributed/errors.h"
#include "ember/distributed/process_group.h"
#include "ember/distributed/store.h"

using namespace ember::distributed;

namespace {

std::atomic<int> failures{0};


void run_rank(uint16_t port, int rank, int n) {
  auto store = std::make_shared<StoreClient>("127.0.0.1", port, Milliseconds(30000));
  store->add("joined", 1);
  ProcessGroup pg(store, rank, n, Milliseconds(30000));

  ember_checks::run_collectives(pg, [rank](const char* what) {
    std::fprintf(stderr, "rank %d: FAIL %s\n", rank, what);
    ++failures;
  });
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 3;
  if (n < 1 || n > 16) {
    std::fprintf(stderr, "usage: %s [world_size 1..16]\n", argv[0]);
    return 2;
  }
  try {
    StoreServer server("127.0.0.1", 0);
    std::vector<std::thread> ranks;
    for (int r = 0; r < n; ++r)
      ranks.emplace_back([&server, r, n] {
        try {
          run_rank(server.port(), r, n);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "rank %d: error: %s\n", r, e.what());
          ++failures;
        }
      });
    for (auto& t : ranks) t.join();
    StoreClient probe("127.0.0.1", server.port(), Milliseconds(5000));
    if (probe.add("joined", 0) != n) {
      std::fprintf(stderr, "store saw %lld ranks join, expected %d\n",
                   static_cast<long long>(probe.add("joined", 0)), n);
      ++failures;
    }
    server.stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  if (failures != 0) {
    std::printf("process_group_check: %d FAILED\n", failures.load());
    return 1;
  }
  std::printf("process_group_check: OK (%d ranks)\n", n);
  return 0;
}
