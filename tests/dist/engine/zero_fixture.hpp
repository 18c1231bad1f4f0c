// Shared pieces of the multi-rank engine tests: a tiny GPT, deterministic global batches, and a
// replica built by the shared training assembly at a given ZeRO stage.
#pragma once

#include <cmath>
#include <memory>
#include <vector>

#include "framework/core/rng.hpp"
#include "framework/nn/gpt.hpp"
#include "framework/nn/linear.hpp"
#include "framework/nn/param_store.hpp"
#include "framework/train/trainer.hpp"
#include "parallel/engine/training.hpp"

namespace strata::test {

inline nn::GptConfig tiny_gpt() {
  nn::GptConfig c;
  c.vocab_size = 64;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  return c;
}

// Global row `key`: a deterministic token window with some structure.
inline void global_row(std::int64_t key, int T, int V, std::int32_t* in, std::int32_t* tgt) {
  Philox r(static_cast<std::uint64_t>(key) * 7919 + 1);
  std::int32_t t = static_cast<std::int32_t>(r.next_below(V));
  for (int i = 0; i <= T; ++i) {
    if (i < T) in[i] = t;
    if (i > 0) tgt[i - 1] = t;
    t = r.next_uniform() < 0.6f ? (t + 5) % V : static_cast<std::int32_t>(r.next_below(V));
  }
}

// Feeds micro-batches as the sampler would: the k-th micro-batch over all dp ranks covers global
// rows k*N*b .. k*N*b + N*b - 1 and rank r takes rows r*b .. r*b + b - 1 of it.
struct BatchFeed {
  int N, rank, b, T, V;
  std::int64_t calls = 0;
  void operator()(std::int32_t* in, std::int32_t* tgt) {
    for (int i = 0; i < b; ++i)
      global_row(calls * N * b + rank * b + i, T, V, in + i * T, tgt + i * T);
    ++calls;
  }
  void operator()(nn::Batch& batch) {
    (*this)(batch["tokens"].data<std::int32_t>(), batch["targets"].data<std::int32_t>());
  }
};

// The Adam-style hyperparameters every such optimizer writes to the config the same way (the
// inverse of train::trainer_options).
template <typename Hyper>
void adam_family_to_config(const Hyper& h, config::Optimizer& opt) {
  opt.lr = h.lr;
  opt.betas = {h.beta1, h.beta2};
  opt.eps = h.eps;
  opt.weight_decay = h.weight_decay;
}

// The config of a test job: the trainer options as config keys, the ZeRO stage and its bucket,
// the batch, the parameter dtype (bf16 / f16 turn on that mixed precision; activations stay f32
// unless act16, as these tests measure 16-bit parameters), seed 5. Stage-3 options as the C++
// ZeroOptions defaults (release after every use, nothing persistent).
inline config::Config job_config(const train::TrainerOptions& o, int micro, int accum, int stage,
                                 DType dt = DType::f32, std::int64_t bucket = 1000,
                                 bool overlap = true, bool checkpointing = true,
                                 bool act16 = false) {
  config::Config cfg;
  cfg.strata.activation_dtype = act16 ? config::ActivationDtype::automatic : config::ActivationDtype::f32;
  cfg.train_micro_batch_size_per_gpu = micro;
  cfg.gradient_accumulation_steps = accum;
  cfg.strata.seed = 5;
  cfg.strata.activation_checkpointing = checkpointing;
  auto& z = cfg.zero_optimization;
  z.stage = stage;
  z.reduce_bucket_size = bucket;
  z.overlap_comm = overlap;
  z.stage3_param_persistence_threshold = 0;
  z.stage3_max_reuse_distance = 0;
  auto& opt = cfg.optimizer;
  switch (o.optimizer) {
    case train::OptimizerKind::sgd:
      opt.type = config::OptimizerType::sgd;
      opt.lr = o.sgd.lr;
      opt.momentum = o.sgd.momentum;
      opt.nesterov = o.sgd.nesterov;
      opt.weight_decay = o.sgd.weight_decay;
      break;
    case train::OptimizerKind::adafactor: {
      const optim::AdafactorHyper& h = o.adafactor;
      opt.type = config::OptimizerType::adafactor;
      opt.lr = h.lr;
      opt.adafactor_eps = {h.eps1, h.eps2};
      opt.clip_threshold = h.clip_threshold;
      opt.decay_rate = h.decay_rate;
      opt.beta1 = h.beta1 >= 0 ? std::optional<double>(h.beta1) : std::nullopt;
      opt.weight_decay = h.weight_decay;
      opt.scale_parameter = h.scale_parameter;
      opt.relative_step = h.relative_step;
      opt.warmup_init = h.warmup_init;
      break;
    }
    case train::OptimizerKind::lamb: {
      const optim::LambHyper& h = o.lamb;
      opt.type = config::OptimizerType::lamb;
      adam_family_to_config(h, opt);
      opt.bias_correction = h.bias_correction;
      opt.max_coeff = h.max_coeff;
      opt.min_coeff = h.min_coeff;
      opt.eps_inside_sqrt = h.eps_inside_sqrt;
      break;
    }
    case train::OptimizerKind::onebit_adam: {
      const optim::OneBitAdamHyper& h = o.onebit;
      opt.type = config::OptimizerType::onebit_adam;
      adam_family_to_config(h, opt);
      opt.bias_correction = false;
      opt.freeze_step = h.freeze_step;
      break;
    }
    case train::OptimizerKind::onebit_lamb: {
      const optim::OneBitLambHyper& h = o.onebit_lamb;
      opt.type = config::OptimizerType::onebit_lamb;
      adam_family_to_config(h, opt);
      opt.bias_correction = false;
      opt.max_coeff = h.max_coeff;
      opt.min_coeff = h.min_coeff;
      opt.freeze_step = h.freeze_step;
      opt.coeff_beta = h.coeff_beta;
      opt.factor_max = h.factor_max;
      opt.factor_min = h.factor_min;
      opt.factor_threshold = h.factor_threshold;
      break;
    }
    case train::OptimizerKind::adamw:
    case train::OptimizerKind::adamw8bit:
      opt.type = o.optimizer == train::OptimizerKind::adamw8bit ? config::OptimizerType::adamw8bit
                                                                : config::OptimizerType::adamw;
      adam_family_to_config(o.adamw, opt);
      opt.bias_correction = o.adamw.bias_correction;
      break;
  }
  cfg.gradient_clipping = o.max_grad_norm;
  cfg.strata.optimizer_in_backward = o.step_in_backward;
  cfg.bf16.enabled = dt == DType::bf16;
  cfg.fp16.enabled = dt == DType::f16;
  cfg.fp16.loss_scale = o.static_loss_scale;
  cfg.fp16.initial_scale_power = static_cast<std::int64_t>(std::log2(o.dynamic_scaler.init_scale));
  cfg.fp16.loss_scale_window = o.dynamic_scaler.scale_window;
  cfg.fp16.hysteresis = o.dynamic_scaler.delayed_shift;
  cfg.fp16.consecutive_hysteresis = o.dynamic_scaler.consecutive_hysteresis;
  cfg.fp16.min_loss_scale = o.dynamic_scaler.min_scale;
  return cfg;
}

// A data-parallel replica of the tiny GPT built by the shared assembly (parallel::Training).
struct Replica {
  nn::Gpt gpt;
  std::unique_ptr<parallel::Training> training;
  nn::ParamStore& store;
  train::Trainer& trainer;
  parallel::DataParallelEngine& engine;
  Replica(const nn::GptConfig& c, const config::Config& cfg, const parallel::Group& dp,
          parallel::TrainingExtras extras = {})
      : gpt(c, parallel::tensor_shard(cfg, dp)),  // this rank's tensor-parallel part
        training(std::make_unique<parallel::Training>(cfg, dp, gpt, std::move(extras))),
        store(training->store()),
        trainer(training->trainer()),
        engine(training->engine()) {}
  Replica(const nn::GptConfig& c, const train::TrainerOptions& o, const parallel::Group& dp,
          int micro, int accum, int stage, DType dt = DType::f32, std::int64_t bucket = 1000,
          bool overlap = true, bool checkpointing = true, TensorOptions mem = {})
      : Replica(c, job_config(o, micro, accum, stage, dt, bucket, overlap, checkpointing), dp,
                parallel::TrainingExtras::on(mem.ledger)) {}
  // The full fp32 master weights of every unit, gathered over dp (padding stripped).
  std::vector<float> master_weights() {
    const auto& dp = engine.dp();
    const int n = store.options().shard_count;
    std::vector<float> out;
    for (std::size_t u = 0; u < store.num_units(); ++u) {
      const auto& l = store.layout(u);
      std::vector<float> mine = trainer.master_shard(u).to_vector();
      std::vector<float> full(static_cast<std::size_t>(l.padded));
      if (n == 1) full = mine;
      else dp.all_gather(parallel::span(mine.data(), mine.size()), parallel::span(full.data(), full.size())).wait();
      out.insert(out.end(), full.begin(), full.begin() + l.numel);
    }
    return out;
  }
  // This rank's owned parameter slices (16-bit or f32 values, widened).
  std::vector<float> value_shards() {
    std::vector<float> out;
    for (std::size_t u = 0; u < store.num_units(); ++u) {
      const nn::ValueShardScope v(store, u, false);
      auto x = v.get().to_vector();
      out.insert(out.end(), x.begin(), x.end());
    }
    return out;
  }
};

// A Linear(3 → 2) with bias: one unit of 8 elements (padded to a multiple of the dp size), for
// tests of the ZeRO hooks' reductions on their own.
struct OneLinear : nn::Module {
  nn::Linear fc{"fc", 3, 2, true, 0.02f};
  OneLinear() : Module("") { add_child(fc); }
};

inline double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

inline double rel_max(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::abs(static_cast<double>(b[i])));
  }
  return num / den;
}

}  // namespace strata::test
