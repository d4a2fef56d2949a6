// ember/distributed/c_api.h over the C++ classes: every entry point catches what the C++
// side throws and turns it into a status plus the thread's last error.
#include "ember/distributed/c_api.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "ember/distributed/errors.h"
#include "ember/distributed/process_group.h"
#include "ember/distributed/store.h"

namespace ed = ember::distributed;

struct ember_dist_server {
  ed::StoreServer server;
  ember_dist_server(const std::string& host, uint16_t port, const std::string& token)
      : server(host, port, token) {}
};

struct ember_dist_client {
  std::shared_ptr<ed::StoreClient> client;
};

struct ember_dist_group {
  std::unique_ptr<ed::ProcessGroup> group;
};

namespace {

struct LastError {
  std::string message;
  std::string op;
  std::vector<int> missing_ranks;
};

thread_local LastError last_error;

ember_dist_status fail(ember_dist_status status, const char* message, const std::string& op = {},
                       const std::vector<int>& missing = {}) {
  last_error.message = message;
  last_error.op = op;
  last_error.missing_ranks = missing;
  return status;
}

// Runs body() and maps what it throws to a status.
template <typename Body>
ember_dist_status guarded(Body&& body) noexcept {
  try {
    body();
    return EMBER_DIST_OK;
  } catch (const ed::TimeoutError& e) {
    return fail(EMBER_DIST_TIMEOUT, e.what(), e.op(), e.missing_ranks());
  } catch (const ed::DistributedError& e) {
    return fail(EMBER_DIST_ERROR, e.what(), e.op(), e.missing_ranks());
  } catch (const std::invalid_argument& e) {
    return fail(EMBER_DIST_INVALID, e.what());
  } catch (const std::bad_alloc&) {
    return fail(EMBER_DIST_RUNTIME, "out of memory");
  } catch (const std::exception& e) {
    return fail(EMBER_DIST_RUNTIME, e.what());
  } catch (...) {
    return fail(EMBER_DIST_RUNTIME, "unknown C++ exception in ember_distributed");
  }
}

// A copy the caller frees with ember_dist_free.
void give(const std::string& s, char** value, size_t* value_len) {
  char* buffer = static_cast<char*>(std::malloc(s.size() + 1));
  if (buffer == nullptr) throw std::bad_alloc();
  std::memcpy(buffer, s.data(), s.size());
  buffer[s.size()] = '\0';
  *value = buffer;
  *value_len = s.size();
}


ed::Milliseconds ms(int64_t timeout_ms) {
  if (timeout_ms < 0 || timeout_ms > EMBER_DIST_MAX_TIMEOUT_MS)
    throw std::invalid_argument("timeout must be between 0 and " + std::to_string(EMBER_DIST_MAX_TIMEOUT_MS) +
                                " ms (one year), got " + std::to_string(timeout_ms) + " ms");
  return ed::Milliseconds(timeout_ms);
}

ed::Milliseconds ms_or(int64_t timeout_ms, const ed::StoreClient& client) {
  return timeout_ms < 0 ? client.timeout() : ms(timeout_ms);
}

// Setters cannot fail: they clamp into the accepted range.
ed::Milliseconds clamped(int64_t timeout_ms) {
  return ed::Milliseconds(timeout_ms < 0 ? 0 : timeout_ms > EMBER_DIST_MAX_TIMEOUT_MS ? EMBER_DIST_MAX_TIMEOUT_MS
                                                                                       : timeout_ms);
}

// A required pointer argument.
template <typename T>
T* need(T* p, const char* name) {
  if (p == nullptr) throw std::invalid_argument(std::string(name) + " must not be NULL");
  return p;
}

// A byte string argument: NULL is allowed only for length 0.
std::string bytes(const char* p, size_t len, const char* name) {
  if (p == nullptr && len != 0) throw std::invalid_argument(std::string(name) + " is NULL with a nonzero length");
  return len ? std::string(p, len) : std::string();
}

std::vector<std::string> keys_of(const char* const* keys, const size_t* lens, size_t count) {
  std::vector<std::string> out;
  if (count != 0 && (keys == nullptr || lens == nullptr))
    throw std::invalid_argument("keys and key lengths must not be NULL");
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) out.push_back(bytes(keys[i], lens[i], "key"));
  return out;
}

ed::DType dtype(int value) {
  if (value < EMBER_DIST_FLOAT32 || value > EMBER_DIST_INT64)
    throw std::invalid_argument("unsupported dtype code " + std::to_string(value));
  return static_cast<ed::DType>(value);
}

ed::ReduceOp reduce_op(int value) {
  if (value < EMBER_DIST_SUM || value > EMBER_DIST_AVG)
    throw std::invalid_argument("unsupported reduce op code " + std::to_string(value));
  return static_cast<ed::ReduceOp>(value);
}

}  // namespace

extern "C" {

const char* ember_dist_error_message(void) { return last_error.message.c_str(); }
const char* ember_dist_error_op(void) { return last_error.op.c_str(); }
size_t ember_dist_error_missing_ranks(const int** ranks) {
  *ranks = last_error.missing_ranks.data();
  return last_error.missing_ranks.size();
}

void ember_dist_free(char* buffer) { std::free(buffer); }

// --- server -----------------------------------------------------------------------------

ember_dist_status ember_dist_server_create(const char* host, uint16_t port, ember_dist_server** out) {
  return ember_dist_server_create_with_token(host, port, nullptr, 0, out);
}
ember_dist_status ember_dist_server_create_with_token(const char* host, uint16_t port, const char* token,
                                                      size_t token_len, ember_dist_server** out) {
  return guarded([&] {
    need(out, "out");  // checked before anything is created, so a refusal leaks nothing
    *out = new ember_dist_server(need(host, "host"), port, bytes(token, token_len, "token"));
  });
}
void ember_dist_server_destroy(ember_dist_server* server) { delete server; }
ember_dist_status ember_dist_server_stop(ember_dist_server* server) {
  return guarded([&] { server->server.stop(); });
}
uint16_t ember_dist_server_port(const ember_dist_server* server) { return server->server.port(); }
uint64_t ember_dist_server_rejected_connections(const ember_dist_server* server) {
  return server->server.rejected_connections();
}

// --- client -----------------------------------------------------------------------------

ember_dist_status ember_dist_client_create(const char* host, uint16_t port, int64_t timeout_ms,
                                           ember_dist_client** out) {
  return ember_dist_client_create_with_token(host, port, nullptr, 0, timeout_ms, out);
}
ember_dist_status ember_dist_client_create_with_token(const char* host, uint16_t port, const char* token,
                                                      size_t token_len, int64_t timeout_ms,
                                                      ember_dist_client** out) {
  return guarded([&] {
    need(out, "out");
    auto client = std::make_shared<ed::StoreClient>(need(host, "host"), port, ms(timeout_ms),
                                                    bytes(token, token_len, "token"));
    *out = new ember_dist_client{std::move(client)};
  });
}
void ember_dist_client_destroy(ember_dist_client* client) { delete client; }

ember_dist_status ember_dist_client_set(ember_dist_client* c, const char* key, size_t key_len, const char* value,
                                        size_t value_len) {
  return guarded([&] {
    need(c, "client")->client->set(bytes(key, key_len, "key"), bytes(value, value_len, "value"));
  });
}

ember_dist_status ember_dist_client_get(ember_dist_client* c, const char* key, size_t key_len, int64_t timeout_ms,
                                        char** value, size_t* value_len) {
  return guarded([&] {
    need(c, "client");
    need(value, "value");
    need(value_len, "value_len");
    give(c->client->get(bytes(key, key_len, "key"), ms_or(timeout_ms, *c->client)), value, value_len);
  });
}

ember_dist_status ember_dist_client_add(ember_dist_client* c, const char* key, size_t key_len, int64_t delta,
                                        int64_t* result) {
  return guarded([&] {
    need(result, "result");  // before the add: a refused call must not change the store
    *result = need(c, "client")->client->add(bytes(key, key_len, "key"), delta);
  });
}

ember_dist_status ember_dist_client_compare_set(ember_dist_client* c, const char* key, size_t key_len,
                                                const char* expected, size_t expected_len, const char* desired,
                                                size_t desired_len, char** value, size_t* value_len) {
  return guarded([&] {
    need(c, "client");
    need(value, "value");
    need(value_len, "value_len");
    give(c->client->compare_set(bytes(key, key_len, "key"), bytes(expected, expected_len, "expected"),
                                bytes(desired, desired_len, "desired")),
         value, value_len);
  });
}

ember_dist_status ember_dist_client_wait(ember_dist_client* c, const char* const* keys, const size_t* key_lens,
                                         size_t count, int64_t timeout_ms) {
  return guarded([&] { need(c, "client")->client->wait(keys_of(keys, key_lens, count), ms_or(timeout_ms, *c->client)); });
}

ember_dist_status ember_dist_client_check(ember_dist_client* c, const char* const* keys, const size_t* key_lens,
                                          size_t count, int* present) {
  return guarded([&] {
    need(present, "present");
    *present = need(c, "client")->client->check(keys_of(keys, key_lens, count)) ? 1 : 0;
  });
}

ember_dist_status ember_dist_client_delete_key(ember_dist_client* c, const char* key, size_t key_len, int* deleted) {
  return guarded([&] {
    need(deleted, "deleted");  // before the delete: a refused call must not change the store
    *deleted = need(c, "client")->client->delete_key(bytes(key, key_len, "key")) ? 1 : 0;
  });
}

ember_dist_status ember_dist_client_num_keys(ember_dist_client* c, int64_t* count) {
  return guarded([&] { *count = c->client->num_keys(); });
}

ember_dist_status ember_dist_client_local_address(ember_dist_client* c, char** value, size_t* value_len) {
  return guarded([&] { give(c->client->local_address(), value, value_len); });
}

int64_t ember_dist_client_timeout_ms(const ember_dist_client* c) { return c->client->timeout().count(); }
void ember_dist_client_set_timeout_ms(ember_dist_client* c, int64_t timeout_ms) {
  c->client->set_timeout(clamped(timeout_ms));
}
const char* ember_dist_client_host(const ember_dist_client* c) { return c->client->host().c_str(); }
uint16_t ember_dist_client_port(const ember_dist_client* c) { return c->client->port(); }

// --- process group ----------------------------------------------------------------------

ember_dist_status ember_dist_group_create(ember_dist_client* store, int rank, int world_size, int64_t timeout_ms,
                                          const char* prefix, ember_dist_group** out) {
  return guarded([&] {
    need(out, "out");
    auto group = std::make_unique<ed::ProcessGroup>(need(store, "store")->client, rank, world_size, ms(timeout_ms),
                                                    need(prefix, "prefix"));
    *out = new ember_dist_group{std::move(group)};
  });
}
void ember_dist_group_destroy(ember_dist_group* group) { delete group; }
int ember_dist_group_rank(const ember_dist_group* g) { return g->group->rank(); }
int ember_dist_group_world_size(const ember_dist_group* g) { return g->group->world_size(); }
int64_t ember_dist_group_timeout_ms(const ember_dist_group* g) { return g->group->timeout().count(); }
void ember_dist_group_set_timeout_ms(ember_dist_group* g, int64_t timeout_ms) {
  g->group->set_timeout(clamped(timeout_ms));
}
int ember_dist_group_aborted(const ember_dist_group* g) { return g->group->aborted() ? 1 : 0; }
void ember_dist_group_set_ring_threshold(ember_dist_group* g, size_t bytes) { g->group->set_ring_threshold(bytes); }

ember_dist_status ember_dist_group_allreduce(ember_dist_group* g, void* data, size_t count, int dt, int op) {
  return guarded([&] { g->group->allreduce(data, count, dtype(dt), reduce_op(op)); });
}
ember_dist_status ember_dist_group_broadcast(ember_dist_group* g, void* data, size_t bytes, int root) {
  return guarded([&] { g->group->broadcast(data, bytes, root); });
}
ember_dist_status ember_dist_group_allgather(ember_dist_group* g, const void* input, void* output, size_t bytes) {
  return guarded([&] { g->group->allgather(input, output, bytes); });
}
ember_dist_status ember_dist_group_reduce_scatter(ember_dist_group* g, const void* input, void* output, size_t count,
                                                  int dt, int op) {
  return guarded([&] { g->group->reduce_scatter(input, output, count, dtype(dt), reduce_op(op)); });
}
ember_dist_status ember_dist_group_barrier(ember_dist_group* g) {
  return guarded([&] { g->group->barrier(); });
}
ember_dist_status ember_dist_group_send(ember_dist_group* g, const void* data, size_t bytes, int dst) {
  return guarded([&] { g->group->send(data, bytes, dst); });
}
ember_dist_status ember_dist_group_recv(ember_dist_group* g, void* data, size_t bytes, int src) {
  return guarded([&] { g->group->recv(data, bytes, src); });
}
ember_dist_status ember_dist_group_shutdown(ember_dist_group* g) {
  return guarded([&] { g->group->shutdown(); });
}

}  // extern "C"
