// A process group over TCP: every pair of ranks holds a data connection (collective and
// point-to-point payloads) and a control connection (arrival notices, aborts, goodbyes).
// All waiting happens in one poll loop that also watches every control connection, so a
// dead peer is noticed at once and a missing one is named when the timeout expires.
// Each collective's timeout is a deadline, whatever the peers send. Every data message
// carries a header (operation, sequence number, byte count, dtype, reduce op) and every
// rank announces its call, so ranks that make different calls all raise, naming both calls,
// and the group is aborted (later calls say so) instead of reducing misaligned bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ember/distributed/errors.h"
#include "ember/distributed/export.h"
#include "ember/distributed/socket.h"
#include "ember/distributed/store.h"

namespace ember::distributed {

enum class DType : int { kFloat32 = 0, kFloat64 = 1, kInt32 = 2, kInt64 = 3 };
enum class ReduceOp : int { kSum = 0, kMax = 1, kMin = 2, kAvg = 3 };

EMBER_DIST_API size_t dtype_size(DType dtype);

// dst[i] = dst[i] (op) src[i]; kAvg accumulates like kSum (the caller divides).
EMBER_DIST_API void reduce_into(void* dst, const void* src, size_t count, DType dtype, ReduceOp op);
// data[i] /= divisor (integer division for integer types).
EMBER_DIST_API void divide(void* data, size_t count, DType dtype, int64_t divisor);

class EMBER_DIST_API ProcessGroup {
 public:
  // Rendezvous through `store` under `prefix`: publishes this rank's address, connects to
  // every peer. Throws TimeoutError naming the ranks that did not show up in time.
  ProcessGroup(std::shared_ptr<StoreClient> store, int rank, int world_size,
               Milliseconds timeout, const std::string& prefix = "pg");
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const noexcept { return rank_; }
  int world_size() const noexcept { return world_size_; }
  Milliseconds timeout() const noexcept { return timeout_; }
  void set_timeout(Milliseconds timeout) noexcept { timeout_ = timeout; }

  // In-place reduction of `count` elements across all ranks.
  void allreduce(void* data, size_t count, DType dtype, ReduceOp op);
  void broadcast(void* data, size_t bytes, int root);
  // out holds world_size blocks of `bytes`; block r comes from rank r.
  void allgather(const void* in, void* out, size_t bytes);
  // in holds world_size blocks of `count` elements; out gets the reduction of block `rank`.
  void reduce_scatter(const void* in, void* out, size_t count, DType dtype, ReduceOp op);
  void barrier();
  void send(const void* data, size_t bytes, int dst);
  void recv(void* data, size_t bytes, int src);

  // Collectives of at most this many bytes use direct exchange instead of the ring.
  void set_ring_threshold(size_t bytes) noexcept { ring_threshold_ = bytes; }

  bool aborted() const noexcept { return !abort_reason_.empty(); }
  const std::string& abort_reason() const noexcept { return abort_reason_; }
  // Tells every peer we are leaving on purpose, then closes the connections.
  void shutdown();

  struct Peer;
  struct Transfer;
  // What one rank called: every rank must make the same call for collective #seq. Peers
  // announce theirs on the control connection and stamp it on every data message.
  struct Call {
    uint32_t kind = 0;    // CallKind
    uint32_t dtype = 0;   // DType, or kNoDType for byte collectives
    uint32_t reduce = 0;  // ReduceOp, or kNoReduce
    uint32_t root = 0;    // broadcast root
    uint64_t count = 0;   // elements (reductions) or bytes (byte collectives)
    bool operator==(const Call& o) const {
      return kind == o.kind && dtype == o.dtype && reduce == o.reduce && root == o.root && count == o.count;
    }
  };

 private:
  void connect_mesh(StoreClient& store, const std::string& prefix, Deadline deadline);
  uint64_t begin_collective(const char* op, const Call& call, Deadline deadline);
  // begin_collective, body(deadline, seq), then wait until every peer announced the same
  // call, so a mismatch raises on every rank (a broadcast root receives no data to check).
  template <typename Body>
  void collective(const char* op, const Call& call, Body&& body);
  void check_call(const char* op, int peer, const Call& theirs) const;
  void check_usable(const char* op) const;
  template <typename Body>
  void guarded(const char* op, Body&& body);
  // Moves every transfer to completion, watching control connections; throws on a dead
  // peer, an abort notice or the deadline. With wait_arrivals, also waits until every
  // peer announced collective `seq` (the barrier).
  void progress(const char* op, std::vector<Transfer>& transfers, Deadline deadline,
                uint64_t seq, bool wait_arrivals);
  void read_control(const char* op, int peer);
  // Fills in the data header a message carries (send) or must carry (receive).
  void stamp(Transfer& t, uint64_t seq) const;
  // A received header differs from the expected one: throws, naming both ranks' calls.
  [[noreturn]] void bad_header(const char* op, int peer, const Transfer& t);
  void fail(const char* op, const DistributedError& error);
  void ring_reduce_scatter(const char* op, char* data, const std::vector<size_t>& offsets,
                           DType dtype, ReduceOp op_kind, Deadline deadline, uint64_t seq);
  void ring_allgather(const char* op, char* data, const std::vector<size_t>& offsets,
                      Deadline deadline, uint64_t seq);
  Deadline deadline() const { return Clock::now() + timeout_; }

  int rank_;
  int world_size_;
  Milliseconds timeout_;
  size_t ring_threshold_ = 256 * 1024;
  uint64_t seq_ = 0;
  // The operation whose data messages are in flight: collective kind and sequence number
  // (point-to-point messages count per peer and direction), and the collective's call.
  uint32_t cur_kind_ = 0;
  Call cur_call_;
  std::vector<uint64_t> sent_p2p_, received_p2p_;
  std::string abort_reason_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::mutex mutex_;
};

}  // namespace ember::distributed
