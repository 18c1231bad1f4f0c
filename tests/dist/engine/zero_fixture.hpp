// Shared pieces of the multi-rank engine tests: a tiny GPT, deterministic global batches, and a
// replica built by the shared training assembly at a given ZeRO stage.
#pragma once

#include <cmath>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "framework/core/rng.hpp"
#include "framework/nn/gpt.hpp"
#include "framework/nn/linear.hpp"
#include "framework/nn/param_store.hpp"
#include "framework/optim/optimizers/sgd.hpp"
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

// The config of a test job: the trainer options as config keys (the optimizer's block from its
// own to_config), the ZeRO stage and its bucket,
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
  cfg.strata.activation_checkpointing =
      checkpointing ? config::Recompute::full : config::Recompute::none;
  auto& z = cfg.zero_optimization;
  z.stage = stage;
  z.reduce_bucket_size = bucket;
  z.overlap_comm = overlap;
  z.stage3_param_persistence_threshold = 0;
  z.stage3_max_reuse_distance = 0;
  o.optimizer->to_config(cfg.optimizer);  // the optimizer block that makes it
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

// The index of the trainer's state tensor of this checkpoint kind (and shape, when given) in
// UnitOptimizerState::tensors; -1 when its optimizer declares none.
inline int state_index(const train::Trainer& t, std::string_view kind,
                       std::optional<optim::StateShape> shape = std::nullopt) {
  const auto& state = t.optimizer().declaration().state;
  for (std::size_t i = 0; i < state.size(); ++i)
    if (state[i].kind == kind && (!shape || state[i].shape == *shape)) return static_cast<int>(i);
  return -1;
}

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
