// How a rank's program ended, as its wrapper saw it: written to <status-dir>/rank_XXXXX.exit
// when the program fails, read by the launcher to say which rank failed first and why, to print
// the ranks' last words once, and to decide whether a restart can help (exit_status.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::launcher::run {

struct ExitRecord {
  int rank = 0;
  bool signaled = false;  // killed by signal `code`, else exited with status `code`
  int code = 0;
  bool collateral = false;   // mpirun had already told this rank to stop (another rank failed)
  std::int64_t time_ns = 0;  // wall clock (comparable across nodes with synchronised clocks)
  // The program's last burst of stderr lines (its error), held back from the console: the
  // launcher prints it once for every rank that reported the same.
  std::vector<std::string> message;

  std::string describe() const;  // "rank 3 killed by signal 9 (SIGKILL, Killed)"
  // The program exited (not killed) with a status a restart cannot change (bad input, usage,
  // out of memory), and not because mpirun was ending the job.
  bool final() const;
};

std::string exit_record_path(const std::string& dir, int rank);
// Atomic (temporary file + rename). Errors are ignored: the record is a diagnostic.
void write_exit_record(const std::string& dir, const ExitRecord& r);
// Every record in `dir`, earliest first; unreadable files are skipped.
std::vector<ExitRecord> read_exit_records(const std::string& dir);

}  // namespace strata::launcher::run
