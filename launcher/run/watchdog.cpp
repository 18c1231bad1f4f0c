#include "launcher/run/watchdog.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace strata::launcher::run {

namespace fs = std::filesystem;

ProgressMap read_progress(const std::string& dir) {
  ProgressMap out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    // rank_XXXXX.progress
    if (name.rfind("rank_", 0) != 0 || e.path().extension() != ".progress") continue;
    char* end = nullptr;
    const long rank = std::strtol(name.c_str() + 5, &end, 10);
    if (end == name.c_str() + 5 || std::string(end) != ".progress" || rank < 0) continue;
    std::ifstream in(e.path());
    std::string first;
    if (!(in >> first)) continue;
    RankProgress p;
    if (first == "done") {
      p.done = true;
      if (!(in >> p.step)) continue;
    } else {
      p.step = std::strtoll(first.c_str(), &end, 10);
      if (*end != '\0') continue;
    }
    out[static_cast<int>(rank)] = p;
  }
  return out;
}

std::string describe_progress(const ProgressMap& p, int limit) {
  if (p.empty()) return "no rank reported progress";
  std::string s;
  int n = 0;
  for (const auto& [rank, r] : p) {
    if (n++ == limit) return s + ", ...";
    s += fmt::format("{}rank {} {}{}", s.empty() ? "" : ", ", rank,
                     r.done ? "done at step " : "step ", r.step);
  }
  return s;
}

Watchdog::Watchdog(double timeout_s, double startup_s, int ranks, Clock::time_point start)
    : timeout_s_(timeout_s),
      startup_s_(startup_s > 0 ? startup_s : timeout_s),
      ranks_(ranks),
      start_(start),
      last_change_(start) {}

std::optional<std::string> Watchdog::check(Clock::time_point now, const ProgressMap& progress) {
  if (!enabled()) return std::nullopt;
  if (progress != last_) {
    // Any rank that appeared or moved counts as progress (a new attempt starts from files
    // removed, so steps only grow within one).
    last_ = progress;
    last_change_ = now;
    seen_ = seen_ || !progress.empty();
  }
  int done = 0;
  for (const auto& [rank, p] : progress) done += p.done ? 1 : 0;
  if (done >= ranks_) return std::nullopt;
  const double idle = std::chrono::duration<double>(now - last_change_).count();
  if (!seen_ && idle > startup_s_)
    return fmt::format("watchdog: no rank reported progress within {:g} s of the start",
                       startup_s_);
  if (seen_ && idle > timeout_s_)
    return fmt::format("watchdog: no rank made progress for {:g} s ({})", timeout_s_,
                       describe_progress(progress));
  return std::nullopt;
}

}  // namespace strata::launcher::run
