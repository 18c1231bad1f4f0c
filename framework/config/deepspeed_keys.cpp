#include "framework/config/deepspeed_keys.hpp"

#include <cctype>
#include <span>

#include "framework/config/config.hpp"

namespace strata::config {

namespace {

using json = nlohmann::json;
using K = Kind;

bool any_value(const json&, const json&) {
  return true;
}
bool is_false(const json& v, const json& = {}) {
  return v.is_boolean() && !v.get<bool>();
}
bool is_true(const json& v, const json&) {
  return v.is_boolean() && v.get<bool>();
}
bool is_null(const json& v, const json&) {
  return v.is_null();
}
bool is_zero(const json& v, const json&) {
  return v.is_number() && v.get<double>() == 0.0;
}
bool is_one(const json& v, const json&) {
  return v.is_number() && v.get<double>() == 1.0;
}
bool is_minus_one(const json& v, const json&) {
  return v.is_number() && v.get<double>() == -1.0;
}
bool is_huge(const json& v, const json&) {  // DeepSpeed's sys.maxsize defaults: no cap
  return v.is_number() && v.get<double>() >= 9.2e18;
}
// A section with an "enabled" switch: no "enabled": true anywhere inside.
bool off(const json& v, const json& doc) {
  if (!v.is_object()) return false;
  for (const auto& [k, x] : v.items()) {
    if (k == "enabled" && is_true(x, doc)) return false;
    if (x.is_object() && !off(x, doc)) return false;
  }
  return true;
}
// A section of switches: every value inside is false or null.
bool nothing_on(const json& v, const json& doc) {
  if (!v.is_object()) return false;
  for (const auto& [k, x] : v.items()) {
    if (x.is_object() ? !nothing_on(x, doc) : !(is_false(x, doc) || x.is_null())) return false;
  }
  return true;
}
// DeepSpeed's activation_checkpointing configures its checkpointing API, which Strata's models
// never call; what it asks for matters only where Strata lacks it: checkpoints kept on the CPU,
// or partitioned over tensor-parallel ranks when there are several.
bool checkpointing_moot(const json& v, const json& doc) {
  if (!v.is_object()) return false;
  if (v.contains("cpu_checkpointing") && !is_false(v["cpu_checkpointing"], doc)) return false;
  const bool partition =
      v.contains("partition_activations") && !is_false(v["partition_activations"], doc);
  if (!partition) return true;
  const auto s = doc.find("strata");
  if (s == doc.end() || !s->is_object()) return true;
  const auto tp = s->find("tensor_parallel_size");
  return tp == s->end() || (tp->is_number() && tp->get<double>() == 1.0);
}
bool never(const json&, const json&) {
  return false;
}

constexpr std::string_view kDefault = "DeepSpeed's default";
constexpr std::string_view kRemoveOrFalse = "remove the key or set it to false";
constexpr std::string_view kRemoveSection = "remove the section or set its enabled to false";

// The keys, parents before children. `what` is empty where every value is a no-op.
const DeepSpeedKey kKeys[] = {
    // ---- top level: gradients and communication ----
    {"sparse_gradients", K::boolean, is_false, "DeepSpeed's default: dense gradient reduction",
     "sparse all-reduce of embedding gradients", kRemoveOrFalse},
    {"communication_data_type", K::string, is_null,
     "DeepSpeed's default: gradients are reduced in their own data type, as in Strata",
     "reducing gradients in a chosen data type", "remove the key", true},
    {"seq_parallel_communication_data_type", K::string, any_value,
     "only DeepSpeed-Ulysses sequence parallelism uses it, which Strata does not have; Strata's "
     "is Megatron's, strata.sequence_parallel", "", ""},
    {"disable_allgather", K::boolean, any_value,
     "DeepSpeed reads this key but nothing in DeepSpeed uses it", "", ""},
    {"cuda_visible_devices", K::integer, any_value,
     "DeepSpeed has no such key and ignores unknown top-level keys (DeepSpeed issue #653), so it "
     "chooses no GPU there either; choose GPUs with the CUDA_VISIBLE_DEVICES environment variable",
     "", ""},
    {"dump_state", K::boolean, is_false, kDefault, "printing the engine's state at start-up",
     kRemoveOrFalse},
    {"memory_breakdown", K::boolean, is_false, kDefault,
     "a memory report at every step; Strata prints its memory ledger after set-up", kRemoveOrFalse},
    {"zero_allow_untested_optimizer", K::boolean, any_value,
     "Strata's ZeRO works with every optimizer Strata has", "", ""},
    {"zero_force_ds_cpu_optimizer", K::boolean, any_value,
     "an offloaded optimizer step always runs Strata's own CPU optimizer", "", ""},
    {"graph_harvesting", K::boolean, is_false, kDefault,
     "capturing the optimizer step as a CUDA graph", kRemoveOrFalse},
    {"dataloader_drop_last", K::boolean, any_value,
     "only DeepSpeed's own data loader reads it; Strata's sampler draws whole windows of tokens",
     "", ""},
    {"use_data_before_expert_parallelism", K::boolean, is_false, kDefault,
     "ordering data-parallel ranks before expert-parallel ones (mixture of experts)",
     kRemoveOrFalse},
    // ---- top level: features configured by a section ----
    {"amp", K::object, off, "Apex AMP is not enabled", "NVIDIA Apex automatic mixed precision",
     "remove the section and use fp16 or bf16"},
    {"sparse_attention", K::object, never, "", "block-sparse attention", "remove the section"},
    {"pipeline", K::object, never, "", "the settings of DeepSpeed's pipeline engine",
     "remove the section and set strata.pipeline_parallel_size"},
    {"tensor_parallel", K::object, never, "", "DeepSpeed's automatic tensor parallelism, AutoTP",
     "remove the section and set strata.tensor_parallel_size"},
    {"activation_checkpointing", K::object, checkpointing_moot,
     "it configures DeepSpeed's checkpointing API, which Strata's models do not call (Strata's "
     "switch is strata.activation_checkpointing), and with strata.tensor_parallel_size 1 there "
     "is nothing to partition",
     "activation checkpoints kept on the CPU, or partitioned over tensor-parallel ranks",
     "remove the section; Strata's switch is strata.activation_checkpointing (false, \"selective\" or true)"},
    {"flops_profiler", K::object, off, "the profiler is not enabled", "the FLOPs profiler",
     kRemoveSection},
    {"autotuning", K::object, off, "the autotuner is not enabled", "the autotuner", kRemoveSection},
    {"wandb", K::object, off, "it is not enabled",
     "logging to Weights & Biases, a service reached over the network (not available without "
     "one)",
     "remove the section or set its enabled to false; tensorboard and csv_monitor write the same "
     "metrics to files (and --metrics to a JSON-lines file)"},
    {"comet", K::object, off, "it is not enabled", "logging to Comet",
     "remove the section or set its enabled to false (Strata logs to stdout and, with "
     "--metrics, to a JSON-lines file)"},
    {"comms_logger", K::object, off, "it is not enabled", "logging every communication call",
     kRemoveSection},
    {"timers", K::object, off, "no timer in it is enabled", "throughput timers", kRemoveSection},
    {"eigenvalue", K::object, off, "it is not enabled",
     "eigenvalue estimation for MoQ quantization schedules", kRemoveSection},
    {"progressive_layer_drop", K::object, off, "it is not enabled", "progressive layer dropping",
     kRemoveSection},
    {"curriculum_learning", K::object, off, "it is not enabled", "curriculum learning",
     kRemoveSection},
    {"data_efficiency", K::object, off, "it is not enabled",
     "curriculum data sampling and random layerwise token dropping (data efficiency)",
     kRemoveSection},
    {"elasticity", K::object, off, "it is not enabled",
     "elastic training (batch sizes chosen for a changing number of GPUs)",
     "remove the section (Strata's checkpoints resume on any number of ranks)"},
    {"compression_training", K::object, off, "every method in it is disabled",
     "model compression: quantization, pruning, layer reduction", "remove the section"},
    {"quantize_training", K::object, off, "it is not enabled", "MoQ quantization-aware training",
     kRemoveSection},
    {"hybrid_engine", K::object, off, "it is not enabled",
     "the hybrid training and generation engine (DeepSpeed-Chat)", kRemoveSection},
    {"nebula", K::object, off, "it is not enabled", "Nebula checkpointing",
     "remove the section (strata.checkpoint.async writes checkpoints in the background)"},
    {"weight_quantization", K::object, never, "", "quantized weights", "remove the section"},
    // ---- checkpoint (Strata's checkpoint policy is strata.checkpoint) ----
    {"checkpoint", K::object, nullptr, "", "", ""},
    {"checkpoint.tag_validation", K::string, any_value,
     "Strata names checkpoints by step, which every rank shares, so there is no tag to validate",
     "", ""},
    {"checkpoint.load_universal", K::boolean, is_false, kDefault,
     "loading DeepSpeed's universal checkpoints",
     "remove the key (Strata's own checkpoints load on any layout)"},
    {"checkpoint.use_node_local_storage", K::boolean, is_false, kDefault,
     "saving checkpoints on node-local storage", kRemoveOrFalse},
    {"checkpoint.parallel_write", K::object, nothing_on, "nothing in it is switched on",
     "writing checkpoints in parallel by pipeline stage", "remove the key"},
    {"data_types", K::object, nullptr, "", "", ""},
    {"data_types.grad_accum_dtype", K::string, is_null,
     "DeepSpeed's default: gradients accumulate in the training data type, as in Strata",
     "accumulating gradients in a chosen data type", "remove the key", true},
    // ---- fp16, bf16 ----
    {"fp16.fp16_master_weights_and_grads", K::boolean, is_false,
     "DeepSpeed's default: float32 master weights, as in Strata",
     "keeping master weights and gradients in fp16", kRemoveOrFalse},
    {"bf16.immediate_grad_update", K::boolean, is_false, kDefault,
     "applying bf16 gradients to the master weights right after backward", kRemoveOrFalse},
    // ---- optimizer ----
    {"optimizer.legacy_fusion", K::boolean, any_value,
     "it only selects an old fused fp16 optimizer inside DeepSpeed", "", ""},
    // ---- zero_optimization: tuning that Strata's unit-at-a-time design makes moot ----
    {"zero_optimization.contiguous_gradients", K::boolean, any_value,
     "Strata keeps every unit's gradients in one flat buffer whatever it says; the trained "
     "numbers do not depend on it",
     "", ""},
    {"zero_optimization.sub_group_size", K::integer, any_value,
     "Strata's optimizer steps one unit at a time, which already bounds its working set", "", ""},
    {"zero_optimization.stage3_gather_16bit_weights_on_model_save", K::boolean, any_value,
     "Strata saves sharded checkpoints that load on any layout; `strata ckpt export` writes one "
     "consolidated file",
     "", ""},
    {"zero_optimization.stage3_gather_fp16_weights_on_model_save", K::boolean, any_value,
     "DeepSpeed's old name of stage3_gather_16bit_weights_on_model_save; Strata saves sharded "
     "checkpoints that load on any layout, and `strata ckpt export` writes one consolidated file",
     "", ""},
    {"zero_optimization.use_multi_rank_bucket_allreduce", K::boolean, any_value,
     "Strata reduces each unit's gradients in calls of their own", "", ""},
    {"zero_optimization.round_robin_gradients", K::boolean, any_value,
     "it only changes how DeepSpeed spreads gradient copies over its buffers", "", ""},
    {"zero_optimization.elastic_checkpoint", K::boolean, any_value,
     "Strata's checkpoints load on any data-parallel size whatever it says", "", ""},
    {"zero_optimization.memory_efficient_linear", K::boolean, any_value,
     "a detail of DeepSpeed's stage 3 for torch linear layers; Strata's layers save only what "
     "their backward needs",
     "", ""},
    {"zero_optimization.override_module_apply", K::boolean, any_value,
     "a detail of DeepSpeed's stage 3 for torch's Module.apply", "", ""},
    {"zero_optimization.log_trace_cache_warnings", K::boolean, any_value,
     "Strata has no parameter trace cache to warn about", "", ""},
    // ---- zero_optimization: features ----
    {"zero_optimization.load_from_fp32_weights", K::boolean, is_true,
     "DeepSpeed's default: master weights come from the float32 copy, as in Strata",
     "restoring master weights from the 16-bit weights", "remove the key or set it to true"},
    {"zero_optimization.ignore_unused_parameters", K::boolean, is_true, kDefault,
     "failing when a parameter gets no gradient", "remove the key or set it to true"},
    {"zero_optimization.legacy_stage1", K::boolean, is_false, kDefault,
     "DeepSpeed's legacy stage-1 implementation", kRemoveOrFalse},
    {"zero_optimization.stage3_model_persistence_threshold", K::integer, is_huge,
     "DeepSpeed's default: no cap", "a cap on the total size of parameters kept whole",
     "remove the key"},
    {"zero_optimization.stage3_module_granularity_threshold", K::integer, is_zero, kDefault,
     "gathering groups of small modules as one", "remove the key or set it to 0"},
    {"zero_optimization.stage3_use_all_reduce_for_fetch_params", K::boolean, is_false, kDefault,
     "fetching parameters with all-reduce instead of all-gather", kRemoveOrFalse},
    {"zero_optimization.grad_hooks", K::boolean, is_true, kDefault,
     "reducing gradients without backward hooks", "remove the key or set it to true"},
    {"zero_optimization.zero_hpz_partition_size", K::integer, is_one,
     "DeepSpeed's default: no secondary partition",
     "ZeRO++ hierarchical partitioning of parameters", "remove the key or set it to 1"},
    {"zero_optimization.zero_quantized_weights", K::boolean, is_false, kDefault,
     "ZeRO++ quantized weight communication", kRemoveOrFalse},
    {"zero_optimization.zero_quantized_nontrainable_weights", K::boolean, is_false, kDefault,
     "ZeRO++ quantized non-trainable weights", kRemoveOrFalse},
    {"zero_optimization.zero_quantized_gradients", K::boolean, is_false, kDefault,
     "ZeRO++ quantized gradient communication", kRemoveOrFalse},
    {"zero_optimization.zeropp_loco_param", K::object, is_null, kDefault,
     "ZeRO++ LoCo error feedback", "remove the key", true},
    {"zero_optimization.mics_shard_size", K::integer, is_minus_one,
     "DeepSpeed's default: MiCS is off", "MiCS (sharding within groups of ranks)",
     "remove the key or set it to -1"},
    {"zero_optimization.mics_hierarchical_params_gather", K::boolean, is_false, kDefault,
     "MiCS hierarchical all-gather", kRemoveOrFalse},
    {"zero_optimization.pipeline_loading_checkpoint", K::boolean, is_false, kDefault,
     "loading checkpoints into pipeline-parallel ZeRO-3 models", kRemoveOrFalse},
    {"zero_optimization.cpu_offload_use_pin_memory", K::boolean, any_value,
     "DeepSpeed ignores this deprecated key (it does not carry over to pin_memory)", "", ""},
    {"zero_optimization.offload_optimizer.ratio", K::number, is_one,
     "DeepSpeed's default: all optimizer state is offloaded",
     "offloading only part of the optimizer state", "remove the key or set it to 1.0"},
    {"zero_optimization.offload_optimizer.pipeline_read", K::boolean, any_value,
     "Strata's NVMe swapper always reads ahead and writes behind while the step runs", "", ""},
    {"zero_optimization.offload_optimizer.pipeline_write", K::boolean, any_value,
     "Strata's NVMe swapper always reads ahead and writes behind while the step runs", "", ""},
    {"zero_optimization.offload_optimizer.fast_init", K::boolean, any_value,
     "it only changes how DeepSpeed first writes the state to NVMe", "", ""},
    // ---- aio ----
    {"aio.use_gds", K::boolean, is_false, kDefault, "GPUDirect Storage", kRemoveOrFalse},
};

// DeepSpeed's optimizer parameters beyond Strata's; which optimizer types take each is the
// type's own declaration (OptimizerSpec::deepspeed_params, framework/optim/hparams).
const DeepSpeedKey kOptimizerParams[] = {
    {"optimizer.params.torch_adam", K::boolean, any_value,
     "Strata's Adam is its own implementation, bitwise equal to PyTorch's", "", ""},
    {"optimizer.params.adam_w_mode", K::boolean, any_value,
     "DeepSpeed's AdamW decouples weight decay whatever adam_w_mode says, as Strata's does", "",
     ""},
    {"optimizer.params.amsgrad", K::boolean, is_false, "PyTorch's default",
     "the AMSGrad variant of Adam", kRemoveOrFalse},
    {"optimizer.params.max_grad_norm", K::number, is_zero,
     "FusedLamb's default: no clipping inside the optimizer",
     "FusedLamb's own gradient clipping, which needs a gradient norm DeepSpeed's engine never "
     "passes it",
     "remove the key and set gradient_clipping (global-norm clipping before the update)"},
    {"optimizer.params.cuda_aware", K::boolean, any_value,
     "it picks how DeepSpeed's MPI backend moves GPU buffers; Strata's compressed all-reduce "
     "exchanges host buffers over the data-parallel group (MPI), the same numbers either way",
     "", ""},
    {"optimizer.params.comm_backend_name", K::string, any_value,
     "Strata's compressed all-reduce always exchanges host buffers over the data-parallel "
     "group (MPI); DeepSpeed's backends compute the same numbers",
     "", ""},
    {"optimizer.params.dampening", K::number, is_zero, "PyTorch's default",
     "SGD momentum dampening", "remove the key or set it to 0"},
    {"optimizer.params.maximize", K::boolean, is_false, "PyTorch's default",
     "maximizing the objective", kRemoveOrFalse},
};

const DeepSpeedKey kSchedulerParams[] = {
    {"scheduler.params.last_batch_iteration", K::integer, is_minus_one,
     "DeepSpeed's default: the schedule starts at step 0 (Strata resumes it from checkpoints)",
     "starting the schedule part-way", "remove the key or set it to -1"},
};

struct Named {
  std::string_view name, what;  // name as DeepSpeed writes it (matched in any letter case)
};

const Named kOptimizers[] = {
    {"ZeroOneAdam", "0/1 Adam (compressed communication)"},
    {"Adagrad", "the Adagrad optimizer"},
    {"MuAdam", "the muP optimizer MuAdam"},
    {"MuAdamW", "the muP optimizer MuAdamW"},
    {"MuSGD", "the muP optimizer MuSGD"},
    // torch.optim optimizers DeepSpeed loads by name
    {"Adadelta", "PyTorch's Adadelta, which DeepSpeed loads from torch.optim"},
    {"Adamax", "PyTorch's Adamax, which DeepSpeed loads from torch.optim"},
    {"ASGD", "PyTorch's ASGD, which DeepSpeed loads from torch.optim"},
    {"LBFGS", "PyTorch's LBFGS, which DeepSpeed loads from torch.optim"},
    {"NAdam", "PyTorch's NAdam, which DeepSpeed loads from torch.optim"},
    {"RAdam", "PyTorch's RAdam, which DeepSpeed loads from torch.optim"},
    {"RMSprop", "PyTorch's RMSprop, which DeepSpeed loads from torch.optim"},
    {"Rprop", "PyTorch's Rprop, which DeepSpeed loads from torch.optim"},
    {"SparseAdam", "PyTorch's SparseAdam, which DeepSpeed loads from torch.optim"},
};

const Named kSchedulers[] = {
    {"LRRangeTest", "the learning-rate range test"},
    {"OneCycle", "the 1-cycle schedule"},
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view find_named(std::span<const Named> list, std::string_view name) {
  const std::string l = lower(name);
  for (const auto& n : list)
    if (lower(n.name) == l) return n.what;
  return {};
}

std::string_view parent_key(std::string_view path) {
  const auto dot = path.rfind('.');
  return dot == std::string_view::npos ? std::string_view{} : path.substr(0, dot);
}

// Moves doc[section][from] to doc[section][to] (DeepSpeed's renaming), noting it.
void rename(json& doc, const std::vector<std::string>& section, const std::string& from,
            const std::string& to, Problems& problems, std::vector<std::string>& notes) {
  json* cur = &doc;
  std::string prefix;
  for (const auto& s : section) {
    if (!cur->is_object() || !cur->contains(s)) return;
    cur = &(*cur)[s];
    prefix += s + ".";
  }
  if (!cur->is_object() || !cur->contains(from)) return;
  if (cur->contains(to)) {
    problems.mistake(prefix + from,
                     "{0}{1} and {0}{2} are both given; keep {0}{2} ({1} is DeepSpeed's old name "
                     "of it)",
                     prefix, from, to);
    cur->erase(from);
    return;
  }
  (*cur)[to] = (*cur)[from];
  cur->erase(from);
  notes.push_back(
      fmt::format("read {0}{1} as {0}{2} (DeepSpeed's old name of it)", prefix, from, to));
}

// DeepSpeed's deprecated ZeRO switch `key` (true = offload `target` to the CPU).
void offload_switch(json& zero, const std::string& key, const std::string& target,
                    Problems& problems, std::vector<std::string>& notes) {
  if (!zero.contains(key)) return;
  const json v = zero[key];
  zero.erase(key);
  const std::string path = "zero_optimization." + key;
  if (!v.is_boolean()) {
    problems.mistake(path, "{} must be true or false, got {} ({})", path, v.dump(),
                     json_type_name(v));
    return;
  }
  if (!v.get<bool>()) {
    notes.push_back(fmt::format("ignored: {}=false: DeepSpeed's old switch, off", path));
    return;
  }
  if (zero.contains(target)) {
    problems.mistake(path,
                     "{} and zero_optimization.{} are both given; keep zero_optimization.{} ({} "
                     "is DeepSpeed's old switch for it)",
                     path, target, target, key);
    return;
  }
  zero[target] = json{{"device", "cpu"}};
  notes.push_back(fmt::format(
      "read {}=true as zero_optimization.{}.device \"cpu\" (DeepSpeed's old switch for it)", path,
      target));
}

// The values a predicate accepts, in words.
std::string_view noop_values(const DeepSpeedKey& k) {
  using P = bool (*)(const json&, const json&);
  const std::pair<P, std::string_view> words[] = {
      {any_value, "any value"},
      {is_false, "`false`"},
      {is_true, "`true`"},
      {is_null, "`null`"},
      {is_zero, "`0`"},
      {is_one, "`1`"},
      {is_minus_one, "`-1`"},
      {is_huge, "no cap (>= 2^63)"},
      {off, "no `\"enabled\": true` inside"},
      {nothing_on, "every value inside `false` or `null`"},
      {checkpointing_moot,
       "no `cpu_checkpointing`, and `partition_activations` only with "
       "`strata.tensor_parallel_size` 1"},
      {never, "-"},
  };
  for (const auto& [p, w] : words)
    if (p == k.noop) return w;
  return "(each key inside on its own)";
}

std::string otherwise(const DeepSpeedKey& k) {
  if (k.what.empty()) return "- (" + std::string(k.why) + ")";
  return fmt::format("{}; {}", k.what, k.fix);
}

}  // namespace

std::vector<DeepSpeedKeyRow> deepspeed_key_rows() {
  std::vector<DeepSpeedKeyRow> rows;
  for (const auto& k : kKeys) {
    if (!k.noop) continue;  // a section judged key by key: its keys have rows
    rows.push_back({std::string(k.path), std::string(noop_values(k)), otherwise(k)});
  }
  for (const auto& k : kOptimizerParams) {
    const std::string_view name = k.path.substr(std::string_view("optimizer.params.").size());
    std::vector<std::string_view> types;
    for (const optim::OptimizerSpec* spec : optim::optimizer_specs())
      for (std::string_view d : spec->deepspeed_params)
        if (d == name) types.push_back(spec->name);
    rows.push_back({fmt::format("{} ({})", k.path, fmt::join(types, ", ")),
                    std::string(noop_values(k)), otherwise(k)});
  }
  for (const auto& k : kSchedulerParams)
    rows.push_back({std::string(k.path), std::string(noop_values(k)), otherwise(k)});
  for (const auto& o : kOptimizers)
    rows.push_back(
        {fmt::format("optimizer.type \"{}\" (any letter case)", o.name), "-", std::string(o.what)});
  for (const auto& o : kSchedulers)
    rows.push_back(
        {fmt::format("scheduler.type \"{}\" (any letter case)", o.name), "-", std::string(o.what)});
  return rows;
}

const DeepSpeedKey* find_deepspeed_key(std::string_view path) {
  for (const auto& k : kKeys)
    if (k.path == path) return &k;
  return nullptr;
}

std::vector<std::string> deepspeed_keys_in(std::string_view section) {
  std::vector<std::string> out;
  for (const auto& k : kKeys)
    if (parent_key(k.path) == section)
      out.emplace_back(section.empty() ? k.path : k.path.substr(section.size() + 1));
  return out;
}

const DeepSpeedKey* find_optimizer_param(std::string_view name) {
  for (const auto& k : kOptimizerParams)
    if (k.path.substr(std::string_view("optimizer.params.").size()) == name) return &k;
  return nullptr;
}

const DeepSpeedKey* find_scheduler_param(std::string_view name) {
  for (const auto& k : kSchedulerParams)
    if (k.path.substr(std::string_view("scheduler.params.").size()) == name) return &k;
  return nullptr;
}

std::string_view deepspeed_optimizer(std::string_view type) {
  return find_named(kOptimizers, type);
}

std::string_view deepspeed_scheduler(std::string_view type) {
  return find_named(kSchedulers, type);
}

std::string not_implemented(std::string_view shown, std::string_view what, std::string_view fix) {
  return fmt::format("{} asks for {}, a DeepSpeed feature Strata does not implement; {}", shown,
                     what, fix);
}

std::string value_text(const json& v) {
  if (v.is_object()) return "{...}";
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

void judge_deepspeed_key(const DeepSpeedKey& k, const json& value, const json& doc,
                         Problems& problems, std::vector<std::string>& notes) {
  const std::string path(k.path);
  if (!(value.is_null() && k.nullable) && !kind_matches(k.kind, value)) {
    problems.mistake(path, "{} must be {}, got {} ({})", path, kind_name(k.kind), value.dump(),
                     json_type_name(value));
    return;
  }
  if (!k.noop) {  // a section of keys judged one by one
    for (const auto& [child, v] : value.items()) {
      const std::string p = path + "." + child;
      if (const DeepSpeedKey* c = find_deepspeed_key(p))
        judge_deepspeed_key(*c, v, doc, problems, notes);
      else
        problems.mistake(p, "{}", unknown_key_message(p));
    }
    return;
  }
  const std::string shown =
      value.is_object() ? path : fmt::format("{}={}", path, value_text(value));
  if (k.noop(value, doc)) {
    notes.push_back(fmt::format("ignored: {}: {}", shown, k.why));
    return;
  }
  problems.add(ProblemKind::not_implemented, path, not_implemented(shown, k.what, k.fix));
}

void apply_aliases(json& doc, Problems& problems, std::vector<std::string>& notes) {
  if (!doc.is_object()) return;
  rename(doc, {}, "bfloat16", "bf16", problems, notes);
  rename(doc, {"aio"}, "intra_op_parallelism", "thread_count", problems, notes);
  if (doc.contains("zero_optimization") && doc["zero_optimization"].is_object()) {
    json& z = doc["zero_optimization"];
    offload_switch(z, "cpu_offload", "offload_optimizer", problems, notes);
    offload_switch(z, "cpu_offload_param", "offload_param", problems, notes);
  }
}

}  // namespace strata::config
