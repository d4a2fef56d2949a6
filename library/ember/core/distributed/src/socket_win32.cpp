// Winsock implementation of the socket layer (Windows, built with mingw-w64 or MSVC).
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <winsock2.h>
#include <ws2tcpip.h>

#include <cstring>
#include <mutex>

#include "ember/distributed/errors.h"
#include "ember/distributed/socket.h"

namespace ember::distributed {
namespace {

SOCKET sock_of(Socket::Handle h) { return static_cast<SOCKET>(h); }

std::string wsa_message(int err) {
  char buf[256] = {0};
  DWORD n = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, nullptr,
                           static_cast<DWORD>(err), 0, buf, sizeof(buf), nullptr);
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = 0;
  return "WSA error " + std::to_string(err) + (n ? " (" + std::string(buf) + ")" : "");
}

[[noreturn]] void throw_wsa(const std::string& what) {
  throw DistributedError("socket", what + ": " + wsa_message(WSAGetLastError()));
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
    if (error) *error = "cannot resolve " + host + ": " + wsa_message(rc);
    return false;
  }
  out->sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return true;
}

bool is_disconnect(int err) {
  return err == WSAECONNRESET || err == WSAECONNABORTED || err == WSAENOTCONN ||
         err == WSAESHUTDOWN || err == WSAETIMEDOUT || err == WSAENETRESET ||
         err == WSAEHOSTUNREACH || err == WSAENETUNREACH;
}

}  // namespace

void ensure_socket_runtime() {
  static std::once_flag once;
  std::call_once(once, [] {
    WSADATA data;
    if (WSAStartup(MAKEWORD(2, 2), &data) != 0)
      throw DistributedError("socket", "WSAStartup failed");
  });
}

void Socket::close() noexcept {
  if (handle_ != kInvalid) {
    ::closesocket(sock_of(handle_));
    handle_ = kInvalid;
  }
}

void Socket::shutdown() noexcept {
  if (handle_ != kInvalid) ::shutdown(sock_of(handle_), SD_BOTH);
}

Socket Socket::listen(const std::string& host, uint16_t port, int backlog) {
  ensure_socket_runtime();
  sockaddr_in addr;
  std::string error;
  if (!resolve_ipv4(host, port, &addr, &error)) throw DistributedError("listen", error);
  SOCKET s = ::socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
  if (s == INVALID_SOCKET) throw_wsa("socket");
  Socket sock(static_cast<Handle>(s));
  // SO_REUSEADDR on Windows would let a second process steal a bound port; exclusive
  // use is what the store's "first agent binds, the others connect" logic relies on.
  BOOL one = TRUE;
  setsockopt(s, SOL_SOCKET, SO_EXCLUSIVEADDRUSE, reinterpret_cast<const char*>(&one), sizeof(one));
  if (::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == SOCKET_ERROR)
    throw_wsa("bind " + (host.empty() ? std::string("*") : host) + ":" + std::to_string(port));
  if (::listen(s, backlog) == SOCKET_ERROR) throw_wsa("listen");
  sock.set_nonblocking();
  return sock;
}

Socket Socket::accept_one() {
  SOCKET s = ::accept(sock_of(handle_), nullptr, nullptr);
  if (s == INVALID_SOCKET) {
    int err = WSAGetLastError();
    if (err == WSAEWOULDBLOCK || err == WSAEINTR || err == WSAECONNRESET) return Socket();
    throw_wsa("accept");
  }
  Socket sock(static_cast<Handle>(s));
  sock.set_nonblocking();
  sock.set_nodelay();
  return sock;
}

Socket Socket::connect_once(const std::string& host, uint16_t port, int timeout_ms,
                            std::string* error) {
  ensure_socket_runtime();
  sockaddr_in addr;
  if (!resolve_ipv4(host, port, &addr, error)) return Socket();
  SOCKET s = ::socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
  if (s == INVALID_SOCKET) throw_wsa("socket");
  Socket sock(static_cast<Handle>(s));
  sock.set_nonblocking();
  if (::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == SOCKET_ERROR) {
    int err = WSAGetLastError();
    if (err != WSAEWOULDBLOCK) {
      if (error) *error = wsa_message(err);
      return Socket();
    }
    // select() rather than WSAPoll: older WSAPoll never reports a refused connect.
    fd_set wr, ex;
    FD_ZERO(&wr);
    FD_ZERO(&ex);
    FD_SET(s, &wr);
    FD_SET(s, &ex);
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    int rc = ::select(0, nullptr, &wr, &ex, &tv);
    if (rc <= 0 || FD_ISSET(s, &ex)) {
      int so_error = 0;
      int len = sizeof(so_error);
      getsockopt(s, SOL_SOCKET, SO_ERROR, reinterpret_cast<char*>(&so_error), &len);
      if (error) *error = rc <= 0 ? std::string("connect timed out") : wsa_message(so_error);
      return Socket();
    }
  }
  sock.set_nodelay();
  return sock;
}

uint16_t Socket::local_port() const {
  sockaddr_in addr{};
  int len = sizeof(addr);
  if (getsockname(sock_of(handle_), reinterpret_cast<sockaddr*>(&addr), &len) == SOCKET_ERROR)
    throw_wsa("getsockname");
  return ntohs(addr.sin_port);
}

std::string Socket::local_address() const {
  sockaddr_in addr{};
  int len = sizeof(addr);
  if (getsockname(sock_of(handle_), reinterpret_cast<sockaddr*>(&addr), &len) == SOCKET_ERROR)
    throw_wsa("getsockname");
  char buf[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &addr.sin_addr, buf, sizeof(buf));
  return buf;
}

void Socket::close_abortive() noexcept {
  if (handle_ == kInvalid) return;
  linger no_linger{};
  no_linger.l_onoff = 1;
  no_linger.l_linger = 0;
  setsockopt(sock_of(handle_), SOL_SOCKET, SO_LINGER, reinterpret_cast<const char*>(&no_linger), sizeof(no_linger));
  close();
}

bool Socket::connected_to_itself() const {
  sockaddr_in local{}, peer{};
  int local_len = sizeof(local), peer_len = sizeof(peer);
  if (getsockname(sock_of(handle_), reinterpret_cast<sockaddr*>(&local), &local_len) == SOCKET_ERROR ||
      getpeername(sock_of(handle_), reinterpret_cast<sockaddr*>(&peer), &peer_len) == SOCKET_ERROR)
    return false;
  return local.sin_port == peer.sin_port && local.sin_addr.s_addr == peer.sin_addr.s_addr;
}

void Socket::set_nonblocking() {
  u_long one = 1;
  if (ioctlsocket(sock_of(handle_), FIONBIO, &one) == SOCKET_ERROR) throw_wsa("ioctlsocket");
}

void Socket::set_nodelay() {
  BOOL one = TRUE;
  setsockopt(sock_of(handle_), IPPROTO_TCP, TCP_NODELAY, reinterpret_cast<const char*>(&one),
             sizeof(one));
}

void Socket::set_buffer_sizes(int bytes) {
  setsockopt(sock_of(handle_), SOL_SOCKET, SO_SNDBUF, reinterpret_cast<const char*>(&bytes),
             sizeof(bytes));
  setsockopt(sock_of(handle_), SOL_SOCKET, SO_RCVBUF, reinterpret_cast<const char*>(&bytes),
             sizeof(bytes));
}

IoResult Socket::send_some(const void* data, size_t size) {
  int chunk = size > (1u << 30) ? (1 << 30) : static_cast<int>(size);
  int n = ::send(sock_of(handle_), static_cast<const char*>(data), chunk, 0);
  if (n != SOCKET_ERROR) return {IoResult::kDone, static_cast<size_t>(n)};
  int err = WSAGetLastError();
  if (err == WSAEWOULDBLOCK || err == WSAEINTR) return {IoResult::kWouldBlock, 0};
  if (is_disconnect(err)) return {IoResult::kClosed, 0};
  throw_wsa("send");
}

IoResult Socket::recv_some(void* data, size_t size) {
  int chunk = size > (1u << 30) ? (1 << 30) : static_cast<int>(size);
  int n = ::recv(sock_of(handle_), static_cast<char*>(data), chunk, 0);
  if (n > 0) return {IoResult::kDone, static_cast<size_t>(n)};
  if (n == 0) return {IoResult::kClosed, 0};
  int err = WSAGetLastError();
  if (err == WSAEWOULDBLOCK || err == WSAEINTR) return {IoResult::kWouldBlock, 0};
  if (is_disconnect(err)) return {IoResult::kClosed, 0};
  throw_wsa("recv");
}

int poll_sockets(std::vector<PollItem>& items, int timeout_ms) {
  std::vector<WSAPOLLFD> fds(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    fds[i].fd = sock_of(items[i].handle);
    fds[i].events = static_cast<SHORT>((items[i].want_read ? POLLRDNORM : 0) |
                                       (items[i].want_write ? POLLWRNORM : 0));
    fds[i].revents = 0;
  }
  int rc = WSAPoll(fds.data(), static_cast<ULONG>(fds.size()), timeout_ms);
  if (rc == SOCKET_ERROR) throw_wsa("WSAPoll");
  for (size_t i = 0; i < items.size(); ++i) {
    SHORT ev = fds[i].revents;
    items[i].readable = (ev & (POLLRDNORM | POLLHUP | POLLERR | POLLNVAL)) != 0;
    items[i].writable = (ev & (POLLWRNORM | POLLERR | POLLHUP)) != 0;
  }
  return rc;
}

}  // namespace ember::distributed
