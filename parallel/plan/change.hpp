// A change to a config as a user makes it on the command line — `--set key=value` assignments,
// memory caps as --device-memory/--host-memory/--nvme-memory — applied through the config's own
// override and validation path, so what the planner tried is exactly what the printed flags do.
#pragma once

#include <string>
#include <vector>

#include "framework/config/config.hpp"

namespace strata::parallel::plan {

struct Change {
  std::string what;               // "turn on activation checkpointing"
  std::vector<std::string> sets;  // "key=value", in order

  // The command-line flags: "--set a=b --set c=d"; a memory cap as "--device-memory 82.14MiB".
  std::string flags() const;
};

// cfg (resolved) with the change applied: config::to_json, config::apply_override for each
// assignment, config::parse_config. Throws the config's UserError when the result is invalid.
config::Config apply(const config::Config& cfg, const Change& change);

}  // namespace strata::parallel::plan
