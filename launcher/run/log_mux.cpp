#include "launcher/run/log_mux.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>

namespace strata::launcher::run {

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

RankOutput::RankOutput(int rank, int log_fd, int console_out, int console_err)
    : rank_(rank),
      log_fd_(log_fd),
      out_(console_out),
      err_(console_err),
      prefix_(fmt::format("[{}] ", rank)) {}

void RankOutput::console(int fd, std::string_view line) {
  // One write per line, so lines from different ranks do not interleave mid-line.
  std::string s;
  s.reserve(prefix_.size() + line.size() + 1);
  s.append(prefix_).append(line).push_back('\n');
  write_all(fd, s);
}

void RankOutput::on_stdout(std::string_view data) {
  if (log_fd_ >= 0) write_all(log_fd_, data);
  if (rank_ == 0) out_lines_.feed(data, [&](std::string_view l) { console(out_, l); });
}

void RankOutput::on_stderr(std::string_view data) {
  if (log_fd_ >= 0) write_all(log_fd_, data);
  err_lines_.feed(data, [&](std::string_view l) { console(err_, l); });
}

void RankOutput::note(std::string_view line) {
  if (log_fd_ >= 0) write_all(log_fd_, std::string(line) + "\n");
  console(err_, line);
}

void RankOutput::finish() {
  if (rank_ == 0) out_lines_.flush([&](std::string_view l) { console(out_, l); });
  err_lines_.flush([&](std::string_view l) { console(err_, l); });
}

}  // namespace strata::launcher::run
