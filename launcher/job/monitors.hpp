// DeepSpeed's monitors as a DeepSpeed config turns them on (`tensorboard`, `csv_monitor`; docs/
// metrics.md): each step's metrics, written by rank 0, against the samples trained so far (as
// DeepSpeed's engine does, global_samples), under DeepSpeed's tags — Train/Samples/train_loss,
// lr, loss_scale — and Strata's: val_loss, grad_norm, tokens_per_s, Memory/<tier>/peak_bytes.
// TensorBoard gets one event file (tfevents.hpp), csv_monitor DeepSpeed's layout: one file per
// tag named after it with "/" as "_", a "step,<last part of the tag>" header, "step,value" rows.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/config/config.hpp"
#include "framework/memory/ledger.hpp"
#include "launcher/job/progress.hpp"
#include "launcher/job/tfevents.hpp"

namespace strata::job {

// The (tag, value) pairs a step reports.
std::vector<std::pair<std::string, double>> monitor_events(const StepReport& r,
                                                           const MemorySnapshot& memory);

// csv_monitor: appends to <dir>/<tag as file name>.csv.
class CsvMonitor {
 public:
  explicit CsvMonitor(std::string dir);
  void write(std::int64_t samples, const std::vector<std::pair<std::string, double>>& events);

 private:
  std::string dir_;
  std::map<std::string, bool> started_;  // files this run wrote to
};

class Monitors {
 public:
  // The monitors the config enables (none on ranks other than 0). Creates the folders now: a bad
  // path fails before training.
  Monitors(const config::Config& cfg, bool lead);
  bool any() const { return tensorboard_ || csv_; }
  // One step's metrics at `samples` trained.
  void write(std::int64_t samples, const StepReport& r, const MemorySnapshot& memory);
  // Where the TensorBoard event file is ("" = none).
  std::string tensorboard_file() const { return tensorboard_ ? tensorboard_->path() : ""; }

 private:
  std::unique_ptr<TfEventsWriter> tensorboard_;
  std::unique_ptr<CsvMonitor> csv_;
};

}  // namespace strata::job
