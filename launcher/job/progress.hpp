// Progress reporting for a GPT job (train_gpt, the Python package): the console line every steps_per_print and one JSON line per
// step for --metrics (fields: docs/metrics.md).
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>

#include "framework/memory/ledger.hpp"
#include "framework/train/trainer.hpp"

namespace strata::job {

struct StepReport {
  std::int64_t step = 0, total = 0;
  double loss = 0;
  train::StepResult result;
  bool fp16 = false;
  double tokens_per_s = 0;
  double elapsed_s = 0;
  double eta_s = 0;
  std::uint64_t peak_device = 0;  // peak device-tier bytes this step, max over the ranks
  std::optional<double> val_loss;
  int rank = 0, world_size = 1;  // who writes the metrics line
  int data_parallel_size = 0, accumulation = 0;  // 0: not reported
  // The first step after `strata run --nodes` changed the job's size: why, and how
  // ($STRATA_ELASTIC_CHANGE); empty otherwise.
  std::string resize;
};

std::string format_duration(double seconds);  // "1m23s"
std::string progress_line(const StepReport& r);
// One JSON object: the report's numbers plus memory per tier × category (current and peak).
std::string metrics_json(const StepReport& r, const MemorySnapshot& mem);
// The metrics file this rank writes: `pattern` with "{rank}" replaced by the rank on every rank;
// without "{rank}", `pattern` on rank 0 and "" (none) elsewhere.
std::string metrics_path(const std::string& pattern, int rank);

}  // namespace strata::job
