/* A C interface to ember's distributed core (store server, store client, process group).
 *
 * The Python extension ember._distributed is written against this header: it is the only
 * part compiled once per Python, and a C interface keeps it free of the C++ standard
 * library's headers and of exception handling. Any C or FFI caller can use it too.
 *
 * Every fallible call returns an ember_dist_status. On failure the calling thread's last
 * error (ember_dist_error_*) says what went wrong, in which operation, and which ranks
 * were missing; it stays valid until the thread's next failing call.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "ember/distributed/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ember_dist_status {
  EMBER_DIST_OK = 0,
  EMBER_DIST_ERROR = 1,    /* a store, collective or RPC operation failed (DistributedError) */
  EMBER_DIST_TIMEOUT = 2,  /* it did not complete before its timeout (DistributedTimeoutError) */
  EMBER_DIST_INVALID = 3,  /* a bad argument (ValueError) */
  EMBER_DIST_RUNTIME = 4   /* anything else (RuntimeError), including out of memory */
} ember_dist_status;

/* The longest timeout accepted (one year, in milliseconds). Longer ones, negative ones (where
 * they do not mean "the client's own") and non-finite ones are refused as EMBER_DIST_INVALID. */
#define EMBER_DIST_MAX_TIMEOUT_MS (365LL * 24 * 3600 * 1000)

/* The same numbering as ember::distributed::DType and ReduceOp. */
enum { EMBER_DIST_FLOAT32 = 0, EMBER_DIST_FLOAT64 = 1, EMBER_DIST_INT32 = 2, EMBER_DIST_INT64 = 3 };
enum { EMBER_DIST_SUM = 0, EMBER_DIST_MAX = 1, EMBER_DIST_MIN = 2, EMBER_DIST_AVG = 3 };

typedef struct ember_dist_server ember_dist_server;
typedef struct ember_dist_client ember_dist_client;
typedef struct ember_dist_group ember_dist_group;

/* The calling thread's last error. */
EMBER_DIST_API const char* ember_dist_error_message(void);
EMBER_DIST_API const char* ember_dist_error_op(void);
EMBER_DIST_API size_t ember_dist_error_missing_ranks(const int** ranks);

/* Buffers returned by the store calls (get, compare_set, local_address). */
EMBER_DIST_API void ember_dist_free(char* buffer);

/* Store server: runs on a thread of this process. Every connection must prove it holds the
 * token (an HMAC-SHA256 challenge-response, see store_wire.h) before it is served. Without a
 * token (NULL or empty) the server may only listen on loopback: EMBER_DIST_INVALID otherwise.
 * ember_dist_server_create is ember_dist_server_create_with_token with no token. */
EMBER_DIST_API ember_dist_status ember_dist_server_create(const char* host, uint16_t port, ember_dist_server** out);
EMBER_DIST_API ember_dist_status ember_dist_server_create_with_token(const char* host, uint16_t port,
                                                                     const char* token, size_t token_len,
                                                                     ember_dist_server** out);
EMBER_DIST_API void ember_dist_server_destroy(ember_dist_server* server);
EMBER_DIST_API ember_dist_status ember_dist_server_stop(ember_dist_server* server);
EMBER_DIST_API uint16_t ember_dist_server_port(const ember_dist_server* server);
EMBER_DIST_API uint64_t ember_dist_server_rejected_connections(const ember_dist_server* server);

/* Store client. Keys and values are byte strings with a length. A timeout below zero means
 * the client's own timeout. */
EMBER_DIST_API ember_dist_status ember_dist_client_create(const char* host, uint16_t port, int64_t timeout_ms,
                                                          ember_dist_client** out);
/* Authenticates with `token`; a store that refuses it (or cannot prove it holds it) is
 * EMBER_DIST_ERROR naming the store. Process groups made on this client use the token too. */
EMBER_DIST_API ember_dist_status ember_dist_client_create_with_token(const char* host, uint16_t port,
                                                                     const char* token, size_t token_len,
                                                                     int64_t timeout_ms, ember_dist_client** out);
EMBER_DIST_API void ember_dist_client_destroy(ember_dist_client* client);
EMBER_DIST_API ember_dist_status ember_dist_client_set(ember_dist_client* client, const char* key, size_t key_len,
                                                       const char* value, size_t value_len);
EMBER_DIST_API ember_dist_status ember_dist_client_get(ember_dist_client* client, const char* key, size_t key_len,
                                                       int64_t timeout_ms, char** value, size_t* value_len);
EMBER_DIST_API ember_dist_status ember_dist_client_add(ember_dist_client* client, const char* key, size_t key_len,
                                                       int64_t delta, int64_t* result);
EMBER_DIST_API ember_dist_status ember_dist_client_compare_set(ember_dist_client* client, const char* key,
                                                               size_t key_len, const char* expected,
                                                               size_t expected_len, const char* desired,
                                                               size_t desired_len, char** value, size_t* value_len);
EMBER_DIST_API ember_dist_status ember_dist_client_wait(ember_dist_client* client, const char* const* keys,
                                                        const size_t* key_lens, size_t count, int64_t timeout_ms);
EMBER_DIST_API ember_dist_status ember_dist_client_check(ember_dist_client* client, const char* const* keys,
                                                         const size_t* key_lens, size_t count, int* present);
EMBER_DIST_API ember_dist_status ember_dist_client_delete_key(ember_dist_client* client, const char* key,
                                                              size_t key_len, int* deleted);
EMBER_DIST_API ember_dist_status ember_dist_client_num_keys(ember_dist_client* client, int64_t* count);
EMBER_DIST_API ember_dist_status ember_dist_client_local_address(ember_dist_client* client, char** value,
                                                                 size_t* value_len);
EMBER_DIST_API int64_t ember_dist_client_timeout_ms(const ember_dist_client* client);
EMBER_DIST_API void ember_dist_client_set_timeout_ms(ember_dist_client* client, int64_t timeout_ms);
EMBER_DIST_API const char* ember_dist_client_host(const ember_dist_client* client);
EMBER_DIST_API uint16_t ember_dist_client_port(const ember_dist_client* client);

/* Process group over a store client (which the group shares; destroying the client handle
 * first is allowed). */
EMBER_DIST_API ember_dist_status ember_dist_group_create(ember_dist_client* store, int rank, int world_size,
                                                         int64_t timeout_ms, const char* prefix,
                                                         ember_dist_group** out);
EMBER_DIST_API void ember_dist_group_destroy(ember_dist_group* group);
EMBER_DIST_API int ember_dist_group_rank(const ember_dist_group* group);
EMBER_DIST_API int ember_dist_group_world_size(const ember_dist_group* group);
EMBER_DIST_API int64_t ember_dist_group_timeout_ms(const ember_dist_group* group);
EMBER_DIST_API void ember_dist_group_set_timeout_ms(ember_dist_group* group, int64_t timeout_ms);
EMBER_DIST_API int ember_dist_group_aborted(const ember_dist_group* group);
EMBER_DIST_API void ember_dist_group_set_ring_threshold(ember_dist_group* group, size_t bytes);
EMBER_DIST_API ember_dist_status ember_dist_group_allreduce(ember_dist_group* group, void* data, size_t count,
                                                            int dtype, int op);
EMBER_DIST_API ember_dist_status ember_dist_group_broadcast(ember_dist_group* group, void* data, size_t bytes,
                                                            int root);
EMBER_DIST_API ember_dist_status ember_dist_group_allgather(ember_dist_group* group, const void* input,
                                                            void* output, size_t bytes);
EMBER_DIST_API ember_dist_status ember_dist_group_reduce_scatter(ember_dist_group* group, const void* input,
                                                                 void* output, size_t count, int dtype, int op);
EMBER_DIST_API ember_dist_status ember_dist_group_barrier(ember_dist_group* group);
EMBER_DIST_API ember_dist_status ember_dist_group_send(ember_dist_group* group, const void* data, size_t bytes,
                                                       int dst);
EMBER_DIST_API ember_dist_status ember_dist_group_recv(ember_dist_group* group, void* data, size_t bytes, int src);
EMBER_DIST_API ember_dist_status ember_dist_group_shutdown(ember_dist_group* group);

#ifdef __cplusplus
}
#endif
