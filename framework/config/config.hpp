// The training configuration: DeepSpeed's JSON keys where Strata does the same thing, plus a
// `strata` section for the rest. Parsed strictly into typed structs holding resolved values.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "framework/config/overrides.hpp"
#include "framework/config/problems.hpp"
#include "framework/core/device.hpp"
#include "framework/optim/hparams/hparams.hpp"

namespace strata::config {

using json = nlohmann::json;

enum class SchedulerType { none, warmup_lr, warmup_cosine_lr, warmup_decay_lr };
enum class WarmupType { linear, log };
enum class OffloadDevice { none, cpu, nvme };
// strata.activation_dtype: follow the compute precision, or keep f32 activations.
enum class ActivationDtype { automatic, f32 };
// strata.activation_checkpointing: false/"none", "selective", true/"full" (docs/memory.md).
enum class Recompute { none, selective, full };

// `fp16`: mixed precision with a (dynamic) loss scale.
struct Fp16 {
  bool enabled = false;
  // "enabled": "auto": chosen by the device at start-up (train::resolve_device); false until then.
  bool automatic = false;
  double loss_scale = 0;                  // 0 = dynamic loss scaling
  std::int64_t initial_scale_power = 16;  // dynamic scale starts at 2^power
  std::int64_t loss_scale_window = 1000;  // steps without overflow before the scale doubles
  std::int64_t hysteresis = 2;            // overflows tolerated before the scale halves
  bool consecutive_hysteresis = false;    // refill hysteresis after a step without overflow
  double min_loss_scale = 1;
  // DeepSpeed's auto_cast: the model's floating-point inputs (f32 batch fields) rounded to fp16
  // before every forward.
  bool auto_cast = false;
  bool dynamic() const { return loss_scale == 0; }
};

// `bf16`: bfloat16 compute with fp32 master weights.
struct Bf16 {
  bool enabled = false;
  // "enabled": "auto": chosen by the device at start-up (train::resolve_device); false until then.
  bool automatic = false;
};

// The type when optimizer.type is not given.
inline constexpr std::string_view kDefaultOptimizer = "AdamW";

// `optimizer`: its type and the values of that type's parameters, each type's spec declaring
// which it takes, with their kinds, ranges and defaults (framework/optim/hparams; the optimizer
// object makes its typed hyperparameters from them: optim/optimizers).
struct Optimizer {
  std::string type;         // the spec's name, as the config writes it
  optim::HValues params;    // every parameter of the type, defaults filled in
  Optimizer();              // kDefaultOptimizer with its defaults
  // `type` (a registered name) with its defaults.
  explicit Optimizer(std::string_view type);
  const optim::OptimizerSpec& spec() const { return optim::optimizer_spec(type); }
  double lr() const { return params.number("lr"); }
};

// `scheduler`: DeepSpeed's warmup schedules and their params.
struct Scheduler {
  SchedulerType type = SchedulerType::none;
  double warmup_min_lr = 0;     // WarmupLR, WarmupDecayLR
  double warmup_max_lr = 1e-3;  // WarmupLR, WarmupDecayLR
  std::int64_t warmup_num_steps = 1000;
  WarmupType warmup_type = WarmupType::log;
  std::int64_t total_num_steps = 0;  // WarmupDecayLR, WarmupCosineLR (required there)
  double cos_min_ratio = 1e-4;       // WarmupCosineLR
  double warmup_min_ratio = 0;       // WarmupCosineLR
};

// `zero_optimization.offload_optimizer`.
struct OffloadOptimizer {
  OffloadDevice device = OffloadDevice::none;
  std::string nvme_path;  // empty = unset
  bool pin_memory = false;
  std::int64_t buffer_count = 4;
};

// `zero_optimization.offload_param` (stage 3 only).
struct OffloadParam {
  OffloadDevice device = OffloadDevice::none;
  std::string nvme_path;
  bool pin_memory = false;
  std::int64_t buffer_count = 5;
  std::int64_t buffer_size = 100'000'000;   // elements
  std::int64_t max_in_cpu = 1'000'000'000;  // elements
};

// `zero_optimization`. Bucket sizes and thresholds count elements, as in DeepSpeed.
struct Zero {
  int stage = 0;
  bool overlap_comm = false;                      // default: true at stage 3, false otherwise
  bool reduce_scatter = true;                     // always true (false is refused)
  std::int64_t reduce_bucket_size = 500'000'000;  // stage 0's all-reduce buckets; > 0
  bool allgather_partitions = true;               // always true (false is refused)
  std::int64_t allgather_bucket_size = 500'000'000;  // stages 1-2: elements gathered in flight
  std::int64_t stage3_prefetch_bucket_size = 50'000'000;
  std::int64_t stage3_max_live_parameters = 1'000'000'000;
  std::int64_t stage3_max_reuse_distance = 1'000'000'000;
  std::int64_t stage3_param_persistence_threshold = 100'000;
  OffloadOptimizer offload_optimizer;
  OffloadParam offload_param;
};

// `aio`: the NVMe tier's asynchronous I/O.
struct Aio {
  std::int64_t block_size = 1'048'576;
  std::int64_t queue_depth = 16;  // DeepSpeed: 8; 16 measured 1.5x faster here (docs/offload.md)
  std::int64_t thread_count = 1;
  bool single_submit = false;
  bool overlap_events = true;
};

// DeepSpeed's `tensorboard` and `csv_monitor`: the job's metrics written by rank 0 under
// <output_path>/<job_name>/ (launcher/job/monitors.hpp).
struct Monitor {
  bool enabled = false;
  std::string output_path;  // "" or null = "tensorboard" / "csv_monitor" in the working directory
  std::string job_name = "DeepSpeedJobName";
};

// strata.memory.on_oom: what an out-of-memory error during a step's forward/backward does —
// fail with the planner's advice, or recover (split the micro-batch, keep the global batch, redo
// the step).
enum class OnOom { fail, recover };

// `strata.memory`: caps per tier in bytes (unset = no cap), and out-of-memory handling.
struct Memory {
  std::optional<std::uint64_t> device_limit, host_limit, nvme_limit;
  OnOom on_oom = OnOom::fail;
};

// `strata.model`.
struct Model {
  std::string type = "gpt";
  std::int64_t n_layer = 12;
  std::int64_t n_head = 12;
  std::int64_t n_embd = 768;
  std::int64_t block_size = 1024;
  std::int64_t vocab_size = 50257;
  double dropout = 0;  // must be 0 for now
};

// `strata.data`: token files (empty = unset).
struct Data {
  std::string train, valid;
  bool shuffle = true;
  std::uint64_t seed = 1234;  // default: strata.seed
};

// `strata.eval`.
struct Eval {
  std::int64_t interval = 0;  // 0 = never
  std::int64_t iters = 20;
};

// `strata.sample`: text sampled after training (tokens 0 = none).
struct Sample {
  std::int64_t tokens = 0;
  double temperature = 1.0;
  std::int64_t top_k = 0;  // 0 = whole vocabulary
};

// `strata.checkpoint`: Strata's checkpoint policy.
struct CheckpointPolicy {
  std::string dir;                    // empty = no checkpoints
  std::int64_t interval = 0;          // steps between saves, 0 = only at the end (when dir is set)
  std::int64_t save_total_limit = 0;  // newest checkpoints kept, 0 = all
  std::int64_t keep_every = 0;        // also keep every step that is a multiple of this, 0 = none
  bool async = false;
  std::string resume = "auto";  // "auto" (newest complete), "none", or a checkpoint path
};

// `strata.comm`.
struct Comm {
  double timeout_s = 300;  // a collective that does not finish in time is an error
};

// `strata`: what DeepSpeed's schema lacks.
struct StrataSection {
  std::uint64_t seed = 1234;
  std::int64_t train_steps = 1000;
  // strata.device: nullopt = "auto", which train::resolve_device makes the local GPU when one is
  // usable and the CPU otherwise (framework/train/from_config.hpp).
  std::optional<DeviceType> device;
  std::int64_t tensor_parallel_size = 1;
  std::int64_t pipeline_parallel_size = 1;
  // Model chunks per pipeline rank under the interleaved 1F1B schedule (Megatron-LM's virtual
  // pipeline stages): rank r holds chunks r, r + pp, ...; 1 is plain 1F1B.
  std::int64_t virtual_pipeline_stages = 1;
  // Megatron-LM's sequence parallelism over the tensor-parallel ranks (needs
  // tensor_parallel_size > 1): LayerNorms, residual adds and the embedding's output hold 1/tp of
  // the tokens (docs/parallelism.md).
  bool sequence_parallel = false;
  Recompute activation_checkpointing = Recompute::none;
  // Each unit's optimizer update runs as soon as its gradient is complete in the last
  // micro-batch's backward (Trainer::step_unit): no whole-model gradient is kept, and offloaded
  // optimizer state moves while backward computes.
  bool optimizer_in_backward = false;
  // f32 GPU matrix products may use TF32 tensor cores (framework/backend/math_mode.hpp).
  bool allow_tf32 = false;
  // 16-bit GPU attention may round P and dS to 16 bits once (framework/backend/math_mode.hpp).
  bool allow_rounded_attention = false;
  ActivationDtype activation_dtype = ActivationDtype::automatic;
  Memory memory;
  Model model;
  Data data;
  Eval eval;
  Sample sample;
  CheckpointPolicy checkpoint;
  Comm comm;
};

struct Config {
  // 0 = not given; resolve_batch() fills them in.
  std::int64_t train_batch_size = 0;
  std::int64_t train_micro_batch_size_per_gpu = 0;
  std::int64_t gradient_accumulation_steps = 0;
  std::int64_t data_parallel_size = 0;  // set by resolve_batch()
  double gradient_clipping = 0;         // max global gradient norm, 0 = off
  bool prescale_gradients = false;      // divide by the dp size before the reduction
  double gradient_predivide_factor = 1.0;  // without prescale: / f before, * f/dp after
  std::int64_t steps_per_print = 10;
  bool wall_clock_breakdown = false;  // a per-step time breakdown in the log
  bool micro_batch_auto =
      false;  // train_micro_batch_size_per_gpu was "auto" (a planner may choose)
  Fp16 fp16;
  Bf16 bf16;
  Optimizer optimizer;
  Scheduler scheduler;
  Zero zero_optimization;
  Aio aio;
  Monitor tensorboard, csv_monitor;
  StrataSection strata;
  // One line each: DeepSpeed keys accepted as no-ops ("ignored: ... : why"), old names read as
  // new ones, "auto" values resolved. Print them once (strata config check, train_gpt's rank 0).
  std::vector<std::string> notes;
};

// Validates a config document and returns it with defaults filled in and its notes, collecting
// every problem into problems instead of stopping at the first: DeepSpeed's old names and
// "auto" values (resolved as Hugging Face's integration does where the config determines them),
// unknown keys (with the nearest key of the same section), DeepSpeed features Strata does not
// implement, DeepSpeed keys that change nothing (noted), types, ranges, cross-field rules and
// the part of the batch arithmetic that does not need the world size.
Config check_config(const json& doc, Problems& problems);

// check_config that throws ConfigError (a UserError tagged "config", one line per problem).
Config parse_config(const json& doc);

// parse_config with each problem prefixed by where the document came from ("gpt.json: ...").
Config parse_config(const json& doc, std::string_view source);

// What `strata config check` answers: check_config and, for a world size, the batch arithmetic
// (data_parallel_size, resolve_batch) as one list of problems.
struct CheckResult {
  Config config;
  Problems problems;
};
CheckResult check_config(const json& doc, std::optional<std::int64_t> world_size);

// Reads a JSON file. A missing file or a syntax error (with line:column) is a UserError naming
// the file; duplicate keys are errors too.
json read_config_file(const std::string& path);

// read_config_file + apply_override for each "key=value" in overrides + parse_config; errors
// name the file.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// DeepSpeed's batch rule: train_batch_size = micro × accumulation × data_parallel_size. Any two
// given determine the third (only micro or only train given: accumulation 1); all three given
// must agree. An "auto" micro-batch that nothing determines must have been chosen by the memory
// planner first (parallel/plan/auto_micro_batch.hpp): it is refused here. Sets
// cfg.data_parallel_size.
void resolve_batch(Config& cfg, std::int64_t data_parallel_size);

// world_size / (tensor_parallel_size × pipeline_parallel_size), which must divide evenly.
std::int64_t data_parallel_size(const Config& cfg, std::int64_t world_size);

// The resolved config as JSON (every key, defaults included); parse_config accepts it back.
json to_json(const Config& cfg);

// Names as written in the config ("AdamW", "WarmupCosineLR", "nvme", "log", "Warn").
std::string_view to_string(SchedulerType t);
std::string_view to_string(WarmupType t);
std::string_view to_string(OffloadDevice d);
std::string_view to_string(OnOom o);
// "none", "selective", "full".
std::string_view to_string(Recompute r);

}  // namespace strata::config
