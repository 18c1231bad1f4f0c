// Reading config files: file errors, JSON syntax errors with line:column, duplicate keys.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "framework/config/config.hpp"
#include "framework/config/overrides.hpp"
#include "framework/core/error.hpp"
#include "framework/core/json_limits.hpp"

namespace strata::config {

namespace {

// "line:column" of a 1-based byte offset into text.
std::string position(const std::string& text, std::size_t byte) {
  return text_position(text, byte > 0 ? byte - 1 : 0);
}

// nlohmann's message without its "[json.exception.parse_error.101] parse error at line 1,
// column 2: " prefix.
std::string reason(const std::string& what) {
  const auto col = what.find("column ");
  if (col != std::string::npos) {
    const auto colon = what.find(": ", col);
    if (colon != std::string::npos) return what.substr(colon + 2);
  }
  return what;
}

// Message of a strata error without its "[tag] " prefix.
std::string message_of(const Error& e) {
  const std::string w = e.what();
  const std::string prefix = "[" + e.tag() + "] ";
  return w.rfind(prefix, 0) == 0 ? w.substr(prefix.size()) : w;
}

}  // namespace

json read_config_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    user_fail("config", "cannot read config file '{}': it is a directory", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) user_fail("config", "cannot open config file '{}': {}", path, std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();

  // Duplicate keys: nlohmann keeps the last one silently; we refuse the file instead.
  struct Frame {
    std::vector<std::string> keys;
    std::string current;
  };
  std::vector<Frame> stack;
  std::string duplicate;
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        stack.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!stack.empty()) stack.pop_back();
        break;
      case json::parse_event_t::key: {
        const std::string key = parsed.get<std::string>();
        Frame& f = stack.back();
        for (const auto& k : f.keys) {
          if (k == key && duplicate.empty()) {
            for (std::size_t i = 0; i + 1 < stack.size(); ++i) duplicate += stack[i].current + ".";
            duplicate += key;
          }
        }
        f.keys.push_back(key);
        f.current = key;
        break;
      }
      default:
        break;
    }
    return true;
  };
  json doc;
  check_json_limits(text, path, "config");  // before the parser: depth, number sizes
  try {
    doc = json::parse(text, callback);
  } catch (const json::parse_error& e) {
    user_fail("config", "{}:{}: invalid JSON: {}", path, position(text, e.byte), reason(e.what()));
  }
  if (!duplicate.empty())
    user_fail("config", "{}: key '{}' appears twice; keep one", path, duplicate);
  return doc;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  json doc = read_config_file(path);
  for (const auto& o : overrides) {
    try {
      apply_override(doc, o);
    } catch (const UserError& e) {
      throw UserError("config", fmt::format("--set {}: {}", o, message_of(e)));
    }
  }
  return parse_config(doc, overrides.empty() ? path : path + " with --set overrides");
}

}  // namespace strata::config
