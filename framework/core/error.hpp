// Strata's exception types and check macros. Every message carries a bracketed subsystem
// tag ("[config] ...", "[zero] ...") so a user can tell at once where a failure came from.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace strata {

// Base of every error Strata throws. what() is "[tag] message".
class Error : public std::runtime_error {
 public:
  Error(std::string tag, const std::string& message)
      : std::runtime_error("[" + tag + "] " + message), tag_(std::move(tag)) {}
  const std::string& tag() const noexcept { return tag_; }

 private:
  std::string tag_;
};

// A mistake in what the user gave us (config, command line, data file): reported as one
// line, no stack, non-zero exit.
class UserError : public Error {
 public:
  using Error::Error;
};

// Throws strata::Error("[tag] formatted message").
template <typename... Args>
[[noreturn]] void fail(const std::string& tag, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(tag, fmt::format(f, std::forward<Args>(args)...));
}

// Throws strata::UserError("[tag] formatted message").
template <typename... Args>
[[noreturn]] void user_fail(const std::string& tag, fmt::format_string<Args...> f,
                            Args&&... args) {
  throw UserError(tag, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace strata

// STRATA_CHECK(cond, "tag", "fmt", args...): throws strata::Error naming the failed condition.
#define STRATA_CHECK(cond, tag, ...)                                                        \
  do {                                                                                      \
    if (!(cond)) [[unlikely]] {                                                             \
      throw ::strata::Error(tag, ::fmt::format(__VA_ARGS__) +                               \
                                     ::fmt::format(" (check `{}` failed at {}:{})", #cond, \
                                                   __FILE__, __LINE__));                    \
    }                                                                                       \
  } while (0)
