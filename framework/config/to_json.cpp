// to_json: the resolved config, every key with its value; and the enums' config names.
#include "framework/config/config.hpp"

namespace strata::config {

std::string_view to_string(SchedulerType t) {
  switch (t) {
    case SchedulerType::none:
      return "none";
    case SchedulerType::warmup_lr:
      return "WarmupLR";
    case SchedulerType::warmup_cosine_lr:
      return "WarmupCosineLR";
    case SchedulerType::warmup_decay_lr:
      return "WarmupDecayLR";
  }
  return "?";
}

std::string_view to_string(WarmupType t) {
  return t == WarmupType::log ? "log" : "linear";
}

std::string_view to_string(OffloadDevice d) {
  switch (d) {
    case OffloadDevice::none:
      return "none";
    case OffloadDevice::cpu:
      return "cpu";
    case OffloadDevice::nvme:
      return "nvme";
  }
  return "?";
}

std::string_view to_string(Recompute r) {
  return r == Recompute::selective ? "selective" : r == Recompute::full ? "full" : "none";
}

std::string_view to_string(OnOom o) {
  return o == OnOom::recover ? "recover" : "fail";
}

namespace {

// false and true for none and full (what configs wrote before "selective"), else the name.
json recompute_json(Recompute r) {
  return r == Recompute::selective ? json("selective") : json(r == Recompute::full);
}

json str(std::string_view s) {
  return std::string(s);
}
json optional_str(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}
json optional_size(const std::optional<std::uint64_t>& v) {
  return v ? json(*v) : json(nullptr);
}

json param_json(const optim::HValue& v) {
  switch (v.index()) {
    case 0:
      return std::get<double>(v);
    case 1:
      return std::get<bool>(v);
    case 2:
      return std::get<std::int64_t>(v);
    case 3: {
      const auto& p = std::get<optim::HPair>(v);
      return {p[0], p[1]};
    }
    default: {
      const auto& o = std::get<std::optional<double>>(v);
      return o ? json(*o) : json(nullptr);
    }
  }
}

// Every parameter of the type the spec prints with these values (Adafactor's lr only without
// relative_step).
json optimizer_json(const Optimizer& o) {
  const optim::OptimizerSpec& spec = o.spec();
  json p = json::object();
  for (const auto& [name, value] : o.params.items())
    if (!spec.printed || spec.printed(name, o.params)) p[name] = param_json(value);
  return {{"type", o.type}, {"params", p}};
}

json scheduler_json(const Scheduler& s) {
  json p = json::object();
  switch (s.type) {
    case SchedulerType::none:
      return {{"type", nullptr}, {"params", p}};
    case SchedulerType::warmup_decay_lr:
      p["total_num_steps"] = s.total_num_steps;
      [[fallthrough]];
    case SchedulerType::warmup_lr:
      p["warmup_min_lr"] = s.warmup_min_lr;
      p["warmup_max_lr"] = s.warmup_max_lr;
      p["warmup_num_steps"] = s.warmup_num_steps;
      p["warmup_type"] = str(to_string(s.warmup_type));
      break;
    case SchedulerType::warmup_cosine_lr:
      p["total_num_steps"] = s.total_num_steps;
      p["warmup_min_ratio"] = s.warmup_min_ratio;
      p["warmup_num_steps"] = s.warmup_num_steps;
      p["cos_min_ratio"] = s.cos_min_ratio;
      p["warmup_type"] = str(to_string(s.warmup_type));
      break;
  }
  return {{"type", str(to_string(s.type))}, {"params", p}};
}

template <typename Offload>
json offload_common(const Offload& o) {
  return {{"device", str(to_string(o.device))},
          {"nvme_path", optional_str(o.nvme_path)},
          {"pin_memory", o.pin_memory},
          {"buffer_count", o.buffer_count}};
}

json zero_json(const Zero& z) {
  json param = offload_common(z.offload_param);
  param["buffer_size"] = z.offload_param.buffer_size;
  param["max_in_cpu"] = z.offload_param.max_in_cpu;
  return {{"stage", z.stage},
          {"overlap_comm", z.overlap_comm},
          {"reduce_scatter", z.reduce_scatter},
          {"reduce_bucket_size", z.reduce_bucket_size},
          {"allgather_partitions", z.allgather_partitions},
          {"stage3_prefetch_bucket_size", z.stage3_prefetch_bucket_size},
          {"stage3_max_live_parameters", z.stage3_max_live_parameters},
          {"stage3_max_reuse_distance", z.stage3_max_reuse_distance},
          {"allgather_bucket_size", z.allgather_bucket_size},
          {"stage3_param_persistence_threshold", z.stage3_param_persistence_threshold},
          {"offload_optimizer", offload_common(z.offload_optimizer)},
          {"offload_param", param}};
}

json strata_json(const StrataSection& s) {
  const CheckpointPolicy& ck = s.checkpoint;
  return {
      {"seed", s.seed},
      {"train_steps", s.train_steps},
      {"device", !s.device ? "auto" : *s.device == DeviceType::cuda ? "cuda" : "cpu"},
      {"tensor_parallel_size", s.tensor_parallel_size},
      {"pipeline_parallel_size", s.pipeline_parallel_size},
      {"virtual_pipeline_stages", s.virtual_pipeline_stages},
      {"sequence_parallel", s.sequence_parallel},
      {"activation_checkpointing", recompute_json(s.activation_checkpointing)},
      {"optimizer_in_backward", s.optimizer_in_backward},
      {"allow_tf32", s.allow_tf32},
      {"allow_rounded_attention", s.allow_rounded_attention},
      {"activation_dtype", s.activation_dtype == ActivationDtype::f32 ? "f32" : "auto"},
      {"memory",
       {{"device_limit", optional_size(s.memory.device_limit)},
        {"host_limit", optional_size(s.memory.host_limit)},
        {"nvme_limit", optional_size(s.memory.nvme_limit)},
        {"on_oom", str(to_string(s.memory.on_oom))}}},
      {"model",
       {{"type", s.model.type},
        {"n_layer", s.model.n_layer},
        {"n_head", s.model.n_head},
        {"n_embd", s.model.n_embd},
        {"block_size", s.model.block_size},
        {"vocab_size", s.model.vocab_size},
        {"dropout", s.model.dropout}}},
      {"data",
       {{"train", optional_str(s.data.train)},
        {"valid", optional_str(s.data.valid)},
        {"shuffle", s.data.shuffle},
        {"seed", s.data.seed}}},
      {"eval", {{"interval", s.eval.interval}, {"iters", s.eval.iters}}},
      {"sample",
       {{"tokens", s.sample.tokens},
        {"temperature", s.sample.temperature},
        {"top_k", s.sample.top_k}}},
      {"checkpoint",
       {{"dir", optional_str(ck.dir)},
        {"interval", ck.interval},
        {"save_total_limit", ck.save_total_limit},
        {"keep_every", ck.keep_every},
        {"async", ck.async},
        {"resume", ck.resume}}},
      {"comm", {{"timeout_s", s.comm.timeout_s}}},
  };
}

}  // namespace

json to_json(const Config& c) {
  json j = json::object();
  // Batch sizes not yet resolved (0) are left out, so the document parses back.
  if (c.train_batch_size) j["train_batch_size"] = c.train_batch_size;
  if (c.train_micro_batch_size_per_gpu)
    j["train_micro_batch_size_per_gpu"] = c.train_micro_batch_size_per_gpu;
  if (c.gradient_accumulation_steps)
    j["gradient_accumulation_steps"] = c.gradient_accumulation_steps;
  j["gradient_clipping"] = c.gradient_clipping;
  j["prescale_gradients"] = c.prescale_gradients;
  j["gradient_predivide_factor"] = c.gradient_predivide_factor;
  j["steps_per_print"] = c.steps_per_print;
  j["wall_clock_breakdown"] = c.wall_clock_breakdown;
  const auto enabled = [](bool on, bool automatic) { return automatic ? json("auto") : json(on); };
  j["fp16"] = {{"enabled", enabled(c.fp16.enabled, c.fp16.automatic)},
               {"loss_scale", c.fp16.loss_scale},
               {"initial_scale_power", c.fp16.initial_scale_power},
               {"loss_scale_window", c.fp16.loss_scale_window},
               {"hysteresis", c.fp16.hysteresis},
               {"consecutive_hysteresis", c.fp16.consecutive_hysteresis},
               {"min_loss_scale", c.fp16.min_loss_scale},
               {"auto_cast", c.fp16.auto_cast}};
  j["bf16"] = {{"enabled", enabled(c.bf16.enabled, c.bf16.automatic)}};
  j["optimizer"] = optimizer_json(c.optimizer);
  j["scheduler"] = scheduler_json(c.scheduler);
  j["zero_optimization"] = zero_json(c.zero_optimization);
  j["aio"] = {{"block_size", c.aio.block_size},
              {"queue_depth", c.aio.queue_depth},
              {"thread_count", c.aio.thread_count},
              {"single_submit", c.aio.single_submit},
              {"overlap_events", c.aio.overlap_events}};
  for (const auto& [name, m] : {std::pair{"tensorboard", &c.tensorboard}, std::pair{"csv_monitor", &c.csv_monitor}})
    j[name] = {{"enabled", m->enabled},
               {"output_path", m->output_path.empty() ? json() : json(m->output_path)},
               {"job_name", m->job_name}};
  j["strata"] = strata_json(c.strata);
  return j;
}

}  // namespace strata::config
