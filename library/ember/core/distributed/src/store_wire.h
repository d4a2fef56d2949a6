// The store's wire format. Every message is a 12-byte header followed by a payload:
//   u32 magic "EMBS" | u16 version | u16 code (request op or response status) | u32 length
// Payload fields are little-endian: i64 values and byte strings (u32 length + bytes).
// Every size is bounded so a garbage or hostile client can only get itself disconnected.
//
// Version 2 opens every connection with a mutual HMAC-SHA256 handshake over the job's
// token (an empty token for a loopback store started without one) before any request:
//   server -> client  status kChallenge, payload: server nonce (32 random bytes)
//   client -> server  op kAuth, payload: client nonce (32) | HMAC(token, kClientLabel | server nonce | client nonce)
//   server -> client  status kOk, payload: HMAC(token, kServerLabel | server nonce | client nonce)
//                     or status kError with a message, after which the server closes.
// Until the handshake is done the server reads at most one header plus kAuthPayload bytes,
// drops any other frame, and drops the connection after kAuthTimeoutMs. A client checks the
// server's answer too, so it never talks to a store that does not hold the token.
// Version 1 (no handshake) peers are refused by the version check on either side.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace ember::distributed::wire {

constexpr uint32_t kMagic = 0x53424D45;  // "EMBS" read little-endian
constexpr uint16_t kVersion = 2;
constexpr size_t kHeaderSize = 12;
constexpr uint32_t kMaxPayload = 64u << 20;
constexpr uint32_t kMaxKeySize = 4096;
constexpr uint32_t kMaxKeysPerRequest = 4096;
constexpr uint32_t kChallengePayload = 32;  // the server nonce
constexpr uint32_t kAuthPayload = 64;       // client nonce | HMAC
constexpr int kAuthTimeoutMs = 10000;
constexpr const char* kClientLabel = "ember-store-v2 client";
constexpr const char* kServerLabel = "ember-store-v2 server";

enum class Op : uint16_t {
  kSet = 1,
  kGet = 2,
  kAdd = 3,
  kCompareSet = 4,
  kWait = 5,
  kCheck = 6,
  kDelete = 7,
  kNumKeys = 8,
  kPing = 9,
  kAuth = 10,
};

enum class Status : uint16_t { kOk = 0, kTimeout = 1, kError = 2, kChallenge = 3 };

struct Header {
  uint32_t magic;
  uint16_t version;
  uint16_t code;
  uint32_t length;
};

inline void put_u16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v & 0xff));
  out.push_back(static_cast<char>(v >> 8));
}
inline void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline void put_i64(std::string& out, int64_t v) {
  uint64_t u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}
inline void put_bytes(std::string& out, const std::string& s) {
  put_u32(out, static_cast<uint32_t>(s.size()));
  out += s;
}

inline uint32_t get_u32(const unsigned char* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
inline uint16_t get_u16(const unsigned char* p) { return uint16_t(p[0] | p[1] << 8); }

// A whole message: header plus payload.
inline std::string frame(uint16_t code, const std::string& payload) {
  std::string out;
  out.reserve(kHeaderSize + payload.size());
  put_u32(out, kMagic);
  put_u16(out, kVersion);
  put_u16(out, code);
  put_u32(out, static_cast<uint32_t>(payload.size()));
  out += payload;
  return out;
}

inline Header parse_header(const unsigned char* p) {
  return Header{get_u32(p), get_u16(p + 4), get_u16(p + 6), get_u32(p + 8)};
}

struct MalformedMessage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Bounds-checked reader over one payload; throws MalformedMessage on any overrun.
class Reader {
 public:
  Reader(const unsigned char* data, size_t size) : p_(data), end_(data + size) {}
  int64_t i64() {
    need(8);
    uint64_t u = 0;
    for (int i = 0; i < 8; ++i) u |= uint64_t(p_[i]) << (8 * i);
    p_ += 8;
    return static_cast<int64_t>(u);
  }
  uint32_t u32() {
    need(4);
    uint32_t v = get_u32(p_);
    p_ += 4;
    return v;
  }
  std::string bytes(uint32_t max_size) {
    uint32_t n = u32();
    if (n > max_size) throw MalformedMessage{"field too large"};
    need(n);
    std::string s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  void expect_end() const {
    if (p_ != end_) throw MalformedMessage{"trailing bytes"};
  }

 private:
  void need(size_t n) const {
    if (static_cast<size_t>(end_ - p_) < n) throw MalformedMessage{"truncated payload"};
  }
  const unsigned char* p_;
  const unsigned char* end_;
};

}  // namespace ember::distributed::wire
