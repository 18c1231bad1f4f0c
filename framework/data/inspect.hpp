// describe_token_file: the human-readable summary printed by `strata data inspect`.
#pragma once

#include <cstdint>
#include <string>

#include "framework/data/token_file.hpp"

namespace strata::data {

// Header fields, token count, size, the first `show` tokens and, when the vocabulary is 256
// (byte-level text), those tokens decoded as escaped text.
std::string describe_token_file(const TokenFile& file, std::uint64_t show = 64);

// Bytes as a C-style escaped string: printable ASCII as is, \n \t \\ \" and \xNN otherwise.
std::string escape_text(const std::string& bytes);

}  // namespace strata::data
