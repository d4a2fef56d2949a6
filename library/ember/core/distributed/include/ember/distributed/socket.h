// A thin, non-blocking TCP socket layer with one POSIX and one Winsock implementation.
// Everything above this header (store, process group) is platform independent.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ember/distributed/export.h"

namespace ember::distributed {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// Milliseconds left until `deadline`, clamped to [0, cap_ms].
EMBER_DIST_API int remaining_ms(Deadline deadline, int cap_ms = 1 << 30);

// Outcome of one non-blocking read or write.
struct IoResult {
  enum Status { kDone, kWouldBlock, kClosed };
  Status status;
  size_t bytes;
};

class EMBER_DIST_API Socket {
 public:
  using Handle = std::intptr_t;
  static constexpr Handle kInvalid = -1;

  Socket() = default;
  explicit Socket(Handle handle) : handle_(handle) {}
  Socket(Socket&& other) noexcept : handle_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  // A listening socket on host:port (port 0 picks a free one); host "" means any address.
  static Socket listen(const std::string& host, uint16_t port, int backlog = 128);
  // Connects to host:port, retrying refused connections until `deadline` (the peer
  // may not be listening yet). Throws TimeoutError naming `what` when it gives up.
  static Socket connect(const std::string& host, uint16_t port, Deadline deadline,
                        const std::string& what);

  // Accepts one connection; returns an invalid socket if none arrived by `deadline`.
  Socket accept(Deadline deadline);

  bool valid() const noexcept { return handle_ != kInvalid; }
  Handle handle() const noexcept { return handle_; }
  Handle release() noexcept {
    Handle h = handle_;
    handle_ = kInvalid;
    return h;
  }
  void close() noexcept;
  // Stops both directions so a peer blocked on us sees EOF at once.
  void shutdown() noexcept;

  uint16_t local_port() const;
  std::string local_address() const;
  // True when a connect() to a port nobody listens on met itself: TCP's simultaneous open
  // lets a client whose ephemeral port equals the target port connect to its own socket.
  bool connected_to_itself() const;
  // Closes with a reset instead of a FIN: nothing lingers in TIME_WAIT on the local port.
  void close_abortive() noexcept;
  void set_nonblocking();
  void set_nodelay();
  void set_buffer_sizes(int bytes);

  IoResult send_some(const void* data, size_t size);
  IoResult recv_some(void* data, size_t size);

  // Blocking-style helpers over the non-blocking socket, bounded by `deadline` (checked
  // after every attempt, so a peer that trickles bytes cannot extend it).
  // Return false on timeout; throw DistributedError if the peer closed the connection.
  bool send_all(const void* data, size_t size, Deadline deadline);
  bool recv_all(void* data, size_t size, Deadline deadline);

 private:
  // Platform parts: a non-blocking accept (invalid if nothing is pending) and a single
  // connection attempt that waits at most timeout_ms.
  Socket accept_one();
  static Socket connect_once(const std::string& host, uint16_t port, int timeout_ms,
                             std::string* error);

  Handle handle_ = kInvalid;
};

struct PollItem {
  Socket::Handle handle;
  bool want_read;
  bool want_write;
  bool readable = false;  // also set on hang-up and error, so the next read reports it
  bool writable = false;
};

// Waits up to timeout_ms for any item to become ready; returns the number ready.
EMBER_DIST_API int poll_sockets(std::vector<PollItem>& items, int timeout_ms);

// Starts the platform socket runtime once per process (WSAStartup on Windows).
EMBER_DIST_API void ensure_socket_runtime();

}  // namespace ember::distributed
