// What a program's main() does with an exception that reaches it: one bounded message on stderr
// and the status from framework/core/exit_status.hpp (UserError → bad input, OutOfMemory → out of
// memory with its whole explanation, anything else → failure). Shared by `strata` and train_gpt.
#pragma once

#include <cstddef>
#include <exception>
#include <string>
#include <string_view>

namespace strata {

// The exit status for an exception that ended a program.
int exit_status_for(const std::exception& e);

// `text` with every line longer than `max_line` characters cut in the middle (its head and its
// tail kept: what a message says about an echoed input usually follows it) and at most
// `max_lines` lines, saying how much was left out, and control characters replaced by '?': a
// message that echoes a huge or hostile input stays readable.
std::string bounded_message(std::string_view text, std::size_t max_line = 512,
                            std::size_t max_lines = 40);

// Writes "<program>: <message>" (or "<program>: internal error: <what>" for an exception that is
// not a strata::Error) to stderr, bounded, each line of a message of several (a config's
// problems) prefixed alike, after flushing stdout; returns exit_status_for(e).
int report_fatal(std::string_view program, const std::exception& e);

}  // namespace strata
