// Progress of the ranks (the files they write under $STRATA_PROGRESS_DIR) and the watchdog
// that declares a job hung when no rank has advanced for a while.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

namespace strata::launcher::run {

struct RankProgress {
  long long step = -1;  // last completed step
  bool done = false;    // "done <step>": the rank finished cleanly
  bool operator==(const RankProgress&) const = default;
};
using ProgressMap = std::map<int, RankProgress>;  // by world rank

// Reads every rank_XXXXX.progress in `dir` ("<step>" or "done <step>"); others are skipped.
ProgressMap read_progress(const std::string& dir);
// "rank 0 step 12, rank 1 step 11" (at most `limit` ranks, then "...").
std::string describe_progress(const ProgressMap& p, int limit = 8);

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;
  // timeout_s: no rank advanced for this long after the first progress; startup_s: no progress
  // at all this long after the start. 0 turns the watchdog off.
  Watchdog(double timeout_s, double startup_s, int ranks, Clock::time_point start);
  bool enabled() const { return timeout_s_ > 0; }
  // Feeds the latest progress; returns why the job counts as hung, if it does. Once every rank
  // reported done the job is finishing and never counts as hung.
  std::optional<std::string> check(Clock::time_point now, const ProgressMap& progress);

 private:
  double timeout_s_, startup_s_;
  int ranks_;
  Clock::time_point start_, last_change_;
  ProgressMap last_;
  bool seen_ = false;
};

}  // namespace strata::launcher::run
