// GPT training throughput on one GPU: the same GPT-2 as pytorch_gpt2.py (bf16 by default, AdamW,
// random tokens), built as train_gpt builds its job (parallel::Training on a 1-rank world with
// strata.device "cuda"). Prints one JSON line: tokens/s (median step after warm-up, the GPU
// synchronised at each step's end), MFU against the GPU's dense bf16 peak, and peak GPU memory (the
// ledger's device tier: what tensors held; and the device's own view of used memory).
//
//   bench_gpt_cuda [--layers 12 --embd 768 --heads 12 --seq 1024 --vocab 50304 --batch 8]
//                  [--steps 20 --warmup 5 --dtype bf16|f32 --checkpointing --peak-tflops 989.5]
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench/common/stats.hpp"
#include "bench/common/gpt_options.hpp"
#include "framework/backend/cuda_runtime.hpp"
#include "framework/backend/stream.hpp"
#include "framework/core/rng.hpp"
#include "framework/memory/ledger.hpp"
#include "framework/nn/gpt.hpp"
#include "parallel/comm/init.hpp"
#include "parallel/engine/training.hpp"

using namespace strata;
using Clock = std::chrono::steady_clock;

namespace {

using bench::median;

// Dense bf16 tensor-core peak of a GPU from its name (TFLOP/s), 0 when unknown.
double peak_tflops_of(const std::string& name) {
  if (name.find("H100") != std::string::npos || name.find("H200") != std::string::npos ||
      name.find("H800") != std::string::npos)
    return 989.5;  // SXM; a PCIe H100 is 756
  if (name.find("A100") != std::string::npos) return 312.0;
  if (name.find("L4") != std::string::npos) return 121.0;
  if (name.find("T4") != std::string::npos) return 65.0;  // fp16 (no bf16 tensor cores)
  return 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Strata GPT training throughput on one GPU (one JSON line)"};
  nn::GptConfig gc;  // GPT-2 124M, vocabulary padded to 50304 as llm.c and nanoGPT do
  gc.n_layer = 12;
  gc.n_embd = 768;
  gc.n_head = 12;
  gc.block_size = 1024;
  gc.vocab_size = 50304;
  int batch = 8, steps = 20, warmup = 5;
  bool checkpointing = false;
  double peak_tflops = 0;
  std::uint64_t seed = 1337;
  std::string dtype = "bf16";
  bench::add_gpt_shape_options(app, gc);
  app.add_option("--batch", batch, "micro-batch (sequences per step)");
  app.add_option("--steps", steps, "timed steps");
  app.add_option("--warmup", warmup, "untimed steps first");
  app.add_flag("--checkpointing", checkpointing, "activation checkpointing of every block");
  app.add_option("--seed", seed, "initialisation and data seed");
  app.add_option("--peak-tflops", peak_tflops, "the GPU's dense peak for MFU (default: from its name)");
  app.add_option("--dtype", dtype, "bf16 (mixed precision) | f32")->check(CLI::IsMember({"f32", "bf16"}));
  CLI11_PARSE(app, argc, argv);
  if (steps < 1 || warmup < 0 || batch < 1) {
    std::fprintf(stderr, "bench_gpt_cuda: --steps and --batch must be >= 1, --warmup >= 0\n");
    return 2;
  }
  if (!cuda::compiled() || cuda::device_count() == 0) {
    std::fprintf(stderr, "bench_gpt_cuda: no GPU here (%s)\n", cuda::describe_devices().c_str());
    return 2;
  }
  try {
    const int T = gc.block_size, B = batch;
    const std::int64_t tokens = static_cast<std::int64_t>(B) * T;
    nn::Gpt model(gc);
    config::Config cfg;  // as pytorch_gpt2.py: AdamW lr 6e-4, betas (0.9, 0.95), wd 0.1, clip 1
    cfg.train_micro_batch_size_per_gpu = B;
    cfg.gradient_accumulation_steps = 1;
    cfg.optimizer.params.set("lr", 6e-4);
    cfg.optimizer.params.set("betas", optim::HPair{0.9, 0.95});
    cfg.optimizer.params.set("eps", 1e-8);
    cfg.optimizer.params.set("weight_decay", 0.1);
    cfg.gradient_clipping = 1.0;
    cfg.bf16.enabled = dtype == "bf16";
    cfg.strata.seed = seed;
    cfg.strata.device = DeviceType::cuda;
    cfg.strata.activation_checkpointing =
      checkpointing ? config::Recompute::full : config::Recompute::none;
    parallel::InitOptions io;
    io.transport = "local";
    parallel::World world(io);
    MemoryLedger ledger;
    parallel::Training job(cfg, world.group(), model, parallel::TrainingExtras::on(&ledger));
    const Stream gpu = current_stream(Device::cuda(0));

    Philox rng(seed + 1);
    auto next_batch = [&](nn::Batch& b) {
      std::int32_t* in = b["tokens"].data<std::int32_t>();
      std::int32_t* tgt = b["targets"].data<std::int32_t>();
      for (std::int64_t i = 0; i < tokens; ++i) {
        in[i] = static_cast<std::int32_t>(rng.next_below(static_cast<std::uint32_t>(gc.vocab_size)));
        tgt[i] = static_cast<std::int32_t>(rng.next_below(static_cast<std::uint32_t>(gc.vocab_size)));
      }
    };
    std::vector<double> step_s, fwd_s, bwd_s, opt_s, losses;
    for (int s = 0; s < warmup + steps; ++s) {
      const auto t0 = Clock::now();
      const parallel::EngineStep es = job.step(next_batch);
      gpu.synchronize();  // the step's last kernels (the optimizer's) have run
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      losses.push_back(es.loss);
      if (s >= warmup) {
        step_s.push_back(dt);
        fwd_s.push_back(es.times.forward);
        bwd_s.push_back(es.times.backward);
        opt_s.push_back(es.times.optimizer);
      }
    }
    const double step = median(step_s), tps = static_cast<double>(tokens) / step;
    // Model FLOPs per token (as pytorch_gpt2.py and llm.c): 6 per matmul parameter (the position
    // table does no matmul) + 12·L·T·C for attention.
    const double C = gc.n_embd, L = gc.n_layer;
    const double matmul_params = static_cast<double>(job.store().total_numel()) - T * C;
    const double flops_per_token = 6.0 * matmul_params + 12.0 * L * T * C;
    const std::string gpu_name = cuda::describe_devices();
    if (peak_tflops <= 0) peak_tflops = peak_tflops_of(gpu_name);
    const double achieved = flops_per_token * tps;
    std::printf(
        "%s\n",
        fmt::format(
            "{{\"impl\": \"strata\", \"mode\": \"cuda\", \"gpu\": \"{}\", \"dtype\": \"{}\", "
            "\"tokens_per_s\": {:.1f}, \"step_ms\": {:.3f}, \"step_ms_min\": {:.3f}, "
            "\"step_ms_max\": {:.3f}, \"forward_ms\": {:.3f}, \"backward_ms\": {:.3f}, "
            "\"optimizer_ms\": {:.3f}, \"tflops\": {:.2f}, \"peak_tflops\": {:.1f}, \"mfu\": {:.4f}, "
            "\"peak_memory_bytes\": {}, \"checkpointing\": {}, \"params\": {}, \"config\": "
            "{{\"n_layer\": {}, \"n_embd\": {}, \"n_head\": {}, \"seq\": {}, \"batch\": {}, "
            "\"vocab\": {}}}, \"steps\": {}, \"warmup\": {}, \"loss_first\": {:.5f}, "
            "\"loss_last\": {:.5f}}}",
            gpu_name, dtype, tps, step * 1e3,
            *std::min_element(step_s.begin(), step_s.end()) * 1e3,
            *std::max_element(step_s.begin(), step_s.end()) * 1e3, median(fwd_s) * 1e3,
            median(bwd_s) * 1e3, median(opt_s) * 1e3, achieved * 1e-12, peak_tflops,
            peak_tflops > 0 ? achieved * 1e-12 / peak_tflops : 0.0, ledger.peak(Tier::device),
            checkpointing, job.store().total_numel(), gc.n_layer, gc.n_embd, gc.n_head, T, B,
            gc.vocab_size, steps, warmup, losses.front(), losses.back())
            .c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpt_cuda: %s\n", e.what());
    return 1;
  }
}
