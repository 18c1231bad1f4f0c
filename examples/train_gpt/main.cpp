// train_gpt: the main job — trains a GPT-2-style model on a token file as configured by a
// DeepSpeed-style JSON config, reporting progress, memory, validation loss and a sample;
// checkpoints and resumes (strata.checkpoint), stops gracefully on SIGTERM/SIGINT and reports
// progress to the launcher (STRATA_PROGRESS_DIR).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

#include "examples/train_gpt/stop_signal.hpp"
#include "framework/backend/cpu/kernels.hpp"
#include "framework/config/config.hpp"
#include "framework/core/exit_status.hpp"
#include "framework/memory/exit_report.hpp"
#include "framework/train/from_config.hpp"
#include "launcher/job/gpt_job.hpp"
#include "launcher/job/progress_file.hpp"
#include "launcher/job/startup_checks.hpp"
#include "parallel/comm/init.hpp"

using namespace strata;

namespace {

struct Args {
  std::string config;
  std::vector<std::string> sets;
  config::MemoryFlags memory;
  std::string metrics;
  int threads = 0;
  std::string resume;          // overrides strata.checkpoint.resume
  std::string checkpoint_dir;  // overrides strata.checkpoint.dir
  std::int64_t exit_after_steps = 0;  // stop after this many steps of this run (0: never)
  std::string log_dir;                // resolved config goes here (see run_summary.hpp)
  job::StartOptions start;            // --init-from, --save-initial
};

int run(const Args& a) {
  std::vector<std::string> overrides = a.sets;
  if (!a.memory.device.empty()) overrides.push_back("strata.memory.device_limit=" + a.memory.device);
  if (!a.memory.host.empty()) overrides.push_back("strata.memory.host_limit=" + a.memory.host);
  if (!a.memory.nvme.empty()) overrides.push_back("strata.memory.nvme_limit=" + a.memory.nvme);
  if (!a.checkpoint_dir.empty()) overrides.push_back("strata.checkpoint.dir=" + a.checkpoint_dir);
  if (!a.resume.empty()) overrides.push_back("strata.checkpoint.resume=" + a.resume);
  config::Config cfg = config::load_config(a.config, overrides);
  // Bad paths fail now, not at the first save (the metrics file as rank 0 names it).
  job::check_outputs(cfg, job::metrics_path(a.metrics, 0));
  // "auto" becomes the GPU or the CPU (a config note says which); "cuda" without a usable GPU
  // and bf16 on a GPU without it are errors before any work.
  train::resolve_device(cfg);
  parallel::InitOptions init;
  init.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(cfg.strata.comm.timeout_s * 1000));
  parallel::World world(init);
  const bool lead = world.group().rank() == 0;
  examples::install_stop_handlers();
  std::optional<job::ProgressFile> progress = job::ProgressFile::from_env(world.group().rank());
  if (a.threads > 0) {
    cpu::set_num_threads(a.threads);
  } else if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"); local && !std::getenv("OMP_NUM_THREADS")) {
    // Ranks sharing a node share its cores: each takes its part instead of all of them.
    const int ranks_here = std::max(1, std::atoi(local));
    cpu::set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / ranks_here));
  }
  const bool breakdown = cfg.wall_clock_breakdown;
  // Plans, builds the job, prints the summary and the plan, resumes (launcher/job/gpt_job.hpp).
  job::GptJob job(std::move(cfg), world.group(), job::JobOptions{a.metrics, a.log_dir, a.start});
  if (progress && lead) {  // for `strata run --nodes`: the batch to keep when the size changes
    const config::Config& c = job.config();
    progress->layout(world.group().size(),
                     static_cast<int>(c.strata.tensor_parallel_size * c.strata.pipeline_parallel_size),
                     c.train_micro_batch_size_per_gpu, c.gradient_accumulation_steps,
                     c.train_batch_size, !c.strata.checkpoint.dir.empty());
  }
  bool stopped = false;
  while (!job.finished() && !stopped) {
    const job::StepOutcome out = job.run_step();
    if (lead)
      for (const auto& c : out.micro_batch_changes)
        std::printf("micro-batch %d -> %d, accumulation %d (same global batch): %s\n", c.from, c.to,
                    c.accumulation, c.why.c_str());
    if (out.print && lead) {
      std::printf("%s\n", job::progress_line(out.report).c_str());
      if (breakdown) std::printf("%s\n", parallel::describe(out.times).c_str());
      std::fflush(stdout);
    }
    // Every rank stops at the same step (signals agreed on; a failed background save throws).
    const bool signalled = job.agree_stop(examples::stop_requested());
    const bool exit_now = a.exit_after_steps > 0 && job.step() - job.start_step() >= a.exit_after_steps;
    stopped = (signalled || exit_now) && !job.finished();  // at the last step it is a finish
    if (stopped && lead) {
      std::printf("stopping after step %lld (%s)\n", static_cast<long long>(job.step()),
                  signalled ? examples::stop_signal_name() : "--exit-after-steps");
      std::fflush(stdout);
    }
    job.save_if_due(stopped);
    if (progress) progress->step(job.step());
  }
  const std::string memory = job.finish();
  if (lead) std::fputs(memory.c_str(), stdout);
  if (stopped) {
    if (lead) std::fflush(stdout);
    return 0;
  }
  // Every rank samples (ZeRO-3 gathers parameters collectively); rank 0 prints.
  const std::string sample = job.configured_sample();
  if (lead) std::fputs(sample.c_str(), stdout);
  if (progress) progress->done(job.step());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"train_gpt: train a GPT-2-style model (the Strata main job)"};
  app.footer(kExitStatusHelp);
  app.failure_message([](const CLI::App* app, const CLI::Error& e) {  // bounded: huge arguments
    return bounded_message(CLI::FailureMessage::simple(app, e)) + "\n";
  });
  Args a;
  app.add_option("--config", a.config, "JSON config (DeepSpeed keys + strata section)")->required();
  app.add_option("--set", a.sets, "override a config key: --set strata.train_steps=100");
  app.add_option("--device-memory", a.memory.device, "cap the device tier, e.g. 2GiB");
  app.add_option("--host-memory", a.memory.host, "cap the host tier");
  app.add_option("--nvme-memory", a.memory.nvme, "cap the nvme tier");
  app.add_option("--metrics", a.metrics,
                 "write one JSON line per step to this file (rank 0); {rank} in the name: one "
                 "file per rank (docs/metrics.md)");
  app.add_option("--log-dir", a.log_dir,
                 "write the resolved config here (default: strata run's log folder, else the "
                 "--metrics file's folder, else the checkpoint directory)");
  app.add_option("--init-from", a.start.init_from,
                 "start a new run from these weights (fresh optimizer, step 0): a checkpoint, a "
                 "Hugging Face GPT-2 (.safetensors or its directory) or an HDF5 export");
  app.add_flag("--save-initial", a.start.save_initial,
               "save the step-0 weights as a checkpoint before the first step");
  app.add_option("--threads", a.threads, "compute threads (default: the node's cores divided among its ranks)");
  app.add_option("--resume", a.resume,
                 "auto (newest complete checkpoint), none, or a checkpoint directory "
                 "(default: strata.checkpoint.resume)");
  app.add_option("--checkpoint-dir", a.checkpoint_dir,
                 "where checkpoints go (overrides strata.checkpoint.dir)");
  app.add_option("--exit-after-steps", a.exit_after_steps,
                 "stop after this many steps of this run, saving a checkpoint when a "
                 "checkpoint directory is set (simulates an interruption)")
      ->check(CLI::NonNegativeNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints the help or the one-line error
    return rc == 0 ? kExitOk : kExitUsage;
  }
  try {
    return run(a);
  } catch (const std::exception& e) {
    return report_fatal("train_gpt", e);  // one bounded line; exit status by kind (exit_status.hpp)
  }
}
