// Optimizer step throughput and bytes per parameter of AdamW8bit and Adafactor against AdamW,
// with the optimizer state on the host and on NVMe (offload_optimizer "cpu" / "nvme"), measured
// side by side in one run: each round times one Trainer::step of every configuration in turn,
// and the figures are medians over rounds (this shared VM's speed drifts between seconds).
//
//   build/release/bench/offload/bench_offload_optimizers [--params 33554432] [--threads 2]
//       [--rounds 5] [--nvme /path/on/the/nvme] [--dtype bf16|f32]
//
// The model is GPT-2-shaped units (one per block: c_attn, c_proj, c_fc, mlp c_proj matrices
// and their biases and LayerNorms) of width --embd, enough blocks for --params; gradients are
// fixed random values, no clipping. Reported per configuration: parameters updated per second
// (the whole step: gradient norm, update, write-backs), the ratio to AdamW on the same store,
// optimizer state bytes per parameter (resident on the host / in the swap file), and for NVMe
// the bytes read + written per parameter per step (the swapper's counters).
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench/common/cpu_flags.hpp"
#include "framework/backend/cpu/kernels.hpp"
#include "framework/core/rng.hpp"
#include "framework/optim/optimizers/adafactor.hpp"
#include "framework/optim/optimizers/adamw8bit.hpp"
#include "framework/train/trainer.hpp"
#include "offload/host_state_store.hpp"
#include "offload/nvme_state_store.hpp"
#include "parallel/zero/zero_memory.hpp"

using namespace strata;
using Clock = std::chrono::steady_clock;

namespace {

struct Model {
  std::vector<std::unique_ptr<nn::Parameter>> owned;
  std::vector<std::vector<nn::Parameter*>> units;
  Model(int blocks, std::int64_t c) {
    for (int b = 0; b < blocks; ++b) {
      std::vector<nn::Parameter*> unit;
      auto add = [&](const std::string& name, Shape shape) {
        auto p = std::make_unique<nn::Parameter>();
        p->name = "h." + std::to_string(b) + "." + name;
        p->decay = shape.rank() >= 2;
        p->init = nn::Init::normal(0.02f);
        p->shape = std::move(shape);
        unit.push_back(p.get());
        owned.push_back(std::move(p));
      };
      add("ln_1.weight", Shape{c});
      add("ln_1.bias", Shape{c});
      add("attn.c_attn.weight", Shape{3 * c, c});
      add("attn.c_attn.bias", Shape{3 * c});
      add("attn.c_proj.weight", Shape{c, c});
      add("attn.c_proj.bias", Shape{c});
      add("ln_2.weight", Shape{c});
      add("ln_2.bias", Shape{c});
      add("mlp.c_fc.weight", Shape{4 * c, c});
      add("mlp.c_fc.bias", Shape{4 * c});
      add("mlp.c_proj.weight", Shape{c, 4 * c});
      add("mlp.c_proj.bias", Shape{c});
      units.push_back(unit);
    }
  }
};

struct Config {
  std::string name;
  train::TrainerOptions opts;
  bool nvme = false;
};

struct Run {
  Config cfg;
  Model model;
  nn::ParamStore store;
  train::Trainer trainer;
  offload::NvmeStateStore* nvme = nullptr;
  std::vector<double> seconds, io_bytes;
  Run(const Config& c, int blocks, std::int64_t embd, DType dt, MemoryLedger& ledger,
      std::unique_ptr<train::OptimizerStateStore> states)
      : cfg(c),
        model(blocks, embd),
        store(model.units, nn::ParamStoreOptions{dt, dt, train::state_pad_multiple(c.opts, 1),
                                                 TensorOptions{Device::cpu(), Tier::device,
                                                               Category::other, &ledger}}),
        trainer((store.initialize(1), store), c.opts, {}, std::move(states)) {
    nvme = dynamic_cast<offload::NvmeStateStore*>(&trainer.states());
  }
  void fill_grads() {
    for (std::size_t u = 0; u < store.num_units(); ++u) {
      Tensor g = store.grads(u);
      Tensor f = Tensor::empty(g.shape(), DType::f32);
      Philox r(17, u);
      float* x = f.data<float>();
      for (std::int64_t i = 0; i < f.numel(); ++i) x[i] = 1e-3f * (r.next_uniform() - 0.5f);
      g.copy_from(f);
    }
  }
  void step() {
    fill_grads();
    if (nvme) nvme->swapper().reset_stats();
    const auto t0 = Clock::now();
    trainer.step();
    seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    if (nvme) {
      const auto s = nvme->swapper().stats();
      io_bytes.push_back(static_cast<double>(s.bytes_read + s.bytes_written));
    }
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"AdamW8bit and Adafactor vs AdamW: step throughput and bytes, host and NVMe"};
  std::int64_t params = std::int64_t{1} << 25, embd = 512;
  int threads = omp_get_max_threads(), rounds = 5, buffers = 4;
  std::string nvme_dir = std::filesystem::temp_directory_path().string(), dtype = "bf16";
  bool with_nvme = true;
  app.add_option("--params", params, "parameters (rounded to whole blocks; default 33554432)");
  app.add_option("--embd", embd, "block width C (default 512: 12·C² + 13·C per block)");
  app.add_option("--threads", threads, "compute threads (default: OpenMP's)");
  app.add_option("--rounds", rounds, "timed steps of each configuration (median; default 5)");
  app.add_option("--nvme", nvme_dir, "directory for the NVMe swap files (default the temp dir)");
  app.add_option("--buffers", buffers, "NVMe buffer_count (default 4)");
  app.add_option("--dtype", dtype, "parameters: bf16 (fp32 master in the state) or f32")
      ->check(CLI::IsMember({"bf16", "f32"}));
  app.add_flag("!--no-nvme", with_nvme, "host store only");
  CLI11_PARSE(app, argc, argv);
  cpu::set_num_threads(threads);
  const DType dt = dtype == "bf16" ? DType::bf16 : DType::f32;
  const std::int64_t per_block = 12 * embd * embd + 13 * embd;
  const int blocks = static_cast<int>(std::max<std::int64_t>(1, params / per_block));

  std::vector<Config> configs;
  for (bool nvme : {false, true}) {
    if (nvme && !with_nvme) continue;
    const std::string where = nvme ? "nvme" : "host";
    train::TrainerOptions o;
    o.precision = dt == DType::bf16 ? train::Precision::bf16 : train::Precision::f32;
    optim::AdamWHyper adamw;
    adamw.lr = 1e-4;
    o.optimizer = std::make_shared<optim::AdamW>(adamw);
    configs.push_back({"AdamW/" + where, o, nvme});
    o.optimizer = std::make_shared<optim::AdamW8bit>(adamw);
    configs.push_back({"AdamW8bit/" + where, o, nvme});
    optim::AdafactorHyper adafactor;  // transformers' defaults: no beta1
    o.optimizer = std::make_shared<optim::Adafactor>(adafactor);
    configs.push_back({"Adafactor/" + where, o, nvme});
    adafactor.beta1 = 0.9;
    o.optimizer = std::make_shared<optim::Adafactor>(adafactor);
    configs.push_back({"Adafactor+beta1/" + where, o, nvme});
  }
  MemoryLedger ledger;
  std::vector<std::unique_ptr<Run>> runs;
  for (const Config& c : configs) {
    std::unique_ptr<train::OptimizerStateStore> states;
    if (c.nvme) {
      offload::SwapperOptions so;
      so.dir = nvme_dir;
      so.rank = static_cast<int>(runs.size());  // one swap file per configuration
      so.buffer_count = buffers;
      so.ledger = &ledger;
      states = std::make_unique<offload::NvmeStateStore>(so);
    } else {
      states = std::make_unique<offload::HostStateStore>(false, &ledger);
    }
    runs.push_back(std::make_unique<Run>(c, blocks, embd, dt, ledger, std::move(states)));
    runs.back()->step();  // warm-up (first touch, file growth)
    runs.back()->seconds.clear();
    runs.back()->io_bytes.clear();
  }
  for (int r = 0; r < rounds; ++r)
    for (auto& run : runs) run->step();

  const auto n = static_cast<double>(runs.front()->store.total_numel());
  std::printf("optimizer step, %.1f M parameters (%d blocks of d=%lld, %s parameters), %d threads, "
              "%s path, %d rounds (median); CPU flags: %s\n",
              n / 1e6, blocks, static_cast<long long>(embd), dtype.c_str(), threads,
              optim::simd_path_name(optim::best_simd_path()), rounds, bench::cpu_flags().c_str());
  std::printf("%-24s %12s %10s %14s %16s\n", "optimizer/state", "M params/s", "vs AdamW",
              "state B/param", "NVMe I/O B/param");
  double adamw_pps = 0;
  for (auto& run : runs) {
    const double pps = n / median(run->seconds);
    if (run->cfg.name.starts_with("AdamW/")) adamw_pps = pps;
    std::vector<Shape> shapes;
    for (const nn::Parameter* p : run->store.parameters()) shapes.push_back(p->shape);
    const auto b = parallel::optimizer_state_bytes(*run->cfg.opts.optimizer, dt != DType::f32, shapes);
    const double state = b.per_element + b.replicated / n;
    std::string io = "-";
    if (run->nvme) io = fmt::format("{:.2f}", median(run->io_bytes) / n);
    std::printf("%-24s %12.1f %9.2fx %14.2f %16s\n", run->cfg.name.c_str(), pps / 1e6,
                pps / adamw_pps, state, io.c_str());
  }
  return 0;
}
