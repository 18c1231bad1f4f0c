// Where one rank's output goes: every byte to its log file as it arrives, and on the console
// whole lines prefixed with the rank ("[3] ..."): rank 0's stdout, and every rank's stderr.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace strata::launcher::run {

// Splits a byte stream into lines; a line longer than `max_line` is cut.
class LineBuffer {
 public:
  explicit LineBuffer(std::size_t max_line = 64 * 1024) : max_(max_line) {}
  // Appends `data`; calls emit(line) for each complete line (without its newline).
  template <typename Emit>
  void feed(std::string_view data, Emit&& emit) {
    for (char c : data) {
      if (c == '\n' || pending_.size() >= max_) {
        emit(std::string_view(pending_));
        pending_.clear();
        if (c == '\n') continue;
      }
      pending_ += c;
    }
  }
  template <typename Emit>
  void flush(Emit&& emit) {
    if (!pending_.empty()) emit(std::string_view(pending_));
    pending_.clear();
  }

 private:
  std::size_t max_;
  std::string pending_;
};

class RankOutput {
 public:
  // log_fd: the rank's log file (appended, not owned); console_fds: where the prefixed lines go
  // (normally 1 and 2).
  RankOutput(int rank, int log_fd, int console_out = 1, int console_err = 2);
  void on_stdout(std::string_view data);
  void on_stderr(std::string_view data);
  // A line from the wrapper itself: to the log and, prefixed, to the console's stderr.
  void note(std::string_view line);
  void finish();  // emits unterminated last lines

 private:
  void console(int fd, std::string_view line);

  int rank_;
  int log_fd_;
  int out_, err_;
  std::string prefix_;
  LineBuffer out_lines_, err_lines_;
};

// write(2) of all of `data`, retrying on EINTR and short writes; false on error.
bool write_all(int fd, std::string_view data);

}  // namespace strata::launcher::run
