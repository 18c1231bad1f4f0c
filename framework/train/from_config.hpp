// Builds the single-process training pieces (GPT shape, parameter dtypes, trainer options,
// memory caps) from a validated config.
#pragma once

#include "framework/config/config.hpp"
#include "framework/memory/ledger.hpp"
#include "framework/nn/gpt.hpp"
#include "framework/train/trainer.hpp"

namespace strata::train {

nn::GptConfig gpt_config(const config::Config& cfg);
Precision precision_of(const config::Config& cfg);
DType param_dtype(Precision p);
// The device the job computes on (strata.device): "auto" is the local GPU when one is usable
// (CUDA compiled in, a GPU visible, CUDA kernels built), else the CPU. "cuda" is refused with what
// to do when this build has no CUDA support, no GPU is usable here, or this build has no CUDA
// kernels: a job never falls back to the CPU silently. bf16 on a GPU without bfloat16 (compute
// capability below 8.0, a T4) is refused naming fp16.
Device compute_device(const config::Config& cfg, int local_rank = 0);
// Makes "auto" concrete before any work, each choice a config note (printed once, by rank 0):
// strata.device "auto" becomes "cuda" or "cpu"; fp16/bf16 "enabled": "auto" becomes bf16 on a
// GPU with bfloat16, fp16 (dynamic loss scaling) on an older GPU, float32 on the CPU. Throws
// compute_device's errors.
void resolve_device(config::Config& cfg, int local_rank = 0);
// resolve_device for a memory plan (strata plan, the Python package's strata.plan): the plan is of
// the job as it would run here — "auto" and "auto" precision resolved as train_gpt resolves them —
// except that "cuda" where no GPU is usable is a plan for a GPU elsewhere, not an error: "auto"
// precision is then planned as bf16 (a note says so and how to plan fp16 instead).
void resolve_device_for_plan(config::Config& cfg);
// The dtype of activations and activation gradients (strata.activation_dtype).
DType activation_dtype(const config::Config& cfg);
TrainerOptions trainer_options(const config::Config& cfg);
// Applies strata.memory.*_limit to the ledger's tier caps.
void apply_memory_caps(const config::Config& cfg, MemoryLedger& ledger);

}  // namespace strata::train
