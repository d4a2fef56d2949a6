// Rendezvous key-value store over TCP: one server (a thread in one process), clients in
// every process. Values are byte strings; `add` keeps a decimal integer.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ember/distributed/export.h"
#include "ember/distributed/socket.h"

namespace ember::distributed {

using Milliseconds = std::chrono::milliseconds;

// Serves the store on its own thread until stop() or destruction.
class EMBER_DIST_API StoreServer {
 public:
  // Binds host:port (port 0 picks a free port) and starts serving. Throws if the port is taken.
  // Every connection must prove it holds `token` (store_wire.h) before it is served. A
  // store without a token may only listen on loopback (std::invalid_argument otherwise).
  StoreServer(const std::string& host, uint16_t port, const std::string& token = "");
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  uint16_t port() const noexcept { return port_; }
  void stop();
  // Connections dropped for protocol violations or a failed handshake since start.
  uint64_t rejected_connections() const noexcept { return rejected_.load(); }

 private:
  class Loop;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> rejected_{0};
  uint16_t port_ = 0;
};

// A connection to a StoreServer. Thread safe: calls are serialised on one connection,
// reconnecting once if the connection broke.
class EMBER_DIST_API StoreClient {
 public:
  // Connects and authenticates with `token`; throws DistributedError if the store refuses it
  // (or cannot prove it holds the token itself).
  StoreClient(const std::string& host, uint16_t port, Milliseconds timeout,
              const std::string& token = "");

  void set(const std::string& key, const std::string& value);
  // Blocks until `key` exists (up to timeout) and returns its value.
  std::string get(const std::string& key);
  std::string get(const std::string& key, Milliseconds timeout);
  int64_t add(const std::string& key, int64_t delta);
  // Sets `desired` if the current value equals `expected` (a missing key matches an empty
  // `expected`); returns the value after the call.
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired);
  // Blocks until every key exists; throws TimeoutError naming the missing keys.
  void wait(const std::vector<std::string>& keys, Milliseconds timeout);
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  bool check(const std::vector<std::string>& keys);
  bool delete_key(const std::string& key);
  int64_t num_keys();

  Milliseconds timeout() const noexcept { return timeout_; }
  void set_timeout(Milliseconds timeout) noexcept { timeout_ = timeout; }
  const std::string& host() const noexcept { return host_; }
  uint16_t port() const noexcept { return port_; }
  // The job's secret: the process group authenticates its peers with it too.
  const std::string& token() const noexcept { return token_; }
  // This side's address of the store connection: an address peers can reach us at.
  std::string local_address();

 private:
  // Sends one request and returns (status, payload). `wait_ms` is how long the server
  // may legitimately hold the request before answering.
  std::pair<uint16_t, std::string> call(const char* op, uint16_t code,
                                        const std::string& payload, Milliseconds wait_ms);
  void connect_locked(Deadline deadline);
  void authenticate(Socket& socket, Deadline deadline);

  std::string host_;
  uint16_t port_;
  Milliseconds timeout_;
  std::string token_;
  std::mutex mutex_;
  Socket socket_;
};

}  // namespace ember::distributed
