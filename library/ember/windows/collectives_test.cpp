// Native multi-process collectives test. Launch it once per rank:
//   collectives_test <store_port> <rank> <world_size>
// Rank 0 hosts the store on 127.0.0.1:<store_port>. Every rank checks allreduce (direct
// and ring), broadcast, allgather, reduce_scatter, barrier and send/recv against values
// it can compute locally, and prints "rank R: OK".
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "collectives_checks.h"
#include "ember/distributed/errors.h"
#include "ember/distributed/process_group.h"
#include "ember/distributed/store.h"

using namespace ember::distributed;

static int failures = 0;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s <store_port> <rank> <world_size>\n", argv[0]);
    return 2;
  }
  const uint16_t port = static_cast<uint16_t>(std::atoi(argv[1]));
  const int rank = std::atoi(argv[2]);
  const int n = std::atoi(argv[3]);
  try {
    std::unique_ptr<StoreServer> server;
    if (rank == 0) server = std::make_unique<StoreServer>("127.0.0.1", port);
    auto store = std::make_shared<StoreClient>("127.0.0.1", port, Milliseconds(30000));
    ProcessGroup pg(store, rank, n, Milliseconds(30000));

    ember_checks::run_collectives(pg, [&](const char* what) {
      std::fprintf(stderr, "rank %d: CHECK failed: %s\n", rank, what);
      ++failures;
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", rank, e.what());
    return 1;
  }
  if (failures) {
    std::printf("rank %d: %d FAILED\n", rank, failures);
    return 1;
  }
  std::printf("rank %d: OK\n", rank);
  return 0;
}
