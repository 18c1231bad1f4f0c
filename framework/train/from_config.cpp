#include "framework/train/from_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/backend/ops/op_table.hpp"
#include "framework/optim/optimizers/registry.hpp"

namespace strata::train {

nn::GptConfig gpt_config(const config::Config& cfg) {
  const auto& m = cfg.strata.model;
  STRATA_CHECK(m.type == "gpt", "config", "strata.model.type '{}' is not a model this program trains",
               m.type);
  nn::GptConfig g;
  g.vocab_size = static_cast<int>(m.vocab_size);
  g.block_size = static_cast<int>(m.block_size);
  g.n_layer = static_cast<int>(m.n_layer);
  g.n_head = static_cast<int>(m.n_head);
  g.n_embd = static_cast<int>(m.n_embd);
  return g;
}

Precision precision_of(const config::Config& cfg) {
  if (cfg.fp16.enabled) return Precision::fp16;
  if (cfg.bf16.enabled) return Precision::bf16;
  return Precision::f32;
}

DType param_dtype(Precision p) {
  return p == Precision::bf16 ? DType::bf16 : p == Precision::fp16 ? DType::f16 : DType::f32;
}

namespace {

// Why the GPUs here cannot run a job ("" when GPU 0 can): no CUDA in this build, none visible,
// or no CUDA kernels in this build.
std::string why_no_gpu() {
  if (!cuda::compiled()) return "this Strata build has no CUDA support";
  if (cuda::device_count() == 0) return fmt::format("no GPU is usable here ({})", cuda::describe_devices());
  if (!ops::cuda_op_table()) return "this Strata build has no CUDA kernels";
  return "";
}

// Whether GPU `d` computes in bfloat16 (compute capability 8.0 or newer).
bool has_bf16(const cuda::DeviceProperties& p) { return p.major >= 8; }

std::string gpu_name(int d, const cuda::DeviceProperties& p) {
  return fmt::format("cuda:{} ({}, compute capability {}.{})", d, p.name.empty() ? "a GPU" : p.name,
                     p.major, p.minor);
}

}  // namespace

Device compute_device(const config::Config& cfg, int local_rank) {
  if (cfg.strata.device == DeviceType::cpu) return Device::cpu();
  const std::string why = why_no_gpu();
  if (!cfg.strata.device) {  // "auto"
    if (!why.empty()) return Device::cpu();
  } else if (!cuda::compiled()) {
    user_fail("config", "strata.device is \"cuda\" but this Strata build has no CUDA support: "
              "rebuild with -DSTRATA_WITH_CUDA=ON on a machine with the CUDA toolkit, or set "
              "strata.device to \"cpu\" or \"auto\"");
  } else if (cuda::device_count() == 0) {
    user_fail("config", "strata.device is \"cuda\" but no GPU is usable here ({}): run on a machine "
              "with an NVIDIA GPU and its driver, or set strata.device to \"cpu\" or \"auto\"",
              cuda::describe_devices());
  } else if (!ops::cuda_op_table()) {
    user_fail("config", "strata.device is \"cuda\" ({}) but this Strata build has no CUDA "
              "kernels yet: set strata.device to \"cpu\"", cuda::describe_devices());
  }
  const int d = local_rank % cuda::device_count();
  const cuda::DeviceProperties p = cuda::device_properties(d);
  if (cfg.bf16.enabled && !has_bf16(p))
    user_fail("config", "bf16.enabled is true but {} has no bfloat16 arithmetic (it needs compute "
              "capability 8.0): set fp16.enabled=true and bf16.enabled=false (float16 with dynamic "
              "loss scaling), or bf16.enabled=\"auto\"", gpu_name(d, p));
  return Device::cuda(d);
}

void resolve_device(config::Config& cfg, int local_rank) {
  const bool was_auto = !cfg.strata.device;
  const bool precision_auto = cfg.fp16.automatic || cfg.bf16.automatic;
  // Where the job would run, to choose the precision before compute_device checks it.
  const std::string why = why_no_gpu();
  const bool gpu = cfg.strata.device == DeviceType::cuda || (was_auto && why.empty());
  std::string precision_note;
  if (precision_auto && !cfg.fp16.enabled && !cfg.bf16.enabled) {
    if (!gpu) {
      precision_note = "float32 on the CPU";
    } else {
      const int d = local_rank % std::max(1, cuda::device_count());
      const cuda::DeviceProperties p = cuda::device_properties(d);
      if (has_bf16(p)) {
        cfg.bf16.enabled = true;
        precision_note = fmt::format("bf16 ({} computes in bfloat16)", gpu_name(d, p));
      } else {
        cfg.fp16.enabled = true;
        precision_note = fmt::format("fp16 with dynamic loss scaling ({} has no bfloat16)", gpu_name(d, p));
      }
    }
  }
  cfg.fp16.automatic = cfg.bf16.automatic = false;
  const Device dev = compute_device(cfg, local_rank);  // the errors of "cuda" and of bf16
  cfg.strata.device = dev.type;
  if (was_auto)
    cfg.notes.push_back(
        dev.is_cuda()
            ? fmt::format("strata.device \"auto\": the GPU {}", gpu_name(dev.index, cuda::device_properties(dev.index)))
            : fmt::format("strata.device \"auto\": the CPU ({})", why));
  if (!precision_note.empty())
    cfg.notes.push_back(fmt::format("auto: {}.enabled: {}", cfg.fp16.enabled ? "fp16" : "bf16", precision_note));
}

void resolve_device_for_plan(config::Config& cfg) {
  // "cuda" where no GPU is usable: a plan for a GPU elsewhere (a laptop planning for Colab).
  if (cfg.strata.device == DeviceType::cuda && !why_no_gpu().empty()) {
    if ((cfg.fp16.automatic || cfg.bf16.automatic) && !cfg.fp16.enabled && !cfg.bf16.enabled) {
      cfg.bf16.enabled = true;
      cfg.notes.push_back(
          "auto: bf16.enabled: planned as bf16, for a GPU with bfloat16 (compute capability 8.0 or "
          "newer; no GPU is usable here to ask); a GPU without it (a T4) trains in fp16: "
          "--set fp16.enabled=true plans that");
    }
    cfg.fp16.automatic = cfg.bf16.automatic = false;
    return;
  }
  resolve_device(cfg);  // where it would run here, as train_gpt resolves it
}

DType activation_dtype(const config::Config& cfg) {
  if (cfg.strata.activation_dtype == config::ActivationDtype::f32) return DType::f32;
  return param_dtype(precision_of(cfg));
}

TrainerOptions trainer_options(const config::Config& cfg) {
  TrainerOptions o;
  // The optimizer of the config's type, made from its block by its own from_config.
  o.optimizer = optim::make_optimizer(cfg.optimizer);
  const auto& s = cfg.scheduler;
  switch (s.type) {
    case config::SchedulerType::none: o.schedule.type = "constant"; break;
    case config::SchedulerType::warmup_lr: o.schedule.type = "WarmupLR"; break;
    case config::SchedulerType::warmup_cosine_lr: o.schedule.type = "WarmupCosineLR"; break;
    case config::SchedulerType::warmup_decay_lr: o.schedule.type = "WarmupDecayLR"; break;
  }
  o.schedule.warmup_min_lr = s.warmup_min_lr;
  o.schedule.warmup_max_lr = s.warmup_max_lr;
  o.schedule.warmup_num_steps = s.warmup_num_steps;
  o.schedule.warmup_type = s.warmup_type == config::WarmupType::log ? "log" : "linear";
  o.schedule.total_num_steps = s.total_num_steps;
  o.schedule.warmup_min_ratio = s.warmup_min_ratio;
  o.schedule.cos_min_ratio = s.cos_min_ratio;
  o.max_grad_norm = cfg.gradient_clipping;
  o.step_in_backward = cfg.strata.optimizer_in_backward;
  o.precision = precision_of(cfg);
  o.static_loss_scale = cfg.fp16.loss_scale;
  o.dynamic_scaler.init_scale = std::ldexp(1.0, static_cast<int>(cfg.fp16.initial_scale_power));
  o.dynamic_scaler.scale_window = cfg.fp16.loss_scale_window;
  o.dynamic_scaler.delayed_shift = cfg.fp16.hysteresis;
  o.dynamic_scaler.consecutive_hysteresis = cfg.fp16.consecutive_hysteresis;
  o.dynamic_scaler.min_scale = cfg.fp16.min_loss_scale;
  return o;
}

void apply_memory_caps(const config::Config& cfg, MemoryLedger& ledger) {
  ledger.set_cap(Tier::device, cfg.strata.memory.device_limit);
  ledger.set_cap(Tier::host, cfg.strata.memory.host_limit);
  ledger.set_cap(Tier::nvme, cfg.strata.memory.nvme_limit);
}

}  // namespace strata::train
