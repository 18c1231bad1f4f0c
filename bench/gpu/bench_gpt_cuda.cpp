// GPT training throughput on one GPU: the same GPT-2 as pytorch_gpt2.py (bf16 by default, AdamW,
// random tokens), built as train_gpt builds its job (parallel::Training on a 1-rank world with
// strata.device "cuda"). Prints one JSON line: tokens/s (median step after warm-up, the GPU
// synchronised at each step's end), MFU against the GPU's dense bf16 peak, and peak GPU memory (the
// ledger's device tier: what tensors held; and the device's own view of used memory).
//
// With --offload (ZeRO-Offload's mode: ZeRO-3, the optimizer state, f32 masters, gradients and the
// parameters' owned slices in pinned host memory, the host optimizer stepping them) it also
// measures, in the same run, the pinned host<->GPU copy speed each way and the bytes each step
// moves (cuda::copied_bytes), and reports the step time over that transfer bound and the achieved
// TFLOP/s over DeepSpeed's published 40 TFLOP/s per GPU for ZeRO-Offload; --device-memory caps
// the GPU (e.g. 16GiB, a T4's memory) as strata.memory.device_limit does.
//
//   bench_gpt_cuda [--layers 12 --embd 768 --heads 12 --seq 1024 --vocab 50304 --batch 8]
//                  [--steps 20 --warmup 5 --dtype bf16|f32 --checkpointing --peak-tflops 989.5]
//                  [--offload --device-memory 16GiB] [--rounded-attention]
//
// --rounded-attention sets strata.allow_rounded_attention (P and dS rounded to 16 bits once in the
// tensor-core attention kernels, as FlashAttention and PyTorch's SDPA do); the JSON line says
// which form ran ("rounded_attention").
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
#include "framework/core/tensor.hpp"
#include "framework/memory/ledger.hpp"
#include "framework/memory/size.hpp"
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

// Pinned host <-> GPU copy speed (bytes/s) each way: `reps` copies of `bytes` on one stream,
// timed from the host after a synchronisation (the first copy of each way is a warm-up).
struct LinkSpeed {
  double to_device = 0, to_host = 0;
};
LinkSpeed measure_link(std::size_t bytes, int reps) {
  const Device gpu = Device::cuda(0);
  TensorOptions host{Device::cpu(), Tier::host, Category::other};
  host.pinned = true;
  const auto n = static_cast<std::int64_t>(bytes);
  Tensor h = Tensor::empty({n}, DType::u8, host);
  Tensor d = Tensor::empty({n}, DType::u8, TensorOptions{gpu, Tier::device, Category::other});
  const Stream s = current_stream(gpu);
  auto time_way = [&](bool up) {
    double best = 0;
    for (int r = 0; r <= reps; ++r) {
      const auto t0 = Clock::now();
      cuda::memcpy_async(up ? d.raw() : h.raw(), up ? h.raw() : d.raw(), bytes,
                         up ? cuda::CopyKind::host_to_device : cuda::CopyKind::device_to_host,
                         s.handle());
      s.synchronize();
      const double bps = static_cast<double>(bytes) /
                         std::chrono::duration<double>(Clock::now() - t0).count();
      if (r > 0) best = std::max(best, bps);
    }
    return best;
  };
  LinkSpeed l;
  l.to_device = time_way(true);
  l.to_host = time_way(false);
  return l;
}

constexpr double kDeepSpeedOffloadTflops = 40.0;  // ZeRO-Offload's published figure per GPU

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
  std::string dtype = "bf16", device_memory;
  bool offload = false, rounded_attention = false;
  bench::add_gpt_shape_options(app, gc);
  app.add_option("--batch", batch, "micro-batch (sequences per step)");
  app.add_option("--steps", steps, "timed steps");
  app.add_option("--warmup", warmup, "untimed steps first");
  app.add_flag("--checkpointing", checkpointing, "activation checkpointing of every block");
  app.add_option("--seed", seed, "initialisation and data seed");
  app.add_option("--peak-tflops", peak_tflops, "the GPU's dense peak for MFU (default: from its name)");
  app.add_option("--dtype", dtype, "bf16 (mixed precision) | f32")->check(CLI::IsMember({"f32", "bf16"}));
  app.add_flag("--offload", offload,
               "ZeRO-3 with the optimizer state and parameters in pinned host memory; also "
               "measures the link and the bytes moved");
  app.add_option("--device-memory", device_memory, "cap on GPU memory, e.g. 16GiB");
  app.add_flag("--rounded-attention", rounded_attention,
               "strata.allow_rounded_attention: P and dS rounded to 16 bits once (FlashAttention's "
               "numerics)");
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
    cfg.strata.allow_rounded_attention = rounded_attention;
    cfg.strata.activation_checkpointing =
      checkpointing ? config::Recompute::full : config::Recompute::none;
    if (!device_memory.empty()) cfg.strata.memory.device_limit = parse_bytes(device_memory);
    if (offload) {
      cfg.zero_optimization.stage = 3;
      cfg.zero_optimization.offload_optimizer.device = config::OffloadDevice::cpu;
      cfg.zero_optimization.offload_optimizer.pin_memory = true;
      cfg.zero_optimization.offload_param.device = config::OffloadDevice::cpu;
      cfg.zero_optimization.offload_param.pin_memory = true;
    }
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
    std::vector<double> step_s, fwd_s, bwd_s, opt_s, losses, up_b, down_b;
    for (int s = 0; s < warmup + steps; ++s) {
      const cuda::CopiedBytes c0 = cuda::copied_bytes();
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
        const cuda::CopiedBytes c1 = cuda::copied_bytes();
        up_b.push_back(static_cast<double>(c1.to_device - c0.to_device));
        down_b.push_back(static_cast<double>(c1.to_host - c0.to_host));
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
    // Offload: the step against the link. The bound is the larger way's bytes over its measured
    // speed (the link copies both ways at once); the step cannot be faster than that.
    std::string offload_json = "\"offload\": false";
    if (offload) {
      const LinkSpeed link = measure_link(std::size_t{256} << 20, 5);
      const double up = median(up_b), down = median(down_b);
      const double bound = std::max(up / link.to_device, down / link.to_host);
      offload_json = fmt::format(
          "\"offload\": true, \"device_limit_bytes\": {}, \"to_device_bytes_per_step\": {:.0f}, "
          "\"to_host_bytes_per_step\": {:.0f}, \"link_to_device_gbps\": {:.2f}, "
          "\"link_to_host_gbps\": {:.2f}, \"transfer_bound_ms\": {:.3f}, "
          "\"step_over_transfer_bound\": {:.2f}, \"tflops_over_deepspeed_offload_40\": {:.3f}",
          cfg.strata.memory.device_limit.value_or(0), up, down, link.to_device * 1e-9,
          link.to_host * 1e-9, bound * 1e3, bound > 0 ? step / bound : 0.0,
          achieved * 1e-12 / kDeepSpeedOffloadTflops);
    }
    std::printf(
        "%s\n",
        fmt::format(
            "{{\"impl\": \"strata\", \"mode\": \"cuda\", \"gpu\": \"{}\", \"dtype\": \"{}\", "
            "\"tokens_per_s\": {:.1f}, \"step_ms\": {:.3f}, \"step_ms_min\": {:.3f}, "
            "\"step_ms_max\": {:.3f}, \"forward_ms\": {:.3f}, \"backward_ms\": {:.3f}, "
            "\"optimizer_ms\": {:.3f}, \"tflops\": {:.2f}, \"peak_tflops\": {:.1f}, \"mfu\": {:.4f}, "
            "\"peak_memory_bytes\": {}, \"checkpointing\": {}, \"rounded_attention\": {}, "
            "\"params\": {}, \"config\": "
            "{{\"n_layer\": {}, \"n_embd\": {}, \"n_head\": {}, \"seq\": {}, \"batch\": {}, "
            "\"vocab\": {}}}, \"steps\": {}, \"warmup\": {}, \"loss_first\": {:.5f}, "
            "\"loss_last\": {:.5f}, {}}}",
            gpu_name, dtype, tps, step * 1e3,
            *std::min_element(step_s.begin(), step_s.end()) * 1e3,
            *std::max_element(step_s.begin(), step_s.end()) * 1e3, median(fwd_s) * 1e3,
            median(bwd_s) * 1e3, median(opt_s) * 1e3, achieved * 1e-12, peak_tflops,
            peak_tflops > 0 ? achieved * 1e-12 / peak_tflops : 0.0, ledger.peak(Tier::device),
            checkpointing, rounded_attention, job.store().total_numel(), gc.n_layer, gc.n_embd,
            gc.n_head, T, B,
            gc.vocab_size, steps, warmup, losses.front(), losses.back(), offload_json)
            .c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpt_cuda: %s\n", e.what());
    return 1;
  }
}
