// The config schema: every accepted key with its JSON kind, default and meaning. Drives the
// unknown-key and type checks, the override parser, `strata config keys` and docs/config.md.
#pragma once

#include <nlohmann/json.hpp>

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "framework/config/problems.hpp"

namespace strata::config {

enum class Kind {
  boolean,
  integer,  // a JSON integer, or a float with an integral value (5e8)
  number,
  string,
  size,         // bytes: an integer, or a string such as "2GiB" (strata::parse_bytes)
  number_pair,  // [a, b]
  number_or_pair,  // a number, or [a, b]
  boolean_or_string,  // true, false, or a string naming a mode
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

// Whether v is of kind k (null aside).
bool kind_matches(Kind k, const nlohmann::json& v);

// The message for a key that is neither Strata's nor a DeepSpeed key Strata knows: names the
// full path and the closest key of the same section (Strata's or DeepSpeed's), or, when none is
// close, the keys valid in that section.
std::string unknown_key_message(std::string_view path);

// What to know about a key that neither Strata nor DeepSpeed reads but configs carry
// (bf16.loss_scale, optimizer.params.max_grad_norm), or "".
std::string_view key_hint(std::string_view path);

// The key of the same section (Strata's or DeepSpeed's) an unknown path is probably a typo of,
// or "" when none is close.
std::string nearest_key(std::string_view path);

// Throws the UserError tagged "config" with unknown_key_message(path).
[[noreturn]] void unknown_key(std::string_view path);

// Checks every key of doc against the schema and DeepSpeed's keys: unknown keys and wrong JSON
// kinds are mistakes; DeepSpeed keys Strata does not have are judged (judge_deepspeed_key).
// Parameters under optimizer.params and scheduler.params that are not in the schema are left to
// the optimizer's and schedule's own checks. Later stages read only keys without a problem.
void check_structure(const nlohmann::json& doc, Problems& problems,
                     std::vector<std::string>& notes);

}  // namespace strata::config
