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
  // Rank 0, at start: <dir>/layout, the batch as this run resolved it, which `strata run --nodes`
  // reads to keep the global batch when the job changes size (launcher/run/elastic.hpp):
  // "world 4\nmodel_parallel 2\nmicro_batch 4\naccumulation 1\nglobal_batch 8\ncheckpoints 1\n".
  void layout(int world, int model_parallel, std::int64_t micro_batch, std::int64_t accumulation,
              std::int64_t global_batch, bool checkpoints);

 private:
  // A failed write is reported once on stderr; training goes on.
  void write(const std::string& text);
  void write_to(const std::string& path, const std::string& text);

  std::string path_;
  bool warned_ = false;
};

}  // namespace strata::job
