// The collectives every native distributed test runs on one rank's ProcessGroup, checked
// against values the rank can compute itself: direct and ring allreduce (sum, max, avg),
// broadcast, allgather, reduce_scatter, barrier and send/recv. Used by collectives_test
// (one process per rank) and tests/cpp_api/process_group_check (ranks as threads).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "ember/distributed/process_group.h"

namespace ember_checks {

// Calls fail(what) for each failed check; returns after pg.shutdown().
template <typename Fail>
void run_collectives(ember::distributed::ProcessGroup& pg, Fail&& fail) {
  using ember::distributed::DType;
  using ember::distributed::ReduceOp;
  const int rank = pg.rank(), n = pg.world_size();
  // Small (direct) and large (ring) allreduce, sum of rank-dependent values.
  for (size_t count : {size_t(7), size_t(300000)}) {
    std::vector<double> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = rank + 0.5 * double(i % 13);
    pg.allreduce(v.data(), count, DType::kFloat64, ReduceOp::kSum);
    bool ok = true;
    for (size_t i = 0; i < count; ++i)
      ok = ok && std::fabs(v[i] - (n * (n - 1) / 2.0 + n * 0.5 * double(i % 13))) <= 1e-9;
    if (!ok) fail(count < 100 ? "allreduce sum (direct)" : "allreduce sum (ring)");
  }
  std::vector<int32_t> mx(1000, rank * 10);
  mx[3] = -rank;
  pg.allreduce(mx.data(), mx.size(), DType::kInt32, ReduceOp::kMax);
  if (!(mx[0] == (n - 1) * 10 && mx[3] == 0)) fail("allreduce max int32");
  std::vector<float> avg(100000, float(rank + 1));
  pg.allreduce(avg.data(), avg.size(), DType::kFloat32, ReduceOp::kAvg);
  if (!(std::fabs(avg[99999] - (n + 1) / 2.0f) < 1e-5f)) fail("allreduce avg float32");

  const int root = 1 % n;
  std::vector<int64_t> b(2000000 / 8, rank == root ? 42 : 0);
  pg.broadcast(b.data(), b.size() * sizeof(int64_t), root);
  if (!(b.front() == 42 && b.back() == 42)) fail("broadcast");

  std::vector<int32_t> mine(5, rank), all(5 * static_cast<size_t>(n), -1);
  pg.allgather(mine.data(), all.data(), mine.size() * sizeof(int32_t));
  bool ok = true;
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < 5; ++i) ok = ok && all[static_cast<size_t>(r * 5 + i)] == r;
  if (!ok) fail("allgather");

  std::vector<float> rs_in(4 * static_cast<size_t>(n), float(rank)), rs_out(4, 0);
  pg.reduce_scatter(rs_in.data(), rs_out.data(), 4, DType::kFloat32, ReduceOp::kSum);
  if (!(std::fabs(rs_out[0] - n * (n - 1) / 2.0f) < 1e-5f)) fail("reduce_scatter");

  pg.barrier();
  if (n > 1) {
    int64_t token = rank == 0 ? 1234 : 0;
    if (rank == 0) pg.send(&token, sizeof(token), n - 1);
    if (rank == n - 1) {
      pg.recv(&token, sizeof(token), 0);
      if (token != 1234) fail("send/recv");
    }
  }
  pg.barrier();
  pg.shutdown();
}

}  // namespace ember_checks
