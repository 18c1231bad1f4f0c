#include "framework/config/problems.hpp"

namespace strata::config {

namespace {

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : "\n[config] ") + l;
  return out;
}

}  // namespace

void Problems::add(ProblemKind kind, std::string key, std::string text, std::string meant) {
  list_.push_back(Problem{kind, std::move(key), std::move(text), std::move(meant)});
}

namespace {
// a is b, or a key inside b.
bool within(std::string_view a, std::string_view b) {
  return b.empty() || a == b ||
         (a.size() > b.size() && a.substr(0, b.size()) == b && a[b.size()] == '.');
}
}  // namespace

bool Problems::about(std::string_view key) const {
  for (const auto& p : list_) {
    if (within(p.key, key) || within(key, p.key)) return true;
    if (!p.meant.empty() && (within(p.meant, key) || within(key, p.meant))) return true;
  }
  return false;
}

void Problems::raise_if_any(std::string_view source) const {
  if (list_.empty()) return;
  std::vector<std::string> lines;
  for (const auto& p : list_)
    lines.push_back(source.empty() ? p.text : fmt::format("{}: {}", source, p.text));
  throw ConfigError(std::move(lines));
}

ConfigError::ConfigError(std::vector<std::string> lines)
    : UserError("config", joined(lines)), lines_(std::move(lines)) {}

std::vector<std::string> error_lines(const Error& e) {
  if (const auto* c = dynamic_cast<const ConfigError*>(&e)) return c->lines();
  const std::string w = e.what();
  const std::string prefix = "[" + e.tag() + "] ";
  return {w.rfind(prefix, 0) == 0 ? w.substr(prefix.size()) : w};
}

}  // namespace strata::config
