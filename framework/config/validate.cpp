#include "framework/config/validate.hpp"

#include <cmath>
#include <initializer_list>

#include <fmt/format.h>

#include "framework/core/error.hpp"

namespace strata::config {

namespace {

bool ok(const Problems& p, std::initializer_list<std::string_view> keys) {
  for (auto k : keys)
    if (p.about(k)) return false;
  return true;
}

template <typename Offload>
void check_offload_path(const Offload& o, const std::string& section, Problems& p) {
  if (!ok(p, {section})) return;
  if (o.device == OffloadDevice::nvme && o.nvme_path.empty())
    p.mistake(section + ".nvme_path",
              "{}.device is \"nvme\" but {}.nvme_path is not set: name a directory on the NVMe "
              "drive",
              section, section);
  if (o.device != OffloadDevice::nvme && !o.nvme_path.empty())
    p.mistake(section + ".nvme_path",
              "{}.nvme_path is set but {}.device is \"{}\": set device to \"nvme\" or remove "
              "nvme_path",
              section, section, to_string(o.device));
}

std::int64_t mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    user_fail("config", "batch arithmetic overflows: {} × {} does not fit in 64 bits", a, b);
  return r;
}

// strata.optimizer_in_backward updates each unit while backward still runs: nothing that needs
// every gradient before the first update, or a step that can be redone, goes with it.
void check_optimizer_in_backward(const Config& c, Problems& p) {
  const std::string key = "strata.optimizer_in_backward";
  if (!c.optimizer.spec().unit_steps && ok(p, {key, "optimizer.type"})) {
    std::vector<std::string_view> ok_types;
    for (const optim::OptimizerSpec* s : optim::optimizer_specs())
      if (s->unit_steps) ok_types.push_back(s->name);
    const std::string_view last = ok_types.back();
    ok_types.pop_back();
    p.mistake(key,
              "strata.optimizer_in_backward with optimizer.type {} is not implemented (its "
              "update needs statistics over several units or ranks); use {} or {}, or set "
              "strata.optimizer_in_backward to false",
              c.optimizer.type, fmt::join(ok_types, ", "), last);
  }
  if (c.gradient_clipping > 0 && ok(p, {key, "gradient_clipping"}))
    p.mistake(key, "strata.optimizer_in_backward with gradient_clipping {}: clipping needs the "
              "norm of every gradient before the first update; set gradient_clipping to 0 or "
              "strata.optimizer_in_backward to false", c.gradient_clipping);
  if (c.fp16.enabled && ok(p, {key, "fp16.enabled"}))
    p.mistake(key, "strata.optimizer_in_backward with fp16.enabled: the loss scaler checks every "
              "gradient for overflow before the first update; use bf16, or set "
              "strata.optimizer_in_backward to false");
  if (c.zero_optimization.stage == 0 && ok(p, {key, "zero_optimization.stage"}))
    p.mistake(key, "strata.optimizer_in_backward with zero_optimization.stage 0: the update of a "
              "unit starts where its gradient reduction completes, which stage 0 does in "
              "buckets; set zero_optimization.stage to 1, 2 or 3 (on one rank they train the same)");
  if (c.strata.pipeline_parallel_size > 1 && ok(p, {key, "strata.pipeline_parallel_size"}))
    p.mistake(key, "strata.optimizer_in_backward with strata.pipeline_parallel_size {} is not "
              "implemented (the stages sum tied gradients after backward); set one of them back",
              c.strata.pipeline_parallel_size);
  if (c.strata.memory.on_oom == OnOom::recover && ok(p, {key, "strata.memory.on_oom"}))
    p.mistake(key, "strata.optimizer_in_backward with strata.memory.on_oom \"recover\": units "
              "updated during a backward that then runs out of memory cannot be undone, so the "
              "step cannot be redone; set strata.memory.on_oom to \"fail\"");
}

}  // namespace

void check_rules(const Config& c, Problems& p) {
  if (c.fp16.enabled && c.bf16.enabled && ok(p, {"fp16.enabled", "bf16.enabled"}))
    p.mistake("fp16.enabled", "fp16.enabled and bf16.enabled are both true; enable at most one");
  if (c.fp16.enabled && c.fp16.dynamic() &&
      c.fp16.min_loss_scale > std::ldexp(1.0, static_cast<int>(c.fp16.initial_scale_power)) &&
      ok(p, {"fp16"}))
    p.mistake("fp16.min_loss_scale",
              "fp16.min_loss_scale {} is above the initial loss scale 2^{} = {}; lower "
              "min_loss_scale or raise initial_scale_power",
              c.fp16.min_loss_scale, c.fp16.initial_scale_power,
              std::ldexp(1.0, static_cast<int>(c.fp16.initial_scale_power)));

  const Scheduler& s = c.scheduler;
  // An optimizer that sets its own step size (Adafactor's relative_step) takes no schedule.
  if (const auto own = c.optimizer.spec().own_step_size; own && s.type != SchedulerType::none)
    if (const std::string why = own(c.optimizer.params); !why.empty())
      p.mistake("scheduler.type", "scheduler.type is {} but {}", to_string(s.type), why);
  if ((s.type == SchedulerType::warmup_decay_lr || s.type == SchedulerType::warmup_cosine_lr) &&
      ok(p, {"scheduler"})) {
    if (s.total_num_steps == 0)
      p.mistake("scheduler.params.total_num_steps",
                "scheduler.type {} needs scheduler.params.total_num_steps (the step at which the "
                "decay ends)",
                to_string(s.type));
    else if (s.total_num_steps < s.warmup_num_steps)
      p.mistake("scheduler.params.total_num_steps",
                "scheduler.params.total_num_steps {} is less than "
                "scheduler.params.warmup_num_steps {}; the decay would end before warmup does",
                s.total_num_steps, s.warmup_num_steps);
  }

  const Zero& z = c.zero_optimization;
  if (z.offload_param.device != OffloadDevice::none && z.stage != 3 &&
      ok(p, {"zero_optimization.stage", "zero_optimization.offload_param.device"}))
    p.mistake("zero_optimization.offload_param.device",
              "zero_optimization.offload_param.device is \"{}\" but zero_optimization.stage is "
              "{}; parameter offload needs stage 3",
              to_string(z.offload_param.device), z.stage);
  if (z.offload_optimizer.device != OffloadDevice::none && z.stage == 0 &&
      ok(p, {"zero_optimization.stage", "zero_optimization.offload_optimizer.device"}))
    p.mistake("zero_optimization.offload_optimizer.device",
              "zero_optimization.offload_optimizer.device is \"{}\" but zero_optimization.stage "
              "is 0; optimizer offload needs stage 1, 2 or 3",
              to_string(z.offload_optimizer.device));
  check_offload_path(z.offload_optimizer, "zero_optimization.offload_optimizer", p);
  check_offload_path(z.offload_param, "zero_optimization.offload_param", p);
  if (c.strata.optimizer_in_backward) check_optimizer_in_backward(c, p);

  if (c.aio.block_size % 4096 != 0 && ok(p, {"aio.block_size"}))
    p.mistake("aio.block_size",
              "aio.block_size is {}; allowed: a multiple of 4096 (O_DIRECT alignment)",
              c.aio.block_size);

  const StrataSection& st = c.strata;
  const Model& m = st.model;
  if (m.n_embd % m.n_head != 0 && ok(p, {"strata.model.n_embd", "strata.model.n_head"}))
    p.mistake("strata.model.n_embd",
              "strata.model.n_embd {} is not divisible by strata.model.n_head {}", m.n_embd,
              m.n_head);
  if (m.n_head % st.tensor_parallel_size != 0 &&
      ok(p, {"strata.model.n_head", "strata.tensor_parallel_size"}))
    p.mistake("strata.tensor_parallel_size",
              "strata.model.n_head {} is not divisible by strata.tensor_parallel_size {}; tensor "
              "parallelism splits the heads",
              m.n_head, st.tensor_parallel_size);
  if (m.vocab_size % st.tensor_parallel_size != 0 &&
      ok(p, {"strata.model.vocab_size", "strata.tensor_parallel_size"}))
    p.mistake("strata.tensor_parallel_size",
              "strata.model.vocab_size {} is not divisible by strata.tensor_parallel_size {}; tensor "
              "parallelism splits the vocabulary (pad vocab_size to {})",
              m.vocab_size, st.tensor_parallel_size,
              (m.vocab_size + st.tensor_parallel_size - 1) / st.tensor_parallel_size *
                  st.tensor_parallel_size);
  if (st.tensor_parallel_size > 1 && st.sample.tokens > 0 &&
      ok(p, {"strata.sample.tokens", "strata.tensor_parallel_size"}))
    p.mistake("strata.sample.tokens",
              "strata.sample.tokens {} with strata.tensor_parallel_size {}: sampling from a "
              "tensor-parallel model is not implemented; set strata.sample.tokens to 0",
              st.sample.tokens, st.tensor_parallel_size);
  if (st.sequence_parallel) {
    if (st.tensor_parallel_size == 1 &&
        ok(p, {"strata.sequence_parallel", "strata.tensor_parallel_size"}))
      p.mistake("strata.sequence_parallel",
                "strata.sequence_parallel is true but strata.tensor_parallel_size is 1: sequence "
                "parallelism splits the tokens over the tensor-parallel ranks; set "
                "strata.sequence_parallel to false, or tensor_parallel_size to 2 or more");
    else if (m.block_size % st.tensor_parallel_size != 0 &&
             ok(p, {"strata.sequence_parallel", "strata.tensor_parallel_size",
                    "strata.model.block_size"}))
      p.mistake("strata.sequence_parallel",
                "strata.model.block_size {} is not divisible by strata.tensor_parallel_size {}: "
                "with strata.sequence_parallel each tensor-parallel rank holds 1/{} of a "
                "sequence; make block_size a multiple of it (e.g. {}), or set "
                "strata.sequence_parallel to false",
                m.block_size, st.tensor_parallel_size, st.tensor_parallel_size,
                (m.block_size + st.tensor_parallel_size - 1) / st.tensor_parallel_size *
                    st.tensor_parallel_size);
  }
  if (m.n_layer < st.pipeline_parallel_size &&
      ok(p, {"strata.model.n_layer", "strata.pipeline_parallel_size"}))
    p.mistake("strata.pipeline_parallel_size",
              "strata.pipeline_parallel_size {} is more than strata.model.n_layer {}; every "
              "pipeline stage needs at least one block",
              st.pipeline_parallel_size, m.n_layer);
  if (st.virtual_pipeline_stages > 1) {
    const std::int64_t pp = st.pipeline_parallel_size, v = st.virtual_pipeline_stages;
    if (pp == 1 && ok(p, {"strata.virtual_pipeline_stages", "strata.pipeline_parallel_size"}))
      p.mistake("strata.virtual_pipeline_stages",
                "strata.virtual_pipeline_stages {} needs strata.pipeline_parallel_size 2 or more "
                "(it is 1): set strata.virtual_pipeline_stages to 1, or pipeline_parallel_size > 1",
                v);
    else if (m.n_layer < pp * v &&
             ok(p, {"strata.model.n_layer", "strata.pipeline_parallel_size",
                    "strata.virtual_pipeline_stages"}))
      p.mistake("strata.virtual_pipeline_stages",
                "strata.pipeline_parallel_size {} × strata.virtual_pipeline_stages {} = {} model "
                "chunks is more than strata.model.n_layer {}; every chunk needs at least one block",
                pp, v, pp * v, m.n_layer);
    else if (c.gradient_accumulation_steps > 0 && c.gradient_accumulation_steps % pp != 0 &&
             ok(p, {"gradient_accumulation_steps", "strata.pipeline_parallel_size",
                    "strata.virtual_pipeline_stages"}))
      p.mistake("strata.virtual_pipeline_stages",
                "gradient_accumulation_steps {} is not a multiple of strata.pipeline_parallel_size "
                "{}: the interleaved schedule (strata.virtual_pipeline_stages {}) runs micro-batches "
                "in groups of pipeline_parallel_size; make it a multiple, or set "
                "virtual_pipeline_stages to 1", c.gradient_accumulation_steps, pp, v);
  }
  if (st.sample.tokens > 0 && st.pipeline_parallel_size > 1 &&
      ok(p, {"strata.sample.tokens", "strata.pipeline_parallel_size"}))
    p.mistake("strata.sample.tokens",
              "strata.sample.tokens {} with strata.pipeline_parallel_size {}: sampling runs the "
              "whole model on each rank, but a rank holds only its pipeline stage; set "
              "strata.sample.tokens to 0",
              st.sample.tokens, st.pipeline_parallel_size);
  if (st.sample.top_k > m.vocab_size && ok(p, {"strata.sample.top_k", "strata.model.vocab_size"}))
    p.mistake("strata.sample.top_k",
              "strata.sample.top_k {} is more than strata.model.vocab_size {}", st.sample.top_k,
              m.vocab_size);

  const auto positive = [&](const std::optional<std::uint64_t>& v, std::string_view key) {
    if (v && *v == 0 && ok(p, {key}))
      p.mistake(std::string(key), "{} is 0; allowed: a positive size, or null for no cap", key);
  };
  positive(st.memory.device_limit, "strata.memory.device_limit");
  positive(st.memory.host_limit, "strata.memory.host_limit");
  positive(st.memory.nvme_limit, "strata.memory.nvme_limit");

  const CheckpointPolicy& ck = st.checkpoint;
  if (ck.dir.empty() && ok(p, {"strata.checkpoint"})) {
    if (ck.interval > 0)
      p.mistake("strata.checkpoint.interval",
                "strata.checkpoint.interval is {} but strata.checkpoint.dir is not set",
                ck.interval);
    if (ck.save_total_limit > 0)
      p.mistake("strata.checkpoint.save_total_limit",
                "strata.checkpoint.save_total_limit is {} but strata.checkpoint.dir is not set",
                ck.save_total_limit);
    if (ck.keep_every > 0)
      p.mistake("strata.checkpoint.keep_every",
                "strata.checkpoint.keep_every is {} but strata.checkpoint.dir is not set",
                ck.keep_every);
  }
}

void check_batch_given(const Config& c, Problems& p, bool auto_given) {
  if (!ok(p, {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"}))
    return;
  const std::int64_t t = c.train_batch_size, m = c.train_micro_batch_size_per_gpu,
                     g = c.gradient_accumulation_steps;
  if (t == 0 && m == 0) {
    // With a device cap, the program's memory planner chooses it before resolve_batch
    // (parallel/plan/auto_micro_batch.hpp).
    if (c.micro_batch_auto && c.strata.memory.device_limit) return;
    if (auto_given)
      p.add(ProblemKind::unresolved_auto, "train_micro_batch_size_per_gpu",
            "train_micro_batch_size_per_gpu is \"auto\" and nothing determines it: add --set "
            "train_micro_batch_size_per_gpu=8 (Hugging Face fills it from "
            "--per_device_train_batch_size, default 8), or give train_batch_size (with "
            "gradient_accumulation_steps), or give a device memory cap (--device-memory or "
            "strata.memory.device_limit) for the memory planner to choose the largest "
            "micro-batch that fits");
    else
      p.mistake("train_micro_batch_size_per_gpu",
                "set train_batch_size or train_micro_batch_size_per_gpu (or both); "
                "train_batch_size = train_micro_batch_size_per_gpu × gradient_accumulation_steps "
                "× data-parallel size");
    return;
  }
  try {
    if (t && m && g && t % mul(m, g) != 0)
      p.mistake("train_batch_size",
                "train_batch_size {} is not a multiple of train_micro_batch_size_per_gpu {} × "
                "gradient_accumulation_steps {} = {}, so no data-parallel size makes them agree",
                t, m, g, mul(m, g));
  } catch (const UserError& e) {
    p.mistake("train_batch_size", "{}", error_lines(e).front());
  }
  if (t && m && !g && t % m != 0)
    p.mistake("train_batch_size",
              "train_batch_size {} is not a multiple of train_micro_batch_size_per_gpu {}", t, m);
  if (t && g && !m && t % g != 0)
    p.mistake("train_batch_size",
              "train_batch_size {} is not a multiple of gradient_accumulation_steps {}", t, g);
}

std::string unused_at_stage(std::string_view key, int stage) {
  if (key == "zero_optimization.reduce_bucket_size" && stage >= 1)
    return "from stage 1 on Strata reduce-scatters each unit's gradients in one call; the "
           "bucket size applies to stage 0's all-reduce only";
  if (key == "zero_optimization.reduce_scatter" && stage == 0)
    return "stage 0 all-reduces gradients (DeepSpeed ignores it at stage 0 too)";
  if ((key == "zero_optimization.allgather_partitions" ||
       key == "zero_optimization.allgather_bucket_size") && (stage == 0 || stage == 3))
    return "only stages 1 and 2 gather updated parameters after the step (DeepSpeed ignores it "
           "at the other stages too)";
  if (key.starts_with("zero_optimization.stage3_") && stage < 3)
    return "it applies only at stage 3 (DeepSpeed ignores it below stage 3 too)";
  return {};
}

void resolve_batch(Config& c, std::int64_t dp) {
  if (dp < 1) user_fail("config", "the data-parallel size is {}; it must be at least 1", dp);
  if (c.train_batch_size == 0 && c.train_micro_batch_size_per_gpu == 0 && c.micro_batch_auto &&
      c.strata.memory.device_limit)
    user_fail("config", "train_micro_batch_size_per_gpu is \"auto\" but this program has no "
              "memory planner to choose it (train_gpt, and programs that give parallel::Training "
              "a model factory, have one): set it, e.g. --set train_micro_batch_size_per_gpu=8");
  Problems given;
  check_batch_given(c, given, c.micro_batch_auto);
  given.raise_if_any("");
  std::int64_t& t = c.train_batch_size;
  std::int64_t& m = c.train_micro_batch_size_per_gpu;
  std::int64_t& g = c.gradient_accumulation_steps;
  if (t && m && g) {
    if (t != mul(mul(m, g), dp))
      user_fail("config",
                "batch sizes disagree: train_batch_size {} != train_micro_batch_size_per_gpu {} × "
                "gradient_accumulation_steps {} × data-parallel size {} = {}",
                t, m, g, dp, mul(mul(m, g), dp));
  } else if (t && m) {
    if (t % mul(m, dp) != 0)
      user_fail("config",
                "train_batch_size {} is not divisible by train_micro_batch_size_per_gpu {} × "
                "data-parallel size {} = {}, so gradient_accumulation_steps cannot be derived",
                t, m, dp, mul(m, dp));
    g = t / mul(m, dp);
  } else if (t && g) {
    if (t % mul(g, dp) != 0)
      user_fail("config",
                "train_batch_size {} is not divisible by gradient_accumulation_steps {} × "
                "data-parallel size {} = {}, so train_micro_batch_size_per_gpu cannot be derived",
                t, g, dp, mul(g, dp));
    m = t / mul(g, dp);
  } else if (m && g) {
    t = mul(mul(m, g), dp);
  } else if (t) {
    if (t % dp != 0)
      user_fail("config",
                "train_batch_size {} is not divisible by the data-parallel size {}, so "
                "train_micro_batch_size_per_gpu cannot be derived (gradient_accumulation_steps 1)",
                t, dp);
    g = 1;
    m = t / dp;
  } else {
    g = 1;
    t = mul(m, dp);
  }
  c.data_parallel_size = dp;
}

std::int64_t data_parallel_size(const Config& c, std::int64_t world_size) {
  if (world_size < 1)
    user_fail("config", "the world size is {}; it must be at least 1", world_size);
  const std::int64_t model_parallel =
      c.strata.tensor_parallel_size * c.strata.pipeline_parallel_size;
  if (world_size % model_parallel != 0)
    user_fail("config",
              "world size {} is not divisible by strata.tensor_parallel_size {} × "
              "strata.pipeline_parallel_size {} = {}",
              world_size, c.strata.tensor_parallel_size, c.strata.pipeline_parallel_size,
              model_parallel);
  return world_size / model_parallel;
}

}  // namespace strata::config
