// POSIX implementation of the socket layer (Linux, macOS).
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "ember/distributed/errors.h"
#include "ember/distributed/socket.h"

namespace ember::distributed {
namespace {

int fd_of(Socket::Handle h) { return static_cast<int>(h); }

[[noreturn]] void throw_errno(const std::string& what) {
  throw DistributedError("socket", what + ": " + std::strerror(errno));
}

bool resolve_ipv4(const std::string& host, uint16_t port, sockaddr_in* out, std::string* error) {
  std::memset(out, 0, sizeof(*out));
  out->sin_family = AF_INET;
  out->sin_port = htons(port);
  if (host.empty()) {
    out->sin_addr.s_addr = htonl(INADDR_ANY);
    return true;
  }
  if (inet_pton(AF_INET, host.c_str(), &out->sin_addr) == 1) return true;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    if (error) *error = "cannot resolve " + host + ": " + gai_strerror(rc);
    return false;
  }
  out->sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return true;
}

void make_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) throw_errno("fcntl");
  fcntl(fd, F_SETFD, FD_CLOEXEC);
}

bool is_disconnect(int err) {
  return err == ECONNRESET || err == EPIPE || err == ENOTCONN || err == ECONNABORTED ||
         err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH;
}

}  // namespace

void ensure_socket_runtime() {}

void Socket::close() noexcept {
  if (handle_ != kInvalid) {
    ::close(fd_of(handle_));
    handle_ = kInvalid;
  }
}

void Socket::shutdown() noexcept {
  if (handle_ != kInvalid) ::shutdown(fd_of(handle_), SHUT_RDWR);
}

Socket Socket::listen(const std::string& host, uint16_t port, int backlog) {
  sockaddr_in addr;
  std::string error;
  if (!resolve_ipv4(host, port, &addr, &error)) throw DistributedError("listen", error);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw_errno("socket");
  Socket s(fd);
  int one = 1;
  // Lets a restarted server rebind a port still in TIME_WAIT; on Linux this never
  // allows two live listeners on one port.
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0)
    throw_errno("bind " + (host.empty() ? std::string("*") : host) + ":" + std::to_string(port));
  if (::listen(fd, backlog) < 0) throw_errno("listen");
  s.set_nonblocking();
  return s;
}

Socket Socket::accept_one() {
  int fd = ::accept(fd_of(handle_), nullptr, nullptr);
  if (fd < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
      return Socket();
    throw_errno("accept");
  }
  Socket s(fd);
  s.set_nonblocking();
  s.set_nodelay();
  return s;
}

Socket Socket::connect_once(const std::string& host, uint16_t port, int timeout_ms,
                            std::string* error) {
  sockaddr_in addr;
  if (!resolve_ipv4(host, port, &addr, error)) return Socket();
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw_errno("socket");
  Socket s(fd);
  s.set_nonblocking();
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  if (rc < 0 && errno != EINPROGRESS) {
    if (error) *error = std::strerror(errno);
    return Socket();
  }
  if (rc < 0) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) {
      if (error) *error = "connect timed out";
      return Socket();
    }
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      if (error) *error = std::strerror(err);
      return Socket();
    }
  }
  s.set_nodelay();
  return s;
}

uint16_t Socket::local_port() const {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd_of(handle_), reinterpret_cast<sockaddr*>(&addr), &len) < 0)
    throw_errno("getsockname");
  return ntohs(addr.sin_port);
}

std::string Socket::local_address() const {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd_of(handle_), reinterpret_cast<sockaddr*>(&addr), &len) < 0)
    throw_errno("getsockname");
  char buf[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &addr.sin_addr, buf, sizeof(buf));
  return buf;
}

void Socket::close_abortive() noexcept {
  if (handle_ == kInvalid) return;
  linger no_linger{};
  no_linger.l_onoff = 1;
  no_linger.l_linger = 0;
  setsockopt(fd_of(handle_), SOL_SOCKET, SO_LINGER, reinterpret_cast<const char*>(&no_linger), sizeof(no_linger));
  close();
}

bool Socket::connected_to_itself() const {
  sockaddr_in local{}, peer{};
  socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
  if (getsockname(fd_of(handle_), reinterpret_cast<sockaddr*>(&local), &local_len) < 0 ||
      getpeername(fd_of(handle_), reinterpret_cast<sockaddr*>(&peer), &peer_len) < 0)
    return false;
  return local.sin_port == peer.sin_port && local.sin_addr.s_addr == peer.sin_addr.s_addr;
}

void Socket::set_nonblocking() { make_nonblocking(fd_of(handle_)); }

void Socket::set_nodelay() {
  int one = 1;
  setsockopt(fd_of(handle_), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void Socket::set_buffer_sizes(int bytes) {
  setsockopt(fd_of(handle_), SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  setsockopt(fd_of(handle_), SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

IoResult Socket::send_some(const void* data, size_t size) {
  while (true) {
    // MSG_NOSIGNAL: a dead peer must surface as an error, not kill us with SIGPIPE.
    ssize_t n = ::send(fd_of(handle_), data, size, MSG_NOSIGNAL);
    if (n >= 0) return {IoResult::kDone, static_cast<size_t>(n)};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {IoResult::kWouldBlock, 0};
    if (is_disconnect(errno)) return {IoResult::kClosed, 0};
    throw_errno("send");
  }
}

IoResult Socket::recv_some(void* data, size_t size) {
  while (true) {
    ssize_t n = ::recv(fd_of(handle_), data, size, 0);
    if (n > 0) return {IoResult::kDone, static_cast<size_t>(n)};
    if (n == 0) return {IoResult::kClosed, 0};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {IoResult::kWouldBlock, 0};
    if (is_disconnect(errno)) return {IoResult::kClosed, 0};
    throw_errno("recv");
  }
}

int poll_sockets(std::vector<PollItem>& items, int timeout_ms) {
  std::vector<pollfd> fds(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    fds[i].fd = fd_of(items[i].handle);
    fds[i].events = static_cast<short>((items[i].want_read ? POLLIN : 0) |
                                       (items[i].want_write ? POLLOUT : 0));
    fds[i].revents = 0;
  }
  int rc;
  do {
    rc = ::poll(fds.data(), fds.size(), timeout_ms);
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) throw_errno("poll");
  for (size_t i = 0; i < items.size(); ++i) {
    short ev = fds[i].revents;
    items[i].readable = (ev & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) != 0;
    items[i].writable = (ev & (POLLOUT | POLLERR | POLLHUP)) != 0;
  }
  return rc;
}

}  // namespace ember::distributed
