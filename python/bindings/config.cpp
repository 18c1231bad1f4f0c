// Configs: the document read from a file (syntax errors with line:column), overrides applied with
// the command line's rules (config::apply_override), validated with every problem at once, and
// the resolved config (config::to_json) with its notes.
#include <utility>
#include <vector>

#include "framework/config/config.hpp"
#include "framework/config/overrides.hpp"
#include "python/bindings/bindings.hpp"

namespace strata::python {

namespace {

using nlohmann::json;

// doc with each (key, text) applied as `--set key=text` would, validated. Throws ConfigError
// naming `source` with every problem (those of the overrides first).
json checked(const std::string& doc_text, const std::vector<std::pair<std::string, std::string>>& sets,
             const std::string& source, json& doc_out, std::vector<std::string>& notes) {
  json doc = json::parse(doc_text);
  std::vector<std::string> lines;
  for (const auto& [key, value] : sets) {
    try {
      config::apply_override(doc, key, value);
    } catch (const UserError& e) {
      lines.push_back(source + ": " + key + "=" + value + ": " + config::error_lines(e).front());
    }
  }
  try {
    const config::Config cfg = config::parse_config(doc, source);
    if (!lines.empty()) throw config::ConfigError(lines);
    doc_out = doc;
    notes = cfg.notes;
    return config::to_json(cfg);
  } catch (const config::ConfigError& e) {
    lines.insert(lines.end(), e.lines().begin(), e.lines().end());
    throw config::ConfigError(lines);
  }
}

}  // namespace

void register_config(py::module_& m) {
  m.def(
      "read_config_file",
      [](const std::string& path) { return config::read_config_file(path).dump(); },
      "The JSON text of a config file (UserError naming the file and line:column when invalid)");
  m.def(
      "check_config",
      [](const std::string& doc_text, const std::vector<std::pair<std::string, std::string>>& sets,
         const std::string& source) {
        json doc;
        std::vector<std::string> notes;
        const json resolved = checked(doc_text, sets, source, doc, notes);
        py::dict out;
        out["document"] = doc.dump();
        out["resolved"] = resolved.dump();
        out["notes"] = notes;
        return out;
      },
      py::arg("document"), py::arg("sets"), py::arg("source"),
      "Applies the overrides (key, text) to the document, validates it; returns the document, "
      "the resolved config (JSON texts) and the notes. Raises ConfigError with every problem.");
}

}  // namespace strata::python
