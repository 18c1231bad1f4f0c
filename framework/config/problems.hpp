// Everything wrong with a config, collected so that one run reports all of it (one line per
// problem), and the error that carries the list.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <vector>

#include "framework/core/error.hpp"

namespace strata::config {

enum class ProblemKind {
  mistake,          // unknown key, wrong type, value out of range, keys that contradict each other
  not_implemented,  // a DeepSpeed feature Strata does not implement
  unresolved_auto,  // "auto" with nothing that determines the value
};

struct Problem {
  ProblemKind kind;
  std::string key;   // the dotted key it is about ("" for the whole document)
  std::string text;  // one line, naming the key
  // For an unknown key: the key it was probably meant to be. Checks of that key are skipped
  // too, so a typo does not also report the key it misspells as missing.
  std::string meant;
};

class Problems {
 public:
  void add(ProblemKind kind, std::string key, std::string text, std::string meant = {});
  template <typename... Args>
  void mistake(std::string key, fmt::format_string<Args...> f, Args&&... args) {
    add(ProblemKind::mistake, std::move(key), fmt::format(f, std::forward<Args>(args)...));
  }

  bool empty() const { return list_.empty(); }
  std::size_t size() const { return list_.size(); }
  const std::vector<Problem>& list() const { return list_; }
  // True when a problem names key, a key inside it or a section holding it, or was probably
  // meant for one of these (so that later checks skip what is already reported).
  bool about(std::string_view key) const;

  // Throws ConfigError with every problem, each line prefixed by "source: ", when there is any.
  void raise_if_any(std::string_view source) const;

 private:
  std::vector<Problem> list_;
};

// A UserError listing one or more problems; what() is one "[config] ..." line per problem.
class ConfigError : public UserError {
 public:
  explicit ConfigError(std::vector<std::string> lines);
  // The problems, one line each, without the "[config] " tag.
  const std::vector<std::string>& lines() const noexcept { return lines_; }

 private:
  std::vector<std::string> lines_;
};

// The lines of e: those of a ConfigError, or e's message as the only line; without the tag.
std::vector<std::string> error_lines(const Error& e);

}  // namespace strata::config
