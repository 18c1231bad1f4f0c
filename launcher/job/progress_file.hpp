// The launcher's progress contract: with STRATA_PROGRESS_DIR set, each rank keeps
// <dir>/rank_XXXXX.progress (5-digit world rank) holding the last completed step ("42"), or
// "done 42" after a clean finish; every update is atomic (temporary file, then rename), so a
// watchdog never reads a partial file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace strata::job {

class ProgressFile {
 public:
  // From $STRATA_PROGRESS_DIR; nullopt when it is unset or empty. Creates the directory.
  static std::optional<ProgressFile> from_env(int world_rank);
  ProgressFile(std::string dir, int world_rank);

  void step(std::int64_t step) { write(std::to_string(step)); }
  void done(std::int64_t step) { write("done " + std::to_string(step)); }
  const std::string& path() const { return path_; }

 private:
  // A failed write is reported once on stderr; training goes on.
  void write(const std::string& text);

  std::string path_;
  bool warned_ = false;
};

}  // namespace strata::job
