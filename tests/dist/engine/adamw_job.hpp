// A test job's config written key by key, for tests that need no train::TrainerOptions: the batch
// (micro-batch per rank, accumulation), AdamW at lr 3e-3 with clipping at 1.0, f32 parameters and
// activations, seed 5, activation checkpointing, ZeRO `stage` with 1000-element buckets and
// overlap, stage 3 releasing a unit after each use (zero_fixture.hpp's job_config settings).
#pragma once

#include "framework/config/config.hpp"

namespace strata::test {

inline config::Config adamw_job(int micro, int accum, int stage) {
  config::Config cfg;
  cfg.strata.activation_dtype = config::ActivationDtype::f32;
  cfg.train_micro_batch_size_per_gpu = micro;
  cfg.gradient_accumulation_steps = accum;
  cfg.strata.seed = 5;
  cfg.strata.activation_checkpointing = config::Recompute::full;
  auto& z = cfg.zero_optimization;
  z.stage = stage;
  z.reduce_bucket_size = 1000;
  z.overlap_comm = true;
  z.stage3_param_persistence_threshold = 0;
  z.stage3_max_reuse_distance = 0;
  cfg.optimizer = config::Optimizer("AdamW");
  cfg.optimizer.params.set("lr", 3e-3);
  cfg.gradient_clipping = 1.0;
  return cfg;
}

}  // namespace strata::test
