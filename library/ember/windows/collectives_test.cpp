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

#include "ember/distributed/errors.h"
#include "ember/distributed/process_group.h"
#include "ember/distributed/store.h"

using namespace ember::distributed;

static int failures = 0;
#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "CHECK failed line %d: %s\n", __LINE__, #cond);          \
      ++failures;                                                                   \
    }                                                                               \
  } while (0)

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

    // Small (direct) and large (ring) allreduce, sum of rank-dependent values.
    for (size_t count : {size_t(7), size_t(300000)}) {
      std::vector<double> v(count);
      for (size_t i = 0; i < count; ++i) v[i] = rank + 0.5 * double(i % 13);
      pg.allreduce(v.data(), count, DType::kFloat64, ReduceOp::kSum);
      bool ok = true;
      for (size_t i = 0; i < count; ++i) {
        double want = n * (n - 1) / 2.0 + n * 0.5 * double(i % 13);
        if (std::fabs(v[i] - want) > 1e-9) ok = false;
      }
      CHECK(ok);
    }
    std::vector<int32_t> mx(1000, rank * 10);
    mx[3] = -rank;
    pg.allreduce(mx.data(), mx.size(), DType::kInt32, ReduceOp::kMax);
    CHECK(mx[0] == (n - 1) * 10 && mx[3] == 0);
    std::vector<float> avg(100000, float(rank + 1));
    pg.allreduce(avg.data(), avg.size(), DType::kFloat32, ReduceOp::kAvg);
    CHECK(std::fabs(avg[99999] - (n + 1) / 2.0f) < 1e-5);

    std::vector<int64_t> b(2000000 / 8, rank == 1 % n ? 42 : 0);
    pg.broadcast(b.data(), b.size() * 8, 1 % n);
    CHECK(b.front() == 42 && b.back() == 42);

    std::vector<int32_t> mine(5, rank), all(5 * n, -1);
    pg.allgather(mine.data(), all.data(), mine.size() * 4);
    bool ok = true;
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < 5; ++i) ok = ok && all[r * 5 + i] == r;
    CHECK(ok);

    std::vector<float> rs_in(4 * n, float(rank)), rs_out(4, 0);
    pg.reduce_scatter(rs_in.data(), rs_out.data(), 4, DType::kFloat32, ReduceOp::kSum);
    CHECK(std::fabs(rs_out[0] - n * (n - 1) / 2.0f) < 1e-5);

    pg.barrier();
    if (n > 1) {
      int64_t token = rank == 0 ? 1234 : 0;
      if (rank == 0) pg.send(&token, sizeof(token), n - 1);
      if (rank == n - 1) {
        pg.recv(&token, sizeof(token), 0);
        CHECK(token == 1234);
      }
    }
    pg.barrier();
    pg.shutdown();
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
