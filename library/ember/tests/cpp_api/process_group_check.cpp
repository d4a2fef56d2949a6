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
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ember/distributed/errors.h"
#include "ember/distributed/process_group.h"
#include "ember/distributed/store.h"

using namespace ember::distributed;

namespace {

std::atomic<int> failures{0};

void check(bool ok, int rank, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "rank %d: FAIL %s\n", rank, what);
  ++failures;
}

void run_rank(uint16_t port, int rank, int n) {
  auto store = std::make_shared<StoreClient>("127.0.0.1", port, Milliseconds(30000));
  store->add("joined", 1);
  ProcessGroup pg(store, rank, n, Milliseconds(30000));

  for (size_t count : {size_t(7), size_t(200000)}) {  // direct, then ring
    std::vector<double> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = rank + 0.5 * double(i % 13);
    pg.allreduce(v.data(), count, DType::kFloat64, ReduceOp::kSum);
    bool ok = true;
    for (size_t i = 0; i < count; ++i)
      ok = ok && std::fabs(v[i] - (n * (n - 1) / 2.0 + n * 0.5 * double(i % 13))) < 1e-9;
    check(ok, rank, count < 100 ? "allreduce sum (direct)" : "allreduce sum (ring)");
  }
  std::vector<int32_t> mx(1000, rank * 10);
  mx[3] = -rank;
  pg.allreduce(mx.data(), mx.size(), DType::kInt32, ReduceOp::kMax);
  check(mx[0] == (n - 1) * 10 && mx[3] == 0, rank, "allreduce max int32");

  const int root = 1 % n;
  std::vector<int64_t> b(100000, rank == root ? 42 : 0);
  pg.broadcast(b.data(), b.size() * sizeof(int64_t), root);
  check(b.front() == 42 && b.back() == 42, rank, "broadcast");

  std::vector<int32_t> mine(5, rank), all(5 * static_cast<size_t>(n), -1);
  pg.allgather(mine.data(), all.data(), mine.size() * sizeof(int32_t));
  bool ok = true;
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < 5; ++i) ok = ok && all[static_cast<size_t>(r * 5 + i)] == r;
  check(ok, rank, "allgather");

  std::vector<float> rs_in(4 * static_cast<size_t>(n), float(rank)), rs_out(4, 0);
  pg.reduce_scatter(rs_in.data(), rs_out.data(), 4, DType::kFloat32, ReduceOp::kSum);
  check(std::fabs(rs_out[0] - n * (n - 1) / 2.0f) < 1e-5f, rank, "reduce_scatter");

  pg.barrier();
  if (n > 1) {
    int64_t token = rank == 0 ? 1234 : 0;
    if (rank == 0) pg.send(&token, sizeof(token), n - 1);
    if (rank == n - 1) {
      pg.recv(&token, sizeof(token), 0);
      check(token == 1234, rank, "send/recv");
    }
  }
  pg.barrier();
  pg.shutdown();
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
