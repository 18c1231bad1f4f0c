#include "framework/config/schema.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>

#include <fmt/format.h>

#include "framework/config/config.hpp"
#include "framework/config/deepspeed_keys.hpp"
#include "framework/config/suggest.hpp"
#include "framework/core/error.hpp"
#include "framework/memory/size.hpp"

namespace strata::config {

namespace {

using K = Kind;

// The single list of accepted keys. Defaults are JSON text when they are fixed; prose when they
// depend on other keys. Keep docs/config.md in step (a test checks every key is documented).
constexpr KeySpec kSchema[] = {
    // ---- batch and loop (DeepSpeed) ----
    {"train_batch_size", K::integer, "derived",
     "Samples per optimizer step over all data-parallel ranks = train_micro_batch_size_per_gpu × "
     "gradient_accumulation_steps × data-parallel size. Give any two of the three."},
    {"train_micro_batch_size_per_gpu", K::integer, "derived",
     "Samples per forward/backward on one rank (one data-parallel replica)."},
    {"gradient_accumulation_steps", K::integer, "derived (1 when only one batch size is given)",
     "Micro-batches accumulated before each optimizer step (also the pipeline's micro-batches)."},
    {"gradient_clipping", K::number, "0.0",
     "Clip the global gradient L2 norm to this value; 0 = off."},
    {"prescale_gradients", K::boolean, "false",
     "Divide gradients by the data-parallel size before their reduction (a sum) instead of "
     "averaging after it, as DeepSpeed does; gradient_predivide_factor then has no effect."},
    {"gradient_predivide_factor", K::number, "1.0",
     "With prescale_gradients false: divide gradients by this factor before their reduction (a "
     "sum) and multiply by factor / data-parallel size after it, as DeepSpeed does (keeps fp16 "
     "sums in range); 1.0 = average after the reduction."},
    {"steps_per_print", K::integer, "10", "Print the training log every this many steps."},
    {"wall_clock_breakdown", K::boolean, "false",
     "With each printed step, where its time went: forward, backward, waiting for collectives, "
     "optimizer, waiting for offloaded state."},
    // ---- fp16 (DeepSpeed) ----
    {"fp16", K::object, "{}", "Mixed precision with float16 compute and a loss scale."},
    {"fp16.enabled", K::boolean, "false", "Train in float16 with float32 master weights."},
    {"fp16.loss_scale", K::number, "0.0", "Fixed loss scale; 0 = dynamic loss scaling."},
    {"fp16.initial_scale_power", K::integer, "16",
     "Dynamic scaling starts at 2^initial_scale_power."},
    {"fp16.loss_scale_window", K::integer, "1000",
     "Steps without overflow before the dynamic scale doubles."},
    {"fp16.hysteresis", K::integer, "2", "Overflows tolerated before the dynamic scale halves."},
    {"fp16.consecutive_hysteresis", K::boolean, "false",
     "Refill the hysteresis budget after each step without overflow."},
    {"fp16.min_loss_scale", K::number, "1.0", "Lower bound of the dynamic loss scale."},
    {"fp16.auto_cast", K::boolean, "false",
     "Round the model's floating-point inputs (f32 batch fields) to fp16 before every forward, "
     "as DeepSpeed's auto_cast casts them; needs fp16.enabled."},
    // ---- bf16 (DeepSpeed) ----
    {"bf16", K::object, "{}", "bfloat16 compute with float32 master weights (no loss scale)."},
    {"bf16.enabled", K::boolean, "false", "Train in bfloat16. Exclusive with fp16.enabled."},
    // ---- optimizer (DeepSpeed) ----
    {"optimizer", K::object, "{}", "The optimizer."},
    // optimizer.type's meaning and the parameters under optimizer.params: from each optimizer
    // type's declaration (framework/optim/hparams), by all_keys() below.
    {"optimizer.type", K::string, "\"AdamW\"", "(the registered optimizer types)"},
    {"optimizer.params", K::object, "{}",
     "Optimizer parameters; only those the type uses are accepted."},
    // ---- scheduler (DeepSpeed) ----
    {"scheduler", K::object, "{}",
     "Learning-rate schedule; absent = constant optimizer.params.lr."},
    {"scheduler.type", K::string, "null",
     "\"WarmupLR\", \"WarmupDecayLR\" or \"WarmupCosineLR\"; null = none.", true},
    {"scheduler.params", K::object, "{}",
     "Schedule parameters; only those the type uses are accepted."},
    {"scheduler.params.warmup_min_lr", K::number, "0.0",
     "WarmupLR, WarmupDecayLR: rate at step 0."},
    {"scheduler.params.warmup_max_lr", K::number, "0.001",
     "WarmupLR, WarmupDecayLR: rate at the end of warmup."},
    {"scheduler.params.warmup_num_steps", K::integer, "1000", "Steps of warmup."},
    {"scheduler.params.warmup_type", K::string, "\"log\"", "Warmup curve: \"log\" or \"linear\"."},
    {"scheduler.params.total_num_steps", K::integer,
     "required for WarmupDecayLR and WarmupCosineLR",
     "WarmupDecayLR, WarmupCosineLR: step at which the decay ends."},
    {"scheduler.params.warmup_min_ratio", K::number, "0.0",
     "WarmupCosineLR: rate at step 0 as a fraction of optimizer.params.lr."},
    {"scheduler.params.cos_min_ratio", K::number, "0.0001",
     "WarmupCosineLR: final rate as a fraction of optimizer.params.lr."},
    // ---- zero_optimization (DeepSpeed) ----
    {"zero_optimization", K::object, "{}", "ZeRO: shard training state over data-parallel ranks."},
    {"zero_optimization.stage", K::integer, "0",
     "0 = off, 1 = shard optimizer state, 2 = also gradients, 3 = also parameters."},
    {"zero_optimization.overlap_comm", K::boolean, "true at stage 3, false otherwise",
     "Overlap gradient reduction with the backward pass."},
    {"zero_optimization.reduce_scatter", K::boolean, "true",
     "Stages 1-3 reduce-scatter each unit's gradients; false (all-reduce) is not implemented."},
    {"zero_optimization.reduce_bucket_size", K::integer, "500000000",
     "Stage 0: elements all-reduced per call (stages 1-3 reduce-scatter a whole unit per call). "
     "0 (DeepSpeed: one call per parameter) is not implemented at stage 0."},
    {"zero_optimization.allgather_partitions", K::boolean, "true",
     "Stages 1-2 all-gather the updated parameters; false (a series of broadcasts) is not "
     "implemented."},
    {"zero_optimization.stage3_prefetch_bucket_size", K::integer, "50000000",
     "Stage 3: elements of parameters prefetched ahead of use."},
    {"zero_optimization.allgather_bucket_size", K::integer, "500000000",
     "Stages 1-2: most parameter elements all-gathered in flight after the optimizer step (the "
     "send buffers they need)."},
    {"zero_optimization.stage3_max_live_parameters", K::integer, "1000000000",
     "Stage 3: most gathered parameter elements resident at once."},
    {"zero_optimization.stage3_max_reuse_distance", K::integer, "1000000000",
     "Stage 3: a unit used again within this many elements of other units' uses (in the model's "
     "unit schedule) stays gathered; 0 releases it after every use."},
    {"zero_optimization.stage3_param_persistence_threshold", K::integer, "100000",
     "Stage 3: units (blocks) of at most this many elements stay gathered on every rank."},
    {"zero_optimization.offload_optimizer", K::object, "{}",
     "Keep optimizer state (and run the optimizer step) on the host or NVMe. Stage 1, 2 or 3."},
    {"zero_optimization.offload_optimizer.device", K::string, "\"none\"",
     "\"none\", \"cpu\" or \"nvme\"."},
    {"zero_optimization.offload_optimizer.nvme_path", K::string, "null",
     "Directory for optimizer state when device is \"nvme\".", true},
    {"zero_optimization.offload_optimizer.pin_memory", K::boolean, "false",
     "Use page-locked host buffers (faster device transfers)."},
    {"zero_optimization.offload_optimizer.buffer_count", K::integer, "4",
     "NVMe: buffers for overlapping reads and writes of optimizer state."},
    {"zero_optimization.offload_param", K::object, "{}",
     "Keep each rank's owned parameter slices on the host or NVMe between uses (the device holds "
     "only the units being gathered). Stage 3 only."},
    {"zero_optimization.offload_param.device", K::string, "\"none\"",
     "\"none\" (slices on the device), \"cpu\" (host memory) or \"nvme\" (a swap file per rank "
     "under nvme_path). Needs stage 3."},
    {"zero_optimization.offload_param.nvme_path", K::string, "null",
     "Directory for the parameter swap files when device is \"nvme\" (created if missing; not "
     "inside strata.checkpoint.dir; may be the optimizer's).",
     true},
    {"zero_optimization.offload_param.pin_memory", K::boolean, "false",
     "Use page-locked host buffers (with CUDA)."},
    {"zero_optimization.offload_param.buffer_count", K::integer, "5",
     "NVMe: host buffers, each the size of the largest unit's slice (the one in use and the next "
     "ones read ahead); at least 2."},
    {"zero_optimization.offload_param.buffer_size", K::integer, "100000000",
     "Accepted only at its default (buffers are sized to the largest unit's slice)."},
    {"zero_optimization.offload_param.max_in_cpu", K::integer, "1000000000",
     "Accepted only at its default (host memory for NVMe parameters is buffer_count slices)."},
    // ---- aio (DeepSpeed) ----
    {"aio", K::object, "{}", "Asynchronous I/O of the NVMe tier."},
    {"aio.block_size", K::integer, "1048576", "Bytes per I/O request (a multiple of 4096)."},
    {"aio.queue_depth", K::integer, "16", "I/O requests in flight per I/O thread (DeepSpeed: 8)."},
    {"aio.thread_count", K::integer, "1", "I/O submission threads."},
    {"aio.single_submit", K::boolean, "false",
     "Submit requests one at a time instead of in batches."},
    {"aio.overlap_events", K::boolean, "true", "Submit new requests while earlier ones complete."},
    // ---- monitors (DeepSpeed's) ----
    {"tensorboard", K::object, "{}",
     "TensorBoard event files written by rank 0 under output_path/job_name: loss, validation "
     "loss, learning rate, loss scale, gradient norm, tokens/s and peak memory per tier against "
     "the samples trained (DeepSpeed's Train/Samples/... tags)."},
    {"tensorboard.enabled", K::boolean, "false", "Write TensorBoard event files."},
    {"tensorboard.output_path", K::string, "null",
     "Folder holding the job's folder; null or \"\" = ./tensorboard.", true},
    {"tensorboard.job_name", K::string, "\"DeepSpeedJobName\"", "The job's folder under output_path."},
    {"csv_monitor", K::object, "{}",
     "DeepSpeed's CSV files written by rank 0 under output_path/job_name: one file per metric "
     "(Train_Samples_train_loss.csv, ...), rows \"step,value\" with the samples trained as step."},
    {"csv_monitor.enabled", K::boolean, "false", "Write the CSV files."},
    {"csv_monitor.output_path", K::string, "null",
     "Folder holding the job's folder; null or \"\" = ./csv_monitor.", true},
    {"csv_monitor.job_name", K::string, "\"DeepSpeedJobName\"", "The job's folder under output_path."},
    // ---- strata ----
    {"strata", K::object, "{}", "What DeepSpeed's schema lacks."},
    {"strata.seed", K::integer, "1234",
     "Seed of parameter initialisation and every random stream."},
    {"strata.train_steps", K::integer, "1000", "Optimizer steps to train."},
    {"strata.device", K::string, "\"auto\"",
     "\"auto\" (the local GPU when one is usable, else the CPU; the choice is printed), \"cpu\" "
     "or \"cuda\" (each rank uses its local GPU; an error where none is usable)."},
    {"strata.tensor_parallel_size", K::integer, "1",
     "Ranks that split each layer (Megatron tensor parallelism: heads, MLP and vocabulary; divides n_head and vocab_size; docs/parallelism.md)."},
    {"strata.pipeline_parallel_size", K::integer, "1",
     "Pipeline stages: consecutive layers per rank, 1F1B over the gradient_accumulation_steps "
     "micro-batches (docs/parallelism.md)."},
    {"strata.virtual_pipeline_stages", K::integer, "1",
     "Model chunks per pipeline rank: the interleaved 1F1B schedule (Megatron-LM's virtual "
     "pipeline stages) cuts the model into pipeline_parallel_size × this many chunks, rank r "
     "holding chunks r, r + pp, ...; the bubble falls to (pp − 1)/(v·m) of the ideal step. Needs "
     "pipeline_parallel_size ≥ 2, n_layer ≥ pp × v (chunks are cut by cost like stages) and gradient_accumulation_steps a "
     "multiple of pp (docs/parallelism.md)."},
    {"strata.sequence_parallel", K::boolean, "false",
     "Megatron-LM's sequence parallelism: outside the split layers (LayerNorms, residual adds, "
     "the embedding's output) each tensor-parallel rank holds 1/tensor_parallel_size of the "
     "tokens, so those activations shrink by tp; the all-reduces become all-gathers and "
     "reduce-scatters. Needs tensor_parallel_size ≥ 2 and block_size a multiple of it "
     "(docs/parallelism.md)."},
    {"strata.activation_checkpointing", K::boolean_or_string, "false",
     "Activation recomputation: false or \"none\" (keep what backward reads); \"selective\" "
     "(drop the LayerNorm and GELU outputs and the attention core's output and log-sum-exps, "
     "recompute them in backward: no matrix product with a weight is redone); true or \"full\" "
     "(keep only each block's input and recompute the whole block in backward). Bitwise the same "
     "training either way; each mode composes with strata.sequence_parallel (docs/memory.md)."},
    {"strata.allow_tf32", K::boolean, "false",
     "Let f32 matrix products on a GPU use TF32 tensor cores (10-bit mantissa products, f32 "
     "sums: faster, about 1e-3 relative error; PyTorch's torch.backends.cuda.matmul.allow_tf32). "
     "Off: f32 products are exact f32 (docs/gpu.md). No effect on the CPU or on 16-bit products."},
    {"strata.allow_rounded_attention", K::boolean, "false",
     "Let the tensor-core attention kernels (bf16/fp16 q, k, v on a GPU of compute capability "
     ">= 8.0) round the probabilities and their gradients to 16 bits once before the products "
     "with V, dO, K and Q, as FlashAttention and PyTorch's scaled_dot_product_attention do: "
     "fewer tensor-core products, about 1e-3 (bf16) or 1e-4 (fp16) relative error in attention's "
     "outputs. Off: within 1e-5 of f32 attention (docs/gpu.md). No effect on the CPU, on f32 "
     "attention or on a T4."},
    {"strata.optimizer_in_backward", K::boolean, "false",
     "Update each unit as soon as its gradient is complete in the last micro-batch's backward "
     "(PyTorch's optimizer hooks in backward): offloaded gradients are never written, and "
     "offloaded optimizer state moves while backward computes. Needs ZeRO stage >= 1, Adam, "
     "AdamW, AdamW8bit, SGD, Lion or Lion8bit, no gradient_clipping, no fp16, no pipeline, "
     "strata.memory.on_oom \"fail\" (docs/offload.md)."},
    {"strata.activation_dtype", K::string, "\"auto\"",
     "Activations and their gradients: \"auto\" (16-bit with bf16/fp16 enabled, else f32) or "
     "\"f32\" (f32 activations also with 16-bit parameters: more memory, the exactness of f32)."},
    {"strata.memory", K::object, "{}",
     "Caps per memory tier (exceeding one raises OutOfMemory with a breakdown)."},
    {"strata.memory.device_limit", K::size, "null",
     "Device memory cap: bytes or a size such as \"2GiB\"; null = the device's capacity. "
     "Command line: --device-memory.",
     true},
    {"strata.memory.host_limit", K::size, "null",
     "Host memory cap; null = none. Command line: --host-memory.", true},
    {"strata.memory.nvme_limit", K::size, "null",
     "NVMe space cap; null = none. Command line: --nvme-memory.", true},
    {"strata.memory.on_oom", K::string, "\"fail\"",
     "Out of memory during a step's forward/backward: \"fail\" (the error says what fits, from "
     "the memory planner) or \"recover\" (halve the micro-batch, double the accumulation, redo "
     "the step; down to micro-batch 1; kept in checkpoints)."},
    {"strata.model", K::object, "{}", "The model (examples/train_gpt)."},
    {"strata.model.type", K::string, "\"gpt\"", "Model family; \"gpt\" (GPT-2 architecture)."},
    {"strata.model.n_layer", K::integer, "12", "Transformer blocks."},
    {"strata.model.n_head", K::integer, "12",
     "Attention heads (divides n_embd and by tensor_parallel_size)."},
    {"strata.model.n_embd", K::integer, "768", "Embedding width."},
    {"strata.model.block_size", K::integer, "1024", "Context length in tokens."},
    {"strata.model.vocab_size", K::integer, "50257", "Vocabulary size."},
    {"strata.model.dropout", K::number, "0.0", "Must be 0: Strata's GPT has no dropout yet."},
    {"strata.data", K::object, "{}", "Training data."},
    {"strata.data.train", K::string, "null", "Token file for training.", true},
    {"strata.data.valid", K::string, "null", "Token file for evaluation.", true},
    {"strata.data.shuffle", K::boolean, "true", "Shuffle samples each epoch."},
    {"strata.data.seed", K::integer, "strata.seed", "Seed of the sampler."},
    {"strata.eval", K::object, "{}", "Evaluation on strata.data.valid."},
    {"strata.eval.interval", K::integer, "0", "Evaluate every this many steps; 0 = never."},
    {"strata.eval.iters", K::integer, "20", "Batches per evaluation."},
    {"strata.sample", K::object, "{}", "Text sampled from the model after training."},
    {"strata.sample.tokens", K::integer, "0", "Tokens to generate; 0 = no sampling."},
    {"strata.sample.temperature", K::number, "1.0", "Softmax temperature (> 0)."},
    {"strata.sample.top_k", K::integer, "0", "Sample among the k most likely tokens; 0 = all."},
    {"strata.checkpoint", K::object, "{}", "Checkpoint policy."},
    {"strata.checkpoint.dir", K::string, "null", "Directory of checkpoints; null = no checkpoints.",
     true},
    {"strata.checkpoint.interval", K::integer, "0",
     "Save every this many steps; 0 = only at the end of training (when dir is set)."},
    {"strata.checkpoint.save_total_limit", K::integer, "0",
     "Newest checkpoints kept; 0 = keep all."},
    {"strata.checkpoint.keep_every", K::integer, "0",
     "Also keep checkpoints whose step is a multiple of this; 0 = none."},
    {"strata.checkpoint.async", K::boolean, "false", "Write checkpoints in the background."},
    {"strata.checkpoint.resume", K::string, "\"auto\"",
     "\"auto\" = newest complete checkpoint in dir if any, \"none\" = start fresh, or a checkpoint "
     "path."},
    {"strata.comm", K::object, "{}", "Communication."},
    {"strata.comm.timeout_s", K::number, "300.0",
     "Seconds a collective may take before it is reported as hung."},
};

// Keys that neither Strata nor DeepSpeed reads but that configs carry, with what to know.
struct Hint {
  std::string_view path, hint;
};
constexpr std::string_view kNoLossScale =
    "bfloat16 needs no loss scaling; only fp16 has a loss scale (DeepSpeed refuses this key "
    "too since its bf16 section became a strict schema in 2025: remove it)";
constexpr Hint kHints[] = {
    {"bf16.loss_scale", kNoLossScale},
    {"bf16.initial_scale_power", kNoLossScale},
    {"bf16.loss_scale_window", kNoLossScale},
    {"bf16.hysteresis", kNoLossScale},
    {"bf16.consecutive_hysteresis", kNoLossScale},
    {"bf16.min_loss_scale", kNoLossScale},
    {"optimizer.params.max_grad_norm",
     "it is not an optimizer parameter (DeepSpeed refuses it too): set gradient_clipping"},
};

std::string_view parent_of(std::string_view path) {
  const auto dot = path.rfind('.');
  return dot == std::string_view::npos ? std::string_view{} : path.substr(0, dot);
}

std::string_view leaf_of(std::string_view path) {
  const auto dot = path.rfind('.');
  return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

bool integral(const nlohmann::json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && std::trunc(d) == d && std::fabs(d) < 9.2e18;
}

Kind key_kind(optim::HKind k) {
  switch (k) {
    case optim::HKind::number:
    case optim::HKind::optional_number:
      return Kind::number;
    case optim::HKind::boolean:
      return Kind::boolean;
    case optim::HKind::integer:
      return Kind::integer;
    case optim::HKind::pair:
      return Kind::number_pair;
  }
  return Kind::number;
}

// "A, B: text C: other" grouping the types by their text, most common first; the text alone
// when every type has the same. `join` separates the groups.
std::string by_type(const std::vector<std::pair<std::string_view, std::string>>& per_type,
                    bool all_types, std::string_view join, bool name_first_group) {
  std::vector<std::pair<std::string, std::vector<std::string_view>>> groups;
  for (const auto& [type, text] : per_type) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == text; });
    if (it == groups.end())
      groups.push_back({text, {type}});
    else
      it->second.push_back(type);
  }
  if (groups.size() == 1 && all_types) return groups[0].first;
  std::stable_sort(groups.begin(), groups.end(),
                   [](auto& a, auto& b) { return a.second.size() > b.second.size(); });
  std::string out;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (i > 0) out += join;
    if (i > 0 || name_first_group || !all_types)
      out += fmt::format("{}: ", fmt::join(groups[i].second, ", "));
    out += groups[i].first;
  }
  return out;
}

// optimizer.type's line and one key per parameter name any registered optimizer type takes
// (kind, default and meaning per type), in order of first appearance.
void add_optimizer_keys(std::vector<KeySpec>& out, std::deque<std::string>& texts) {
  const auto specs = optim::optimizer_specs();
  std::string types;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (i > 0) types += i + 1 == specs.size() ? " or " : ", ";
    types += fmt::format("\"{}\"", specs[i]->name);
    if (!specs[i]->summary.empty()) types += fmt::format(" ({})", specs[i]->summary);
  }
  texts.push_back(types + " (any letter case); each takes its own optimizer.params.");
  for (KeySpec& k : out)
    if (k.path == "optimizer.type") k.meaning = texts.back();
  std::vector<std::string_view> names;
  for (const optim::OptimizerSpec* s : specs)
    for (const optim::HParam& p : s->params)
      if (std::find(names.begin(), names.end(), p.name) == names.end()) names.push_back(p.name);
  for (std::string_view name : names) {
    std::vector<std::pair<std::string_view, std::string>> defaults, docs;
    bool nullable = false, pair = false, single = false;
    Kind kind = Kind::number;
    for (const optim::OptimizerSpec* s : specs) {
      const optim::HParam* p = s->find(name);
      if (!p) continue;
      defaults.emplace_back(s->name, optim::value_text(p->default_value));
      docs.emplace_back(s->name, std::string(p->doc));
      nullable |= p->kind == optim::HKind::optional_number;
      kind = key_kind(p->kind);
      (p->kind == optim::HKind::pair ? pair : single) = true;
    }
    if (pair && single) kind = Kind::number_or_pair;
    const bool everyone = defaults.size() == specs.size();
    texts.push_back(fmt::format("optimizer.params.{}", name));
    const std::string_view path = texts.back();
    texts.push_back(by_type(defaults, true, "; ", false));
    const std::string_view def = texts.back();
    texts.push_back(by_type(docs, everyone, " ", true));
    out.push_back({path, kind, def, texts.back(), nullable});
  }
}

const std::vector<KeySpec>& all_keys() {
  static std::deque<std::string> texts;
  static const std::vector<KeySpec> keys = [] {
    std::vector<KeySpec> out;
    for (const KeySpec& k : kSchema) {
      out.push_back(k);
      if (k.path == "optimizer.params") add_optimizer_keys(out, texts);
    }
    return out;
  }();
  return keys;
}

}  // namespace

bool kind_matches(Kind k, const nlohmann::json& v) {
  switch (k) {
    case Kind::boolean:
      return v.is_boolean();
    case Kind::integer:
      return integral(v);
    case Kind::number:
      return v.is_number();
    case Kind::string:
      return v.is_string();
    case Kind::size:
      return v.is_string() || (integral(v) && v.get<double>() >= 0);
    case Kind::number_pair:
      return v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number();
    case Kind::number_or_pair:
      return v.is_number() || kind_matches(Kind::number_pair, v);
    case Kind::boolean_or_string:
      return v.is_boolean() || v.is_string();
    case Kind::object:
      return v.is_object();
  }
  return false;
}

namespace {

void check_object(const nlohmann::json& doc, const nlohmann::json& obj, const std::string& prefix,
                  Problems& problems, std::vector<std::string>& notes) {
  for (const auto& [key, value] : obj.items()) {
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    const KeySpec* spec = find_key(path);
    if (!spec) {
      // Parameters are judged with the optimizer or schedule they belong to (parse.cpp).
      if (prefix == "optimizer.params" || prefix == "scheduler.params") continue;
      if (const DeepSpeedKey* ds = find_deepspeed_key(path))
        judge_deepspeed_key(*ds, value, doc, problems, notes);
      else
        problems.add(ProblemKind::mistake, path, unknown_key_message(path), nearest_key(path));
      continue;
    }
    if (value.is_null() && spec->nullable) continue;
    if (!kind_matches(spec->kind, value)) {
      problems.mistake(path, "{} must be {}, got {} ({})", path, kind_name(spec->kind),
                       value.dump(), json_type_name(value));
      continue;
    }
    if (spec->kind == Kind::size && value.is_string()) {
      try {
        (void)parse_bytes(value.get<std::string>());
      } catch (const UserError&) {
        problems.mistake(path,
                         "{} is {}; allowed: a byte count such as 1073741824 or a size such as "
                         "\"512MiB\", \"2GiB\", \"1.5GB\" (KiB/MiB/GiB/TiB are powers of 1024, "
                         "KB/MB/GB/TB of 1000)",
                         path, value.dump());
      }
    }
    if (value.is_object()) check_object(doc, value, path, problems, notes);
  }
}

}  // namespace

std::span<const KeySpec> schema() {
  return all_keys();
}

const KeySpec* find_key(std::string_view path) {
  for (const auto& k : all_keys())
    if (k.path == path) return &k;
  return nullptr;
}

std::string_view kind_name(Kind k) {
  switch (k) {
    case Kind::boolean:
      return "true or false";
    case Kind::integer:
      return "an integer";
    case Kind::number:
      return "a number";
    case Kind::string:
      return "a string";
    case Kind::size:
      return "a byte count or a size string such as \"2GiB\"";
    case Kind::number_pair:
      return "an array of two numbers";
    case Kind::number_or_pair:
      return "a number or an array of two numbers";
    case Kind::boolean_or_string:
      return "true, false or a string";
    case Kind::object:
      return "an object";
  }
  return "?";
}

std::string json_type_name(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return fmt::format("an array of {}", v.size());
  return "an object";
}

std::string_view key_hint(std::string_view path) {
  for (const auto& h : kHints)
    if (h.path == path) return h.hint;
  return {};
}

std::string nearest_key(std::string_view path) {
  const std::string_view parent = parent_of(path);
  std::vector<std::string> candidates;
  for (const auto& k : all_keys())
    if (parent_of(k.path) == parent) candidates.emplace_back(leaf_of(k.path));
  for (auto& d : deepspeed_keys_in(parent)) candidates.push_back(std::move(d));
  const auto best = closest(leaf_of(path), candidates);
  if (!best) return {};
  return parent.empty() ? *best : fmt::format("{}.{}", parent, *best);
}

std::string unknown_key_message(std::string_view path) {
  if (const std::string_view hint = key_hint(path); !hint.empty())
    return fmt::format("unknown key '{}': {}", path, hint);
  const std::string_view parent = parent_of(path);
  const std::string_view leaf = leaf_of(path);
  const KeySpec* parent_spec = parent.empty() ? nullptr : find_key(parent);
  if (!parent.empty() && parent_spec && parent_spec->kind != Kind::object)
    return fmt::format("unknown key '{}': {} takes {}, not keys", path, parent,
                       kind_name(parent_spec->kind));
  if (const std::string best = nearest_key(path); !best.empty())
    return fmt::format("unknown key '{}'; did you mean '{}'?", path, best);
  std::vector<std::string> siblings;
  for (const auto& k : all_keys())
    if (parent_of(k.path) == parent) siblings.emplace_back(leaf_of(k.path));
  // The same name in another section is worth knowing (a key put in the wrong place).
  std::string elsewhere;
  for (const auto& k : all_keys())
    if (k.path != path && leaf_of(k.path) == leaf && parent_of(k.path) != parent)
      elsewhere = fmt::format(" ('{}' is a key of {})", leaf, parent_of(k.path));
  if (siblings.empty())
    return fmt::format("unknown key '{}': {} takes no keys{}", path, parent, elsewhere);
  return fmt::format(
      "unknown key '{}'; valid keys {}: {}{}", path,
      parent.empty() ? std::string("at the top level") : fmt::format("in {}", parent),
      fmt::join(siblings, ", "), elsewhere);
}

void unknown_key(std::string_view path) {
  user_fail("config", "{}", unknown_key_message(path));
}

void check_structure(const nlohmann::json& doc, Problems& problems,
                     std::vector<std::string>& notes) {
  if (!doc.is_object()) {
    problems.mistake("", "a config must be a JSON object {{...}}, got {}", json_type_name(doc));
    return;
  }
  check_object(doc, doc, "", problems, notes);
}

}  // namespace strata::config
