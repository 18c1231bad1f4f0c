#include "framework/core/json_limits.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "framework/core/error.hpp"

namespace strata {

namespace {

bool number_char(char c) {
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

}  // namespace

std::string text_position(std::string_view text, std::size_t at) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < at && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return fmt::format("{}:{}", line, col);
}

void check_json_limits(std::string_view text, std::string_view source, const std::string& tag,
                       const JsonLimits& limits) {
  std::size_t depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limits.max_depth)
        user_fail(tag, "{}:{}: JSON nested more than {} levels deep (Strata's inputs need a few)",
                  source, text_position(text, i), limits.max_depth);
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      std::size_t end = i;
      while (end < text.size() && number_char(text[end])) ++end;
      const std::size_t n = end - i;
      if (n > limits.max_number_chars)
        user_fail(tag, "{}:{}: a number of {} characters ({}...); at most {} are accepted", source,
                  text_position(text, i), n, text.substr(i, 16), limits.max_number_chars);
      const std::string token(text.substr(i, n));
      errno = 0;
      char* stop = nullptr;
      const double v = std::strtod(token.c_str(), &stop);
      if (stop != token.c_str() && errno == ERANGE && std::isinf(v))
        user_fail(tag, "{}:{}: the number {} is too large", source, text_position(text, i), token);
      i = end - 1;
    }
  }
}

}  // namespace strata
