#include "framework/data/inspect.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace strata::data {

std::string escape_text(const std::string& bytes) {
  std::string s;
  for (const unsigned char c : bytes) {
    switch (c) {
      case '\n':
        s += "\\n";
        break;
      case '\t':
        s += "\\t";
        break;
      case '\\':
        s += "\\\\";
        break;
      case '"':
        s += "\\\"";
        break;
      default:
        if (c >= 0x20 && c < 0x7f)
          s += static_cast<char>(c);
        else
          s += fmt::format("\\x{:02x}", c);
    }
  }
  return s;
}

std::string describe_token_file(const TokenFile& file, std::uint64_t show) {
  const auto& h = file.header();
  std::string out;
  out += fmt::format("file        {}\n", file.path());
  out += fmt::format("format      Strata token file, version {}\n", h.version);
  out += fmt::format("dtype       {} ({} bytes per token)\n",
                     h.bytes_per_token == 2 ? "u16" : "u32", h.bytes_per_token);
  out += fmt::format("tokens      {}\n", h.token_count);
  out += fmt::format("vocab_size  {}\n", h.vocab_size);
  out += fmt::format("file size   {} bytes\n", h.expected_file_size());
  const std::uint64_t n = std::min(show, file.size());
  std::vector<std::int32_t> tokens(n);
  if (n > 0) file.read(0, n, tokens.data());
  out += fmt::format("first {:<5} [{}]\n", n, fmt::join(tokens, ", "));
  if (h.vocab_size == 256) {
    std::string text(tokens.begin(), tokens.end());
    out += fmt::format("as text     \"{}\"\n", escape_text(text));
  }
  return out;
}

}  // namespace strata::data
