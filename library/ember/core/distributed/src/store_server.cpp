// The store server: one poll loop over every client connection, never blocked by one
// client. Blocking requests (get, wait) are parked as waiters and answered when their
// keys appear or their deadline passes.
#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>

#include "auth.h"
#include "ember/distributed/errors.h"
#include "ember/distributed/store.h"
#include "store_wire.h"

namespace ember::distributed {
namespace {

constexpr size_t kMaxClients = 4096;
constexpr size_t kReadChunk = 64 * 1024;
constexpr int64_t kMaxWaitMs = 24LL * 3600 * 1000;

// A decimal int64 as `add` keeps it; false for anything else, including out-of-range values.
bool parse_int(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  const bool negative = s[0] == '-';
  size_t i = negative ? 1 : 0;
  if (i == s.size()) return false;
  // Accumulate the magnitude unsigned: -9223372036854775808 has no positive int64 twin.
  const uint64_t limit = negative ? uint64_t(INT64_MAX) + 1 : uint64_t(INT64_MAX);
  uint64_t v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(s[i] - '0');
    if (v > (limit - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *out = negative ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  return true;
}

// a + b, or false if the sum leaves int64.
bool checked_add(int64_t a, int64_t b, int64_t* out) {
  if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) return false;
  *out = a + b;
  return true;
}

}  // namespace

class StoreServer::Loop {
 public:
  Loop(Socket listener, std::string token, std::atomic<bool>& stopping, std::atomic<uint64_t>& rejected)
      : listener_(std::move(listener)), token_(std::move(token)), stopping_(stopping), rejected_(rejected) {}

  void run() {
    while (!stopping_.load()) {
      std::vector<PollItem> items;
      std::vector<uint64_t> ids;
      items.push_back({listener_.handle(), clients_.size() < kMaxClients, false});
      for (auto& [id, c] : clients_) {
        items.push_back({c.sock.handle(), !c.waiting, !c.out.empty()});
        ids.push_back(id);
      }
      poll_sockets(items, next_timeout_ms());
      if (items[0].readable) accept_clients();
      for (size_t i = 0; i < ids.size(); ++i) {
        auto it = clients_.find(ids[i]);
        if (it == clients_.end()) continue;
        if (items[i + 1].writable) flush(it->second);
        if (items[i + 1].readable) read_from(it->first, it->second);
      }
      for (auto& [id, c] : clients_) process_frames(id, c);
      expire_waiters();
      expire_handshakes();
      for (auto it = clients_.begin(); it != clients_.end();) {
        if (it->second.dead) {
          drop_waiters(it->first);
          it = clients_.erase(it);
        } else {
          ++it;
        }
      }
    }
  }

 private:
  struct Client {
    Socket sock;
    std::string in;
    std::string out;
    bool waiting = false;
    bool dead = false;
    // Nothing but the handshake is read or served until the peer proved it holds the token.
    bool authenticated = false;
    std::string nonce;
    Deadline handshake_deadline;
  };
  struct Waiter {
    uint64_t client;
    wire::Op op;
    std::vector<std::string> keys;
    Deadline deadline;
  };

  int next_timeout_ms() const {
    // Wake up regularly to notice stop(); sooner if a waiter expires first.
    int t = 100;
    for (const auto& w : waiters_) t = std::min(t, remaining_ms(w.deadline));
    return t;
  }

  void accept_clients() {
    while (clients_.size() < kMaxClients) {
      Socket s = listener_.accept(Clock::now());
      if (!s.valid()) return;
      Client& c = clients_[next_id_++];
      c.sock = std::move(s);
      c.nonce = auth::random_nonce();
      c.handshake_deadline = Clock::now() + std::chrono::milliseconds(wire::kAuthTimeoutMs);
      respond(c, wire::Status::kChallenge, c.nonce);
    }
  }

  void reject(Client& c) {
    c.dead = true;
    rejected_.fetch_add(1);
  }

  // A frame the server accepts in the connection's current state (before the handshake:
  // only the kAuth frame, of exactly its size).
  static bool acceptable(const Client& c, const wire::Header& h) {
    if (h.magic != wire::kMagic || h.version != wire::kVersion || h.length > wire::kMaxPayload) return false;
    return c.authenticated || (h.code == uint16_t(wire::Op::kAuth) && h.length == wire::kAuthPayload);
  }

  void read_from(uint64_t, Client& c) {
    char buf[kReadChunk];
    for (int rounds = 0; rounds < 16 && !c.dead; ++rounds) {
      // Before the handshake, read no further than the one frame it may send.
      size_t want = sizeof(buf);
      if (!c.authenticated) {
        const size_t limit = wire::kHeaderSize + wire::kAuthPayload;
        if (c.in.size() >= limit) return;
        want = limit - c.in.size();
      }
      IoResult r = c.sock.recv_some(buf, want);
      if (r.status == IoResult::kClosed) {
        c.dead = true;
        return;
      }
      if (r.status == IoResult::kWouldBlock) return;
      c.in.append(buf, r.bytes);
      // Validate the header as soon as it is complete, so a garbage stream is dropped
      // after 12 bytes instead of being buffered.
      if (c.in.size() >= wire::kHeaderSize) {
        auto h = wire::parse_header(reinterpret_cast<const unsigned char*>(c.in.data()));
        if (!acceptable(c, h)) {
          reject(c);
          return;
        }
        if (c.in.size() >= wire::kHeaderSize + h.length) return;  // let process_frames run
      }
    }
  }

  void flush(Client& c) {
    while (!c.out.empty()) {
      IoResult r = c.sock.send_some(c.out.data(), c.out.size());
      if (r.status == IoResult::kClosed) {
        c.dead = true;
        return;
      }
      if (r.status == IoResult::kWouldBlock) return;
      c.out.erase(0, r.bytes);
    }
  }

  void respond(Client& c, wire::Status status, const std::string& payload) {
    c.out += wire::frame(static_cast<uint16_t>(status), payload);
    flush(c);
  }

  void process_frames(uint64_t id, Client& c) {
    while (!c.dead && !c.waiting && c.in.size() >= wire::kHeaderSize) {
      auto* bytes = reinterpret_cast<const unsigned char*>(c.in.data());
      auto h = wire::parse_header(bytes);
      if (!acceptable(c, h)) {
        reject(c);
        return;
      }
      if (c.in.size() < wire::kHeaderSize + h.length) return;
      if (!c.authenticated) {
        check_proof(c, bytes + wire::kHeaderSize);
        c.in.erase(0, wire::kHeaderSize + h.length);
        continue;
      }
      try {
        wire::Reader reader(bytes + wire::kHeaderSize, h.length);
        handle(id, c, static_cast<wire::Op>(h.code), reader);
      } catch (const wire::MalformedMessage&) {
        reject(c);
        return;
      }
      c.in.erase(0, wire::kHeaderSize + h.length);
    }
  }

  // The kAuth payload: client nonce | HMAC(token, client label | server nonce | client nonce).
  void check_proof(Client& c, const unsigned char* payload) {
    const std::string client_nonce(reinterpret_cast<const char*>(payload), auth::kNonceSize);
    const auth::Digest expected = auth::hmac_sha256(token_, wire::kClientLabel + c.nonce + client_nonce);
    if (!auth::equal_digests(payload + auth::kNonceSize, expected.data(), auth::kMacSize)) {
      // Counted before the answer leaves, so whoever reads the refusal also sees the count;
      // said once, then closed: the client reports it instead of a bare reset.
      reject(c);
      respond(c, wire::Status::kError, "authentication failed: the peer does not hold this store's token");
      return;
    }
    c.authenticated = true;
    respond(c, wire::Status::kOk,
            auth::as_string(auth::hmac_sha256(token_, wire::kServerLabel + c.nonce + client_nonce)));
    c.nonce.clear();
  }

  void expire_handshakes() {
    const auto now = Clock::now();
    for (auto& [id, c] : clients_)
      if (!c.authenticated && !c.dead && c.handshake_deadline <= now) reject(c);
  }

  void handle(uint64_t id, Client& c, wire::Op op, wire::Reader& r) {
    using wire::Op;
    std::string out;
    switch (op) {
      case Op::kSet: {
        std::string key = r.bytes(wire::kMaxKeySize);
        std::string value = r.bytes(wire::kMaxPayload);
        r.expect_end();
        data_[key] = std::move(value);
        respond(c, wire::Status::kOk, "");
        wake_waiters();
        return;
      }
      case Op::kGet:
      case Op::kWait: {
        std::vector<std::string> keys;
        uint32_t n = op == Op::kGet ? 1 : r.u32();
        if (n > wire::kMaxKeysPerRequest) throw wire::MalformedMessage{"too many keys"};
        for (uint32_t i = 0; i < n; ++i) keys.push_back(r.bytes(wire::kMaxKeySize));
        int64_t wait_ms = std::clamp<int64_t>(r.i64(), 0, kMaxWaitMs);
        r.expect_end();
        Waiter w{id, op, std::move(keys), Clock::now() + std::chrono::milliseconds(wait_ms)};
        if (!try_answer(c, w)) {
          c.waiting = true;
          waiters_.push_back(std::move(w));
        }
        return;
      }
      case Op::kAdd: {
        std::string key = r.bytes(wire::kMaxKeySize);
        int64_t delta = r.i64();
        r.expect_end();
        int64_t value = 0;
        auto it = data_.find(key);
        if (it != data_.end() && !parse_int(it->second, &value)) {
          respond(c, wire::Status::kError, "value of '" + key + "' is not a 64-bit integer");
          return;
        }
        if (!checked_add(value, delta, &value)) {
          respond(c, wire::Status::kError,
                  "adding " + std::to_string(delta) + " to '" + key + "' (" + std::to_string(value) +
                      ") overflows a 64-bit integer; the value is unchanged");
          return;
        }
        data_[key] = std::to_string(value);
        wire::put_i64(out, value);
        respond(c, wire::Status::kOk, out);
        wake_waiters();
        return;
      }
      case Op::kCompareSet: {
        std::string key = r.bytes(wire::kMaxKeySize);
        std::string expected = r.bytes(wire::kMaxPayload);
        std::string desired = r.bytes(wire::kMaxPayload);
        r.expect_end();
        auto it = data_.find(key);
        if (it == data_.end()) {
          if (expected.empty()) data_[key] = desired;
        } else if (it->second == expected) {
          it->second = desired;
        }
        auto now = data_.find(key);
        wire::put_bytes(out, now == data_.end() ? expected : now->second);
        respond(c, wire::Status::kOk, out);
        wake_waiters();
        return;
      }
      case Op::kCheck: {
        uint32_t n = r.u32();
        if (n > wire::kMaxKeysPerRequest) throw wire::MalformedMessage{"too many keys"};
        bool all = true;
        for (uint32_t i = 0; i < n; ++i) all = data_.count(r.bytes(wire::kMaxKeySize)) && all;
        r.expect_end();
        wire::put_i64(out, all ? 1 : 0);
        respond(c, wire::Status::kOk, out);
        return;
      }
      case Op::kDelete: {
        std::string key = r.bytes(wire::kMaxKeySize);
        r.expect_end();
        wire::put_i64(out, static_cast<int64_t>(data_.erase(key)));
        respond(c, wire::Status::kOk, out);
        return;
      }
      case Op::kNumKeys:
        r.expect_end();
        wire::put_i64(out, static_cast<int64_t>(data_.size()));
        respond(c, wire::Status::kOk, out);
        return;
      case Op::kPing:
        r.expect_end();
        respond(c, wire::Status::kOk, "");
        return;
      case Op::kAuth:
        break;  // only ever the first frame of a connection
    }
    throw wire::MalformedMessage{"unknown op"};
  }

  // Answers a get/wait whose keys all exist; returns false if it must keep waiting.
  bool try_answer(Client& c, const Waiter& w) {
    for (const auto& k : w.keys)
      if (!data_.count(k)) return false;
    std::string out;
    if (w.op == wire::Op::kGet) wire::put_bytes(out, data_[w.keys[0]]);
    respond(c, wire::Status::kOk, out);
    return true;
  }

  void wake_waiters() {
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      Client& c = clients_[it->client];
      if (try_answer(c, *it)) {
        c.waiting = false;
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void expire_waiters() {
    auto now = Clock::now();
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->deadline > now) {
        ++it;
        continue;
      }
      Client& c = clients_[it->client];
      std::string out;
      std::vector<const std::string*> missing;
      for (const auto& k : it->keys)
        if (!data_.count(k)) missing.push_back(&k);
      wire::put_u32(out, static_cast<uint32_t>(missing.size()));
      for (auto* k : missing) wire::put_bytes(out, *k);
      respond(c, wire::Status::kTimeout, out);
      c.waiting = false;
      it = waiters_.erase(it);
    }
  }

  void drop_waiters(uint64_t id) {
    waiters_.erase(std::remove_if(waiters_.begin(), waiters_.end(),
                                  [id](const Waiter& w) { return w.client == id; }),
                   waiters_.end());
  }

  Socket listener_;
  const std::string token_;
  std::atomic<bool>& stopping_;
  std::atomic<uint64_t>& rejected_;
  std::map<uint64_t, Client> clients_;
  std::map<std::string, std::string> data_;
  std::vector<Waiter> waiters_;
  uint64_t next_id_ = 1;
};

StoreServer::StoreServer(const std::string& host, uint16_t port, const std::string& token) {
  Socket listener = Socket::listen(host, port);
  port_ = listener.local_port();
  const std::string bound = listener.local_address();
  if (token.empty() && !auth::is_loopback(bound))
    throw std::invalid_argument("a store listening on " + bound + ":" + std::to_string(port_) +
                                " (beyond loopback) needs a token for its peers to prove; give it the "
                                "job's token (EMBER_RDZV_TOKEN, or ember-run --rdzv-token-file)");
  loop_ = std::make_unique<Loop>(std::move(listener), token, stopping_, rejected_);
  thread_ = std::thread([this] {
    try {
      loop_->run();
    } catch (...) {
      // A failing poll means the process is tearing down; clients see the closed port.
    }
  });
}

StoreServer::~StoreServer() { stop(); }

void StoreServer::stop() {
  stopping_.store(true);
  if (thread_.joinable()) thread_.join();
  loop_.reset();
}

}  // namespace ember::distributed
