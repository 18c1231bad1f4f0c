#include "launcher/job/startup_checks.hpp"

#include "launcher/job/metrics_file.hpp"
#include "framework/core/output_path.hpp"

namespace strata::job {

void check_outputs(const config::Config& cfg, const std::string& metrics_path) {
  if (!cfg.strata.checkpoint.dir.empty())
    check_output_dir(cfg.strata.checkpoint.dir, "train_gpt",
                     "the checkpoint directory (strata.checkpoint.dir / --checkpoint-dir)");
  MetricsFile::check(metrics_path);
}

}  // namespace strata::job
