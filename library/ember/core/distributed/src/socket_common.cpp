// Platform-independent parts of the socket layer, built on send_some/recv_some/poll.
#include <algorithm>
#include <thread>

#include "ember/distributed/errors.h"
#include "ember/distributed/socket.h"

namespace ember::distributed {

int remaining_ms(Deadline deadline, int cap_ms) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left < 0) return 0;
  return static_cast<int>(std::min<long long>(left, cap_ms));
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    handle_ = other.release();
  }
  return *this;
}

bool Socket::send_all(const void* data, size_t size, Deadline deadline) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    IoResult r = send_some(p, size);
    if (r.status == IoResult::kClosed) throw DistributedError("send", "connection closed by peer");
    if (r.status == IoResult::kDone) {
      p += r.bytes;
      size -= r.bytes;
    }
    // Checked whether or not bytes moved: a peer trickling one byte at a time must not
    // stretch the deadline.
    if (size == 0) break;
    if (Clock::now() >= deadline) return false;
    if (r.status == IoResult::kDone) continue;
    std::vector<PollItem> items{{handle_, false, true}};
    poll_sockets(items, remaining_ms(deadline, 1000));
  }
  return true;
}

bool Socket::recv_all(void* data, size_t size, Deadline deadline) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    IoResult r = recv_some(p, size);
    if (r.status == IoResult::kClosed) throw DistributedError("recv", "connection closed by peer");
    if (r.status == IoResult::kDone) {
      p += r.bytes;
      size -= r.bytes;
    }
    // Checked whether or not bytes moved: a peer trickling one byte at a time must not
    // stretch the deadline.
    if (size == 0) break;
    if (Clock::now() >= deadline) return false;
    if (r.status == IoResult::kDone) continue;
    std::vector<PollItem> items{{handle_, true, false}};
    poll_sockets(items, remaining_ms(deadline, 1000));
  }
  return true;
}

Socket Socket::accept(Deadline deadline) {
  while (true) {
    std::vector<PollItem> items{{handle_, true, false}};
    int left = remaining_ms(deadline, 1000);
    if (poll_sockets(items, left) > 0 && items[0].readable) {
      Socket s = accept_one();
      if (s.valid()) return s;
    }
    if (Clock::now() >= deadline) return Socket();
  }
}

Socket Socket::connect(const std::string& host, uint16_t port, Deadline deadline,
                       const std::string& what) {
  // Back off gently: the listener may start a moment later than we do.
  int backoff_ms = 10;
  std::string last_error;
  while (true) {
    Socket s = connect_once(host, port, remaining_ms(deadline, 2000), &last_error);
    if (s.valid() && s.connected_to_itself()) {
      // Nobody listens yet, and this socket would hold the port the server is about to bind
      // (a plain close would leave it in TIME_WAIT).
      s.close_abortive();
      last_error = "nothing listening (the connect met its own socket)";
    } else if (s.valid()) {
      return s;
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(backoff_ms, remaining_ms(deadline))));
    backoff_ms = std::min(backoff_ms * 2, 200);
  }
  throw TimeoutError(what, "could not connect to " + host + ":" + std::to_string(port) +
                               " before the timeout (" + last_error + ")");
}

}  // namespace ember::distributed
