#include "framework/config/auto_values.hpp"

#include <cmath>

#include "framework/config/deepspeed_keys.hpp"
#include "framework/config/schema.hpp"
#include "framework/config/validate.hpp"

namespace strata::config {

namespace {

using json = nlohmann::json;

const json* at(const json& doc, std::string_view path) {
  const json* cur = &doc;
  while (!path.empty()) {
    const auto dot = path.find('.');
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(std::string(path.substr(0, dot)));
    if (it == cur->end()) return nullptr;
    cur = &*it;
    path = dot == std::string_view::npos ? std::string_view{} : path.substr(dot + 1);
  }
  return cur;
}

json* parent_of(json& doc, std::string_view path, std::string& leaf) {
  const auto dot = path.rfind('.');
  leaf = std::string(dot == std::string_view::npos ? path : path.substr(dot + 1));
  if (dot == std::string_view::npos) return &doc;
  return const_cast<json*>(at(doc, path.substr(0, dot)));
}

void erase(json& doc, std::string_view path) {
  std::string leaf;
  if (json* p = parent_of(doc, path, leaf)) p->erase(leaf);
}

void set(json& doc, std::string_view path, json value) {
  std::string leaf;
  if (json* p = parent_of(doc, path, leaf)) (*p)[leaf] = std::move(value);
}

void collect(const json& v, const std::string& prefix, std::vector<std::string>& out) {
  for (const auto& [k, x] : v.items()) {
    const std::string path = prefix.empty() ? k : prefix + "." + k;
    if (x.is_object())
      collect(x, path, out);
    else if (x.is_string() && x.get<std::string>() == "auto")
      out.push_back(path);
  }
}

// The integer at path in doc when it is one (>= lo), else the schema default of path.
std::int64_t integer_or_default(const json& doc, std::string_view path, std::int64_t lo) {
  const json* v = at(doc, path);
  if (v && v->is_number() && std::trunc(v->get<double>()) == v->get<double>() &&
      v->get<double>() >= static_cast<double>(lo))
    return static_cast<std::int64_t>(v->get<double>());
  return json::parse(find_key(path)->default_value).get<std::int64_t>();
}

// The keys Hugging Face fills from its command line (TrainingArguments): an "auto" there takes
// the default of that flag, as Hugging Face does when the flag is not given; Strata's command
// line gives another value with --set (the example).
struct FromCommandLine {
  std::string_view key, value, hf_flag, example;
};
constexpr FromCommandLine kFromCommandLine[] = {
    {"gradient_clipping", "1.0", "--max_grad_norm", "0.5"},
    {"optimizer.params.lr", "5e-05", "--learning_rate", "0.0001"},
    {"optimizer.params.betas", "[0.9, 0.999]", "--adam_beta1 and --adam_beta2", "[0.9, 0.95]"},
    {"optimizer.params.eps", "1e-08", "--adam_epsilon", "1e-06"},
    {"optimizer.params.weight_decay", "0.0", "--weight_decay", "0.01"},
    {"scheduler.params.warmup_num_steps", "0", "--warmup_steps", "100"},
};

const FromCommandLine* from_command_line(std::string_view key) {
  for (const auto& c : kFromCommandLine)
    if (c.key == key) return &c;
  return nullptr;
}

// `--set key=value`, quoted for the shell when the value has characters it would expand.
std::string set_flag(std::string_view key, std::string_view value) {
  const bool quote = value.find_first_of("[] ") != std::string_view::npos;
  return quote ? fmt::format("--set '{}={}'", key, value) : fmt::format("--set {}={}", key, value);
}

}  // namespace

AutoBatch resolve_auto(json& doc, Problems& problems, std::vector<std::string>& notes) {
  AutoBatch batch;
  if (!doc.is_object()) return batch;
  const json original = doc;
  std::vector<std::string> autos;
  collect(original, "", autos);
  const auto is_auto = [&](std::string_view p) {
    const json* v = at(original, p);
    return v && v->is_string() && v->get<std::string>() == "auto";
  };
  const json* stage_value = at(original, "zero_optimization.stage");
  const int stage = stage_value && stage_value->is_number_integer() &&
                            stage_value->get<std::int64_t>() >= 0 &&
                            stage_value->get<std::int64_t>() <= 3
                        ? static_cast<int>(stage_value->get<std::int64_t>())
                        : 0;

  for (const std::string& path : autos) {
    const auto note = [&](std::string text) { notes.push_back(std::move(text)); };
    if (path == "train_batch_size") {
      erase(doc, path);
      batch.train_batch_size = true;
      note(
          "auto: train_batch_size = train_micro_batch_size_per_gpu × "
          "gradient_accumulation_steps × data-parallel size, as Hugging Face computes it");
    } else if (path == "train_micro_batch_size_per_gpu") {
      erase(doc, path);
      batch.train_micro_batch_size_per_gpu = true;
      const json* t = at(original, "train_batch_size");
      const json* cap = at(original, "strata.memory.device_limit");
      if (t && t->is_number())
        note(
            "auto: train_micro_batch_size_per_gpu = train_batch_size / "
            "(gradient_accumulation_steps × data-parallel size)");
      else if (cap && !cap->is_null())
        note(
            "auto: train_micro_batch_size_per_gpu = the largest micro-batch whose training step "
            "fits strata.memory.device_limit, chosen by the memory planner at start-up (`strata "
            "plan` shows the plan)");
    } else if (path == "gradient_accumulation_steps") {
      erase(doc, path);
      batch.gradient_accumulation_steps = true;
      note(
          "auto: gradient_accumulation_steps is derived from the two batch sizes when both are "
          "given, else 1 (Hugging Face's default)");
    } else if (path == "fp16.enabled" || path == "bf16.enabled") {
      set(doc, path, false);
      (path == "fp16.enabled" ? batch.fp16_enabled : batch.bf16_enabled) = true;
      note(fmt::format("auto: {} follows the device at start-up: bf16 on a GPU with bfloat16 "
                       "(compute capability 8.0 or newer), fp16 with dynamic loss scaling on an "
                       "older GPU, neither on the CPU (--set {}=true or false decides)",
                       path, path));
    } else if (path == "scheduler.params.warmup_min_lr") {
      set(doc, path, 0);
      note("auto: scheduler.params.warmup_min_lr = 0, as Hugging Face sets it");
    } else if (path == "scheduler.params.warmup_max_lr") {
      const json* lr = at(original, "optimizer.params.lr");
      const json hf_lr = json::parse(from_command_line("optimizer.params.lr")->value);
      if (is_auto("optimizer.params.lr")) lr = &hf_lr;  // resolved below to Hugging Face's
      if (!lr || lr->is_null()) {
        set(doc, path, json::parse(find_key("optimizer.params.lr")->default_value));
        note(
            fmt::format("auto: {} = {} (the default optimizer.params.lr, as Hugging Face sets it "
                        "from the learning rate)",
                        path, find_key("optimizer.params.lr")->default_value));
      } else if (lr->is_number()) {
        set(doc, path, *lr);
        note(
            fmt::format("auto: {} = {} (optimizer.params.lr, as Hugging Face sets it from the "
                        "learning rate)",
                        path, lr->dump()));
      } else {
        erase(doc, path);  // optimizer.params.lr's own problem names what resolves both
      }
    } else if (path == "scheduler.params.total_num_steps") {
      const std::int64_t steps = integer_or_default(original, "strata.train_steps", 1);
      set(doc, path, steps);
      note(
          fmt::format("auto: {} = {} (strata.train_steps, as Hugging Face uses its number of "
                      "training steps)",
                      path, steps));
    } else if (path == "zero_optimization.reduce_bucket_size" ||
               path == "zero_optimization.stage3_prefetch_bucket_size" ||
               path == "zero_optimization.stage3_param_persistence_threshold") {
      if (const std::string why = unused_at_stage(path, stage); !why.empty()) {
        erase(doc, path);
        note(fmt::format("ignored: {}=\"auto\": {}", path, why));
        continue;
      }
      const std::int64_t h = integer_or_default(original, "strata.model.n_embd", 1);
      const std::int64_t v = path == "zero_optimization.reduce_bucket_size" ? h * h
                             : path == "zero_optimization.stage3_prefetch_bucket_size"
                                 ? static_cast<std::int64_t>(0.9 * static_cast<double>(h * h))
                                 : 10 * h;
      set(doc, path, v);
      note(
          fmt::format("auto: {} = {} (from strata.model.n_embd {}, as Hugging Face computes it "
                      "from the model's hidden size)",
                      path, v, h));
    } else if (const FromCommandLine* f = from_command_line(path)) {
      set(doc, path, json::parse(f->value));
      const bool follows =
          path == "optimizer.params.lr" && is_auto("scheduler.params.warmup_max_lr");
      note(fmt::format("auto: {} = {}, the default of Hugging Face's {}, which fills it when not "
                       "given{} (another value: {})",
                       path, f->value, f->hf_flag,
                       follows ? "; scheduler.params.warmup_max_lr follows it" : "",
                       set_flag(path, f->example)));
    } else if (const KeySpec* spec = find_key(path)) {
      if (spec->kind == Kind::string) continue;  // a value of its own (strata.checkpoint.resume)
      erase(doc, path);
      const bool literal = json::accept(spec->default_value);
      problems.add(
          ProblemKind::unresolved_auto, path,
          fmt::format("{} is \"auto\", which Strata resolves only where the config "
                      "determines the value (docs/config.md, \"auto\"): {}",
                      path,
                      literal ? "give it a value, e.g. " + set_flag(path, spec->default_value)
                              : std::string("give it a value")));
    } else if (const DeepSpeedKey* ds = find_deepspeed_key(path)) {
      erase(doc, path);
      if (ds->what.empty())
        note(fmt::format("ignored: {}=\"auto\": {}", path, ds->why));
      else
        problems.add(ProblemKind::unresolved_auto, path,
                     fmt::format("{} is \"auto\", which neither DeepSpeed nor Strata resolves "
                                 "(only Hugging Face's integration fills some keys): give it a "
                                 "value",
                                 path));
    }
  }
  return batch;
}

}  // namespace strata::config
