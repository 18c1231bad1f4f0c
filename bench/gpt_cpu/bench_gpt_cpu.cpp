// Single-process GPT training benchmark on the CPU backend: trains the same GPT-2 as
// gpt_torch.py (fp32, AdamW, random tokens) with K kernel threads and prints one JSON line —
// tokens/s (median step after warmup), activation memory per token from a ledger that sees only
// Category::activations + workspace, and the GFLOPS of a large sgemm on the same threads (the
// peak that model FLOP utilisation is measured against).
//
//   bench_gpt_cpu --threads 2 [--layers 4 --embd 256 --heads 4 --seq 256 --batch 8 --vocab 256]
//                 [--steps 10 --warmup 2 --sgemm 2048 --checkpointing]
#include <time.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/core/rng.hpp"
#include "framework/memory/ledger.hpp"
#include "framework/nn/gpt.hpp"
#include "framework/nn/param_store.hpp"
#include "framework/train/trainer.hpp"

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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

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
  app.add_option("--layers", gc.n_layer, "transformer blocks");
  app.add_option("--embd", gc.n_embd, "model width");
  app.add_option("--heads", gc.n_head, "attention heads");
  app.add_option("--seq", gc.block_size, "sequence length (= block size)");
  app.add_option("--vocab", gc.vocab_size, "vocabulary size");
  app.add_option("--batch", batch, "micro-batch (sequences per step)");
  app.add_option("--steps", steps, "timed steps");
  app.add_option("--warmup", warmup, "untimed steps first");
  app.add_option("--threads", threads, "kernel threads");
  app.add_option("--sgemm", sgemm_n, "n of the n^3 sgemm measuring peak GFLOPS (0: skip)");
  app.add_option("--sgemm-reps", sgemm_reps, "timed sgemm calls (median)");
  app.add_flag("--checkpointing", checkpointing, "activation checkpointing of every block");
  app.add_option("--seed", seed, "initialisation and data seed");
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
    model.set_checkpointing(checkpointing);
    nn::ParamStore store(model.units(), nn::ParamStoreOptions{});
    store.initialize(seed);
    train::TrainerOptions to;
    to.adamw.lr = 1e-3;  // gpt_torch.py's configure_optimizer
    to.adamw.beta1 = 0.9;
    to.adamw.beta2 = 0.95;
    to.adamw.eps = 1e-8;
    to.adamw.weight_decay = 0.1;
    train::Trainer trainer(store, to);

    // Activations and workspace are charged to their own ledger: its tier peak is the peak of
    // their sum (the global ledger keeps per-category peaks only).
    MemoryLedger act_ledger;
    nn::Context ctx;
    ctx.activations.ledger = &act_ledger;
    ctx.workspace.ledger = &act_ledger;

    Philox rng(seed + 1);
    std::vector<std::int32_t> in(static_cast<std::size_t>(tokens)), tgt(in.size());
    auto next_batch = [&] {
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
      next_batch();
      act_ledger.reset_peaks();
      const double c0 = cpu_seconds();
      const auto t0 = Clock::now();
      const double loss = model.forward(ctx, in.data(), tgt.data(), B, T);
      const auto t1 = Clock::now();
      const std::uint64_t held = act_ledger.current(Tier::device);
      model.backward(ctx, trainer.loss_scale());
      const auto t2 = Clock::now();
      trainer.step();
      const auto t3 = Clock::now();
      const double c1 = cpu_seconds();
      losses.push_back(loss);
      peak_act = std::max(peak_act, act_ledger.peak(Tier::device));
      saved_act = std::max(saved_act, held);
      if (s >= warmup) {
        step_s.push_back(std::chrono::duration<double>(t3 - t0).count());
        fwd_s.push_back(std::chrono::duration<double>(t1 - t0).count());
        bwd_s.push_back(std::chrono::duration<double>(t2 - t1).count());
        opt_s.push_back(std::chrono::duration<double>(t3 - t2).count());
        cpu_s.push_back(c1 - c0);
      }
    }
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
        "\"threads\": %d, \"checkpointing\": %s, \"config\": {\"n_layer\": %d, \"n_embd\": %d, "
        "\"n_head\": %d, \"seq\": %d, \"batch\": %d, \"vocab\": %d}, \"params\": %lld, "
        "\"flops_per_token\": %.6g, \"model_gflops\": %.2f, \"sgemm_n\": %d, "
        "\"sgemm_gflops\": %.2f, \"mfu\": %.4f, \"steps\": %d, \"warmup\": %d, "
        "\"loss_first\": %.5f, \"loss_last\": %.5f}\n",
        tps, step * 1e3, *std::min_element(step_s.begin(), step_s.end()) * 1e3,
        *std::max_element(step_s.begin(), step_s.end()) * 1e3, median(fwd_s) * 1e3,
        median(bwd_s) * 1e3, median(opt_s) * 1e3, median(cpu_s) * 1e3,
        static_cast<double>(peak_act) / tokens,
        static_cast<double>(saved_act) / tokens, cpu::num_threads(),
        checkpointing ? "true" : "false", gc.n_layer, gc.n_embd, gc.n_head, T, B, gc.vocab_size,
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
