#include "launcher/job/gpt_job.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/checkpoint/catalog.hpp"
#include "framework/core/error.hpp"
#include "framework/data/eval_sampler.hpp"
#include "framework/train/from_config.hpp"
#include "launcher/job/plan_summary.hpp"
#include "launcher/job/run_summary.hpp"
#include "parallel/plan/auto_micro_batch.hpp"

namespace strata::job {

namespace {

using clock = std::chrono::steady_clock;

std::string decode_bytes(const std::vector<std::int32_t>& toks) {
  std::string s;
  for (auto t : toks) s.push_back(static_cast<char>(t & 0xff));
  return s;
}

// The config with "auto" micro-batch and the batch arithmetic resolved for the world, and the
// plan of it (computed before anything is allocated).
config::Config planned(config::Config cfg, int world_size, parallel::plan::MemoryPlan& plan) {
  const parallel::plan::ModelFactory gpt = parallel::plan::gpt_model();
  parallel::plan::resolve_auto_micro_batch(cfg, world_size, gpt);
  config::resolve_batch(cfg, config::data_parallel_size(cfg, world_size));
  plan = parallel::plan::plan_memory(cfg, gpt, {world_size, 2});
  return cfg;
}

}  // namespace

GptJob::GptJob(config::Config cfg_in, const parallel::Group& world, const JobOptions& o)
    : ledger_(MemoryLedger::global()) {
  // The memory planner: chooses an "auto" micro-batch, predicts this job's peaks before anything
  // is allocated (printed beside what the run then measures), and explains out-of-memory errors.
  config::Config cfg = planned(std::move(cfg_in), world.size(), plan_);
  train::apply_memory_caps(cfg, ledger_);
  lead_ = world.rank() == 0;
  if (lead_)
    for (const auto& note : cfg.notes) std::printf("config note: %s\n", note.c_str());
  check_start_options(cfg, o.start);
  const std::string log_dir = resolve_log_dir(o.log_dir, o.metrics, cfg);
  std::string config_file;
  if (lead_ && !log_dir.empty()) config_file = write_resolved_config(log_dir, cfg);
  if (cfg.strata.data.train.empty())
    user_fail("train_gpt", "no training data: set strata.data.train to a token file (make one with "
              "`strata data prepare --input TEXT --output PREFIX`)");

  gc_ = train::gpt_config(cfg);
  micro_ = static_cast<int>(cfg.train_micro_batch_size_per_gpu);
  accum_ = static_cast<int>(cfg.gradient_accumulation_steps);
  steps_ = cfg.strata.train_steps;

  train_file_ = std::make_unique<data::TokenFile>(cfg.strata.data.train);
  if (train_file_->vocab_size() > static_cast<std::uint64_t>(gc_.vocab_size))
    user_fail("train_gpt", "{} has vocabulary {} but strata.model.vocab_size is {}: raise vocab_size",
              train_file_->path(), train_file_->vocab_size(), gc_.vocab_size);
  if (!cfg.strata.data.valid.empty()) valid_file_.emplace(cfg.strata.data.valid);
  model_ = std::make_unique<nn::Gpt>(gc_, parallel::tensor_shard(cfg, world));  // this rank's tp part
  // The job as every Strata program builds it: grid, ZeRO-sharded parameters (offloaded as
  // configured), trainer, engine, checkpoints.
  parallel::TrainingExtras extras = parallel::TrainingExtras::on(&ledger_);
  extras.model_factory = parallel::plan::gpt_model();
  training_ = std::make_unique<parallel::Training>(std::move(cfg), world, *model_, extras);
  const config::Config& c = training_->config();
  const parallel::Group& dp = training_->dp();
  batches_ = std::make_unique<train::TokenBatches>(*train_file_, gc_.block_size, micro_, dp.size(),
                                                   dp.rank(), c.strata.data.shuffle, c.strata.data.seed);
  parallel::CheckpointPolicy& checkpoints = training_->checkpoints();
  checkpoints.set_data(batches_.get());
  if (lead_) {
    std::fputs(run_summary({*training_, gc_, cpu::num_threads(), config_file}).c_str(), stdout);
    std::fputs(plan_summary(plan_).c_str(), stdout);
    std::fflush(stdout);
  }
  StartOptions start_opts = o.start;
  start_opts.scratch_dir = log_dir;
  start_ = start_training(c, world, checkpoints, start_opts);
  step_ = start_;
  if (lead_) std::fflush(stdout);
  // A resumed run continues the file of the run it resumes.
  if (const std::string path = metrics_path(o.metrics, world.rank()); !path.empty())
    metrics_.open(path, start_ > 0);
  // `strata run --nodes` changed the job's size before this run (launcher/run/elastic.hpp).
  if (const char* change = std::getenv("STRATA_ELASTIC_CHANGE"); change && *change) {
    resize_ = change;
    if (lead_) {
      std::printf("strata run changed the job's size: %s (resumed at step %lld on %d ranks, dp %d, "
                  "gradient accumulation %d)\n", change, static_cast<long long>(start_),
                  world.size(), training_->grid().dp_size(), accum_);
      std::fflush(stdout);
    }
  }
  monitors_ = std::make_unique<Monitors>(c, lead_);  // tensorboard, csv_monitor (rank 0)
  every_step_ = metrics_.is_open() || o.every_step || monitors_->any();
  t0_ = last_ = clock::now();
}

GptJob::~GptJob() = default;

void GptJob::note_peaks() {
  for (std::size_t t = 0; t < kNumTiers; ++t)
    run_peak_[t] = std::max(run_peak_[t], ledger_.peak(static_cast<Tier>(t)));
}

// Validation loss over the first `iters` micro-batches' worth of windows, split over dp ranks;
// forward only, through the engine (with pipeline stages each rank runs its stage's layers).
double GptJob::evaluate() {
  const parallel::Group& dp = training_->dp();
  const int T = gc_.block_size;
  const std::int64_t iters = training_->config().strata.eval.iters;
  data::EvalSampler ev(*valid_file_, T, micro_, dp.size(), dp.rank(),
                       static_cast<std::uint64_t>(iters * micro_ * dp.size()));
  parallel::DataParallelEngine& engine = training_->engine();
  nn::Batch& batch = engine.batch_buffer();  // laid out as model.batch_fields(micro)
  std::int32_t* in = batch["tokens"].data<std::int32_t>();
  std::int32_t* tgt = batch["targets"].data<std::int32_t>();
  Tensor acc = Tensor::zeros({2}, DType::f64, TensorOptions{}.with(Category::comm));
  double* a = acc.data<double>();
  while (!ev.done()) {
    const int rows = ev.next(in, tgt);
    for (std::int64_t i = static_cast<std::int64_t>(rows) * T; i < std::int64_t{micro_} * T; ++i)
      tgt[i] = -1;
    if (rows == 0) continue;  // every rank of a pipeline has the same rows (same dp position)
    const double loss = engine.eval_loss(batch);
    a[0] += loss * rows * T;
    a[1] += static_cast<double>(rows) * T;
  }
  if (dp.size() > 1) dp.all_reduce(acc, parallel::ReduceOp::sum).wait();
  return a[1] > 0 ? a[0] / a[1] : 0.0;
}

StepOutcome GptJob::run_step() {
  const config::Config& cfg = training_->config();
  parallel::DataParallelEngine& engine = training_->engine();
  const parallel::Group& world = training_->world();
  ++step_;
  note_peaks();
  ledger_.reset_peaks();
  // With strata.memory.on_oom = "recover" an out-of-memory step is redone with smaller
  // micro-batches (same samples): each change is reported.
  parallel::EngineStep es = training_->step(*batches_);
  if (!es.micro_batch_changes.empty()) recovered_to_ = es.micro_batch_changes.back().to;
  StepOutcome out;
  out.times = es.times;
  out.micro_batch_changes = std::move(es.micro_batch_changes);
  StepReport& r = out.report;
  r.result = es.result;
  r.step = step_;
  r.total = steps_;
  r.loss = es.loss;
  r.fp16 = train::precision_of(cfg) == train::Precision::fp16;
  r.rank = world.rank();
  r.world_size = world.size();
  r.data_parallel_size = training_->grid().dp_size();
  r.accumulation = accum_;
  if (step_ == start_ + 1) r.resize = resize_;  // the mark of a size change, on its first step
  // Peak device bytes of the step, max over ranks.
  r.peak_device =
      static_cast<std::uint64_t>(engine.max_over_ranks(static_cast<double>(ledger_.peak(Tier::device))));
  tokens_since_ += static_cast<std::int64_t>(accum_) * micro_ * gc_.block_size * training_->grid().dp_size();
  const auto now = clock::now();
  r.elapsed_s = std::chrono::duration<double>(now - t0_).count();
  r.eta_s = r.elapsed_s / static_cast<double>(step_ - start_) * static_cast<double>(steps_ - step_);
  const bool eval_now = valid_file_ && cfg.strata.eval.interval > 0 &&
                        (step_ % cfg.strata.eval.interval == 0 || step_ == steps_);
  if (eval_now) r.val_loss = evaluate();
  out.print = step_ == start_ + 1 || step_ == steps_ || step_ % cfg.steps_per_print == 0 || eval_now;
  // Tokens per second since the last report (every step when each step is reported).
  const bool report = out.print || every_step_;
  if (report)
    r.tokens_per_s = static_cast<double>(tokens_since_) /
                     std::max(1e-9, std::chrono::duration<double>(now - last_).count());
  if (every_step_) {
    const MemorySnapshot memory = ledger_.snapshot();
    out.metrics_json = metrics_json(r, memory);
    if (metrics_.is_open()) metrics_.write_line(out.metrics_json);
    monitors_->write(step_ * cfg.train_batch_size, r, memory);
  }
  if (report) {
    last_ = clock::now();
    tokens_since_ = 0;
  }
  return out;
}

bool GptJob::agree_stop(bool local_stop) {
  parallel::CheckpointPolicy& checkpoints = training_->checkpoints();
  // Every rank stops at the same step: agree on stop requests and background-save failures.
  const auto flags = training_->world().all_reduce_values(
      std::array<std::int32_t, 2>{local_stop ? 1 : 0, checkpoints.background_failed() ? 1 : 0},
      parallel::ReduceOp::max);
  if (flags[1]) checkpoints.finish();  // throws on every rank
  return flags[0] != 0;
}

void GptJob::save_if_due(bool stopping) {
  parallel::CheckpointPolicy& checkpoints = training_->checkpoints();
  if (checkpoints.due(step_) || (checkpoints.enabled() && (stopping || step_ == steps_)))
    checkpoints.save(step_);
}

std::string GptJob::finish() {
  STRATA_CHECK(!finished_, "train_gpt", "GptJob::finish called twice");
  finished_ = true;
  parallel::CheckpointPolicy& checkpoints = training_->checkpoints();
  parallel::DataParallelEngine& engine = training_->engine();
  if (checkpoints.enabled() && checkpoints.last_saved() != step_) checkpoints.save(step_);
  checkpoints.finish();  // the last background save is complete (or its error thrown)
  note_peaks();
  // The plan is the busiest rank's (pipeline stages differ): compare it with the busiest rank.
  for (auto& p : run_peak_) p = static_cast<std::uint64_t>(engine.max_over_ranks(static_cast<double>(p)));
  std::string s = fmt::format("peak memory (rank 0, last step):\n{}", ledger_.report());
  s += plan_versus_measured(plan_, run_peak_);
  if (recovered_to_ > 0)
    s += fmt::format("  (planned for micro-batch {}; out-of-memory recovery went down to {}: `strata "
                     "plan --set train_micro_batch_size_per_gpu={} --set gradient_accumulation_steps={}` "
                     "plans that)\n", plan_.micro_batch, recovered_to_, recovered_to_,
                     plan_.accumulation * plan_.micro_batch / recovered_to_);
  return s;
}

std::string GptJob::last_checkpoint() const {
  const auto& saved = training_->checkpoints().last_saved();
  if (!saved) return "";
  for (const auto& c : checkpoint::list_step_dirs(training_->config().strata.checkpoint.dir))
    if (c.step == *saved) return c.dir;
  return "";
}

std::string GptJob::memory_report() const { return ledger_.report(); }

std::vector<std::int32_t> GptJob::sample(const std::vector<std::int32_t>& prompt,
                                         const nn::SampleOptions& options, std::uint64_t seed) {
  if (prompt.empty()) user_fail("train_gpt", "sampling needs a prompt of at least one token");
  for (const auto t : prompt)
    if (t < 0 || t >= gc_.vocab_size)
      user_fail("train_gpt", "prompt token {} is outside the vocabulary [0, {})", t, gc_.vocab_size);
  Philox rng(seed, 0);
  nn::Context sctx = training_->engine().eval_context();
  return nn::generate(*model_, sctx, prompt, options, rng);
}

std::string GptJob::configured_sample() {
  const config::Config& cfg = training_->config();
  if (cfg.strata.sample.tokens <= 0) return "";
  nn::SampleOptions so;
  so.max_new_tokens = static_cast<int>(cfg.strata.sample.tokens);
  so.temperature = static_cast<float>(cfg.strata.sample.temperature);
  so.top_k = static_cast<int>(cfg.strata.sample.top_k);
  std::vector<std::int32_t> prompt{'\n'};
  if (prompt[0] >= gc_.vocab_size) prompt[0] = 0;
  const auto out = sample(prompt, so, cfg.strata.seed);
  return fmt::format("sample (temperature {:.2f}, top-k {}):\n{}\n", so.temperature, so.top_k,
                     gc_.vocab_size == 256 ? decode_bytes(out) : "(token ids; vocab is not bytes)");
}

}  // namespace strata::job
