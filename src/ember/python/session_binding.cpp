// ember._ember._Session: train::Session for Python. Everything that trains, evaluates or touches
// files runs with the GIL released; arrays cross as numpy arrays. The argument conversions a
// Python user expects (a dict of overrides, keys in several layouts) are in ember/session.py.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "ember/core/error.hpp"
#include "ember/python/bindings.hpp"
#include "ember/python/interrupt_guard.hpp"
#include "ember/python/python_output.hpp"
#include "ember/train/model_config.hpp"
#include "ember/train/session.hpp"

namespace ember::python {

namespace {

using F32Array = py::array_t<float, py::array::c_style | py::array::forcecast>;
using I64Array = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;

struct SessionArgs {
  std::string config;  // a path, or JSON text when config_is_json
  bool config_is_json = false;
  std::vector<std::string> overrides;
  train::SessionOptions options;
  bool quiet = false;
};

train::ModelConfig read_config(const SessionArgs& a) {
  if (!a.config_is_json) return train::load_model_config(a.config, a.overrides);
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(a.config);
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(std::string("ember.Session: the configuration is not valid JSON (") +
                      e.what() + ")");
  }
  for (const std::string& o : a.overrides)
    train::apply_override(root, o);
  return train::parse_model_config(std::move(root), "<python>");
}

py::dict eval_dict(const train::EvalResult& r) {
  py::dict d;
  d["AUC"] = r.auc;
  d["AverageLoss"] = r.average_loss;
  if (r.hit_rate) d["HitRate"] = *r.hit_rate;
  d["samples"] = r.samples;
  return d;
}

py::dict train_dict(const train::TrainResult& r) {
  py::dict d;
  d["iterations"] = r.iterations;
  d["loss"] = r.last_loss ? py::object(py::float_(*r.last_loss)) : py::object(py::none());
  d["eval"] = r.last_eval ? py::object(eval_dict(*r.last_eval)) : py::object(py::none());
  d["reached_auc_target"] = r.reached_auc_target;
  d["skipped_batches"] = r.skipped_batches;
  d["seconds"] = r.seconds;
  d["samples_per_second"] = r.samples_per_second;
  d["losses"] = r.losses;
  d["rates"] = r.rates;
  d["late_device_slots"] = r.late_device_slots;
  return d;
}

class PySession {
 public:
  explicit PySession(SessionArgs a) : out_(a.quiet) {
    a.options.out = &out_;
    a.options.stop_requested = &stop_;
    py::gil_scoped_release release;
    const auto guard = lock_session();
    session_ = std::make_unique<train::Session>(read_config(a), a.options);
  }

  // One call at a time per session (taken after releasing the GIL): train::Session is not for
  // several threads at once, and Python threads may share a session object.
  std::unique_lock<std::mutex> lock_session() { return std::unique_lock<std::mutex>(mutex_); }

  train::Session& get() {
    if (!session_) throw Error("ember.Session: the session was closed");
    return *session_;
  }

  // Frees the replicas, threads and device memory now rather than when Python collects it.
  void close() {
    py::gil_scoped_release release;
    const auto guard = lock_session();
    session_.reset();
  }

  py::dict fit() {
    stop_.store(false);
    train::TrainResult r;
    {
      InterruptGuard interrupts(stop_);
      py::gil_scoped_release release;
      const auto guard = lock_session();
      train::Session& s = get();
      r = s.train();
    }
    if (r.interrupted) {
      const std::string message = cat("training interrupted at iter=", r.iterations,
                                      "; snapshot in ", r.interrupt_snapshot.string());
      PyErr_SetString(PyExc_KeyboardInterrupt, message.c_str());
      throw py::error_already_set();
    }
    return train_dict(r);
  }

  py::array_t<double> predict(const F32Array& dense,
                              const std::vector<std::pair<I64Array, I64Array>>& sparse,
                              std::int64_t rows) {
    train::SampleArrays a;
    a.rows = rows;
    a.dense = {dense.data(), static_cast<std::size_t>(dense.size())};
    for (const auto& [offsets, keys] : sparse) {
      a.sparse.push_back({{offsets.data(), static_cast<std::size_t>(offsets.size())},
                          {keys.data(), static_cast<std::size_t>(keys.size())}});
    }
    std::vector<double> scores;
    {
      py::gil_scoped_release release;
      const auto guard = lock_session();
      train::Session& s = get();
      scores = s.predict_samples(a);
    }
    const auto columns = rows > 0 ? static_cast<py::ssize_t>(scores.size()) / rows : 1;
    py::array_t<double> out = columns == 1 ? py::array_t<double>({static_cast<py::ssize_t>(rows)})
                                           : py::array_t<double>({rows, columns});
    std::memcpy(out.mutable_data(), scores.data(), scores.size() * sizeof(double));
    return out;
  }

  py::tuple get_embedding(const std::string& name) {
    embedding::EmbeddingSnapshot snap;
    {
      py::gil_scoped_release release;
      const auto guard = lock_session();
      train::Session& s = get();
      snap = s.embedding_snapshot(name);
    }
    const auto n = static_cast<py::ssize_t>(snap.keys.size());
    const py::ssize_t width = n > 0 ? static_cast<py::ssize_t>(snap.vectors.size()) / n : 0;
    py::array_t<std::int64_t> keys(n);
    py::array_t<float> vectors({n, width});
    std::memcpy(keys.mutable_data(), snap.keys.data(), snap.keys.size() * sizeof(std::int64_t));
    std::memcpy(vectors.mutable_data(), snap.vectors.data(), snap.vectors.size() * sizeof(float));
    return py::make_tuple(keys, vectors);
  }

  py::dict get_dense_weights() {
    std::vector<train::DenseWeight> weights;
    {
      py::gil_scoped_release release;
      const auto guard = lock_session();
      train::Session& s = get();
      weights = s.dense_weights();
    }
    py::dict out;
    for (const auto& w : weights) {
      std::vector<py::ssize_t> shape(w.shape.begin(), w.shape.end());
      py::array_t<float> a(shape);
      std::memcpy(a.mutable_data(), w.values.data(), w.values.size() * sizeof(float));
      out[py::str(w.name)] = a;
    }
    return out;
  }

  void set_dense_weights(const py::dict& weights) {
    std::vector<train::DenseWeight> in;
    for (const auto& [key, value] : weights) {
      const auto a = F32Array::ensure(value);
      if (!a)
        throw ConfigError("set_dense_weights: '" + py::str(key).cast<std::string>() +
                          "' is not convertible to a float32 array");
      train::DenseWeight w;
      w.name = py::str(key).cast<std::string>();
      w.shape.assign(a.shape(), a.shape() + a.ndim());
      w.values.assign(a.data(), a.data() + a.size());
      in.push_back(std::move(w));
    }
    py::gil_scoped_release release;
    const auto guard = lock_session();
    train::Session& s = get();
    s.set_dense_weights(in);
  }

 private:
  PythonStdoutStream out_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::unique_ptr<train::Session> session_;
};

}  // namespace

void bind_session(py::module_& m) {
  py::class_<PySession>(m, "_Session", "train::Session; use ember.Session")
      .def(py::init([](std::string config, bool config_is_json, std::vector<std::string> overrides,
                       std::string device, std::vector<int> gpus, int cpu_ranks,
                       std::string run_dir, bool progress, bool quiet) {
             SessionArgs a;
             a.config = std::move(config);
             a.config_is_json = config_is_json;
             a.overrides = std::move(overrides);
             a.options.device = std::move(device);
             a.options.gpus = std::move(gpus);
             a.options.cpu_ranks = cpu_ranks;
             a.options.run_dir = run_dir;
             a.options.progress = progress;
             a.quiet = quiet;
             return std::make_unique<PySession>(std::move(a));
           }),
           py::arg("config"), py::arg("config_is_json"), py::arg("overrides"), py::arg("device"),
           py::arg("gpus"), py::arg("cpu_ranks"), py::arg("run_dir"), py::arg("progress"),
           py::arg("quiet"))
      .def("close", &PySession::close)
      .def("train",
           [](PySession& self) {
             py::gil_scoped_release release;
             const auto guard = self.lock_session();
             train::Session& s = self.get();
             return s.train_step();
           })
      .def("get_current_loss",
           [](PySession& self) {
             py::gil_scoped_release release;
             const auto guard = self.lock_session();
             train::Session& s = self.get();
             return s.current_loss();
           })
      .def("evaluate",
           [](PySession& self) {
             train::EvalResult r;
             {
               py::gil_scoped_release release;
               const auto guard = self.lock_session();
               train::Session& s = self.get();
               r = s.evaluate();
             }
             return eval_dict(r);
           })
      .def("fit", &PySession::fit)
      .def("predict", &PySession::predict)
      .def("predict_file",
           [](PySession& self, const std::string& path) {
             train::EvalResult r;
             {
               py::gil_scoped_release release;
               const auto guard = self.lock_session();
               train::Session& s = self.get();
               r = s.predict(path);
             }
             return eval_dict(r);
           })
      .def(
          "save",
          [](PySession& self, const std::string& dir) {
            py::gil_scoped_release release;
            const auto guard = self.lock_session();
            train::Session& s = self.get();
            s.save(dir);
          },
          py::arg("dir"))
      .def(
          "load",
          [](PySession& self, const std::string& dir, bool with_optimizer_states) {
            py::gil_scoped_release release;
            const auto guard = self.lock_session();
            train::Session& s = self.get();
            s.load(dir, with_optimizer_states);
          },
          py::arg("dir"), py::arg("with_optimizer_states") = true)
      .def("get_embedding", &PySession::get_embedding)
      .def("get_dense_weights", &PySession::get_dense_weights)
      .def("set_dense_weights", &PySession::set_dense_weights)
      .def_property_readonly("iteration", [](PySession& self) { return self.get().iteration(); })
      .def_property_readonly("skipped_batches",
                             [](PySession& self) { return self.get().skipped_batches(); })
      .def_property_readonly("devices",
                             [](PySession& self) { return self.get().describe_devices(); })
      .def_property_readonly("ranks", [](PySession& self) { return self.get().ranks(); })
      .def_property_readonly("config_json",
                             [](PySession& self) { return self.get().config().json.dump(); })
      .def_property_readonly("dense_dim",
                             [](PySession& self) { return self.get().config().data.dense_dim; })
      .def_property_readonly("sparse_inputs", [](PySession& self) {
        py::list out;
        for (const auto& s : self.get().config().data.sparse)
          out.append(py::make_tuple(s.top, s.slot_num));
        return out;
      });
}

}  // namespace ember::python
