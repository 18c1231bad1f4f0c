#include "framework/train/from_config.hpp"

#include <cmath>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/backend/ops/op_table.hpp"

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

Device compute_device(const config::Config& cfg, int local_rank) {
  if (cfg.strata.device == DeviceType::cpu) return Device::cpu();
  if (!cuda::compiled())
    user_fail("config", "strata.device is \"cuda\" but this Strata build has no CUDA support: "
              "rebuild with -DSTRATA_WITH_CUDA=ON on a machine with the CUDA toolkit, or set "
              "strata.device to \"cpu\"");
  const int n = cuda::device_count();
  if (n == 0)
    user_fail("config", "strata.device is \"cuda\" but no GPU is usable here ({}): run on a machine "
              "with an NVIDIA GPU and its driver, or set strata.device to \"cpu\"",
              cuda::describe_devices());
  if (!ops::cuda_op_table())
    user_fail("config", "strata.device is \"cuda\" ({}) but this Strata build has no CUDA "
              "kernels yet: set strata.device to \"cpu\"", cuda::describe_devices());
  return Device::cuda(local_rank % n);
}

DType activation_dtype(const config::Config& cfg) {
  if (cfg.strata.activation_dtype == config::ActivationDtype::f32) return DType::f32;
  return param_dtype(precision_of(cfg));
}

namespace {
// The fields every Adam-style optimizer reads from the config the same way.
template <typename Hyper>
void set_adam_family(Hyper& h, const config::Optimizer& opt) {
  h.lr = opt.lr;
  h.beta1 = opt.betas[0];
  h.beta2 = opt.betas[1];
  h.eps = opt.eps;
  h.weight_decay = opt.weight_decay;
}
}  // namespace

TrainerOptions trainer_options(const config::Config& cfg) {
  TrainerOptions o;
  const auto& opt = cfg.optimizer;
  switch (opt.type) {
    case config::OptimizerType::sgd:
      o.optimizer = OptimizerKind::sgd;
      o.sgd.lr = opt.lr;
      o.sgd.momentum = opt.momentum;
      o.sgd.nesterov = opt.nesterov;
      o.sgd.weight_decay = opt.weight_decay;
      break;
    case config::OptimizerType::adafactor: {
      o.optimizer = OptimizerKind::adafactor;
      optim::AdafactorHyper& h = o.adafactor;
      h.lr = opt.lr;
      h.eps1 = opt.adafactor_eps[0];
      h.eps2 = opt.adafactor_eps[1];
      h.clip_threshold = opt.clip_threshold;
      h.decay_rate = opt.decay_rate;
      h.beta1 = opt.beta1 ? *opt.beta1 : -1.0;
      h.weight_decay = opt.weight_decay;
      h.scale_parameter = opt.scale_parameter;
      h.relative_step = opt.relative_step;
      h.warmup_init = opt.warmup_init;
      break;
    }
    case config::OptimizerType::onebit_adam: {
      o.optimizer = OptimizerKind::onebit_adam;
      optim::OneBitAdamHyper& h = o.onebit;
      set_adam_family(h, opt);
      h.freeze_step = opt.freeze_step;
      break;
    }
    case config::OptimizerType::onebit_lamb: {
      o.optimizer = OptimizerKind::onebit_lamb;
      optim::OneBitLambHyper& h = o.onebit_lamb;
      set_adam_family(h, opt);
      h.max_coeff = opt.max_coeff;
      h.min_coeff = opt.min_coeff;
      h.freeze_step = opt.freeze_step;
      h.coeff_beta = opt.coeff_beta;
      h.factor_max = opt.factor_max;
      h.factor_min = opt.factor_min;
      h.factor_threshold = opt.factor_threshold;
      break;
    }
    case config::OptimizerType::lamb: {
      o.optimizer = OptimizerKind::lamb;
      optim::LambHyper& h = o.lamb;
      set_adam_family(h, opt);
      h.bias_correction = opt.bias_correction;
      h.max_coeff = opt.max_coeff;
      h.min_coeff = opt.min_coeff;
      h.eps_inside_sqrt = opt.eps_inside_sqrt;
      break;
    }
    case config::OptimizerType::adam:
    case config::OptimizerType::adamw:
    case config::OptimizerType::adamw8bit:
      // Adam with adam_w_mode=false would need coupled decay; the config layer only lets AdamW
      // semantics through (DeepSpeed's default adam_w_mode=true).
      o.optimizer = opt.type == config::OptimizerType::adamw8bit ? OptimizerKind::adamw8bit
                                                                 : OptimizerKind::adamw;
      set_adam_family(o.adamw, opt);
      o.adamw.bias_correction = opt.bias_correction;
      break;
  }
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
