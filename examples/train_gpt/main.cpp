// train_gpt: the main job — trains a GPT-2-style model on a token file as configured by a
// DeepSpeed-style JSON config, reporting progress, memory, validation loss and a sample;
// checkpoints and resumes (strata.checkpoint), stops gracefully on SIGTERM/SIGINT and reports
// progress to the launcher (STRATA_PROGRESS_DIR).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <thread>

#include "examples/train_gpt/init_from.hpp"
#include "examples/train_gpt/metrics_file.hpp"
#include "examples/train_gpt/progress.hpp"
#include "examples/train_gpt/progress_file.hpp"
#include "examples/train_gpt/plan_summary.hpp"
#include "examples/train_gpt/run_summary.hpp"
#include "examples/train_gpt/startup_checks.hpp"
#include "examples/train_gpt/stop_signal.hpp"
#include "framework/backend/cpu/kernels.hpp"
#include "framework/config/config.hpp"
#include "framework/core/exit_status.hpp"
#include "framework/data/eval_sampler.hpp"
#include "framework/memory/exit_report.hpp"
#include "framework/memory/size.hpp"
#include "framework/nn/generate.hpp"
#include "framework/train/from_config.hpp"
#include "framework/train/token_batches.hpp"
#include "parallel/comm/init.hpp"
#include "parallel/engine/training.hpp"
#include "parallel/plan/auto_micro_batch.hpp"

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
  examples::StartOptions start;       // --init-from, --save-initial
};

// Validation loss over the first `iters` micro-batches' worth of windows, split over dp ranks;
// forward only, through the engine (with pipeline stages each rank runs its stage's layers).
double evaluate(parallel::DataParallelEngine& engine, const data::TokenFile& file, int T, int micro, std::int64_t iters,
                const parallel::Group& dp) {
  data::EvalSampler ev(file, T, micro, dp.size(), dp.rank(),
                       static_cast<std::uint64_t>(iters * micro * dp.size()));
  nn::Batch& batch = engine.batch_buffer();  // laid out as model.batch_fields(micro)
  std::int32_t* in = batch["tokens"].data<std::int32_t>();
  std::int32_t* tgt = batch["targets"].data<std::int32_t>();
  Tensor acc = Tensor::zeros({2}, DType::f64, TensorOptions{}.with(Category::comm));
  double* a = acc.data<double>();
  while (!ev.done()) {
    const int rows = ev.next(in, tgt);
    for (std::int64_t i = static_cast<std::int64_t>(rows) * T; i < std::int64_t{micro} * T; ++i)
      tgt[i] = -1;
    if (rows == 0) continue;  // every rank of a pipeline has the same rows (same dp position)
    const double loss = engine.eval_loss(batch);
    a[0] += loss * rows * T;
    a[1] += static_cast<double>(rows) * T;
  }
  if (dp.size() > 1) dp.all_reduce(acc, parallel::ReduceOp::sum).wait();
  return a[1] > 0 ? a[0] / a[1] : 0.0;
}

std::string decode_bytes(const std::vector<std::int32_t>& toks) {
  std::string s;
  for (auto t : toks) s.push_back(static_cast<char>(t & 0xff));
  return s;
}

int run(const Args& a) {
  auto& ledger = MemoryLedger::global();
  std::vector<std::string> overrides = a.sets;
  if (!a.memory.device.empty()) overrides.push_back("strata.memory.device_limit=" + a.memory.device);
  if (!a.memory.host.empty()) overrides.push_back("strata.memory.host_limit=" + a.memory.host);
  if (!a.memory.nvme.empty()) overrides.push_back("strata.memory.nvme_limit=" + a.memory.nvme);
  if (!a.checkpoint_dir.empty()) overrides.push_back("strata.checkpoint.dir=" + a.checkpoint_dir);
  if (!a.resume.empty()) overrides.push_back("strata.checkpoint.resume=" + a.resume);
  config::Config cfg = config::load_config(a.config, overrides);
  // Bad paths fail now, not at the first save (the metrics file as rank 0 names it).
  examples::check_outputs(cfg, examples::metrics_path(a.metrics, 0));
  train::compute_device(cfg);  // "cuda" without a usable GPU: an error before any work
  parallel::InitOptions init;
  init.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(cfg.strata.comm.timeout_s * 1000));
  parallel::World world(init);
  const bool lead = world.group().rank() == 0;
  examples::install_stop_handlers();
  std::optional<examples::ProgressFile> progress =
      examples::ProgressFile::from_env(world.group().rank());
  // The memory planner: chooses an "auto" micro-batch, predicts this job's peaks before anything
  // is allocated (printed beside what the run then measures), and explains out-of-memory errors.
  const parallel::plan::ModelFactory gpt = parallel::plan::gpt_model();
  parallel::plan::resolve_auto_micro_batch(cfg, world.group().size(), gpt);
  config::resolve_batch(cfg, config::data_parallel_size(cfg, world.group().size()));
  const parallel::plan::MemoryPlan plan =
      parallel::plan::plan_memory(cfg, gpt, {world.group().size(), 2});
  train::apply_memory_caps(cfg, ledger);
  if (a.threads > 0) {
    cpu::set_num_threads(a.threads);
  } else if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"); local && !std::getenv("OMP_NUM_THREADS")) {
    // Ranks sharing a node share its cores: each takes its part instead of all of them.
    const int ranks_here = std::max(1, std::atoi(local));
    cpu::set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / ranks_here));
  }

  if (lead)
    for (const auto& note : cfg.notes) std::printf("config note: %s\n", note.c_str());
  examples::check_start_options(cfg, a.start);
  const std::string log_dir = examples::resolve_log_dir(a.log_dir, a.metrics, cfg);
  std::string config_file;
  if (lead && !log_dir.empty()) config_file = examples::write_resolved_config(log_dir, cfg);
  if (cfg.strata.data.train.empty())
    user_fail("train_gpt", "no training data: set strata.data.train to a token file (make one with "
              "`strata data prepare --input TEXT --output PREFIX`)");

  const nn::GptConfig gc = train::gpt_config(cfg);
  const int T = gc.block_size;
  const int micro = static_cast<int>(cfg.train_micro_batch_size_per_gpu);
  const int accum = static_cast<int>(cfg.gradient_accumulation_steps);
  const std::int64_t steps = cfg.strata.train_steps;

  data::TokenFile train_file(cfg.strata.data.train);
  if (train_file.vocab_size() > static_cast<std::uint64_t>(gc.vocab_size))
    user_fail("train_gpt", "{} has vocabulary {} but strata.model.vocab_size is {}: raise vocab_size",
              train_file.path(), train_file.vocab_size(), gc.vocab_size);
  std::optional<data::TokenFile> valid_file;
  if (!cfg.strata.data.valid.empty()) valid_file.emplace(cfg.strata.data.valid);
  nn::Gpt model(gc, parallel::tensor_shard(cfg, world.group()));  // this rank's tp part
  // The job as every Strata program builds it: grid, ZeRO-sharded parameters (offloaded as
  // configured), trainer, engine, checkpoints.
  parallel::TrainingExtras extras = parallel::TrainingExtras::on(&ledger);
  extras.model_factory = gpt;
  parallel::Training training(cfg, world.group(), model, extras);
  const parallel::Grid& grid = training.grid();
  const parallel::Group& dp = training.dp();
  train::TokenBatches batches(train_file, T, micro, dp.size(), dp.rank(), cfg.strata.data.shuffle,
                              cfg.strata.data.seed);
  parallel::CheckpointPolicy& checkpoints = training.checkpoints();
  checkpoints.set_data(&batches);
  parallel::DataParallelEngine& engine = training.engine();
  const train::Precision prec = train::precision_of(cfg);
  if (lead) {
    std::fputs(examples::run_summary({training, gc, cpu::num_threads(), config_file}).c_str(),
               stdout);
    std::fputs(examples::plan_summary(plan).c_str(), stdout);
    std::fflush(stdout);
  }
  examples::StartOptions start_opts = a.start;
  start_opts.scratch_dir = log_dir;
  const std::int64_t start = examples::start_training(cfg, world.group(), checkpoints, start_opts);
  if (lead) std::fflush(stdout);

  examples::MetricsFile metrics;
  // A resumed run continues the file of the run it resumes.
  if (const std::string path = examples::metrics_path(a.metrics, world.group().rank()); !path.empty())
    metrics.open(path, start > 0);

  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto last = t0;
  std::int64_t tokens_since = 0;
  std::int64_t step = start;  // the last completed step
  bool stopped = false;
  // Peaks per tier over the whole run (set-up included), for the comparison with the plan.
  std::array<std::uint64_t, kNumTiers> run_peak{};
  int recovered_to = 0;  // the micro-batch out-of-memory recovery went down to (0: none)
  auto note_peaks = [&] {
    for (std::size_t t = 0; t < kNumTiers; ++t)
      run_peak[t] = std::max(run_peak[t], ledger.peak(static_cast<Tier>(t)));
  };
  while (step < steps && !stopped) {
    ++step;
    note_peaks();
    ledger.reset_peaks();
    // With strata.memory.on_oom = "recover" an out-of-memory step is redone with smaller
    // micro-batches (same samples): each change is logged.
    const parallel::EngineStep es = training.step(batches);
    if (!es.micro_batch_changes.empty()) recovered_to = es.micro_batch_changes.back().to;
    if (lead)
      for (const auto& c : es.micro_batch_changes)
        std::printf("micro-batch %d -> %d, accumulation %d (same global batch): %s\n", c.from, c.to,
                    c.accumulation, c.why.c_str());
    examples::StepReport r;
    r.result = es.result;
    r.step = step;
    r.total = steps;
    r.loss = es.loss;
    r.fp16 = prec == train::Precision::fp16;
    r.rank = world.group().rank();
    r.world_size = world.group().size();
    // Peak device bytes of the step, max over ranks.
    r.peak_device = static_cast<std::uint64_t>(
        engine.max_over_ranks(static_cast<double>(ledger.peak(Tier::device))));
    tokens_since += static_cast<std::int64_t>(accum) * micro * T * grid.dp_size();
    const auto now = clock::now();
    r.elapsed_s = std::chrono::duration<double>(now - t0).count();
    r.eta_s = r.elapsed_s / static_cast<double>(step - start) * static_cast<double>(steps - step);
    const bool eval_now = valid_file && cfg.strata.eval.interval > 0 &&
                          (step % cfg.strata.eval.interval == 0 || step == steps);
    if (eval_now)
      r.val_loss = evaluate(engine, *valid_file, T, micro, cfg.strata.eval.iters, dp);
    const bool print = step == start + 1 || step == steps || step % cfg.steps_per_print == 0 || eval_now;
    if (print || metrics.is_open())  // tokens since the last report (one step with metrics)
      r.tokens_per_s = static_cast<double>(tokens_since) /
                       std::max(1e-9, std::chrono::duration<double>(now - last).count());
    if (print && lead) {
      std::printf("%s\n", examples::progress_line(r).c_str());
      if (cfg.wall_clock_breakdown) std::printf("%s\n", parallel::describe(es.times).c_str());
      std::fflush(stdout);
    }
    if (metrics.is_open()) {
      metrics.write_line(examples::metrics_json(r, ledger.snapshot()));
    }
    if (print || metrics.is_open()) {
      last = clock::now();
      tokens_since = 0;
    }
    // Every rank stops at the same step: agree on signals and background-save failures.
    const auto flags = world.group().all_reduce_values(
        std::array<std::int32_t, 2>{examples::stop_requested() ? 1 : 0,
                                    checkpoints.background_failed() ? 1 : 0},
        parallel::ReduceOp::max);
    if (flags[1]) checkpoints.finish();  // throws on every rank
    const bool exit_now = a.exit_after_steps > 0 && step - start >= a.exit_after_steps;
    stopped = (flags[0] || exit_now) && step < steps;  // at the last step it is a finish
    if (stopped && lead) {
      std::printf("stopping after step %lld (%s)\n", static_cast<long long>(step),
                  flags[0] ? examples::stop_signal_name() : "--exit-after-steps");
      std::fflush(stdout);
    }
    if (checkpoints.due(step) || (checkpoints.enabled() && (stopped || step == steps)))
      checkpoints.save(step);
    if (progress) progress->step(step);
  }
  if (checkpoints.enabled() && checkpoints.last_saved() != step) checkpoints.save(step);
  checkpoints.finish();  // the last background save is complete (or its error thrown)
  note_peaks();
  // The plan is the busiest rank's (pipeline stages differ): compare it with the busiest rank.
  for (auto& p : run_peak) p = static_cast<std::uint64_t>(engine.max_over_ranks(static_cast<double>(p)));
  if (lead) {
    std::printf("peak memory (rank 0, last step):\n%s", ledger.report().c_str());
    std::fputs(examples::plan_versus_measured(plan, run_peak).c_str(), stdout);
    if (recovered_to > 0)
      std::printf("  (planned for micro-batch %d; out-of-memory recovery went down to %d: `strata "
                  "plan --set train_micro_batch_size_per_gpu=%d --set gradient_accumulation_steps=%d` "
                  "plans that)\n", plan.micro_batch, recovered_to, recovered_to,
                  plan.accumulation * plan.micro_batch / recovered_to);
  }
  if (stopped) {
    if (lead) std::fflush(stdout);
    return 0;
  }

  // Every rank samples (ZeRO-3 gathers parameters collectively); rank 0 prints.
  if (cfg.strata.sample.tokens > 0) {
    nn::SampleOptions so;
    so.max_new_tokens = static_cast<int>(cfg.strata.sample.tokens);
    so.temperature = static_cast<float>(cfg.strata.sample.temperature);
    so.top_k = static_cast<int>(cfg.strata.sample.top_k);
    Philox rng(cfg.strata.seed, 0);
    nn::Context sctx = engine.eval_context();
    std::vector<std::int32_t> prompt{'\n'};
    if (prompt[0] >= gc.vocab_size) prompt[0] = 0;
    auto out = nn::generate(model, sctx, prompt, so, rng);
    if (lead)
      std::printf("sample (temperature %.2f, top-k %d):\n%s\n", so.temperature, so.top_k,
                  gc.vocab_size == 256 ? decode_bytes(out).c_str() : "(token ids; vocab is not bytes)");
  }
  if (progress) progress->done(step);
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
