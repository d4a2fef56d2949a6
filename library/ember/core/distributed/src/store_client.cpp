#include <algorithm>
#include <stdexcept>

#include "ember/distributed/errors.h"
#include "auth.h"
#include "ember/distributed/store.h"
#include "store_wire.h"

namespace ember::distributed {
namespace {

// Extra time a client allows beyond the server-side wait, for the answer to travel: the
// client's timeout, kept within these bounds.
constexpr Milliseconds kMinReplyGrace{100};
constexpr Milliseconds kMaxReplyGrace{5000};

}  // namespace

StoreClient::StoreClient(const std::string& host, uint16_t port, Milliseconds timeout,
                         const std::string& token)
    : host_(host), port_(port), timeout_(timeout), token_(token) {
  std::lock_guard<std::mutex> lock(mutex_);
  connect_locked(Clock::now() + timeout_);
}

void StoreClient::connect_locked(Deadline deadline) {
  Socket s = Socket::connect(host_, port_, deadline, "store connect " + host_ + ":" + std::to_string(port_));
  authenticate(s, deadline);
  socket_ = std::move(s);
}

void StoreClient::authenticate(Socket& s, Deadline deadline) {
  const char* op = "store connect";
  const std::string where = "the store at " + host_ + ":" + std::to_string(port_);
  const std::string fix =
      "; every process of a job needs the job's token (EMBER_RDZV_TOKEN, or ember-run --rdzv-token-file)";
  // Reads one reply frame of at most `limit` payload bytes.
  auto read_frame = [&](uint32_t limit, std::string* body) -> uint16_t {
    unsigned char header[wire::kHeaderSize];
    if (!s.recv_all(header, sizeof(header), deadline))
      throw TimeoutError(op, where + " did not complete the handshake before the timeout");
    auto h = wire::parse_header(header);
    if (h.magic != wire::kMagic) throw DistributedError(op, where + " is not an ember store");
    if (h.version != wire::kVersion)
      throw DistributedError(op, where + " speaks store protocol version " + std::to_string(h.version) +
                                     ", this process version " + std::to_string(wire::kVersion) +
                                     " (mixed ember versions in one job?)");
    if (h.length > limit) throw DistributedError(op, "malformed handshake from " + where);
    body->assign(h.length, '\0');
    if (h.length && !s.recv_all(&(*body)[0], h.length, deadline))
      throw TimeoutError(op, where + " did not complete the handshake before the timeout");
    return h.code;
  };
  try {
    std::string server_nonce;
    if (read_frame(wire::kChallengePayload, &server_nonce) != uint16_t(wire::Status::kChallenge) ||
        server_nonce.size() != wire::kChallengePayload)
      throw DistributedError(op, "malformed handshake from " + where);
    const std::string client_nonce = auth::random_nonce();
    const std::string proof =
        auth::as_string(auth::hmac_sha256(token_, wire::kClientLabel + server_nonce + client_nonce));
    const std::string request = wire::frame(uint16_t(wire::Op::kAuth), client_nonce + proof);
    if (!s.send_all(request.data(), request.size(), deadline))
      throw TimeoutError(op, where + " did not complete the handshake before the timeout");
    std::string answer;
    const uint16_t status = read_frame(1024, &answer);
    if (status == uint16_t(wire::Status::kError))
      throw DistributedError(op, where + " refused this process: " + answer + fix);
    const auth::Digest expected = auth::hmac_sha256(token_, wire::kServerLabel + server_nonce + client_nonce);
    if (status != uint16_t(wire::Status::kOk) || answer.size() != auth::kMacSize ||
        !auth::equal_digests(reinterpret_cast<const unsigned char*>(answer.data()), expected.data(),
                             auth::kMacSize))
      throw DistributedError(op, where + " did not prove it holds the job's token" + fix);
  } catch (const TimeoutError&) {
    throw;
  } catch (const DistributedError& e) {
    if (e.op() == op) throw;
    // The server closes at once on a failed handshake; say what that most likely means.
    throw DistributedError(op, where + " closed the connection during the handshake (" + e.what() +
                                   "): most likely it refused this process's token" + fix);
  }
}

std::string StoreClient::local_address() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!socket_.valid()) connect_locked(Clock::now() + timeout_);
  return socket_.local_address();
}

std::pair<uint16_t, std::string> StoreClient::call(const char* op, uint16_t code,
                                                   const std::string& payload,
                                                   Milliseconds wait_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string request = wire::frame(code, payload);
  // One retry on a fresh connection covers a server that dropped an idle connection;
  // requests are idempotent except add, which is only retried if it was never sent.
  // One deadline for the whole call, retry included: a server that trickles its answer
  // cannot stretch it.
  const Deadline deadline = Clock::now() + wait_ms + std::clamp(timeout_, kMinReplyGrace, kMaxReplyGrace);
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!socket_.valid()) connect_locked(std::min(deadline, Clock::now() + timeout_));
    bool sent = false;
    try {
      if (!socket_.send_all(request.data(), request.size(), deadline))
        throw TimeoutError(op, "store request could not be sent before the timeout");
      sent = true;
      unsigned char header[wire::kHeaderSize];
      if (!socket_.recv_all(header, sizeof(header), deadline))
        throw TimeoutError(op, "store did not answer before the timeout");
      auto h = wire::parse_header(header);
      if (h.magic != wire::kMagic || h.version != wire::kVersion || h.length > wire::kMaxPayload)
        throw DistributedError(op, "malformed reply from store");
      std::string body(h.length, '\0');
      if (h.length && !socket_.recv_all(&body[0], h.length, deadline))
        throw TimeoutError(op, "store reply truncated by the timeout");
      return {h.code, std::move(body)};
    } catch (const TimeoutError&) {
      socket_.close();  // the stream is out of sync now
      throw;
    } catch (const DistributedError& e) {
      socket_.close();
      bool retry = attempt == 0 && (!sent || code != static_cast<uint16_t>(wire::Op::kAdd));
      if (!retry)
        throw DistributedError(op, std::string("lost connection to store at ") + host_ + ":" +
                                       std::to_string(port_) + " (" + e.what() + ")");
    }
  }
  throw DistributedError(op, "unreachable");
}

namespace {

// The server drops a connection that breaks its limits; say why here instead.
void check_key(const char* op, const std::string& key) {
  if (key.size() > wire::kMaxKeySize)
    throw std::invalid_argument(std::string(op) + ": key is " + std::to_string(key.size()) +
                                " bytes long; the store's limit is " + std::to_string(wire::kMaxKeySize));
}

void check_value(const char* op, const std::string& value) {
  // Room for the key and length fields that share the payload.
  const size_t limit = wire::kMaxPayload - wire::kMaxKeySize - 64;
  if (value.size() > limit)
    throw std::invalid_argument(std::string(op) + ": value is " + std::to_string(value.size()) +
                                " bytes long; the store's limit is " + std::to_string(limit));
}

void check_keys(const char* op, const std::vector<std::string>& keys) {
  if (keys.size() > wire::kMaxKeysPerRequest)
    throw std::invalid_argument(std::string(op) + ": " + std::to_string(keys.size()) +
                                " keys in one request; the store's limit is " +
                                std::to_string(wire::kMaxKeysPerRequest));
  for (const auto& k : keys) check_key(op, k);
}

void check_ok(const char* op, const std::pair<uint16_t, std::string>& reply) {
  if (reply.first == static_cast<uint16_t>(wire::Status::kOk)) return;
  if (reply.first == static_cast<uint16_t>(wire::Status::kError))
    throw DistributedError(op, reply.second);
  if (reply.first == static_cast<uint16_t>(wire::Status::kTimeout)) {
    auto* p = reinterpret_cast<const unsigned char*>(reply.second.data());
    std::string keys;
    try {
      wire::Reader r(p, reply.second.size());
      uint32_t n = r.u32();
      for (uint32_t i = 0; i < n; ++i) keys += (i ? ", " : "") + r.bytes(wire::kMaxKeySize);
    } catch (const wire::MalformedMessage&) {
    }
    throw TimeoutError(op, "timed out waiting for keys [" + keys + "]");
  }
  throw DistributedError(op, "unexpected store status " + std::to_string(reply.first));
}

}  // namespace

void StoreClient::set(const std::string& key, const std::string& value) {
  check_key("store.set", key);
  check_value("store.set", value);
  std::string p;
  wire::put_bytes(p, key);
  wire::put_bytes(p, value);
  check_ok("store.set", call("store.set", uint16_t(wire::Op::kSet), p, Milliseconds(0)));
}

std::string StoreClient::get(const std::string& key) { return get(key, timeout_); }

std::string StoreClient::get(const std::string& key, Milliseconds timeout) {
  check_key("store.get", key);
  std::string p;
  wire::put_bytes(p, key);
  wire::put_i64(p, timeout.count());
  auto reply = call("store.get", uint16_t(wire::Op::kGet), p, timeout);
  check_ok("store.get", reply);
  wire::Reader r(reinterpret_cast<const unsigned char*>(reply.second.data()), reply.second.size());
  return r.bytes(wire::kMaxPayload);
}

int64_t StoreClient::add(const std::string& key, int64_t delta) {
  check_key("store.add", key);
  std::string p;
  wire::put_bytes(p, key);
  wire::put_i64(p, delta);
  auto reply = call("store.add", uint16_t(wire::Op::kAdd), p, Milliseconds(0));
  check_ok("store.add", reply);
  wire::Reader r(reinterpret_cast<const unsigned char*>(reply.second.data()), reply.second.size());
  return r.i64();
}

std::string StoreClient::compare_set(const std::string& key, const std::string& expected,
                                     const std::string& desired) {
  check_key("store.compare_set", key);
  check_value("store.compare_set", expected);
  check_value("store.compare_set", desired);
  if (expected.size() + desired.size() > wire::kMaxPayload - wire::kMaxKeySize - 64)
    throw std::invalid_argument("store.compare_set: expected and desired values are too large together");
  std::string p;
  wire::put_bytes(p, key);
  wire::put_bytes(p, expected);
  wire::put_bytes(p, desired);
  auto reply = call("store.compare_set", uint16_t(wire::Op::kCompareSet), p, Milliseconds(0));
  check_ok("store.compare_set", reply);
  wire::Reader r(reinterpret_cast<const unsigned char*>(reply.second.data()), reply.second.size());
  return r.bytes(wire::kMaxPayload);
}

void StoreClient::wait(const std::vector<std::string>& keys, Milliseconds timeout) {
  check_keys("store.wait", keys);
  std::string p;
  wire::put_u32(p, static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) wire::put_bytes(p, k);
  wire::put_i64(p, timeout.count());
  check_ok("store.wait", call("store.wait", uint16_t(wire::Op::kWait), p, timeout));
}

bool StoreClient::check(const std::vector<std::string>& keys) {
  check_keys("store.check", keys);
  std::string p;
  wire::put_u32(p, static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) wire::put_bytes(p, k);
  auto reply = call("store.check", uint16_t(wire::Op::kCheck), p, Milliseconds(0));
  check_ok("store.check", reply);
  wire::Reader r(reinterpret_cast<const unsigned char*>(reply.second.data()), reply.second.size());
  return r.i64() != 0;
}

bool StoreClient::delete_key(const std::string& key) {
  check_key("store.delete_key", key);
  std::string p;
  wire::put_bytes(p, key);
  auto reply = call("store.delete_key", uint16_t(wire::Op::kDelete), p, Milliseconds(0));
  check_ok("store.delete_key", reply);
  wire::Reader r(reinterpret_cast<const unsigned char*>(reply.second.data()), reply.second.size());
  return r.i64() != 0;
}

int64_t StoreClient::num_keys() {
  auto reply = call("store.num_keys", uint16_t(wire::Op::kNumKeys), "", Milliseconds(0));
  check_ok("store.num_keys", reply);
  wire::Reader r(reinterpret_cast<const unsigned char*>(reply.second.data()), reply.second.size());
  return r.i64();
}

}  // namespace ember::distributed
