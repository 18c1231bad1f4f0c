// GptJob: a GPT training job from a validated config to its last step — the one loop body that
// train_gpt and the Python package (python/) both run: the memory plan (an "auto" micro-batch,
// the peaks predicted before anything is allocated), the assembly (parallel::Training), resume or
// --init-from, then one step at a time with validation, the metrics line and checkpoints when
// due, the final save, the plan beside the measured peaks, and sampling. The caller owns the
// world, the console lines of each step and when to stop; rank 0 prints what train_gpt printed
// before and after the loop.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "framework/config/config.hpp"
#include "framework/data/token_file.hpp"
#include "framework/nn/generate.hpp"
#include "framework/nn/gpt.hpp"
#include "framework/train/token_batches.hpp"
#include "launcher/job/init_from.hpp"
#include "launcher/job/metrics_file.hpp"
#include "launcher/job/monitors.hpp"
#include "launcher/job/progress.hpp"
#include "parallel/engine/training.hpp"
#include "parallel/plan/planner.hpp"

namespace strata::job {

struct JobOptions {
  std::string metrics;  // --metrics file pattern ("" = none; "{rank}": one file per rank)
  std::string log_dir;  // --log-dir ("" = run_summary.hpp's default)
  StartOptions start;   // --init-from, --save-initial
  // Every step's metrics line in its StepOutcome, and its tokens per second (also when no
  // metrics file is written); otherwise tokens per second only for the steps that print.
  bool every_step = false;
};

// What one step did, for the caller's console line and progress display.
struct StepOutcome {
  StepReport report;
  parallel::StepTimes times;
  std::vector<parallel::MicroBatchChange> micro_batch_changes;
  bool print = false;        // train_gpt's console line is due (first, last, steps_per_print, eval)
  // The step's metrics line (docs/metrics.md) when every step is reported (a metrics file or
  // JobOptions::every_step); "" otherwise.
  std::string metrics_json;
};

class GptJob {
 public:
  // Collective over `world`. `cfg` validated, its device resolved (train::resolve_device). Plans,
  // applies the memory caps, prints the config notes, writes the resolved config to the log
  // folder, builds the job, prints the summary and the plan, resumes or starts from --init-from.
  GptJob(config::Config cfg, const parallel::Group& world, const JobOptions& options);
  ~GptJob();
  GptJob(const GptJob&) = delete;
  GptJob& operator=(const GptJob&) = delete;

  const config::Config& config() const { return training_->config(); }
  const nn::GptConfig& model_config() const { return gc_; }
  const parallel::plan::MemoryPlan& plan() const { return plan_; }
  parallel::Training& training() { return *training_; }
  bool lead() const { return lead_; }
  std::int64_t start_step() const { return start_; }
  std::int64_t step() const { return step_; }  // the last completed step
  std::int64_t total_steps() const { return steps_; }
  bool finished() const { return step_ >= steps_; }

  // Collective. Trains the next step; validation loss when due; writes the metrics line.
  StepOutcome run_step();
  // Collective: whether any rank asks to stop (local_stop); throws on every rank when a
  // background save failed on any.
  bool agree_stop(bool local_stop);
  // Collective: saves after the step just run when the interval says so, when `stopping`, or at
  // the last step (with a checkpoint directory).
  void save_if_due(bool stopping);
  // Collective. The final save when the last step is not saved yet, the last background save
  // waited for; returns the end-of-run memory report rank 0 prints (the ledger's peaks of the
  // last step, the plan beside the busiest rank's measured peaks). Call once, after the loop.
  std::string finish();
  // The path of the newest checkpoint this run saved ("" = none).
  std::string last_checkpoint() const;
  // The ledger's report now (per tier and category).
  std::string memory_report() const;
  // The TensorBoard event file rank 0 writes ("" = none: tensorboard not enabled).
  std::string tensorboard_file() const { return monitors_->tensorboard_file(); }

  // Collective (ZeRO-3 gathers parameters). Continues `prompt` with the trained model.
  std::vector<std::int32_t> sample(const std::vector<std::int32_t>& prompt,
                                   const nn::SampleOptions& options, std::uint64_t seed);
  // strata.sample as train_gpt prints it after training ("" when strata.sample.tokens is 0).
  std::string configured_sample();

 private:
  MemoryLedger& ledger_;
  parallel::plan::MemoryPlan plan_;
  nn::GptConfig gc_;
  bool lead_ = false;
  std::unique_ptr<data::TokenFile> train_file_;
  std::optional<data::TokenFile> valid_file_;
  std::unique_ptr<nn::Gpt> model_;
  std::unique_ptr<parallel::Training> training_;
  std::unique_ptr<train::TokenBatches> batches_;
  MetricsFile metrics_;
  std::unique_ptr<Monitors> monitors_;
  std::int64_t steps_ = 0, start_ = 0, step_ = 0;
  int micro_ = 0, accum_ = 0;
  std::chrono::steady_clock::time_point t0_, last_;
  std::int64_t tokens_since_ = 0;
  // Peaks per tier over the whole run (set-up included), for the comparison with the plan.
  std::array<std::uint64_t, kNumTiers> run_peak_{};
  std::string resize_;  // $STRATA_ELASTIC_CHANGE: marks the first step's metrics line
  int recovered_to_ = 0;  // the micro-batch out-of-memory recovery went down to (0: none)
  bool finished_ = false;
  bool every_step_ = false;

  void note_peaks();
  double evaluate();
};

}  // namespace strata::job
