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

void RankOutput::on_stdout(std::string_view data, Clock::time_point now) {
  if (log_fd_ >= 0) write_all(log_fd_, data);
  if (rank_ == 0) out_lines_.feed(data, [&](std::string_view l) { console(out_, l); });
  tick(now);
}

void RankOutput::hold(std::string_view line, Clock::time_point now) {
  // The lines of an earlier burst were not the program's last words: show them.
  if (!held_.empty() && now - held_.back().at > kBurstGap) show_held();
  if (held_.size() >= kHoldLines) {
    console(err_, held_.front().line);
    held_.pop_front();
  }
  held_.push_back({std::string(line), now});
}

void RankOutput::on_stderr(std::string_view data, Clock::time_point now) {
  if (log_fd_ >= 0) write_all(log_fd_, data);
  err_lines_.feed(data, [&](std::string_view l) { hold(l, now); });
  tick(now);
}

void RankOutput::tick(Clock::time_point now) {
  while (!held_.empty() && now - held_.front().at > kHoldMax) {
    console(err_, held_.front().line);
    held_.pop_front();
  }
}

void RankOutput::note(std::string_view line) {
  if (log_fd_ >= 0) write_all(log_fd_, std::string(line) + "\n");
}

void RankOutput::finish() {
  const auto now = Clock::now();
  if (rank_ == 0) out_lines_.flush([&](std::string_view l) { console(out_, l); });
  err_lines_.flush([&](std::string_view l) { hold(l, now); });
}

std::vector<std::string> RankOutput::take_held() {
  std::vector<std::string> out;
  for (auto& h : held_) out.push_back(std::move(h.line));
  held_.clear();
  return out;
}

void RankOutput::show_held() {
  for (const auto& h : held_) console(err_, h.line);
  held_.clear();
}

}  // namespace strata::launcher::run
