// ember._distributed: Python bindings of the distributed core, over its C interface
// (ember/distributed/c_api.h). This file is compiled once per Python, so it stays plain:
// the CPython C API and C headers, no C++ standard library, no exceptions.
// Every blocking call releases the GIL; failures become DistributedError /
// DistributedTimeoutError carrying `op` and `missing_ranks`.
#include "buffer.h"
#include "ember/distributed/c_api.h"

namespace {

PyObject* g_distributed_error = nullptr;
PyObject* g_timeout_error = nullptr;
PyObject* g_reduce_op = nullptr;  // an enum.IntEnum made at import
PyTypeObject* g_client_type = nullptr;

// --- errors and arguments ---------------------------------------------------------------

// Raises the Python exception for a failed call; returns nullptr for the caller to return.
PyObject* raise_status(ember_dist_status status) {
  const char* message = ember_dist_error_message();
  if (status == EMBER_DIST_INVALID) {
    PyErr_SetString(PyExc_ValueError, message);
    return nullptr;
  }
  if (status == EMBER_DIST_RUNTIME) {
    PyErr_SetString(PyExc_RuntimeError, message);
    return nullptr;
  }
  PyObject* type = status == EMBER_DIST_TIMEOUT ? g_timeout_error : g_distributed_error;
  const int* ranks = nullptr;
  const size_t count = ember_dist_error_missing_ranks(&ranks);
  PyObject* exc = PyObject_CallFunction(type, "s", message);
  PyObject* op = PyUnicode_FromString(ember_dist_error_op());
  PyObject* missing = PyList_New(static_cast<Py_ssize_t>(count));
  for (size_t i = 0; missing != nullptr && i < count; ++i) {
    PyObject* rank = PyLong_FromLong(ranks[i]);
    if (rank == nullptr) {
      Py_CLEAR(missing);
      break;
    }
    PyList_SET_ITEM(missing, static_cast<Py_ssize_t>(i), rank);
  }
  if (exc && op && missing && PyObject_SetAttrString(exc, "op", op) == 0 &&
      PyObject_SetAttrString(exc, "missing_ranks", missing) == 0)
    PyErr_SetObject(type, exc);
  Py_XDECREF(exc);
  Py_XDECREF(op);
  Py_XDECREF(missing);
  return nullptr;
}

// None, or the exception for a failed call.
PyObject* done(ember_dist_status status) {
  if (status != EMBER_DIST_OK) return raise_status(status);
  Py_RETURN_NONE;
}

// Seconds (float) to milliseconds; false with ValueError for a negative, non-finite or
// over-long timeout (NaN fails every comparison, so the test is written to catch it).
bool to_ms(double seconds, int64_t* out) {
  const double max_seconds = static_cast<double>(EMBER_DIST_MAX_TIMEOUT_MS) / 1000.0;
  if (!(seconds >= 0.0 && seconds <= max_seconds)) {
    PyObject* value = PyFloat_FromDouble(seconds);
    if (value != nullptr) {
      PyErr_Format(PyExc_ValueError, "timeout must be a finite number of seconds between 0 and %lld (one year), got %R",
                   static_cast<long long>(max_seconds), value);
      Py_DECREF(value);
    }
    return false;
  }
  *out = static_cast<int64_t>(seconds * 1000.0);
  return true;
}

// An optional timeout argument: None means the client's own (-1).
bool optional_ms(PyObject* timeout, int64_t* out) {
  if (timeout == Py_None) {
    *out = -1;
    return true;
  }
  const double seconds = PyFloat_AsDouble(timeout);
  if (seconds == -1.0 && PyErr_Occurred()) return false;
  return to_ms(seconds, out);
}

bool to_port(int port, uint16_t* out) {
  if (port < 0 || port > 65535) {
    PyErr_Format(PyExc_ValueError, "port must be in 0..65535, got %d", port);
    return false;
  }
  *out = static_cast<uint16_t>(port);
  return true;
}

// Store values: bytes or str (UTF-8). The pointer borrows from `value`.
bool as_bytes(PyObject* value, const char** data, Py_ssize_t* size) {
  if (PyBytes_Check(value)) {
    char* p = nullptr;
    if (PyBytes_AsStringAndSize(value, &p, size) != 0) return false;
    *data = p;
    return true;
  }
  if (PyUnicode_Check(value)) {
    *data = PyUnicode_AsUTF8AndSize(value, size);
    return *data != nullptr;
  }
  PyErr_SetString(PyExc_TypeError, "store values must be bytes or str");
  return false;
}

PyObject* take_bytes(char* buffer, size_t size) {
  PyObject* out = PyBytes_FromStringAndSize(buffer, static_cast<Py_ssize_t>(size));
  ember_dist_free(buffer);
  return out;
}

// A list of str keys as the pointer/length arrays the C interface takes. The pointers
// borrow from the list's items, which `seq` keeps alive.
class Keys {
 public:
  bool parse(PyObject* keys) {
    if (PyUnicode_Check(keys)) {
      PyErr_SetString(PyExc_TypeError, "keys must be a list of str, not a str");
      return false;
    }
    seq_ = PySequence_Fast(keys, "keys must be a list of str");
    if (seq_ == nullptr) return false;
    count_ = static_cast<size_t>(PySequence_Fast_GET_SIZE(seq_));
    data_ = PyMem_New(const char*, count_ + 1);
    lens_ = PyMem_New(size_t, count_ + 1);
    if (data_ == nullptr || lens_ == nullptr) {
      PyErr_NoMemory();
      return false;
    }
    for (size_t i = 0; i < count_; ++i) {
      PyObject* item = PySequence_Fast_GET_ITEM(seq_, static_cast<Py_ssize_t>(i));
      Py_ssize_t size = 0;
      data_[i] = PyUnicode_Check(item) ? PyUnicode_AsUTF8AndSize(item, &size) : nullptr;
      if (data_[i] == nullptr) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "keys must be a list of str");
        return false;
      }
      lens_[i] = static_cast<size_t>(size);
    }
    return true;
  }
  ~Keys() {
    PyMem_Free(data_);
    PyMem_Free(lens_);
    Py_XDECREF(seq_);
  }
  const char* const* data() const { return data_; }
  const size_t* lens() const { return lens_; }
  size_t count() const { return count_; }

 private:
  PyObject* seq_ = nullptr;
  const char** data_ = nullptr;
  size_t* lens_ = nullptr;
  size_t count_ = 0;
};

bool as_reduce_op(PyObject* op, int* out) {
  const int is = PyObject_IsInstance(op, g_reduce_op);
  if (is < 0) return false;
  if (!is) {
    PyErr_SetString(PyExc_TypeError, "op must be an ember.distributed.ReduceOp");
    return false;
  }
  const long value = PyLong_AsLong(op);
  if (value == -1 && PyErr_Occurred()) return false;
  *out = static_cast<int>(value);
  return true;
}

// A tensor argument: a C-contiguous buffer (numpy array), held until the Tensor goes away.
class Tensor {
 public:
  bool get(PyObject* object, const char* name, bool writable) {
    if (!buffer_.get(object)) return false;
    if (!PyBuffer_IsContiguous(&buffer_.view(), 'C')) {
      PyErr_Format(PyExc_ValueError, "%s must be C-contiguous", name);
      return false;
    }
    if (writable && buffer_.view().readonly) {
      PyErr_Format(PyExc_ValueError, "%s must be writable", name);
      return false;
    }
    return true;
  }
  void* data() const { return buffer_.view().buf; }
  size_t nbytes() const { return static_cast<size_t>(buffer_.view().len); }
  size_t count() const {
    const Py_ssize_t itemsize = buffer_.view().itemsize;
    return itemsize ? nbytes() / static_cast<size_t>(itemsize) : 0;
  }

  // The element type as the distributed core numbers it.
  bool dtype(int* out) const {
    switch (buffer_.dtype()) {
      case EMBER_FLOAT32: *out = EMBER_DIST_FLOAT32; return true;
      case EMBER_FLOAT64: *out = EMBER_DIST_FLOAT64; return true;
      case EMBER_INT32: *out = EMBER_DIST_INT32; return true;
      case EMBER_INT64: *out = EMBER_DIST_INT64; return true;
      default:
        PyErr_Format(PyExc_TypeError, "unsupported dtype (buffer format '%s'; use float32, float64, int32 or int64)",
                     buffer_.format());
        return false;
    }
  }

 private:
  ember_python::Buffer buffer_;
};

// --- StoreServer ------------------------------------------------------------------------

struct ServerObject {
  PyObject_HEAD
  ember_dist_server* server;
};

ember_dist_server* server_of(PyObject* self) { return reinterpret_cast<ServerObject*>(self)->server; }

PyObject* server_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"host", "port", "token", nullptr};
  const char* host = "127.0.0.1";
  int port = 0;
  const char* token = nullptr;
  Py_ssize_t token_len = 0;
  uint16_t p;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|siy#:StoreServer", const_cast<char**>(kw), &host, &port,
                                   &token, &token_len) ||
      !to_port(port, &p))
    return nullptr;
  ember_dist_server* server = nullptr;
  ember_dist_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_dist_server_create_with_token(host, p, token, static_cast<size_t>(token_len), &server);
  Py_END_ALLOW_THREADS
  if (status != EMBER_DIST_OK) return raise_status(status);
  auto* self = reinterpret_cast<ServerObject*>(type->tp_alloc(type, 0));
  if (self == nullptr) {
    ember_dist_server_destroy(server);
    return nullptr;
  }
  self->server = server;
  return reinterpret_cast<PyObject*>(self);
}

void server_dealloc(PyObject* self) {
  ember_dist_server* server = server_of(self);
  if (server != nullptr) {
    Py_BEGIN_ALLOW_THREADS
    ember_dist_server_destroy(server);
    Py_END_ALLOW_THREADS
  }
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyObject* server_stop(PyObject* self, PyObject*) {
  ember_dist_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_dist_server_stop(server_of(self));
  Py_END_ALLOW_THREADS
  return done(status);
}
PyObject* server_port(PyObject* self, void*) { return PyLong_FromLong(ember_dist_server_port(server_of(self))); }
PyObject* server_rejected(PyObject* self, void*) {
  return PyLong_FromUnsignedLongLong(ember_dist_server_rejected_connections(server_of(self)));
}

PyMethodDef server_methods[] = {
    {"stop", server_stop, METH_NOARGS, "Stop serving and join the server thread."},
    {nullptr, nullptr, 0, nullptr},
};
PyGetSetDef server_getset[] = {
    {"port", server_port, nullptr, "The port the server listens on.", nullptr},
    {"rejected_connections", server_rejected, nullptr, "Connections dropped for bad requests.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};
PyType_Slot server_slots[] = {
    {Py_tp_new, reinterpret_cast<void*>(server_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(server_dealloc)},
    {Py_tp_methods, server_methods},
    {Py_tp_getset, server_getset},
    {Py_tp_doc, const_cast<char*>("StoreServer(host='127.0.0.1', port=0, token=b''): a store server running on a thread of this process; "
                                      "peers must prove they hold the token.")},
    {0, nullptr},
};
PyType_Spec server_spec = {"ember._distributed.StoreServer", sizeof(ServerObject), 0, Py_TPFLAGS_DEFAULT,
                           server_slots};

// --- StoreClient ------------------------------------------------------------------------

struct ClientObject {
  PyObject_HEAD
  ember_dist_client* client;
};

ember_dist_client* client_of(PyObject* self) { return reinterpret_cast<ClientObject*>(self)->client; }

PyObject* client_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"host", "port", "timeout", "token", nullptr};
  const char* host;
  int port;
  double timeout = 300.0;
  const char* token = nullptr;
  Py_ssize_t token_len = 0;
  uint16_t p;
  int64_t ms;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "si|dy#:StoreClient", const_cast<char**>(kw), &host, &port,
                                   &timeout, &token, &token_len) ||
      !to_port(port, &p) || !to_ms(timeout, &ms))
    return nullptr;
  ember_dist_client* client = nullptr;
  ember_dist_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_dist_client_create_with_token(host, p, token, static_cast<size_t>(token_len), ms, &client);
  Py_END_ALLOW_THREADS
  if (status != EMBER_DIST_OK) return raise_status(status);
  auto* self = reinterpret_cast<ClientObject*>(type->tp_alloc(type, 0));
  if (self == nullptr) {
    ember_dist_client_destroy(client);
    return nullptr;
  }
  self->client = client;
  return reinterpret_cast<PyObject*>(self);
}

void client_dealloc(PyObject* self) {
  ember_dist_client* client = client_of(self);
  if (client != nullptr) {
    Py_BEGIN_ALLOW_THREADS
    ember_dist_client_destroy(client);
    Py_END_ALLOW_THREADS
  }
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyObject* client_set(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"key", "value", nullptr};
  const char *key, *value;
  Py_ssize_t key_len, value_len;
  PyObject* value_obj;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s#O:set", const_cast<char**>(kw), &key, &key_len, &value_obj) ||
      !as_bytes(value_obj, &value, &value_len))
    return nullptr;
  ember_dist_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_dist_client_set(client_of(self), key, static_cast<size_t>(key_len), value,
                                 static_cast<size_t>(value_len));
  Py_END_ALLOW_THREADS
  return done(status);
}

PyObject* client_get(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"key", "timeout", nullptr};
  const char* key;
  Py_ssize_t key_len;
  PyObject* timeout = Py_None;
  int64_t ms;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s#|O:get", const_cast<char**>(kw), &key, &key_len, &timeout) ||
      !optional_ms(timeout, &ms))
    return nullptr;
  char* value = nullptr;
  size_t value_len = 0;
  ember_dist_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_dist_client_get(client_of(self), key, static_cast<size_t>(key_len), ms, &value, &value_len);
  Py_END_ALLOW_THREADS
  return status == EMBER_DIST_OK ? take_bytes(value, value_len) : raise_status(status);
}

PyObject* client_add(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"key", "delta", nullptr};
  const char* key;
  Py_ssize_t key_len;
  long long delta;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s#L:add", const_cast<char**>(kw), &key, &key_len, &delta))
    return nullptr;
  int64_t result = 0;
  ember_dist_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_dist_client_add(client_of(self), key, static_cast<size_t>(key_len), delta, &result);
  Py_END_ALLOW_THREADS
  return status == EMBER_DIST_OK ? PyLong_FromLongLong(result) : raise_status(status);
}

PyObject* client_compare_set(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"key", "expected", "desired", nullptr};
  const char *key, *expected, *desired;
  Py_ssize_t key_len, expected_len, desired_len;
  PyObject *expected_obj, *desired_obj;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s#OO:compare_set", const_cast<char**>(kw), &key, &key_len,
                                   &expected_obj, &desired_obj) ||
      !as_bytes(expected_obj, &expected, &expected_len) || !as_bytes(desired_obj, &desired, &desired_len))
    return nullptr;
  char* value = nullptr;
  size_t value_len = 0;
  ember_dist_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_dist_client_compare_set(client_of(self), key, static_cast<size_t>(key_len), expected,
                                         static_cast<size_t>(expected_len), desired,
                                         static_cast<size_t>(desired_len), &value, &value_len);
  Py_END_ALLOW_THREADS
  return status == EMBER_DIST_OK ? take_bytes(value, value_len) : raise_status(status);
}

PyObject* client_wait(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"keys", "timeout", nullptr};
  PyObject* keys_obj;
  PyObject* timeout = Py_None;
  int64_t ms;
  Keys keys;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:wait", const_cast<char**>(kw), &keys_obj, &timeout) ||
      !optional_ms(timeout, &ms) || !keys.parse(keys_obj))
    return nullptr;
  ember_dist_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_dist_client_wait(client_of(self), keys.data(), keys.lens(), keys.count(), ms);
  Py_END_ALLOW_THREADS
  return done(status);
}

PyObject* client_check(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"keys", nullptr};
  PyObject* keys_obj;
  Keys keys;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:check", const_cast<char**>(kw), &keys_obj) ||
      !keys.parse(keys_obj))
    return nullptr;
  int present = 0;
  ember_dist_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_dist_client_check(client_of(self), keys.data(), keys.lens(), keys.count(), &present);
  Py_END_ALLOW_THREADS
  return status == EMBER_DIST_OK ? PyBool_FromLong(present) : raise_status(status);
}

PyObject* client_delete_key(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"key", nullptr};
  const char* key;
  Py_ssize_t key_len;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s#:delete_key", const_cast<char**>(kw), &key, &key_len))
    return nullptr;
  int deleted = 0;
  ember_dist_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_dist_client_delete_key(client_of(self), key, static_cast<size_t>(key_len), &deleted);
  Py_END_ALLOW_THREADS
  return status == EMBER_DIST_OK ? PyBool_FromLong(deleted) : raise_status(status);
}

PyObject* client_num_keys(PyObject* self, PyObject*) {
  int64_t count = 0;
  ember_dist_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_dist_client_num_keys(client_of(self), &count);
  Py_END_ALLOW_THREADS
  return status == EMBER_DIST_OK ? PyLong_FromLongLong(count) : raise_status(status);
}

PyObject* client_local_address(PyObject* self, PyObject*) {
  char* value = nullptr;
  size_t value_len = 0;
  ember_dist_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_dist_client_local_address(client_of(self), &value, &value_len);
  Py_END_ALLOW_THREADS
  if (status != EMBER_DIST_OK) return raise_status(status);
  PyObject* out = PyUnicode_FromStringAndSize(value, static_cast<Py_ssize_t>(value_len));
  ember_dist_free(value);
  return out;
}

PyObject* client_get_timeout(PyObject* self, void*) {
  return PyFloat_FromDouble(static_cast<double>(ember_dist_client_timeout_ms(client_of(self))) / 1000.0);
}
int client_set_timeout(PyObject* self, PyObject* value, void*) {
  int64_t ms;
  if (value == nullptr) {
    PyErr_SetString(PyExc_AttributeError, "cannot delete timeout");
    return -1;
  }
  const double seconds = PyFloat_AsDouble(value);
  if ((seconds == -1.0 && PyErr_Occurred()) || !to_ms(seconds, &ms)) return -1;
  ember_dist_client_set_timeout_ms(client_of(self), ms);
  return 0;
}
PyObject* client_host(PyObject* self, void*) { return PyUnicode_FromString(ember_dist_client_host(client_of(self))); }
PyObject* client_port(PyObject* self, void*) { return PyLong_FromLong(ember_dist_client_port(client_of(self))); }

PyMethodDef client_methods[] = {
    EMBER_METHOD("set", client_set, "set(key, value): store bytes or str under key"),
    EMBER_METHOD("get", client_get, "get(key, timeout=None) -> bytes: wait for key and return its value"),
    EMBER_METHOD("add", client_add, "add(key, delta) -> int: atomically add to an integer key"),
    EMBER_METHOD("compare_set", client_compare_set, "compare_set(key, expected, desired) -> bytes"),
    EMBER_METHOD("wait", client_wait, "wait(keys, timeout=None): block until every key exists"),
    EMBER_METHOD("check", client_check, "check(keys) -> bool: whether every key exists"),
    EMBER_METHOD("delete_key", client_delete_key, "delete_key(key) -> bool"),
    {"num_keys", client_num_keys, METH_NOARGS, "Keys held by the store."},
    {"local_address", client_local_address, METH_NOARGS, "This end's address of the store connection."},
    {nullptr, nullptr, 0, nullptr},
};
PyGetSetDef client_getset[] = {
    {"timeout", client_get_timeout, client_set_timeout, "Default timeout in seconds.", nullptr},
    {"host", client_host, nullptr, "The store's host.", nullptr},
    {"port", client_port, nullptr, "The store's port.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};
PyType_Slot client_slots[] = {
    {Py_tp_new, reinterpret_cast<void*>(client_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(client_dealloc)},
    {Py_tp_methods, client_methods},
    {Py_tp_getset, client_getset},
    {Py_tp_doc, const_cast<char*>("StoreClient(host, port, timeout=300.0, token=b''): an authenticated connection to a store server.")},
    {0, nullptr},
};
PyType_Spec client_spec = {"ember._distributed.StoreClient", sizeof(ClientObject), 0, Py_TPFLAGS_DEFAULT,
                           client_slots};

// --- ProcessGroup -----------------------------------------------------------------------

struct GroupObject {
  PyObject_HEAD
  ember_dist_group* group;
};

ember_dist_group* group_of(PyObject* self) { return reinterpret_cast<GroupObject*>(self)->group; }

PyObject* group_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"store", "rank", "world_size", "timeout", "prefix", nullptr};
  PyObject* store;
  int rank, world_size;
  double timeout = 300.0;
  const char* prefix = "pg";
  int64_t ms;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!ii|ds:ProcessGroup", const_cast<char**>(kw), g_client_type,
                                   &store, &rank, &world_size, &timeout, &prefix) ||
      !to_ms(timeout, &ms))
    return nullptr;
  ember_dist_group* group = nullptr;
  ember_dist_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_dist_group_create(client_of(store), rank, world_size, ms, prefix, &group);
  Py_END_ALLOW_THREADS
  if (status != EMBER_DIST_OK) return raise_status(status);
  auto* self = reinterpret_cast<GroupObject*>(type->tp_alloc(type, 0));
  if (self == nullptr) {
    ember_dist_group_destroy(group);
    return nullptr;
  }
  self->group = group;
  return reinterpret_cast<PyObject*>(self);
}

void group_dealloc(PyObject* self) {
  ember_dist_group* group = group_of(self);
  if (group != nullptr) {
    Py_BEGIN_ALLOW_THREADS
    ember_dist_group_destroy(group);
    Py_END_ALLOW_THREADS
  }
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyObject* group_allreduce(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"tensor", "op", nullptr};
  PyObject *tensor, *op_obj;
  int op, dtype;
  Tensor t;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:allreduce", const_cast<char**>(kw), &tensor, &op_obj) ||
      !as_reduce_op(op_obj, &op) || !t.get(tensor, "tensor", true) || !t.dtype(&dtype))
    return nullptr;
  ember_dist_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_dist_group_allreduce(group_of(self), t.data(), t.count(), dtype, op);
  Py_END_ALLOW_THREADS
  return done(status);
}

using TransferFn = ember_dist_status (*)(ember_dist_group*, void*, size_t, int);

// broadcast(tensor, root), send(tensor, dst), recv(tensor, src): the whole buffer, to or from a rank.
PyObject* transfer(PyObject* self, PyObject* args, PyObject* kwargs, const char* format, const char* peer,
                   bool writable, TransferFn fn) {
  const char* kw[] = {"tensor", peer, nullptr};
  PyObject* tensor;
  int rank;
  Tensor t;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, const_cast<char**>(kw), &tensor, &rank) ||
      !t.get(tensor, "tensor", writable))
    return nullptr;
  ember_dist_status status;
  Py_BEGIN_ALLOW_THREADS
  status = fn(group_of(self), t.data(), t.nbytes(), rank);
  Py_END_ALLOW_THREADS
  return done(status);
}

PyObject* group_broadcast(PyObject* self, PyObject* args, PyObject* kwargs) {
  return transfer(self, args, kwargs, "Oi:broadcast", "root", true, ember_dist_group_broadcast);
}
PyObject* group_send(PyObject* self, PyObject* args, PyObject* kwargs) {
  return transfer(self, args, kwargs, "Oi:send", "dst", false,
                  [](ember_dist_group* g, void* data, size_t bytes, int dst) {
                    return ember_dist_group_send(g, data, bytes, dst);
                  });
}
PyObject* group_recv(PyObject* self, PyObject* args, PyObject* kwargs) {
  return transfer(self, args, kwargs, "Oi:recv", "src", true, ember_dist_group_recv);
}

PyObject* group_allgather(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"input", "output", nullptr};
  PyObject *input, *output;
  Tensor in, out;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:allgather", const_cast<char**>(kw), &input, &output) ||
      !in.get(input, "input", false) || !out.get(output, "output", true))
    return nullptr;
  ember_dist_group* group = group_of(self);
  if (out.nbytes() != in.nbytes() * static_cast<size_t>(ember_dist_group_world_size(group))) {
    PyErr_SetString(PyExc_ValueError, "output must hold world_size times the input");
    return nullptr;
  }
  ember_dist_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_dist_group_allgather(group, in.data(), out.data(), in.nbytes());
  Py_END_ALLOW_THREADS
  return done(status);
}

PyObject* group_reduce_scatter(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"input", "output", "op", nullptr};
  PyObject *input, *output, *op_obj;
  int op, in_dtype, out_dtype;
  Tensor in, out;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:reduce_scatter", const_cast<char**>(kw), &input, &output,
                                   &op_obj) ||
      !as_reduce_op(op_obj, &op) || !in.get(input, "input", false) || !out.get(output, "output", true) ||
      !out.dtype(&out_dtype) || !in.dtype(&in_dtype))
    return nullptr;
  if (in_dtype != out_dtype) {
    PyErr_SetString(PyExc_TypeError, "input and output dtypes differ");
    return nullptr;
  }
  ember_dist_group* group = group_of(self);
  if (in.count() != out.count() * static_cast<size_t>(ember_dist_group_world_size(group))) {
    PyErr_SetString(PyExc_ValueError, "input must hold world_size times the output");
    return nullptr;
  }
  ember_dist_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_dist_group_reduce_scatter(group, in.data(), out.data(), out.count(), out_dtype, op);
  Py_END_ALLOW_THREADS
  return done(status);
}

PyObject* group_set_ring_threshold(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"bytes", nullptr};
  unsigned long long bytes;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "K:set_ring_threshold", const_cast<char**>(kw), &bytes))
    return nullptr;
  ember_dist_group_set_ring_threshold(group_of(self), static_cast<size_t>(bytes));
  Py_RETURN_NONE;
}

PyObject* group_barrier(PyObject* self, PyObject*) {
  ember_dist_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_dist_group_barrier(group_of(self));
  Py_END_ALLOW_THREADS
  return done(status);
}

PyObject* group_shutdown(PyObject* self, PyObject*) {
  ember_dist_status status;
  Py_BEGIN_ALLOW_THREADS
  status = ember_dist_group_shutdown(group_of(self));
  Py_END_ALLOW_THREADS
  return done(status);
}

PyObject* group_rank(PyObject* self, void*) { return PyLong_FromLong(ember_dist_group_rank(group_of(self))); }
PyObject* group_world_size(PyObject* self, void*) {
  return PyLong_FromLong(ember_dist_group_world_size(group_of(self)));
}
PyObject* group_aborted(PyObject* self, void*) { return PyBool_FromLong(ember_dist_group_aborted(group_of(self))); }
PyObject* group_get_timeout(PyObject* self, void*) {
  return PyFloat_FromDouble(static_cast<double>(ember_dist_group_timeout_ms(group_of(self))) / 1000.0);
}
int group_set_timeout(PyObject* self, PyObject* value, void*) {
  int64_t ms;
  if (value == nullptr) {
    PyErr_SetString(PyExc_AttributeError, "cannot delete timeout");
    return -1;
  }
  const double seconds = PyFloat_AsDouble(value);
  if ((seconds == -1.0 && PyErr_Occurred()) || !to_ms(seconds, &ms)) return -1;
  ember_dist_group_set_timeout_ms(group_of(self), ms);
  return 0;
}

PyMethodDef group_methods[] = {
    EMBER_METHOD("set_ring_threshold", group_set_ring_threshold, "Messages of at least this many bytes use the ring."),
    EMBER_METHOD("allreduce", group_allreduce, "allreduce(tensor, op): reduce in place across ranks"),
    EMBER_METHOD("broadcast", group_broadcast, "broadcast(tensor, root)"),
    EMBER_METHOD("allgather", group_allgather, "allgather(input, output): output holds every rank's input"),
    EMBER_METHOD("reduce_scatter", group_reduce_scatter, "reduce_scatter(input, output, op)"),
    EMBER_METHOD("send", group_send, "send(tensor, dst)"),
    EMBER_METHOD("recv", group_recv, "recv(tensor, src)"),
    {"barrier", group_barrier, METH_NOARGS, "Wait for every rank."},
    {"shutdown", group_shutdown, METH_NOARGS, "Close the group's connections."},
    {nullptr, nullptr, 0, nullptr},
};
PyGetSetDef group_getset[] = {
    {"rank", group_rank, nullptr, "This process's rank.", nullptr},
    {"world_size", group_world_size, nullptr, "Ranks in the group.", nullptr},
    {"timeout", group_get_timeout, group_set_timeout, "Collective timeout in seconds.", nullptr},
    {"aborted", group_aborted, nullptr, "Whether a failure aborted the group.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};
PyType_Slot group_slots[] = {
    {Py_tp_new, reinterpret_cast<void*>(group_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(group_dealloc)},
    {Py_tp_methods, group_methods},
    {Py_tp_getset, group_getset},
    {Py_tp_doc, const_cast<char*>("ProcessGroup(store, rank, world_size, timeout=300.0, prefix='pg'): a TCP "
                                  "process group (see ember.distributed).")},
    {0, nullptr},
};
PyType_Spec group_spec = {"ember._distributed.ProcessGroup", sizeof(GroupObject), 0, Py_TPFLAGS_DEFAULT,
                          group_slots};

// --- module -----------------------------------------------------------------------------

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_distributed",
                          "ember distributed core: TCP store and process group", -1,
                          nullptr, nullptr, nullptr, nullptr, nullptr};

PyObject* make_reduce_op() {
  PyObject* enum_module = PyImport_ImportModule("enum");
  PyObject* int_enum = enum_module ? PyObject_GetAttrString(enum_module, "IntEnum") : nullptr;
  PyObject* args = Py_BuildValue("(s[(si)(si)(si)(si)])", "ReduceOp", "SUM", EMBER_DIST_SUM, "MAX", EMBER_DIST_MAX,
                                 "MIN", EMBER_DIST_MIN, "AVG", EMBER_DIST_AVG);
  PyObject* kwargs = Py_BuildValue("{ss}", "module", "ember._distributed");
  PyObject* result = int_enum && args && kwargs ? PyObject_Call(int_enum, args, kwargs) : nullptr;
  Py_XDECREF(kwargs);
  Py_XDECREF(args);
  Py_XDECREF(int_enum);
  Py_XDECREF(enum_module);
  return result;
}

// module.name = value, stealing value; false (with an error set) on failure.
bool add_object(PyObject* module, const char* name, PyObject* value) {
  if (value == nullptr) return false;
  if (PyModule_AddObject(module, name, value) != 0) {
    Py_DECREF(value);
    return false;
  }
  return true;
}

}  // namespace

PyMODINIT_FUNC PyInit__distributed(void) {
  PyObject* m = PyModule_Create(&module_def);
  if (m == nullptr) return nullptr;
  // The exception types, ReduceOp and the client type live as long as the interpreter: the
  // globals keep a reference of their own, the module another.
  g_distributed_error = PyErr_NewExceptionWithDoc(
      "ember._distributed.DistributedError",
      "A collective, store or RPC operation failed; `op` and `missing_ranks` say where.", PyExc_RuntimeError,
      nullptr);
  PyObject* timeout_bases =
      g_distributed_error ? Py_BuildValue("(OO)", g_distributed_error, PyExc_TimeoutError) : nullptr;
  g_timeout_error = timeout_bases ? PyErr_NewExceptionWithDoc(
                                        "ember._distributed.DistributedTimeoutError",
                                        "A distributed operation did not complete before its timeout.",
                                        timeout_bases, nullptr)
                                  : nullptr;
  Py_XDECREF(timeout_bases);
  g_reduce_op = g_timeout_error ? make_reduce_op() : nullptr;
  g_client_type = g_reduce_op ? reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&client_spec)) : nullptr;
  PyObject* server_type = g_client_type ? PyType_FromSpec(&server_spec) : nullptr;
  PyObject* group_type = server_type ? PyType_FromSpec(&group_spec) : nullptr;
  if (group_type == nullptr) {
    Py_XDECREF(server_type);
    Py_DECREF(m);
    return nullptr;
  }
  Py_INCREF(g_distributed_error);
  Py_INCREF(g_timeout_error);
  Py_INCREF(g_reduce_op);
  Py_INCREF(g_client_type);
  if (!add_object(m, "DistributedError", g_distributed_error) ||
      !add_object(m, "DistributedTimeoutError", g_timeout_error) || !add_object(m, "ReduceOp", g_reduce_op) ||
      !add_object(m, "StoreClient", reinterpret_cast<PyObject*>(g_client_type)) ||
      !add_object(m, "StoreServer", server_type) || !add_object(m, "ProcessGroup", group_type)) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
