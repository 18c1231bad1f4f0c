// The config schema: every accepted key with its JSON kind, default and meaning. Drives the
// unknown-key and type checks, the override parser, `strata config keys` and docs/config.md.
#pragma once

#include <nlohmann/json.hpp>

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace strata::config {

enum class Kind {
  boolean,
  integer,  // a JSON integer, or a float with an integral value (5e8)
  number,
  string,
  size,         // bytes: an integer, or a string such as "2GiB" (strata::parse_bytes)
  number_pair,  // [a, b]
  number_or_pair,  // a number, or [a, b]
  object,
};

struct KeySpec {
  std::string_view path;  // dotted: "zero_optimization.offload_param.device"
  Kind kind;
  std::string_view default_value;  // JSON text when static ("16", "\"cpu\"", "null"), else prose
  std::string_view meaning;
  bool nullable = false;  // null is accepted and means "unset"
};

// Every key, parents before children, in documentation order.
std::span<const KeySpec> schema();

// The spec for a dotted path, or nullptr.
const KeySpec* find_key(std::string_view path);

// "an integer", "true or false", ...
std::string_view kind_name(Kind k);

// Type name of a JSON value for messages: "a string", "an integer", "null", ...
std::string json_type_name(const nlohmann::json& v);

// Throws the UserError for a key that is not in the schema: names the full path and the
// closest valid key (or, when none is close, the keys valid at that level).
[[noreturn]] void unknown_key(std::string_view path);

// Checks every key of doc against the schema (unknown keys first, then JSON kinds), so that
// later stages can read values without type checks. Throws UserError tagged "config".
void check_structure(const nlohmann::json& doc);

}  // namespace strata::config
