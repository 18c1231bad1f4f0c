// The config flags every Strata program takes (--config, --set, --device-memory, --host-memory,
// --nvme-memory) as CLI11 options. Header-only: include it from programs that link CLI11.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "framework/config/config.hpp"
#include "framework/core/error.hpp"
#include "framework/memory/size.hpp"

namespace strata::config {

struct ConfigOptions {
  std::string path;              // --config FILE (empty: start from {})
  std::vector<std::string> set;  // --set key=value, applied in order
  MemoryFlags memory;            // --device-memory / --host-memory / --nvme-memory

  // The document with the memory flags, then each --set, applied.
  json document() const {
    json doc = path.empty() ? json::object() : read_config_file(path);
    apply_memory_flags(doc, memory);
    for (const auto& s : set) {
      try {
        apply_override(doc, s);
      } catch (const UserError& e) {
        throw UserError("config",
                        "--set " + s + ": " + std::string(e.what()).substr(e.tag().size() + 3));
      }
    }
    return doc;
  }
  // How messages name the document: the file (and whether flags changed it).
  std::string source() const {
    std::string s = path.empty() ? "config" : path;
    if (!set.empty() || !memory.device.empty() || !memory.host.empty() || !memory.nvme.empty())
      s += " with command-line overrides";
    return s;
  }
  // document() parsed and validated; every problem in one ConfigError naming source().
  Config load() const { return parse_config(document(), source()); }
};

// A CLI11 validator for sizes such as "2GiB".
inline CLI::Validator size_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        try {
          (void)parse_bytes(s);
        } catch (const Error& e) {
          return e.what();
        }
        return {};
      },
      "SIZE");
}

// Adds --set and the memory flags, and --config FILE unless config_positional names a positional
// argument to use instead (e.g. "file" for `strata config check FILE`).
inline void add_config_options(CLI::App& app, ConfigOptions& o, bool config_required = true,
                               const std::string& config_positional = "") {
  auto* c = config_positional.empty()
                ? app.add_option("--config,-c", o.path,
                                 "JSON config file (DeepSpeed key names; see docs/config.md)")
                : app.add_option(config_positional, o.path,
                                 "JSON config file (DeepSpeed key names; see docs/config.md)");
  if (config_required) c->required();
  app.add_option("--set", o.set,
                 "Override a config key: --set zero_optimization.stage=3 (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  app.add_option("--device-memory", o.memory.device,
                 "Cap device memory (strata.memory.device_limit), e.g. 2GiB")
      ->check(size_validator());
  app.add_option("--host-memory", o.memory.host,
                 "Cap host memory (strata.memory.host_limit), e.g. 16GiB")
      ->check(size_validator());
  app.add_option("--nvme-memory", o.memory.nvme,
                 "Cap NVMe space (strata.memory.nvme_limit), e.g. 200GB")
      ->check(size_validator());
}

}  // namespace strata::config
