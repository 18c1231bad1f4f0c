// Single-process GPT training benchmark on the CPU backend: trains the same GPT-2 as
// gpt_torch.py (fp32 or --dtype bf16, AdamW, random tokens) with K kernel threads, built as
// train_gpt builds its job (parallel::Training on a 1-rank local world), and prints one JSON line —
// tokens/s (median step after warmup), activation memory per token (the device tier's peak above
// the model states, and the peak of saved activations), and the GFLOPS of a large sgemm on the
// same threads (the peak that model FLOP utilisation is measured against).
//
//   bench_gpt_cpu --threads 2 [--layers 4 --embd 256 --heads 4 --seq 256 --batch 8 --vocab 256]
//                 [--steps 10 --warmup 2 --sgemm 2048 --checkpointing | --recompute selective]
#include <time.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench/common/stats.hpp"
#include "framework/backend/cpu/kernels.hpp"
#include "framework/core/rng.hpp"
#include "framework/memory/ledger.hpp"
#include "bench/common/gpt_options.hpp"
#include "framework/nn/gpt.hpp"
#include "parallel/comm/init.hpp"
#include "parallel/engine/training.hpp"

using namespace strata;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Process CPU seconds (all threads): with the wall time, shows how much a busy machine took.
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

using bench::median;

// Median GFLOPS of C = A @ B with n x n x n on the kernel threads (one untimed call first).
double sgemm_gflops(int n, int reps) {
  const std::size_t nn = static_cast<std::size_t>(n) * n;
  std::vector<float> A(nn), B(nn), C(nn);
  Philox r(7);
  for (auto& x : A) x = r.next_uniform() - 0.5f;
  for (auto& x : B) x = r.next_uniform() - 0.5f;
  cpu::matmul(A.data(), B.data(), C.data(), n, n, n, false, false);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    cpu::matmul(A.data(), B.data(), C.data(), n, n, n, false, false);
    t.push_back(seconds_since(t0));
  }
  return 2.0 * n * static_cast<double>(n) * n / median(t) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Strata GPT training throughput on the CPU (one JSON line)"};
  nn::GptConfig gc;
  gc.n_layer = 4;
  gc.n_embd = 256;
  gc.n_head = 4;
  gc.block_size = 256;
  gc.vocab_size = 256;
  int batch = 8, steps = 10, warmup = 2, threads = 1, sgemm_n = 2048, sgemm_reps = 5;
  bool checkpointing = false;
  std::uint64_t seed = 1337;
  std::string dtype = "f32";
  bench::add_gpt_shape_options(app, gc);
  app.add_option("--batch", batch, "micro-batch (sequences per step)");
  app.add_option("--steps", steps, "timed steps");
  app.add_option("--warmup", warmup, "untimed steps first");
  app.add_option("--threads", threads, "kernel threads");
  app.add_option("--sgemm", sgemm_n, "n of the n^3 sgemm measuring peak GFLOPS (0: skip)");
  app.add_option("--sgemm-reps", sgemm_reps, "timed sgemm calls (median)");
  app.add_flag("--checkpointing", checkpointing, "activation checkpointing of every block");
  std::string recompute;
  app.add_option("--recompute", recompute,
                 "none | selective | full (strata.activation_checkpointing; full = --checkpointing)")
      ->check(CLI::IsMember({"none", "selective", "full"}));
  app.add_option("--seed", seed, "initialisation and data seed");
  app.add_option("--dtype", dtype, "f32 | bf16 (mixed precision: bf16 parameters and activations)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  CLI11_PARSE(app, argc, argv);
  if (steps < 1 || warmup < 0 || threads < 1 || batch < 1) {
    std::fprintf(stderr,
                 "bench_gpt_cpu: --steps, --threads, --batch must be >= 1, --warmup >= 0\n");
    return 2;
  }
  try {
    cpu::set_num_threads(threads);
    const int T = gc.block_size, B = batch;
    const std::int64_t tokens = static_cast<std::int64_t>(B) * T;

    nn::Gpt model(gc);
    config::Config cfg;  // gpt_torch.py's configure_optimizer: AdamW lr 1e-3, betas (0.9, 0.95)
    cfg.train_micro_batch_size_per_gpu = B;
    cfg.gradient_accumulation_steps = 1;
    cfg.optimizer.params.set("lr", 1e-3);
    cfg.optimizer.params.set("betas", optim::HPair{0.9, 0.95});
    cfg.optimizer.params.set("eps", 1e-8);
    cfg.optimizer.params.set("weight_decay", 0.1);
    cfg.bf16.enabled = dtype == "bf16";
    cfg.strata.seed = seed;
    cfg.strata.activation_checkpointing =
        recompute == "selective"                    ? config::Recompute::selective
        : recompute == "full" || checkpointing      ? config::Recompute::full
                                                    : config::Recompute::none;
    parallel::InitOptions io;
    io.transport = "local";
    parallel::World world(io);
    MemoryLedger ledger;
    parallel::Training job(cfg, world.group(), model, parallel::TrainingExtras::on(&ledger));
    // Model states stay put during a step (stage 0, one rank): the device tier's peak above them
    // is what activations and workspace took.
    const auto model_states = [&] {
      return ledger.current(Tier::device, Category::params) +
             ledger.current(Tier::device, Category::grads) +
             ledger.current(Tier::device, Category::optimizer);
    };

    Philox rng(seed + 1);
    auto next_batch = [&](nn::Batch& batch) {
      std::int32_t* in = batch["tokens"].data<std::int32_t>();
      std::int32_t* tgt = batch["targets"].data<std::int32_t>();
      for (int b = 0; b < B; ++b) {
        std::int32_t prev = static_cast<std::int32_t>(rng.next_below(gc.vocab_size));
        for (int t = 0; t < T; ++t) {
          const auto next = static_cast<std::int32_t>(rng.next_below(gc.vocab_size));
          in[static_cast<std::size_t>(b) * T + t] = prev;
          tgt[static_cast<std::size_t>(b) * T + t] = next;
          prev = next;
        }
      }
    };

    std::vector<double> step_s, fwd_s, bwd_s, opt_s, cpu_s, losses;
    std::uint64_t peak_act = 0, saved_act = 0;
    for (int s = 0; s < warmup + steps; ++s) {
      ledger.reset_peaks();
      const double c0 = cpu_seconds();
      const parallel::EngineStep es = job.step(next_batch);
      const double c1 = cpu_seconds();
      losses.push_back(es.loss);
      peak_act = std::max(peak_act, ledger.peak(Tier::device) - model_states());
      saved_act = std::max(saved_act, ledger.peak(Tier::device, Category::activations));
      if (s >= warmup) {
        step_s.push_back(es.times.total);
        fwd_s.push_back(es.times.forward);
        bwd_s.push_back(es.times.backward);
        opt_s.push_back(es.times.optimizer);
        cpu_s.push_back(c1 - c0);
      }
    }
    const nn::ParamStore& store = job.store();
    const double step = median(step_s);
    const double gflops = sgemm_n > 0 ? sgemm_gflops(sgemm_n, sgemm_reps) : 0.0;

    // Model FLOPs per token (PaLM's convention): 6 per matmul parameter (the position table does
    // no matmul; the tied token table counts once, as the LM head) + 12·L·T·C for attention.
    const double C = gc.n_embd, L = gc.n_layer;
    const double matmul_params = static_cast<double>(store.total_numel()) -
                                 static_cast<double>(gc.block_size) * C;
    const double flops_per_token = 6.0 * matmul_params + 12.0 * L * T * C;
    const double tps = static_cast<double>(tokens) / step;

    std::printf(
        "{\"impl\": \"strata\", \"tokens_per_s\": %.1f, \"step_ms\": %.3f, \"step_ms_min\": %.3f, "
        "\"step_ms_max\": %.3f, \"forward_ms\": %.3f, \"backward_ms\": %.3f, "
        "\"optimizer_ms\": %.3f, \"cpu_ms\": %.3f, "
        "\"peak_activation_bytes_per_token\": %.1f, \"saved_activation_bytes_per_token\": %.1f, "
        "\"threads\": %d, \"checkpointing\": %s, \"recompute\": \"%s\", \"dtype\": \"%s\", \"config\": {\"n_layer\": %d, \"n_embd\": %d, "
        "\"n_head\": %d, \"seq\": %d, \"batch\": %d, \"vocab\": %d}, \"params\": %lld, "
        "\"flops_per_token\": %.6g, \"model_gflops\": %.2f, \"sgemm_n\": %d, "
        "\"sgemm_gflops\": %.2f, \"mfu\": %.4f, \"steps\": %d, \"warmup\": %d, "
        "\"loss_first\": %.5f, \"loss_last\": %.5f}\n",
        tps, step * 1e3, *std::min_element(step_s.begin(), step_s.end()) * 1e3,
        *std::max_element(step_s.begin(), step_s.end()) * 1e3, median(fwd_s) * 1e3,
        median(bwd_s) * 1e3, median(opt_s) * 1e3, median(cpu_s) * 1e3,
        static_cast<double>(peak_act) / tokens,
        static_cast<double>(saved_act) / tokens, cpu::num_threads(),
        cfg.strata.activation_checkpointing == config::Recompute::full ? "true" : "false",
        std::string(config::to_string(cfg.strata.activation_checkpointing)).c_str(), dtype.c_str(), gc.n_layer, gc.n_embd, gc.n_head, T, B, gc.vocab_size,
        static_cast<long long>(gc.num_parameters()), flops_per_token,
        flops_per_token * tps * 1e-9, sgemm_n, gflops,
        gflops > 0 ? flops_per_token * tps * 1e-9 / gflops : 0.0, steps, warmup, losses.front(),
        losses.back());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpt_cpu: %s\n", e.what());
    return 1;
  }
}
