// Where one rank's output goes: every byte to its log file as it arrives, and on the console
// whole lines prefixed with the rank ("[3] ..."): rank 0's stdout, and every rank's stderr. The
// last burst of stderr lines is held back a moment: when the program then fails, it is its
// error, and the launcher prints it once for all the ranks that reported it instead of once per
// rank (exit_record.hpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

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
  using Clock = std::chrono::steady_clock;
  // A stderr line is held back until a line arrives more than kBurstGap after it (it was not
  // the program's last words) or it is kHoldMax old; at most kHoldLines lines are held.
  static constexpr auto kBurstGap = std::chrono::milliseconds(200);
  static constexpr auto kHoldMax = std::chrono::seconds(3);
  static constexpr std::size_t kHoldLines = 40;

  // log_fd: the rank's log file (appended, not owned); console_fds: where the prefixed lines go
  // (normally 1 and 2).
  RankOutput(int rank, int log_fd, int console_out = 1, int console_err = 2);
  void on_stdout(std::string_view data, Clock::time_point now = Clock::now());
  void on_stderr(std::string_view data, Clock::time_point now = Clock::now());
  // Shows held stderr lines that are old enough (call now and then while the program runs).
  void tick(Clock::time_point now = Clock::now());
  // A line from the wrapper itself: to the log only (the launcher reports how ranks ended).
  void note(std::string_view line);
  // At the program's end: completes unterminated last lines (held, if on stderr).
  void finish();
  // The stderr lines still held back (the program's last words), which are no longer shown.
  std::vector<std::string> take_held();
  // Shows the held lines on the console (the program did not fail, or its end is not news).
  void show_held();

 private:
  void console(int fd, std::string_view line);
  void hold(std::string_view line, Clock::time_point now);

  int rank_;
  int log_fd_;
  int out_, err_;
  std::string prefix_;
  LineBuffer out_lines_, err_lines_;
  struct Held {
    std::string line;
    Clock::time_point at;
  };
  std::deque<Held> held_;
};

// write(2) of all of `data`, retrying on EINTR and short writes; false on error.
bool write_all(int fd, std::string_view data);

}  // namespace strata::launcher::run
