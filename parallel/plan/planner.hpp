// The memory planner: a rank's peak memory per tier × category for a config, before anything is
// allocated. It builds the real job (parallel::Training: grid, ZeRO ParamStore, Trainer, offload
// stores, engine) with its device tensors on the meta device, a fresh ledger and a planning world
// of the configured size, runs real training steps through the real engine, ZeRO hooks, trainer and
// offload stores, and reads the ledger's peaks: the count comes from the code that allocates
// (layers save for backward and take workspace through the Context; the meta op table charges the
// CPU backend's workspace). Every data-parallel rank holds equal ZeRO slices and allocates the same
// sizes in the same order, so rank 0's plan is every rank's.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "framework/config/config.hpp"
#include "framework/memory/ledger.hpp"
#include "framework/nn/model.hpp"
#include "parallel/zero/zero_hooks.hpp"

namespace strata::parallel::plan {

// Builds a new instance of the job's model for a config (a plan re-points its parameters at meta
// storage, so it never uses the running job's instance).
using ModelFactory = std::function<std::unique_ptr<nn::Model>(const config::Config&)>;

// The GPT of strata.model (train_gpt's model).
ModelFactory gpt_model();

struct MemoryPlan {
  int ranks = 1;  // world size planned for
  int micro_batch = 0, accumulation = 0;
  // Peaks (and what is in use at the end) per tier × category, over set-up and the planned steps.
  MemorySnapshot memory;
  // The config's caps (strata.memory.*_limit).
  std::array<std::optional<std::uint64_t>, kNumTiers> caps{};
  // Per step, for the cost estimate: bytes this rank hands to collectives, bytes read from and
  // written to swap files, bytes of optimizer state and parameter slices that cross between the
  // device and the host tier (on a GPU: over PCIe; the CPU backend moves nothing).
  CommVolume comm;
  std::uint64_t nvme_read = 0, nvme_written = 0;
  std::uint64_t host_transfer = 0;
  // For the compute estimate: parameters, and the elements of the model's first batch field per
  // sample (a GPT's tokens per sequence).
  std::int64_t parameters = 0;
  std::int64_t tokens_per_sample = 1;
  config::Recompute recompute = config::Recompute::none;  // strata.activation_checkpointing

  std::uint64_t peak(Tier t) const { return memory.tier_peak[static_cast<int>(t)]; }
  std::uint64_t peak(Tier t, Category c) const {
    return memory.peak[static_cast<int>(t)][static_cast<int>(c)];
  }
  // The tier's peak is within its cap (no cap: fits).
  bool fits(Tier t) const;
  bool fits() const;
};

struct PlanOptions {
  int ranks = 1;  // the world size (data parallel × tensor × pipeline)
  int steps = 2;  // training steps run after set-up (the second shows the steady state)
  // The step of a GPU job (strata.device "cuda") is charged the workspace the CUDA backend's ops
  // allocate (the meta-CUDA table); with cpu_ops, the CPU backend's, as for a CPU job (tests that
  // compare a GPU job's plan with the same job staged on the CPU, TrainingExtras::host_staging).
  bool cpu_ops = false;
};

// Plans `cfg` (validated; its batch sizes are resolved here for the world size, an "auto"
// micro-batch must be resolved first). Checks the config as a run would (offload rules, ZeRO
// stage) but nothing on this machine's disks.
MemoryPlan plan_memory(const config::Config& cfg, const ModelFactory& model,
                       const PlanOptions& opts = {});

}  // namespace strata::parallel::plan
