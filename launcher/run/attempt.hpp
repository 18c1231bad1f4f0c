// One attempt of a job as the launcher saw it, why it failed (which rank first, and how), and
// the summary of every attempt printed at the end.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/run/elastic.hpp"
#include "launcher/run/exit_record.hpp"
#include "launcher/run/watchdog.hpp"

namespace strata::launcher::run {

struct AttemptResult {
  int number = 1;
  double seconds = 0;
  int wait_status = 0;  // of mpirun (or of the rank wrapper without mpirun)
  bool direct = false;
  std::optional<std::string> hung;  // the watchdog's reason, when it killed the job
  int stop_signals = 0;             // SIGINT/SIGTERM received by the launcher meanwhile
  bool killed = false;              // the launcher had to SIGKILL the job
  std::vector<ExitRecord> records;  // ranks that failed, earliest first
  ProgressMap progress;             // the ranks' last progress
  std::string hosts;                // mpirun's --host for this attempt ("" = none given)
  std::optional<Nodes> grow_to;     // elastic: nodes answered again; the ranks were asked to
  std::string grow_reason;          // save and stop so that the job restarts on grow_to

  // The job finished: mpirun exited 0 and the watchdog did not have to kill it.
  bool ok() const;
  // "rank 1 killed by signal 9 (SIGKILL, Killed) after step 7", or the watchdog's reason; with
  // `excerpt`, followed by the start of that rank's last words (": [checkpoint] no space ...").
  std::string failure(bool excerpt = false) const;
  // "completed in 12.3 s" or "failed after 3.1 s: <failure>".
  std::string outcome(bool excerpt = false) const;
  // The first rank that exited with a status a restart cannot change (ExitRecord::final), if any.
  const ExitRecord* final_failure() const;
  // The ranks' last words, each distinct text once, its lines prefixed with the ranks that
  // reported it ("[0-3] train_gpt: [config] ..."); empty when no failed rank left any.
  std::string last_words() const;
};

// "  attempt 1: failed after 3.1 s: ...\n  attempt 2: completed in 9.0 s\n", each failure with
// an excerpt of the failing rank's last words.
std::string summary(const std::vector<AttemptResult>& attempts);

}  // namespace strata::launcher::run
