#include "ember/distributed/process_group.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>

#include "auth.h"
#include "ember/distributed/errors.h"
#include "group_wire.h"

namespace ember::distributed {
using namespace group_wire;

struct ProcessGroup::Peer {
  Socket data;
  Socket ctrl;
  std::string ctrl_in;
  uint64_t arrived = 0;  // the highest collective number this peer has entered
  std::map<uint64_t, Call> calls_ahead;  // announced calls of collectives we have not begun
  bool said_goodbye = false;
  bool ctrl_closed = false;
};

struct ProcessGroup::Transfer {
  int peer;
  bool is_send;
  char* ptr;
  size_t size;
  size_t done = 0;
  // The data header goes out (or must arrive) before the payload.
  char header[kDataHeaderSize] = {};
  char expect[kDataHeaderSize] = {};  // receive side: the header this message must carry
  size_t header_done = 0;
  bool stamped = false;
  // Receive-side reduction: each completed element is folded into reduce_dst on arrival,
  // so reduction overlaps the transfer instead of following it.
  char* reduce_dst = nullptr;
  size_t reduced = 0;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
};

namespace {

using Transfer = ProcessGroup::Transfer;

Transfer send_to(int peer, const void* ptr, size_t size) {
  return Transfer{peer, true, const_cast<char*>(static_cast<const char*>(ptr)), size};
}
Transfer recv_from(int peer, void* ptr, size_t size) {
  return Transfer{peer, false, static_cast<char*>(ptr), size};
}

}  // namespace

ProcessGroup::ProcessGroup(std::shared_ptr<StoreClient> store, int rank, int world_size,
                           Milliseconds timeout, const std::string& prefix)
    : rank_(rank), world_size_(world_size), timeout_(timeout) {
  if (world_size > kMaxWorldSize)
    throw DistributedError("init_process_group", "world size " + std::to_string(world_size) +
                                                     " exceeds the supported maximum of " +
                                                     std::to_string(kMaxWorldSize));
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw DistributedError("init_process_group", "rank " + std::to_string(rank) +
                                                     " is outside world size " +
                                                     std::to_string(world_size));
  ensure_socket_runtime();
  peers_.resize(world_size);
  sent_p2p_.assign(world_size, 0);
  received_p2p_.assign(world_size, 0);
  for (int p = 0; p < world_size; ++p)
    if (p != rank) peers_[p] = std::make_unique<Peer>();
  connect_mesh(*store, prefix, Clock::now() + timeout_);
}

ProcessGroup::~ProcessGroup() {
  try {
    shutdown();
  } catch (...) {
  }
}

void ProcessGroup::connect_mesh(StoreClient& store, const std::string& prefix, Deadline deadline) {
  const char* op = "init_process_group";
  if (world_size_ == 1) return;
  // The address this host uses to reach the store is one the peers can reach us at, and
  // the only one we listen on.
  const std::string host = store.local_address();
  Socket listener = Socket::listen(host, 0, 2 * world_size_ + 8);
  // Every connection proves it holds the store's token: the acceptor sends a fresh nonce,
  // the connector answers with its hello and HMAC(token, label | nonce | hello).
  const std::string& token = store.token();
  auto proof = [&](const std::string& nonce, const char* hello) {
    return auth::hmac_sha256(token, std::string(kHelloLabel) + nonce + std::string(hello, kFrameSize));
  };
  auto addr_key = [&](int r) { return prefix + "/addr/" + std::to_string(r); };
  store.set(addr_key(rank_), host + ":" + std::to_string(listener.local_port()));
  const uint32_t tag = fnv1a(prefix) ^ static_cast<uint32_t>(world_size_);

  // Lower ranks listen for us; we listen for higher ranks. Connections complete in the
  // kernel backlog, so connecting first and accepting second cannot deadlock.
  for (int p = 0; p < rank_; ++p) {
    std::string addr;
    try {
      addr = store.get(addr_key(p), Milliseconds(remaining_ms(deadline)));
    } catch (const TimeoutError&) {
      std::vector<int> missing;
      for (int q = 0; q < rank_; ++q)
        if (!store.check({addr_key(q)})) missing.push_back(q);
      throw TimeoutError(op, "ranks " + format_ranks(missing) + " did not join within the timeout",
                         missing);
    }
    auto colon = addr.rfind(':');
    std::string peer_host = addr.substr(0, colon);
    auto peer_port = static_cast<uint16_t>(std::stoi(addr.substr(colon + 1)));
    for (uint32_t kind : {kDataConn, kCtrlConn}) {
      Socket s = Socket::connect(peer_host, peer_port, deadline,
                                 std::string(op) + " (connecting to rank " + std::to_string(p) + ")");
      std::string nonce(auth::kNonceSize, '\0');
      if (!s.recv_all(&nonce[0], nonce.size(), deadline))
        throw TimeoutError(op, "handshake with rank " + std::to_string(p) + " timed out", {p});
      char hello[kFrameSize + auth::kMacSize];
      put_u32(hello, kHelloMagic);
      put_u32(hello + 4, tag);
      put_u32(hello + 8, static_cast<uint32_t>(rank_));
      put_u32(hello + 12, kind);
      const auth::Digest mac = proof(nonce, hello);
      std::memcpy(hello + kFrameSize, mac.data(), mac.size());
      if (!s.send_all(hello, sizeof(hello), deadline))
        throw TimeoutError(op, "handshake with rank " + std::to_string(p) + " timed out", {p});
      (kind == kDataConn ? peers_[p]->data : peers_[p]->ctrl) = std::move(s);
    }
  }
  int expected = 2 * (world_size_ - 1 - rank_);
  while (expected > 0) {
    // A stream of stray connections must not keep us past the deadline either.
    Socket s = Clock::now() < deadline ? listener.accept(deadline) : Socket();
    if (!s.valid()) {
      std::vector<int> missing;
      for (int p = rank_ + 1; p < world_size_; ++p)
        if (!peers_[p]->data.valid() || !peers_[p]->ctrl.valid()) missing.push_back(p);
      throw TimeoutError(op, "ranks " + format_ranks(missing) + " did not join within the timeout",
                         missing);
    }
    const std::string nonce = auth::random_nonce();
    char hello[kFrameSize + auth::kMacSize];
    bool ok = false;
    try {
      // Exactly one hello is read, within 5 s: a silent or chatty stray costs no more.
      const Deadline hello_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(5));
      ok = s.send_all(nonce.data(), nonce.size(), hello_deadline) &&
           s.recv_all(hello, sizeof(hello), hello_deadline);
    } catch (const DistributedError&) {
      ok = false;
    }
    // Anything that is not a well-formed hello proving the token from an expected peer is a
    // stray connection: drop it and keep waiting for the real ones.
    if (!ok || get_u32(hello) != kHelloMagic || get_u32(hello + 4) != tag) continue;
    const auth::Digest mac = proof(nonce, hello);
    if (!auth::equal_digests(reinterpret_cast<const unsigned char*>(hello + kFrameSize), mac.data(),
                             mac.size()))
      continue;
    uint32_t peer = get_u32(hello + 8), kind = get_u32(hello + 12);
    if (peer <= static_cast<uint32_t>(rank_) || peer >= static_cast<uint32_t>(world_size_) ||
        kind > kCtrlConn)
      continue;
    Socket& slot = kind == kDataConn ? peers_[peer]->data : peers_[peer]->ctrl;
    if (slot.valid()) continue;
    slot = std::move(s);
    --expected;
  }
}

void ProcessGroup::check_usable(const char* op) const {
  if (aborted())
    throw DistributedError(op, "the process group was aborted by an earlier failure (" +
                                   abort_reason_ + "); destroy it and create a new one");
  if (peers_.empty()) throw DistributedError(op, "the process group was destroyed");
}

uint64_t ProcessGroup::begin_collective(const char* op, const Call& call, Deadline dl) {
  const uint64_t seq = ++seq_;
  cur_kind_ = call.kind;
  cur_call_ = call;
  std::string frame = control_frame(kArrive, seq);
  char body[kCallSize];
  put_u32(body, call.kind);
  put_u32(body + 4, call.dtype);
  put_u32(body + 8, call.reduce);
  put_u32(body + 12, call.root);
  put_u64(body + 16, call.count);
  frame.append(body, kCallSize);
  for (int p = 0; p < world_size_; ++p) {
    if (p == rank_) continue;
    auto it = peers_[p]->calls_ahead.find(seq);
    if (it != peers_[p]->calls_ahead.end()) {
      const Call theirs = it->second;
      peers_[p]->calls_ahead.erase(it);
      check_call(op, p, theirs);
    }
  }
  for (int p = 0; p < world_size_; ++p) {
    if (p == rank_ || peers_[p]->ctrl_closed) continue;
    try {
      if (!peers_[p]->ctrl.send_all(frame.data(), frame.size(), dl))
        throw TimeoutError(op, "rank " + std::to_string(p) + " stopped reading", {p});
    } catch (const TimeoutError&) {
      throw;
    } catch (const DistributedError&) {
      read_control(op, p);  // prefers the peer's own abort notice, if it sent one
      throw DistributedError(op, "rank " + std::to_string(p) + " disconnected", {p});
    }
  }
  return seq;
}

void ProcessGroup::check_call(const char* op, int p, const Call& theirs) const {
  if (theirs == cur_call_) return;
  const bool me_first = rank_ < p;
  const std::string mine = "rank " + std::to_string(rank_) + " called " + describe(cur_call_);
  const std::string other = "rank " + std::to_string(p) + " called " + describe(theirs);
  throw DistributedError(op, "collective #" + std::to_string(seq_) + " does not match across ranks: " +
                                 (me_first ? mine + ", " + other : other + ", " + mine) +
                                 "; every rank must make the same call with the same size, dtype and op");
}

template <typename Body>
void ProcessGroup::collective(const char* op, const Call& call, Body&& body) {
  guarded(op, [&] {
    const Deadline dl = deadline();
    const uint64_t seq = begin_collective(op, call, dl);
    body(dl, seq);
    if (world_size_ == 1) return;
    std::vector<Transfer> none;
    progress(op, none, dl, seq, true);
  });
}

void ProcessGroup::read_control(const char* op, int p) {
  Peer& peer = *peers_[p];
  char buf[4096];
  while (!peer.ctrl_closed) {
    IoResult r = peer.ctrl.recv_some(buf, sizeof(buf));
    if (r.status == IoResult::kWouldBlock) break;
    if (r.status == IoResult::kClosed) {
      peer.ctrl_closed = true;
      break;
    }
    peer.ctrl_in.append(buf, r.bytes);
  }
  size_t pos = 0;
  while (peer.ctrl_in.size() - pos >= kFrameSize) {
    const char* f = peer.ctrl_in.data() + pos;
    if (get_u32(f) != kCtrlMagic)
      throw DistributedError(op, "corrupt control stream from rank " + std::to_string(p), {p});
    uint32_t type = get_u32(f + 4);
    uint64_t arg = uint64_t(get_u32(f + 8)) | uint64_t(get_u32(f + 12)) << 32;
    if (type == kArrive) {
      if (peer.ctrl_in.size() - pos - kFrameSize < kCallSize) break;  // rest still in flight
      const char* b = f + kFrameSize;
      Call theirs;
      theirs.kind = get_u32(b);
      theirs.dtype = get_u32(b + 4);
      theirs.reduce = get_u32(b + 8);
      theirs.root = get_u32(b + 12);
      theirs.count = get_u64(b + 16);
      pos += kCallSize;  // the frame header is skipped below
      peer.arrived = std::max(peer.arrived, arg);
      if (arg == seq_ && seq_ != 0) {
        check_call(op, p, theirs);
      } else if (arg > seq_) {
        if (peer.calls_ahead.size() >= kMaxCallsAhead)
          throw DistributedError(op, "corrupt control stream from rank " + std::to_string(p), {p});
        peer.calls_ahead[arg] = theirs;
      }
    } else if (type == kGoodbye) {
      peer.said_goodbye = true;
    } else if (type == kAbort) {
      uint32_t len = static_cast<uint32_t>(arg & 0xffffffffu);
      uint32_t kind = static_cast<uint32_t>(arg >> 32);
      if (len > kMaxAbortPayload)
        throw DistributedError(op, "corrupt abort notice from rank " + std::to_string(p), {p});
      if (peer.ctrl_in.size() - pos - kFrameSize < len) break;  // rest still in flight
      const char* body = f + kFrameSize;
      uint32_t nmissing = len >= 4 ? get_u32(body) : 0;
      std::vector<int> missing;
      size_t off = 4;
      for (uint32_t i = 0; i < nmissing && off + 4 <= len; ++i, off += 4)
        missing.push_back(static_cast<int>(get_u32(body + off)));
      std::string text(body + std::min<size_t>(off, len), body + len);
      std::string message = "aborted because rank " + std::to_string(p) + " failed: " + text;
      if (kind == kAbortTimeout) throw TimeoutError(op, message, missing);
      throw DistributedError(op, message, missing);
    } else {
      throw DistributedError(op, "unknown control frame from rank " + std::to_string(p), {p});
    }
    pos += kFrameSize;
  }
  peer.ctrl_in.erase(0, pos);
  if (peer.ctrl_closed && !peer.said_goodbye)
    throw DistributedError(op,
                           "rank " + std::to_string(p) +
                               " disconnected (its process exited or was killed)",
                           {p});
}

void ProcessGroup::stamp(Transfer& t, uint64_t seq) const {
  char* h = t.is_send ? t.header : t.expect;
  put_u32(h, kDataMagic);
  h[4] = static_cast<char>(cur_kind_ & 0xff);
  h[5] = static_cast<char>(cur_kind_ >> 8);
  h[6] = static_cast<char>(cur_call_.dtype & 0xff);
  h[7] = static_cast<char>(cur_call_.reduce & 0xff);
  put_u64(h + 8, seq);
  put_u64(h + 16, t.size);
  t.stamped = true;
}

void ProcessGroup::bad_header(const char* op, int p, const Transfer& t) {
  // The peer announced its call on the control connection before sending data: that
  // notice names both calls, so wait a moment for it (check_call throws on a mismatch).
  const Deadline grace = Clock::now() + std::chrono::milliseconds(200);
  read_control(op, p);
  while (seq_ != 0 && peers_[p]->arrived < seq_ && !peers_[p]->ctrl_closed && Clock::now() < grace) {
    std::vector<PollItem> items{{peers_[p]->ctrl.handle(), true, false}};
    poll_sockets(items, remaining_ms(grace, 200));
    read_control(op, p);
  }
  const char* h = t.header;
  const std::string who = "rank " + std::to_string(p);
  if (get_u32(h) != kDataMagic)
    throw DistributedError(op, "corrupt data stream from " + who + " (no message header where one was due)", {p});
  const uint32_t kind = uint32_t(static_cast<unsigned char>(h[4])) | uint32_t(static_cast<unsigned char>(h[5])) << 8;
  const auto dtype = static_cast<unsigned char>(h[6]), reduce = static_cast<unsigned char>(h[7]);
  auto message = [](uint32_t k, uint32_t dt, uint32_t red, uint64_t seq, uint64_t bytes) {
    std::string m = std::string(kind_name(k)) + " message #" + std::to_string(seq) + " of " +
                    std::to_string(bytes) + " bytes";
    if (dt != kNoDType) m += " of " + dtype_name(dt);
    if (red != kNoReduce) m += " with " + reduce_name(red);
    return m;
  };
  const char* e = t.expect;
  const uint32_t my_kind = uint32_t(static_cast<unsigned char>(e[4])) | uint32_t(static_cast<unsigned char>(e[5])) << 8;
  throw DistributedError(
      op, "ranks " + std::to_string(std::min(rank_, p)) + " and " + std::to_string(std::max(rank_, p)) +
              " do not match across ranks: " + who + " sent a " + message(kind, dtype, reduce, get_u64(h + 8), get_u64(h + 16)) +
              " where rank " + std::to_string(rank_) + " expected a " +
              message(my_kind, static_cast<unsigned char>(e[6]), static_cast<unsigned char>(e[7]), get_u64(e + 8),
                      get_u64(e + 16)) +
              "; every rank must make the same call with the same size, dtype and op");
}

void ProcessGroup::progress(const char* op, std::vector<Transfer>& transfers, Deadline dl,
                            uint64_t seq, bool wait_arrivals) {
  const int n = world_size_;
  std::vector<int> send_idx(n), recv_idx(n);
  std::vector<PollItem> items;
  std::vector<int> item_peer;
  std::vector<bool> item_is_ctrl;
  for (Transfer& t : transfers)
    if (!t.stamped) stamp(t, seq);
  auto complete = [](const Transfer& t) { return t.header_done == kDataHeaderSize && t.done == t.size; };
  auto all_arrived = [&] {
    if (wait_arrivals)
      for (int p = 0; p < n; ++p)
        if (p != rank_ && peers_[p]->arrived < seq) return false;
    return true;
  };
  while (true) {
    std::fill(send_idx.begin(), send_idx.end(), -1);
    std::fill(recv_idx.begin(), recv_idx.end(), -1);
    bool pending = false;
    for (size_t i = 0; i < transfers.size(); ++i) {
      Transfer& t = transfers[i];
      if (complete(t)) continue;
      auto& slot = t.is_send ? send_idx[t.peer] : recv_idx[t.peer];
      if (slot < 0) slot = static_cast<int>(i);  // one stream per direction, in order
      pending = true;
    }
    if (!pending && all_arrived()) return;

    bool moved = false;
    for (int p = 0; p < n; ++p) {
      if (send_idx[p] >= 0) {
        Transfer& t = transfers[send_idx[p]];
        while (!complete(t)) {
          const bool in_header = t.header_done < kDataHeaderSize;
          IoResult r = in_header ? peers_[p]->data.send_some(t.header + t.header_done, kDataHeaderSize - t.header_done)
                                 : peers_[p]->data.send_some(t.ptr + t.done, t.size - t.done);
          if (r.status == IoResult::kWouldBlock) break;
          if (r.status == IoResult::kClosed) {
            read_control(op, p);
            throw DistributedError(op, "rank " + std::to_string(p) + " closed its connection", {p});
          }
          (in_header ? t.header_done : t.done) += r.bytes;
          moved = true;
        }
      }
      if (recv_idx[p] >= 0) {
        Transfer& t = transfers[recv_idx[p]];
        while (!complete(t)) {
          const bool in_header = t.header_done < kDataHeaderSize;
          // Never read past the header: what follows is checked against it first.
          IoResult r = in_header ? peers_[p]->data.recv_some(t.header + t.header_done, kDataHeaderSize - t.header_done)
                                 : peers_[p]->data.recv_some(t.ptr + t.done, t.size - t.done);
          if (r.status == IoResult::kWouldBlock) break;
          if (r.status == IoResult::kClosed) {
            read_control(op, p);
            throw DistributedError(op,
                                   "rank " + std::to_string(p) +
                                       (peers_[p]->said_goodbye ? " left the group" : " closed its connection") +
                                       " before sending its data",
                                   {p});
          }
          (in_header ? t.header_done : t.done) += r.bytes;
          moved = true;
          if (in_header && t.header_done == kDataHeaderSize &&
              std::memcmp(t.header, t.expect, kDataHeaderSize) != 0)
            bad_header(op, p, t);
        }
        if (t.reduce_dst) {
          const size_t es = dtype_size(t.dtype);
          const size_t ready = t.done - t.done % es;
          if (ready > t.reduced) {
            reduce_into(t.reduce_dst + t.reduced, t.ptr + t.reduced, (ready - t.reduced) / es,
                        t.dtype, t.op);
            t.reduced = ready;
          }
        }
      }
    }

    items.clear();
    item_peer.clear();
    item_is_ctrl.clear();
    for (int p = 0; p < n; ++p) {
      if (p == rank_) continue;
      if (send_idx[p] >= 0 || recv_idx[p] >= 0) {
        items.push_back({peers_[p]->data.handle(), recv_idx[p] >= 0, send_idx[p] >= 0});
        item_peer.push_back(p);
        item_is_ctrl.push_back(false);
      }
      if (!peers_[p]->ctrl_closed) {
        items.push_back({peers_[p]->ctrl.handle(), true, false});
        item_peer.push_back(p);
        item_is_ctrl.push_back(true);
      }
    }
    // The deadline holds whatever the peers do: one that keeps trickling bytes does not
    // buy more time than one that sends nothing.
    if (Clock::now() >= dl &&
        !(std::all_of(transfers.begin(), transfers.end(), complete) && all_arrived())) {
      for (int p = 0; p < n; ++p)
        if (p != rank_ && !peers_[p]->ctrl_closed) read_control(op, p);
      std::vector<int> absent;
      if (seq)
        for (int p = 0; p < n; ++p)
          if (p != rank_ && peers_[p]->arrived < seq) absent.push_back(p);
      const std::string after = "timed out after " + std::to_string(timeout_.count()) + " ms";
      if (!absent.empty())
        throw TimeoutError(op, after + "; ranks " + format_ranks(absent) +
                                   " never entered collective #" + std::to_string(seq),
                           absent);
      std::vector<int> stalled;
      for (int p = 0; p < n; ++p)
        if (p != rank_ && (send_idx[p] >= 0 || recv_idx[p] >= 0)) stalled.push_back(p);
      throw TimeoutError(op, after + "; ranks " + format_ranks(stalled) + " did not finish exchanging data",
                         stalled);
    }
    if (items.empty()) continue;
    poll_sockets(items, moved ? 0 : remaining_ms(dl, 1000));
    for (size_t i = 0; i < items.size(); ++i)
      if (item_is_ctrl[i] && items[i].readable) read_control(op, item_peer[i]);
  }
}

void ProcessGroup::fail(const char* op, const DistributedError& error) {
  if (aborted()) return;
  abort_reason_ = error.what();
  const bool timed_out = dynamic_cast<const TimeoutError*>(&error) != nullptr;
  std::string body(4, '\0');
  put_u32(&body[0], static_cast<uint32_t>(error.missing_ranks().size()));
  for (int r : error.missing_ranks()) {
    char b[4];
    put_u32(b, static_cast<uint32_t>(r));
    body.append(b, 4);
  }
  body += std::string(error.what()).substr(0, kMaxAbortPayload / 2);
  uint64_t arg = uint64_t(timed_out ? kAbortTimeout : kAbortFailure) << 32 | body.size();
  const std::string notice = control_frame(kAbort, arg) + body;
  // Best effort: tell every peer why, then hang up so nobody keeps waiting on us.
  const Deadline dl = Clock::now() + std::chrono::milliseconds(200);
  for (int p = 0; p < world_size_; ++p) {
    if (p == rank_) continue;
    try {
      if (!peers_[p]->ctrl_closed) peers_[p]->ctrl.send_all(notice.data(), notice.size(), dl);
    } catch (...) {
    }
    peers_[p]->data.shutdown();
    peers_[p]->ctrl.shutdown();
  }
  (void)op;
}

// Serialises the operation, refuses it on an aborted group, and aborts the group (telling
// every peer) when it fails.
template <typename Body>
void ProcessGroup::guarded(const char* op, Body&& body) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_usable(op);
  try {
    body();
  } catch (const DistributedError& e) {
    fail(op, e);
    throw;
  }
}

void ProcessGroup::ring_reduce_scatter(const char* op, char* data, const std::vector<size_t>& off,
                                       DType dtype, ReduceOp op_kind, Deadline dl, uint64_t seq) {
  const int n = world_size_, r = rank_;
  const int right = (r + 1) % n, left = (r - 1 + n) % n;
  size_t max_block = 0;
  for (int i = 0; i < n; ++i) max_block = std::max(max_block, off[i + 1] - off[i]);
  std::vector<char> incoming(max_block);
  // After step s rank r holds the partial sum of block (r - s - 2); after n - 1 steps it
  // holds the complete reduction of block r.
  for (int s = 0; s < n - 1; ++s) {
    const int sb = ((r - s - 1) % n + n) % n;
    const int rb = ((r - s - 2) % n + n) % n;
    std::vector<Transfer> ts{send_to(right, data + off[sb], off[sb + 1] - off[sb]),
                             recv_from(left, incoming.data(), off[rb + 1] - off[rb])};
    ts[1].reduce_dst = data + off[rb];
    ts[1].dtype = dtype;
    ts[1].op = op_kind;
    progress(op, ts, dl, seq, false);
  }
}

void ProcessGroup::ring_allgather(const char* op, char* data, const std::vector<size_t>& off,
                                  Deadline dl, uint64_t seq) {
  const int n = world_size_, r = rank_;
  const int right = (r + 1) % n, left = (r - 1 + n) % n;
  for (int s = 0; s < n - 1; ++s) {
    const int sb = ((r - s) % n + n) % n;
    const int rb = ((r - s - 1) % n + n) % n;
    std::vector<Transfer> ts{send_to(right, data + off[sb], off[sb + 1] - off[sb]),
                             recv_from(left, data + off[rb], off[rb + 1] - off[rb])};
    progress(op, ts, dl, seq, false);
  }
}

static ProcessGroup::Call reduction_call(uint32_t kind, size_t count, DType dtype, ReduceOp op) {
  ProcessGroup::Call c;
  c.kind = kind;
  c.dtype = static_cast<uint32_t>(dtype);
  c.reduce = static_cast<uint32_t>(op);
  c.count = count;
  return c;
}

static ProcessGroup::Call bytes_call(uint32_t kind, size_t bytes, int root = 0) {
  ProcessGroup::Call c;
  c.kind = kind;
  c.dtype = kNoDType;
  c.reduce = kNoReduce;
  c.root = static_cast<uint32_t>(root);
  c.count = bytes;
  return c;
}

void ProcessGroup::allreduce(void* data, size_t count, DType dtype, ReduceOp op_kind) {
  const char* op = "allreduce";
  const size_t es = dtype_size(dtype);
  if (count > SIZE_MAX / es) throw std::invalid_argument("allreduce: element count overflows the address space");
  collective(op, reduction_call(kAllreduce, count, dtype, op_kind), [&](Deadline dl, uint64_t seq) {
    const int n = world_size_;
    if (n == 1) return;
    const size_t bytes = count * es;
    char* buf = static_cast<char*>(data);
    if (bytes <= ring_threshold_ || count < static_cast<size_t>(n)) {
      // Direct exchange, folded in rank order so every rank computes identical bits.
      std::vector<std::vector<char>> theirs(n);
      std::vector<Transfer> ts;
      for (int p = 0; p < n; ++p) {
        if (p == rank_) continue;
        theirs[p].resize(bytes);
        ts.push_back(send_to(p, buf, bytes));
        ts.push_back(recv_from(p, theirs[p].data(), bytes));
      }
      progress(op, ts, dl, seq, false);
      std::vector<char> acc(buf, buf + bytes);
      if (rank_ != 0) std::memcpy(acc.data(), theirs[0].data(), bytes);
      for (int q = 1; q < n; ++q)
        reduce_into(acc.data(), q == rank_ ? buf : theirs[q].data(), count, dtype, op_kind);
      std::memcpy(buf, acc.data(), bytes);
    } else {
      const auto off = split(count, n, es);
      ring_reduce_scatter(op, buf, off, dtype, op_kind, dl, seq);
      ring_allgather(op, buf, off, dl, seq);
    }
    if (op_kind == ReduceOp::kAvg) divide(buf, count, dtype, n);
  });
}

void ProcessGroup::broadcast(void* data, size_t bytes, int root) {
  const char* op = "broadcast";
  if (root < 0 || root >= world_size_)
    throw DistributedError(op, "invalid root rank " + std::to_string(root) + " for world size " +
                                   std::to_string(world_size_));
  collective(op, bytes_call(kBroadcast, bytes, root), [&](Deadline dl, uint64_t seq) {
    const int n = world_size_;
    if (n == 1) return;
    char* buf = static_cast<char*>(data);
    std::vector<Transfer> ts;
    if (bytes <= std::max(ring_threshold_, kDirectBroadcastBytes)) {
      if (rank_ == root) {
        for (int p = 0; p < n; ++p)
          if (p != root) ts.push_back(send_to(p, buf, bytes));
      } else {
        ts.push_back(recv_from(root, buf, bytes));
      }
      progress(op, ts, dl, seq, false);
      return;
    }
    // Large: scatter one block to each rank, then a ring allgather, so the root sends
    // each byte once instead of world_size - 1 times.
    const auto off = split(bytes, n, 1);
    if (rank_ == root) {
      for (int p = 0; p < n; ++p)
        if (p != root) ts.push_back(send_to(p, buf + off[p], off[p + 1] - off[p]));
    } else {
      ts.push_back(recv_from(root, buf + off[rank_], off[rank_ + 1] - off[rank_]));
    }
    progress(op, ts, dl, seq, false);
    ring_allgather(op, buf, off, dl, seq);
  });
}

void ProcessGroup::allgather(const void* in, void* out, size_t bytes) {
  const char* op = "allgather";
  if (bytes > SIZE_MAX / static_cast<size_t>(world_size_))
    throw std::invalid_argument("allgather: output size overflows the address space");
  collective(op, bytes_call(kAllgather, bytes), [&](Deadline dl, uint64_t seq) {
    const int n = world_size_;
    char* dst = static_cast<char*>(out);
    std::memmove(dst + bytes * rank_, in, bytes);
    if (n == 1) return;
    if (bytes * n <= ring_threshold_) {
      std::vector<Transfer> ts;
      for (int p = 0; p < n; ++p) {
        if (p == rank_) continue;
        ts.push_back(send_to(p, dst + bytes * rank_, bytes));
        ts.push_back(recv_from(p, dst + bytes * p, bytes));
      }
      progress(op, ts, dl, seq, false);
      return;
    }
    ring_allgather(op, dst, split(n, n, bytes), dl, seq);
  });
}

void ProcessGroup::reduce_scatter(const void* in, void* out, size_t count, DType dtype,
                                  ReduceOp op_kind) {
  const char* op = "reduce_scatter";
  const size_t es = dtype_size(dtype);
  if (count > SIZE_MAX / es / static_cast<size_t>(world_size_))
    throw std::invalid_argument("reduce_scatter: element count overflows the address space");
  collective(op, reduction_call(kReduceScatter, count, dtype, op_kind), [&](Deadline dl, uint64_t seq) {
    const int n = world_size_;
    const size_t block = count * es;
    const char* src = static_cast<const char*>(in);
    char* dst = static_cast<char*>(out);
    if (n == 1) {
      std::memmove(dst, src, block);
    } else if (block * n <= ring_threshold_) {
      std::vector<std::vector<char>> theirs(n);
      std::vector<Transfer> ts;
      for (int p = 0; p < n; ++p) {
        if (p == rank_) continue;
        theirs[p].resize(block);
        ts.push_back(send_to(p, src + block * p, block));
        ts.push_back(recv_from(p, theirs[p].data(), block));
      }
      progress(op, ts, dl, seq, false);
      std::vector<char> acc(block);
      std::memcpy(acc.data(), rank_ == 0 ? src : theirs[0].data(), block);
      for (int q = 1; q < n; ++q)
        reduce_into(acc.data(), q == rank_ ? src + block * rank_ : theirs[q].data(), count, dtype,
                    op_kind);
      std::memcpy(dst, acc.data(), block);
    } else {
      std::vector<char> work(src, src + block * n);
      ring_reduce_scatter(op, work.data(), split(n, n, block), dtype, op_kind, dl, seq);
      std::memcpy(dst, work.data() + block * rank_, block);
    }
    if (op_kind == ReduceOp::kAvg) divide(dst, count, dtype, n);
  });
}

void ProcessGroup::barrier() {
  const char* op = "barrier";
  collective(op, bytes_call(kBarrier, 0), [](Deadline, uint64_t) {});
}

void ProcessGroup::send(const void* data, size_t bytes, int dst) {
  const char* op = "send";
  if (dst < 0 || dst >= world_size_ || dst == rank_)
    throw DistributedError(op, "invalid destination rank " + std::to_string(dst));
  guarded(op, [&] {
    cur_kind_ = kPointToPoint;
    cur_call_ = bytes_call(kPointToPoint, bytes);
    std::vector<Transfer> ts{send_to(dst, data, bytes)};
    stamp(ts[0], ++sent_p2p_[dst]);
    progress(op, ts, deadline(), 0, false);
  });
}

void ProcessGroup::recv(void* data, size_t bytes, int src) {
  const char* op = "recv";
  if (src < 0 || src >= world_size_ || src == rank_)
    throw DistributedError(op, "invalid source rank " + std::to_string(src));
  guarded(op, [&] {
    cur_kind_ = kPointToPoint;
    cur_call_ = bytes_call(kPointToPoint, bytes);
    std::vector<Transfer> ts{recv_from(src, data, bytes)};
    stamp(ts[0], ++received_p2p_[src]);
    progress(op, ts, deadline(), 0, false);
  });
}

void ProcessGroup::shutdown() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (peers_.empty()) return;
  const std::string bye = control_frame(kGoodbye, 0);
  const Deadline dl = Clock::now() + std::chrono::milliseconds(200);
  char sink[4096];
  for (int p = 0; p < world_size_; ++p) {
    if (p == rank_) continue;
    Peer& peer = *peers_[p];
    try {
      if (!peer.ctrl_closed && !aborted()) peer.ctrl.send_all(bye.data(), bye.size(), dl);
    } catch (...) {
    }
    // Unread bytes at close() make the kernel send a reset, which can overtake our
    // goodbye; drain what has arrived first.
    for (Socket* s : {&peer.ctrl, &peer.data}) {
      for (int i = 0; i < 64 && s->valid(); ++i) {
        IoResult r = s->recv_some(sink, sizeof(sink));
        if (r.status != IoResult::kDone) break;
      }
      s->shutdown();
    }
  }
  peers_.clear();
}

}  // namespace ember::distributed
