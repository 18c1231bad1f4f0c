#include "framework/memory/exit_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "framework/core/error.hpp"
#include "framework/core/exit_status.hpp"
#include "framework/memory/out_of_memory.hpp"

namespace strata {

int exit_status_for(const std::exception& e) {
  if (dynamic_cast<const OutOfMemory*>(&e)) return kExitOutOfMemory;
  if (dynamic_cast<const UserError*>(&e)) return kExitBadInput;
  return kExitFailure;
}

std::string bounded_message(std::string_view text, std::size_t max_line, std::size_t max_lines) {
  // Control characters from a damaged or hostile input (escape sequences) are not passed on to
  // a terminal.
  std::string clean(text);
  for (char& c : clean)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') || c == 0x7f) c = '?';
  text = clean;
  std::string out;
  std::size_t lines = 0;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (lines == max_lines) {
      std::size_t rest = 1;
      for (char c : text) rest += c == '\n';
      out += fmt::format("\n... ({} more lines)", rest);
      break;
    }
    if (lines++ > 0) out += '\n';
    if (line.size() > max_line) {
      // Head and tail: what the message says about an echoed input usually comes after it.
      const std::size_t head = max_line / 2, tail = max_line - head;
      out.append(line.substr(0, head));
      out += fmt::format(" ... ({} characters left out) ... ", line.size() - head - tail);
      out.append(line.substr(line.size() - tail));
    } else {
      out.append(line);
    }
  }
  return out;
}

int report_fatal(std::string_view program, const std::exception& e) {
  std::fflush(stdout);
  const bool ours = dynamic_cast<const Error*>(&e) != nullptr;
  // One line per problem (a config error lists each), every line prefixed with the program.
  const std::string message = bounded_message(e.what());
  std::string text;
  for (std::size_t at = 0; at <= message.size();) {
    const std::size_t nl = std::min(message.find('\n', at), message.size());
    text += fmt::format("{}: {}{}\n", program, at == 0 && !ours ? "internal error: " : "",
                        std::string_view(message).substr(at, nl - at));
    at = nl + 1;
  }
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
  return exit_status_for(e);
}

}  // namespace strata
