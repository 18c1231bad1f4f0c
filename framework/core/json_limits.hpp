// Limits on JSON text from users and files (configs, --set values, checkpoint manifests),
// checked on the raw text before a JSON library parses it: nesting depth (parsers and the code
// walking their values recurse; 100,000 nested arrays overflow the stack) and numbers (a
// 100,000-digit number overflows a double and would be echoed whole in the error).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace strata {

struct JsonLimits {
  std::size_t max_depth = 64;          // arrays and objects inside each other
  std::size_t max_number_chars = 100;  // characters of one number
};

// "line:column" (1-based) of the byte at index `at` of text.
std::string text_position(std::string_view text, std::size_t at);

// Throws UserError("[tag] <source>:<line>:<column>: <what is wrong>") at the first value nested
// deeper than the limit, the first number longer than the limit, or a number too large for a
// double (nothing of the offending text is echoed beyond a few characters). Malformed JSON is
// left to the parser.
void check_json_limits(std::string_view text, std::string_view source, const std::string& tag,
                       const JsonLimits& limits = {});

}  // namespace strata
