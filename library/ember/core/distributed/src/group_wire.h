// The process group's wire format (data and control connections), shared by nothing else
// but kept apart from the protocol logic in process_group.cpp, as store_wire.h is for the store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ember/distributed/process_group.h"

namespace ember::distributed::group_wire {

constexpr uint32_t kHelloMagic = 0x50424D45;  // "EMBP"
constexpr uint32_t kCtrlMagic = 0x43424D45;   // "EMBC"
constexpr uint32_t kDataMagic = 0x44424D45;   // "EMBD"
constexpr size_t kFrameSize = 16;
// The hello (kFrameSize bytes: magic, tag, rank, connection kind) is followed by
// HMAC-SHA256(token, kHelloLabel | acceptor's nonce | hello); the acceptor sends the nonce.
constexpr const char* kHelloLabel = "ember-pg-v2 hello";
// Every data message starts with a header, so a receiver checks what it is about to read
// (which operation, which collective, how many bytes) instead of trusting the stream:
//   u32 magic | u16 kind | u8 dtype | u8 reduce op | u64 sequence number | u64 byte count
constexpr size_t kDataHeaderSize = 24;
// An arrival notice carries the caller's Call: u32 kind, dtype, reduce, root | u64 count.
constexpr size_t kCallSize = 24;
// A peer is at most one collective ahead (each one ends when all peers entered it).
constexpr size_t kMaxCallsAhead = 4;
constexpr uint32_t kNoDType = 0xff;
// Every pair of ranks holds two connections: beyond this a mesh cannot work anyway.
constexpr int kMaxWorldSize = 1 << 14;
constexpr uint32_t kNoReduce = 0xff;
constexpr uint32_t kMaxAbortPayload = 64 * 1024;
constexpr size_t kDirectBroadcastBytes = 1 << 20;

enum CtrlType : uint32_t { kArrive = 1, kAbort = 2, kGoodbye = 3 };
enum AbortKind : uint32_t { kAbortTimeout = 1, kAbortFailure = 2 };
enum ConnKind : uint32_t { kDataConn = 0, kCtrlConn = 1 };
enum CallKind : uint32_t {
  kAllreduce = 1,
  kBroadcast = 2,
  kAllgather = 3,
  kReduceScatter = 4,
  kBarrier = 5,
  kPointToPoint = 6,
};

inline const char* kind_name(uint32_t kind) {
  switch (kind) {
    case kAllreduce: return "allreduce";
    case kBroadcast: return "broadcast";
    case kAllgather: return "allgather";
    case kReduceScatter: return "reduce_scatter";
    case kBarrier: return "barrier";
    case kPointToPoint: return "send/recv";
  }
  return "an unknown operation";
}

inline std::string dtype_name(uint32_t dtype) {
  switch (dtype) {
    case 0: return "float32";
    case 1: return "float64";
    case 2: return "int32";
    case 3: return "int64";
  }
  return "dtype " + std::to_string(dtype);
}

inline std::string reduce_name(uint32_t op) {
  switch (op) {
    case 0: return "SUM";
    case 1: return "MAX";
    case 2: return "MIN";
    case 3: return "AVG";
  }
  return "op " + std::to_string(op);
}

// "allreduce(10 x float32, SUM)", "broadcast(4096 bytes, root=1)", "barrier()".
inline std::string describe(const ProcessGroup::Call& c) {
  std::string args;
  switch (c.kind) {
    case kAllreduce:
    case kReduceScatter:
      args = std::to_string(c.count) + " x " + dtype_name(c.dtype) + ", " + reduce_name(c.reduce);
      break;
    case kBroadcast:
      args = std::to_string(c.count) + " bytes, root=" + std::to_string(c.root);
      break;
    case kAllgather:
      args = std::to_string(c.count) + " bytes";
      break;
    default:
      break;
  }
  return std::string(kind_name(c.kind)) + "(" + args + ")";
}

inline void put_u32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
inline uint32_t get_u32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return uint32_t(u[0]) | uint32_t(u[1]) << 8 | uint32_t(u[2]) << 16 | uint32_t(u[3]) << 24;
}
inline void put_u64(char* p, uint64_t v) {
  put_u32(p, static_cast<uint32_t>(v & 0xffffffffu));
  put_u32(p + 4, static_cast<uint32_t>(v >> 32));
}
inline uint64_t get_u64(const char* p) { return uint64_t(get_u32(p)) | uint64_t(get_u32(p + 4)) << 32; }

// Control frames: u32 magic | u32 type | u64 argument (little-endian).
inline std::string control_frame(uint32_t type, uint64_t arg) {
  std::string f(kFrameSize, '\0');
  put_u32(&f[0], kCtrlMagic);
  put_u32(&f[4], type);
  put_u32(&f[8], static_cast<uint32_t>(arg & 0xffffffffu));
  put_u32(&f[12], static_cast<uint32_t>(arg >> 32));
  return f;
}

inline uint32_t fnv1a(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

// Byte offsets of `parts` near-equal runs of `count` elements of `elem` bytes.
inline std::vector<size_t> split(size_t count, int parts, size_t elem) {
  std::vector<size_t> offsets(parts + 1);
  for (int i = 0; i <= parts; ++i) offsets[i] = (count * i / parts) * elem;
  return offsets;
}

}  // namespace ember::distributed::group_wire
