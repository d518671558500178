// Configurations read by the C++ reader, so that Python checks a model by the same rules, with
// the same messages, as `ember train` does.
#include <pybind11/stl.h>
#include <nlohmann/json.hpp>

#include "ember/python/bindings.hpp"
#include "ember/train/model_config.hpp"

namespace ember::python {

void bind_config(py::module_& m) {
  m.def(
      "check_config",
      [](const std::string& json_text, const std::string& where) {
        nlohmann::json root;
        try {
          root = nlohmann::json::parse(json_text);
        } catch (const nlohmann::json::parse_error& e) {
          throw ConfigError(where + ": not valid JSON (" + e.what() + ")");
        }
        return train::parse_model_config(std::move(root), where).json.dump();
      },
      py::arg("json_text"), py::arg("where") = "<python>",
      "Checks a configuration given as JSON text; returns it normalised (aliases rewritten) as "
      "JSON text, or raises ConfigError naming the layer and the key.");
  m.def(
      "load_config",
      [](const std::string& path, const std::vector<std::string>& overrides) {
        py::gil_scoped_release release;  // reads a file
        return train::load_model_config(path, overrides).json.dump();
      },
      py::arg("path"), py::arg("overrides") = std::vector<std::string>{},
      "Reads a configuration file, applies 'path=value' overrides as --set does, checks it and "
      "returns it normalised as JSON text.");
}

}  // namespace ember::python
