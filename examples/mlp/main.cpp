// mlp: a user's own model on Strata — a two-layer MLP classifier (Classifier, with a user-written
// ReLU layer) on synthetic blobs, trained by the same engine and config as the GPT: data
// parallelism under mpirun, ZeRO stages 1-3, optimizer and parameter offload, mixed precision,
// checkpoints and resume (strata.checkpoint), one JSON line per step with --metrics.
//
//   build/release/examples/mlp --config examples/mlp/config.json
//   mpirun -np 2 build/release/examples/mlp --config examples/mlp/config.json
//     --set zero_optimization.stage=3 --checkpoint-dir ck
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "examples/mlp/blobs.hpp"
#include "examples/mlp/classifier.hpp"
#include "framework/backend/cpu/kernels.hpp"
#include "framework/config/config.hpp"
#include "framework/train/from_config.hpp"
#include "parallel/comm/init.hpp"
#include "parallel/engine/training.hpp"

using namespace strata;

namespace {

struct Args {
  std::string config;
  std::vector<std::string> sets;
  std::string metrics, checkpoint_dir, resume;
  int inputs = 20, hidden = 64, classes = 5, threads = 0;
  std::uint64_t samples = 4096;
  std::int64_t exit_after_steps = 0;
};

// The GPT's sections of the config do not describe this model: refuse them rather than ignore.
void reject_gpt_sections(const config::json& doc, const std::string& path) {
  if (!doc.contains("strata")) return;
  for (const char* k : {"model", "data", "eval", "sample"})
    if (doc["strata"].contains(k))
      user_fail("mlp", "{}: strata.{} describes train_gpt's GPT and text data; this example takes its "
                "shape from --inputs/--hidden/--classes/--samples: remove strata.{}", path, k, k);
}

// Accuracy on `n` samples after the training set, split over dp ranks (ZeRO-3 gathers collectively).
double accuracy(mlp::Classifier& model, const mlp::Blobs& data, std::uint64_t n,
                const parallel::Group& dp, nn::Context ctx) {
  const int D = model.inputs(), K = model.classes();
  double right = 0, total = 0;
  const std::uint64_t per = (n + static_cast<std::uint64_t>(dp.size()) - 1) / dp.size();
  Tensor x = Tensor::zeros({static_cast<std::int64_t>(per), D}, DType::f32, nn::Batch::host_options());
  std::vector<std::int32_t> y(per, -1);
  for (std::uint64_t k = 0; k < per; ++k) {
    const std::uint64_t i = static_cast<std::uint64_t>(dp.rank()) * per + k;
    if (i < n) y[k] = data.sample(data.size() + i, x.data<float>() + k * D);
  }
  const std::vector<float> logits = model.logits(ctx, x).to_vector();
  for (std::uint64_t k = 0; k < per; ++k) {
    if (y[k] < 0) continue;
    const float* l = logits.data() + k * K;
    int best = 0;
    for (int c = 1; c < K; ++c) best = l[c] > l[best] ? c : best;
    right += best == y[k];
    total += 1;
  }
  double v[2] = {right, total};
  if (dp.size() > 1) dp.all_reduce(parallel::span(v, 2), parallel::span(v, 2), parallel::ReduceOp::sum).wait();
  return v[1] > 0 ? v[0] / v[1] : 0;
}

int run(const Args& a) {
  auto& ledger = MemoryLedger::global();
  reject_gpt_sections(config::read_config_file(a.config), a.config);
  std::vector<std::string> overrides = a.sets;
  if (!a.checkpoint_dir.empty()) overrides.push_back("strata.checkpoint.dir=" + a.checkpoint_dir);
  if (!a.resume.empty()) overrides.push_back("strata.checkpoint.resume=" + a.resume);
  config::Config cfg = config::load_config(a.config, overrides);
  parallel::InitOptions init;
  init.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(cfg.strata.comm.timeout_s * 1000));
  parallel::World world(init);
  const bool lead = world.group().rank() == 0;
  train::apply_memory_caps(cfg, ledger);
  if (a.threads > 0) cpu::set_num_threads(a.threads);

  mlp::Classifier model(a.inputs, a.hidden, a.classes);
  parallel::Training job(cfg, world.group(), model, parallel::TrainingExtras::on(&ledger));
  const config::Config& c = job.config();
  const parallel::Group& dp = job.dp();
  mlp::Blobs data(a.inputs, a.classes, a.samples, c.strata.seed,
                  static_cast<int>(c.train_micro_batch_size_per_gpu), dp.size(), dp.rank());
  job.checkpoints().set_data(&data);
  if (lead)
    std::printf("mlp %d-%d-%d: %lld parameters on %d ranks (dp %d), ZeRO stage %d, batch %lld "
                "(%lld micro x %lld accumulation x %d)\n",
                a.inputs, a.hidden, a.classes, static_cast<long long>(job.store().total_numel()),
                world.group().size(), dp.size(), job.zero_stage(),
                static_cast<long long>(c.train_batch_size),
                static_cast<long long>(c.train_micro_batch_size_per_gpu),
                static_cast<long long>(c.gradient_accumulation_steps), dp.size());
  const std::int64_t start = job.checkpoints().resume();
  std::ofstream metrics;
  if (!a.metrics.empty() && lead) {
    metrics.open(a.metrics, start > 0 ? std::ios::app : std::ios::trunc);
    if (!metrics) user_fail("mlp", "cannot write metrics file {}", a.metrics);
  }
  const std::int64_t steps = c.strata.train_steps;
  std::int64_t step = start;
  bool stopped = false;
  while (step < steps && !stopped) {
    ++step;
    const parallel::EngineStep es = job.step(data);
    if (lead && (step % c.steps_per_print == 0 || step == steps || step == start + 1)) {
      std::printf("step %lld/%lld | loss %.6f | grad norm %.4f\n", static_cast<long long>(step),
                  static_cast<long long>(steps), es.loss, es.result.grad_norm);
      if (c.wall_clock_breakdown) std::printf("%s\n", parallel::describe(es.times).c_str());
      std::fflush(stdout);
    }
    if (metrics.is_open()) {
      metrics << fmt::format("{{\"step\": {}, \"loss\": {:.17g}, \"grad_norm\": {:.17g}}}\n", step,
                             es.loss, es.result.grad_norm);
      metrics.flush();
      if (!metrics) user_fail("mlp", "writing metrics file {} failed", a.metrics);
    }
    stopped = a.exit_after_steps > 0 && step - start >= a.exit_after_steps && step < steps;
    if (job.checkpoints().due(step) || (job.checkpoints().enabled() && (stopped || step == steps)))
      job.checkpoints().save(step);
  }
  job.checkpoints().finish();
  if (stopped) return 0;
  const double acc = accuracy(model, data, 1024, dp, job.engine().eval_context());
  if (lead) std::printf("validation accuracy %.3f\n", acc);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mlp: a user's own model (a two-layer MLP classifier) trained by Strata's engine"};
  Args a;
  app.add_option("--config", a.config, "JSON config (DeepSpeed keys + strata section)")->required();
  app.add_option("--set", a.sets, "override a config key: --set zero_optimization.stage=3");
  app.add_option("--metrics", a.metrics, "write one JSON line per step to this file");
  app.add_option("--checkpoint-dir", a.checkpoint_dir, "where checkpoints go (strata.checkpoint.dir)");
  app.add_option("--resume", a.resume, "auto, none, or a checkpoint directory");
  app.add_option("--exit-after-steps", a.exit_after_steps,
                 "stop after this many steps of this run (saving a checkpoint when a directory is set)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--inputs", a.inputs, "features per sample")->check(CLI::Range(1, 4096));
  app.add_option("--hidden", a.hidden, "hidden units")->check(CLI::Range(1, 65536));
  app.add_option("--classes", a.classes, "classes (blobs)")->check(CLI::Range(2, 4096));
  app.add_option("--samples", a.samples, "training samples")->check(CLI::PositiveNumber);
  app.add_option("--threads", a.threads, "compute threads")->check(CLI::NonNegativeNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run(a);
  } catch (const UserError& e) {
    std::fprintf(stderr, "mlp: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlp: error: %s\n", e.what());
    return 3;
  }
}
