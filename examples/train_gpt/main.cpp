// train_gpt: the main job — trains a GPT-2-style model on a token file as configured by a
// DeepSpeed-style JSON config, reporting progress, memory, validation loss and a sample;
// checkpoints and resumes (strata.checkpoint), stops gracefully on SIGTERM/SIGINT and reports
// progress to the launcher (STRATA_PROGRESS_DIR).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include "examples/train_gpt/checkpoints.hpp"
#include "examples/train_gpt/metrics_file.hpp"
#include "examples/train_gpt/progress.hpp"
#include "examples/train_gpt/progress_file.hpp"
#include "examples/train_gpt/startup_checks.hpp"
#include "examples/train_gpt/stop_signal.hpp"
#include "framework/backend/cpu/kernels.hpp"
#include "framework/config/config.hpp"
#include "framework/core/exit_status.hpp"
#include "framework/data/eval_sampler.hpp"
#include "framework/data/sampler.hpp"
#include "framework/memory/exit_report.hpp"
#include "framework/memory/size.hpp"
#include "framework/nn/generate.hpp"
#include "framework/nn/param_store.hpp"
#include "framework/train/from_config.hpp"
#include "offload/factory.hpp"
#include "offload/value_shard_store.hpp"
#include "parallel/comm/init.hpp"
#include "parallel/engine/dp_engine.hpp"
#include "parallel/grid/grid.hpp"
#include "parallel/zero/zero_memory.hpp"

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
};

// Validation loss over the first `iters` micro-batches' worth of windows, split over dp ranks.
double evaluate(nn::Gpt& model, const data::TokenFile& file, int T, int micro,
                std::int64_t iters, const parallel::Group& dp, nn::Context ctx) {
  data::EvalSampler ev(file, T, micro, dp.size(), dp.rank(),
                       static_cast<std::uint64_t>(iters * micro * dp.size()));
  std::vector<std::int32_t> in(static_cast<std::size_t>(micro) * T), tgt(in.size());
  Tensor acc = Tensor::zeros({2}, DType::f64, TensorOptions{}.with(Category::comm));
  double* a = acc.data<double>();
  while (!ev.done()) {
    const int rows = ev.next(in.data(), tgt.data());
    for (std::size_t i = static_cast<std::size_t>(rows) * T; i < tgt.size(); ++i) tgt[i] = -1;
    if (rows == 0) continue;
    const double loss = model.forward(ctx, in.data(), tgt.data(), micro, T);
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
  examples::check_outputs(cfg, a.metrics);  // bad paths fail now, not at the first save
  parallel::InitOptions init;
  init.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(cfg.strata.comm.timeout_s * 1000));
  parallel::World world(init);
  parallel::Grid grid(world.group(), static_cast<int>(cfg.strata.tensor_parallel_size),
                      static_cast<int>(cfg.strata.pipeline_parallel_size));
  if (grid.tp_size() > 1 || grid.pp_size() > 1)
    user_fail("train_gpt", "tensor_parallel_size {} / pipeline_parallel_size {}: only data "
              "parallelism is implemented so far; set both to 1", grid.tp_size(), grid.pp_size());
  const bool lead = world.group().rank() == 0;
  examples::install_stop_handlers();
  std::optional<examples::ProgressFile> progress =
      examples::ProgressFile::from_env(world.group().rank());
  config::resolve_batch(cfg, grid.dp_size());
  train::apply_memory_caps(cfg, ledger);
  if (a.threads > 0) {
    cpu::set_num_threads(a.threads);
  } else if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"); local && !std::getenv("OMP_NUM_THREADS")) {
    // Ranks sharing a node share its cores: each takes its part instead of all of them.
    const int ranks_here = std::max(1, std::atoi(local));
    cpu::set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / ranks_here));
  }

  if (lead) std::printf("resolved config:\n%s\n", config::to_json(cfg).dump(2).c_str());
  offload::validate(cfg, cfg.zero_optimization.stage);  // clear errors before any work
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
  const parallel::Group& dp = grid.dp();
  data::BatchSampler sampler(train_file, T, micro, dp.size(), dp.rank(), cfg.strata.data.shuffle,
                             cfg.strata.data.seed);

  nn::Gpt model(gc);
  model.set_checkpointing(cfg.strata.activation_checkpointing);
  const train::Precision prec = train::precision_of(cfg);
  const DType pd = train::param_dtype(prec);
  const int stage = cfg.zero_optimization.stage;
  nn::ParamStoreOptions so =
      parallel::ZeroHooks::store_options(nn::ParamStoreOptions{pd, pd, 1, {}}, stage, dp);
  // ZeRO-3 parameter slices: on the device, or offloaded to host memory / NVMe swap files.
  so.value_store = offload::make_value_shard_store(cfg, world.group().rank(), so.memory);
  nn::ParamStore store(model.units(), so);
  store.initialize(cfg.strata.seed);  // each rank initialises only what it stores
  // Optimizer state: beside the parameters, or offloaded to host memory / NVMe swap files.
  train::Trainer trainer(store, train::trainer_options(cfg),
                         stage > 0 ? parallel::dp_reductions(dp) : train::ShardReductions{},
                         offload::make_state_store(cfg, world.group().rank(), TensorOptions{}));
  parallel::EngineOptions eo;
  eo.micro_batch = micro;
  eo.accumulation = accum;
  eo.seq_len = T;
  const auto& z = cfg.zero_optimization;
  eo.zero.stage = stage;
  eo.zero.bucket_elements = z.reduce_bucket_size;
  eo.zero.overlap = z.overlap_comm;
  eo.zero.prefetch_elements = z.stage3_prefetch_bucket_size;
  eo.zero.max_live_elements = z.stage3_max_live_parameters;
  eo.zero.persistence_threshold = z.stage3_param_persistence_threshold;
  parallel::DataParallelEngine engine(dp, model, store, trainer, eo);
  auto next_batch = [&](std::int32_t* in, std::int32_t* tgt) { sampler.next(in, tgt); };
  examples::TrainCheckpoints checkpoints(cfg, world.group(), dp, store, trainer, sampler);

  if (lead) {
  std::printf("world: %d ranks (dp %d x tp %d x pp %d) over %s\n", world.group().size(),
              grid.dp_size(), grid.tp_size(), grid.pp_size(), std::string(world.group().transport()).c_str());
  std::printf("model: GPT %d layers, %d heads, d=%d, T=%d, vocab %d: %lld parameters (%s)\n",
              gc.n_layer, gc.n_head, gc.n_embd, T, gc.vocab_size,
              static_cast<long long>(store.total_numel()), train::precision_name(prec));
  std::printf("batch: %d micro x %d accumulation x %d dp = %lld sequences (%lld tokens) per step; %d threads\n",
              micro, accum, grid.dp_size(), static_cast<long long>(cfg.train_batch_size),
              static_cast<long long>(cfg.train_batch_size) * T, cpu::num_threads());
  {
    double psi = 0;
    for (std::size_t u = 0; u < store.num_units(); ++u) psi += static_cast<double>(store.layout(u).padded);
    const double pb = static_cast<double>(dtype_size(pd));
    const double ob = (pd == DType::f32 ? 0.0 : 4.0) + 4.0 +
                      (cfg.optimizer.type == config::OptimizerType::sgd ? 0.0 : 4.0);
    const auto pred = parallel::zero_prediction(stage, grid.dp_size(), psi, pb, pb, ob);
    parallel::ModelStateBytes got;
    got.params = static_cast<double>(ledger.current(Tier::device, Category::params));
    got.grads = static_cast<double>(ledger.current(Tier::device, Category::grads));
    got.optimizer = static_cast<double>(ledger.current(Tier::device, Category::optimizer));
    std::printf("ZeRO stage %d on %d ranks, model states per rank:\n  measured:   %s (device)\n  "
                "prediction: %s (without offload)\n", stage, grid.dp_size(),
                parallel::describe(got).c_str(), parallel::describe(pred).c_str());
    // Offloaded model states, by tier (host includes the NVMe tier's staging buffers).
    for (const Tier t : {Tier::host, Tier::nvme}) {
      const auto p = ledger.current(t, Category::params), o = ledger.current(t, Category::optimizer);
      if (p + o > 0)
        std::printf("  on %-8s params %s, optimizer %s\n", (std::string(tier_name(t)) + ":").c_str(),
                    format_bytes(p).c_str(), format_bytes(o).c_str());
    }
  }
  std::printf("offload: %s\n", offload::describe(cfg).c_str());
  if (const auto& vs = store.options().value_store)
    std::printf("parameter slices (rank 0): %s\n", vs->where().c_str());
  std::printf("memory after set-up (rank 0):\n%s", ledger.report().c_str());
  std::fflush(stdout);
  }
  const std::int64_t start = checkpoints.resume();
  if (lead) std::fflush(stdout);

  examples::MetricsFile metrics;
  // A resumed run continues the file of the run it resumes.
  if (!a.metrics.empty() && lead) metrics.open(a.metrics, start > 0);

  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto last = t0;
  std::int64_t tokens_since = 0;
  std::int64_t step = start;  // the last completed step
  bool stopped = false;
  while (step < steps && !stopped) {
    ++step;
    ledger.reset_peaks();
    const parallel::EngineStep es = engine.train_step(next_batch);
    examples::StepReport r;
    r.result = es.result;
    r.step = step;
    r.total = steps;
    r.loss = es.loss;
    r.fp16 = prec == train::Precision::fp16;
    // Peak device bytes of the step, max over ranks.
    r.peak_device = static_cast<std::uint64_t>(
        engine.max_over_dp(static_cast<double>(ledger.peak(Tier::device))));
    tokens_since += static_cast<std::int64_t>(accum) * micro * T * grid.dp_size();
    const auto now = clock::now();
    r.elapsed_s = std::chrono::duration<double>(now - t0).count();
    r.eta_s = r.elapsed_s / static_cast<double>(step - start) * static_cast<double>(steps - step);
    const bool eval_now = valid_file && cfg.strata.eval.interval > 0 &&
                          (step % cfg.strata.eval.interval == 0 || step == steps);
    if (eval_now) r.val_loss = evaluate(model, *valid_file, T, micro, cfg.strata.eval.iters, dp,
                                   engine.eval_context());
    const bool print = step == start + 1 || step == steps || step % cfg.steps_per_print == 0 || eval_now;
    if (print && lead) {
      r.tokens_per_s = static_cast<double>(tokens_since) / std::chrono::duration<double>(now - last).count();
      std::printf("%s\n", examples::progress_line(r).c_str());
      std::fflush(stdout);
    }
    if (metrics.is_open()) {
      if (!print) r.tokens_per_s = static_cast<double>(accum) * micro * T * grid.dp_size() /
                                   std::max(1e-9, std::chrono::duration<double>(now - last).count());
      metrics.write_line(examples::metrics_json(r, ledger.snapshot()));
    }
    if (print || metrics.is_open()) {
      last = clock::now();
      tokens_since = 0;
    }
    // Every rank stops at the same step: agree on signals and background-save failures.
    std::int32_t flags[2] = {examples::stop_requested() ? 1 : 0,
                             checkpoints.background_failed() ? 1 : 0};
    if (world.group().size() > 1)
      world.group().all_reduce(parallel::span(flags, 2), parallel::span(flags, 2),
                               parallel::ReduceOp::max).wait();
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
  if (lead) std::printf("peak memory (rank 0):\n%s", ledger.report().c_str());
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
  app.add_option("--metrics", a.metrics, "write one JSON line per step to this file");
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
