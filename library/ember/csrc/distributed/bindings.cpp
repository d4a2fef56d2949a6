// ember._distributed: Python bindings of the distributed core (store, process group).
// Every blocking call releases the GIL; C++ errors become DistributedError /
// DistributedTimeoutError carrying `op` and `missing_ranks`.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <string>

#include "ember/distributed/errors.h"
#include "ember/distributed/process_group.h"
#include "ember/distributed/store.h"

namespace py = pybind11;
namespace ed = ember::distributed;

namespace {

py::object g_distributed_error;
py::object g_timeout_error;

ed::Milliseconds to_ms(double seconds) {
  if (seconds < 0) throw py::value_error("timeout must be >= 0 seconds");
  return ed::Milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

void raise_python(const py::object& type, const ed::DistributedError& e) {
  py::object exc = type(e.what());
  exc.attr("op") = e.op();
  exc.attr("missing_ranks") = py::cast(e.missing_ranks());
  PyErr_SetObject(type.ptr(), exc.ptr());
}

ed::DType dtype_of(const py::array& a) {
  const auto dt = a.dtype();
  if (dt.is(py::dtype::of<float>())) return ed::DType::kFloat32;
  if (dt.is(py::dtype::of<double>())) return ed::DType::kFloat64;
  if (dt.is(py::dtype::of<int32_t>())) return ed::DType::kInt32;
  if (dt.is(py::dtype::of<int64_t>())) return ed::DType::kInt64;
  throw py::type_error("unsupported dtype " + py::str(dt).cast<std::string>() +
                       " (use float32, float64, int32 or int64)");
}

void require_contiguous(const py::array& a, bool writable, const char* what) {
  if (!(a.flags() & py::array::c_style))
    throw py::value_error(std::string(what) + " must be C-contiguous");
  if (writable && !a.writeable()) throw py::value_error(std::string(what) + " must be writable");
}

std::string as_bytes(const py::handle& value) {
  if (py::isinstance<py::bytes>(value)) return value.cast<std::string>();
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  throw py::type_error("store values must be bytes or str");
}

}  // namespace

PYBIND11_MODULE(_distributed, m) {
  m.doc() = "ember distributed core: TCP store and process group";

  py::object runtime_error = py::reinterpret_borrow<py::object>(PyExc_RuntimeError);
  py::object builtin_timeout = py::reinterpret_borrow<py::object>(PyExc_TimeoutError);
  g_distributed_error = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
      "ember._distributed.DistributedError",
      "A collective, store or RPC operation failed; `op` and `missing_ranks` say where.",
      runtime_error.ptr(), nullptr));
  py::tuple timeout_bases = py::make_tuple(g_distributed_error, builtin_timeout);
  g_timeout_error = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
      "ember._distributed.DistributedTimeoutError",
      "A distributed operation did not complete before its timeout.", timeout_bases.ptr(),
      nullptr));
  m.attr("DistributedError") = g_distributed_error;
  m.attr("DistributedTimeoutError") = g_timeout_error;
  // The exception types live as long as the interpreter; no cleanup at module teardown.
  g_distributed_error.inc_ref();
  g_timeout_error.inc_ref();

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ed::TimeoutError& e) {
      raise_python(g_timeout_error, e);
    } catch (const ed::DistributedError& e) {
      raise_python(g_distributed_error, e);
    }
  });

  py::enum_<ed::ReduceOp>(m, "ReduceOp")
      .value("SUM", ed::ReduceOp::kSum)
      .value("MAX", ed::ReduceOp::kMax)
      .value("MIN", ed::ReduceOp::kMin)
      .value("AVG", ed::ReduceOp::kAvg);

  py::class_<ed::StoreServer>(m, "StoreServer", "A store server running on a thread of this process.")
      .def(py::init<const std::string&, uint16_t>(), py::arg("host") = "", py::arg("port") = 0,
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("port", &ed::StoreServer::port)
      .def_property_readonly("rejected_connections", &ed::StoreServer::rejected_connections)
      .def("stop", &ed::StoreServer::stop, py::call_guard<py::gil_scoped_release>());

  py::class_<ed::StoreClient, std::shared_ptr<ed::StoreClient>>(m, "StoreClient",
                                                               "A connection to a store server.")
      .def(py::init([](const std::string& host, uint16_t port, double timeout) {
             py::gil_scoped_release release;
             return std::make_shared<ed::StoreClient>(host, port, to_ms(timeout));
           }),
           py::arg("host"), py::arg("port"), py::arg("timeout") = 300.0)
      .def("set",
           [](ed::StoreClient& s, const std::string& key, py::handle value) {
             std::string v = as_bytes(value);
             py::gil_scoped_release release;
             s.set(key, v);
           })
      .def(
          "get",
          [](ed::StoreClient& s, const std::string& key, py::object timeout) {
            std::string v;
            {
              ed::Milliseconds t = timeout.is_none() ? s.timeout() : to_ms(timeout.cast<double>());
              py::gil_scoped_release release;
              v = s.get(key, t);
            }
            return py::bytes(v);
          },
          py::arg("key"), py::arg("timeout") = py::none())
      .def("add", &ed::StoreClient::add, py::call_guard<py::gil_scoped_release>())
      .def("compare_set",
           [](ed::StoreClient& s, const std::string& key, py::handle expected, py::handle desired) {
             std::string e = as_bytes(expected), d = as_bytes(desired), out;
             {
               py::gil_scoped_release release;
               out = s.compare_set(key, e, d);
             }
             return py::bytes(out);
           })
      .def(
          "wait",
          [](ed::StoreClient& s, const std::vector<std::string>& keys, py::object timeout) {
            ed::Milliseconds t = timeout.is_none() ? s.timeout() : to_ms(timeout.cast<double>());
            py::gil_scoped_release release;
            s.wait(keys, t);
          },
          py::arg("keys"), py::arg("timeout") = py::none())
      .def("check", &ed::StoreClient::check, py::call_guard<py::gil_scoped_release>())
      .def("delete_key", &ed::StoreClient::delete_key, py::call_guard<py::gil_scoped_release>())
      .def("num_keys", &ed::StoreClient::num_keys, py::call_guard<py::gil_scoped_release>())
      .def("local_address", &ed::StoreClient::local_address,
           py::call_guard<py::gil_scoped_release>())
      .def_property(
          "timeout", [](ed::StoreClient& s) { return s.timeout().count() / 1000.0; },
          [](ed::StoreClient& s, double t) { s.set_timeout(to_ms(t)); })
      .def_property_readonly("host", &ed::StoreClient::host)
      .def_property_readonly("port", &ed::StoreClient::port);

  py::class_<ed::ProcessGroup>(m, "ProcessGroup", "A TCP process group (see ember.distributed).")
      .def(py::init([](std::shared_ptr<ed::StoreClient> store, int rank, int world_size,
                       double timeout, const std::string& prefix) {
             py::gil_scoped_release release;
             return std::make_unique<ed::ProcessGroup>(store, rank, world_size, to_ms(timeout),
                                                       prefix);
           }),
           py::arg("store"), py::arg("rank"), py::arg("world_size"), py::arg("timeout") = 300.0,
           py::arg("prefix") = "pg")
      .def_property_readonly("rank", &ed::ProcessGroup::rank)
      .def_property_readonly("world_size", &ed::ProcessGroup::world_size)
      .def_property(
          "timeout", [](ed::ProcessGroup& g) { return g.timeout().count() / 1000.0; },
          [](ed::ProcessGroup& g, double t) { g.set_timeout(to_ms(t)); })
      .def_property_readonly("aborted", &ed::ProcessGroup::aborted)
      .def("set_ring_threshold", &ed::ProcessGroup::set_ring_threshold)
      .def("allreduce",
           [](ed::ProcessGroup& g, py::array a, ed::ReduceOp op) {
             require_contiguous(a, true, "tensor");
             ed::DType dt = dtype_of(a);
             void* data = a.mutable_data();
             size_t n = static_cast<size_t>(a.size());
             py::gil_scoped_release release;
             g.allreduce(data, n, dt, op);
           })
      .def("broadcast",
           [](ed::ProcessGroup& g, py::array a, int root) {
             require_contiguous(a, true, "tensor");
             void* data = a.mutable_data();
             size_t n = static_cast<size_t>(a.nbytes());
             py::gil_scoped_release release;
             g.broadcast(data, n, root);
           })
      .def("allgather",
           [](ed::ProcessGroup& g, py::array in, py::array out) {
             require_contiguous(in, false, "input");
             require_contiguous(out, true, "output");
             if (static_cast<size_t>(out.nbytes()) != static_cast<size_t>(in.nbytes()) * g.world_size())
               throw py::value_error("output must hold world_size times the input");
             const void* src = in.data();
             void* dst = out.mutable_data();
             size_t n = static_cast<size_t>(in.nbytes());
             py::gil_scoped_release release;
             g.allgather(src, dst, n);
           })
      .def("reduce_scatter",
           [](ed::ProcessGroup& g, py::array in, py::array out, ed::ReduceOp op) {
             require_contiguous(in, false, "input");
             require_contiguous(out, true, "output");
             ed::DType dt = dtype_of(out);
             if (!in.dtype().is(out.dtype())) throw py::type_error("input and output dtypes differ");
             if (static_cast<size_t>(in.size()) != static_cast<size_t>(out.size()) * g.world_size())
               throw py::value_error("input must hold world_size times the output");
             const void* src = in.data();
             void* dst = out.mutable_data();
             size_t n = static_cast<size_t>(out.size());
             py::gil_scoped_release release;
             g.reduce_scatter(src, dst, n, dt, op);
           })
      .def("barrier", &ed::ProcessGroup::barrier, py::call_guard<py::gil_scoped_release>())
      .def("send",
           [](ed::ProcessGroup& g, py::array a, int dst) {
             require_contiguous(a, false, "tensor");
             const void* data = a.data();
             size_t n = static_cast<size_t>(a.nbytes());
             py::gil_scoped_release release;
             g.send(data, n, dst);
           })
      .def("recv",
           [](ed::ProcessGroup& g, py::array a, int src) {
             require_contiguous(a, true, "tensor");
             void* data = a.mutable_data();
             size_t n = static_cast<size_t>(a.nbytes());
             py::gil_scoped_release release;
             g.recv(data, n, src);
           })
      .def("shutdown", &ed::ProcessGroup::shutdown, py::call_guard<py::gil_scoped_release>());
}
