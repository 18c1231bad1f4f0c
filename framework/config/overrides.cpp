#include "framework/config/overrides.hpp"

#include <cctype>

#include <fmt/format.h>

#include "framework/config/deepspeed_keys.hpp"
#include "framework/config/schema.hpp"
#include "framework/core/error.hpp"
#include "framework/core/json_limits.hpp"
#include "framework/memory/size.hpp"

namespace strata::config {

namespace {

using json = nlohmann::json;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// The text as a JSON value of the key's kind. Text that is not valid JSON stays a string, so
// that parse_config reports "must be an integer, got "abc"" with the key's name.
json value_for(const KeySpec& spec, std::string_view text) {
  const std::string s(text);
  check_json_limits(s, "value", "config");  // before json::accept/parse: depth, number sizes
  if (spec.nullable && s == "null") return nullptr;
  if (spec.kind == Kind::string) {
    if (s.size() >= 2 && s.front() == '"' && s.back() == '"' && json::accept(s))
      return json::parse(s);
    return s;
  }
  if (spec.kind == Kind::size) {
    if (all_digits(s)) return json::parse(s);
    return s;
  }
  if (json::accept(s)) return json::parse(s);
  return s;
}

// A DeepSpeed key Strata knows (or a key inside a DeepSpeed section), or a parameter of the
// optimizer or schedule: set like any key and judged by check_config. spec gets its kind.
bool foreign_or_param(std::string_view key, KeySpec& spec) {
  if (key.starts_with("optimizer.params.") || key.starts_with("scheduler.params.")) {
    spec = KeySpec{key, Kind::number, "", ""};  // read as JSON; checked with its type
    return true;
  }
  for (std::string_view k = key;;) {
    if (const DeepSpeedKey* ds = find_deepspeed_key(k)) {
      spec = KeySpec{key, k == key ? ds->kind : Kind::number, "", "", ds->nullable};
      return true;
    }
    const auto dot = k.rfind('.');
    if (dot == std::string_view::npos) return false;
    k = k.substr(0, dot);
  }
}

}  // namespace

void apply_override(json& doc, std::string_view dotted_key, std::string_view value) {
  const std::string_view key = trim(dotted_key);
  if (key.empty()) user_fail("config", "override '={}' has no key; write key=value", value);
  const KeySpec* spec = find_key(key);
  KeySpec other{};
  if (!spec && (foreign_or_param(key, other))) spec = &other;
  if (!spec) {
    // Report the first part of the path that is not a key ("flux" in "flux.enabled").
    for (auto dot = key.find('.'); dot != std::string_view::npos; dot = key.find('.', dot + 1)) {
      const KeySpec* prefix = find_key(key.substr(0, dot));
      if (!prefix) unknown_key(key.substr(0, dot));
      if (prefix->kind != Kind::object) unknown_key(key);
    }
    unknown_key(key);
  }
  if (doc.is_null()) doc = json::object();
  if (!doc.is_object()) user_fail("config", "cannot set {}: the config is not a JSON object", key);
  json* cur = &doc;
  std::string_view rest = key;
  std::string walked;
  while (true) {
    const auto dot = rest.find('.');
    const std::string part(rest.substr(0, dot));
    walked += walked.empty() ? part : "." + part;
    if (dot == std::string_view::npos) {
      (*cur)[part] = value_for(*spec, trim(value));
      return;
    }
    json& next = (*cur)[part];
    if (next.is_null()) next = json::object();
    if (!next.is_object())
      user_fail("config", "cannot set {}: {} is {}, not an object", key, walked, next.dump());
    cur = &next;
    rest = rest.substr(dot + 1);
  }
}

void apply_override(json& doc, std::string_view assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string_view::npos)
    user_fail("config", "override '{}' has no '='; write key=value, e.g. zero_optimization.stage=2",
              assignment);
  apply_override(doc, assignment.substr(0, eq), assignment.substr(eq + 1));
}

void apply_memory_flags(json& doc, const MemoryFlags& flags) {
  const auto one = [&](const std::string& text, std::string_view flag, std::string_view key) {
    if (text.empty()) return;
    try {
      (void)parse_bytes(text);
    } catch (const UserError&) {
      user_fail("config",
                "{} '{}' is not a size: write a number and a unit such as 512MiB, 2GiB or "
                "1.5GB (KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB of 1000)",
                flag, text);
    }
    apply_override(doc, key, text);
  };
  one(flags.device, "--device-memory", "strata.memory.device_limit");
  one(flags.host, "--host-memory", "strata.memory.host_limit");
  one(flags.nvme, "--nvme-memory", "strata.memory.nvme_limit");
}

}  // namespace strata::config
