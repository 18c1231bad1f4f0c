// Command-line changes to a config document before it is parsed: `--set key=value` and the
// memory-cap flags (`--device-memory 2GiB`), shared by the `strata` command and every example.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace strata::config {

// Sets doc[dotted_key] (creating parent objects) from text. The key must be in the schema
// (else UserError naming the closest key). The text is read as the key's kind: strings are taken
// literally (or as a JSON string when quoted), "null" clears a nullable key, sizes are a byte
// count or a string such as "2GiB", other kinds are JSON ("3", "true", "[0.9, 0.95]", "{}").
// Values are checked later, by parse_config.
void apply_override(nlohmann::json& doc, std::string_view dotted_key, std::string_view value);

// "key=value" form of apply_override.
void apply_override(nlohmann::json& doc, std::string_view assignment);

// The memory-cap flags every program offers (empty = not given).
struct MemoryFlags {
  std::string device;  // --device-memory → strata.memory.device_limit
  std::string host;    // --host-memory   → strata.memory.host_limit
  std::string nvme;    // --nvme-memory   → strata.memory.nvme_limit
};
void apply_memory_flags(nlohmann::json& doc, const MemoryFlags& flags);

}  // namespace strata::config
