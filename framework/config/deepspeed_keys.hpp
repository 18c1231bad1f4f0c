// DeepSpeed's config keys that Strata's schema does not have: for each, the values at which it
// changes nothing in Strata (accepted, reported once as ignored, with why) and, at other values,
// the DeepSpeed feature Strata does not implement. Also DeepSpeed's old names (aliases), and the
// optimizers and schedules DeepSpeed has beyond Strata's. Sources: DeepSpeed's docs/config-json
// and deepspeed/runtime/{config,constants}.py, zero/config.py, zero/offload_config.py.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "framework/config/problems.hpp"
#include "framework/config/schema.hpp"

namespace strata::config {

struct DeepSpeedKey {
  std::string_view path;  // dotted, as in DeepSpeed's config
  Kind kind;              // JSON kind DeepSpeed expects (object: a section)
  // Whether value (in config doc) changes nothing in Strata; nullptr for a section whose keys
  // are judged one by one (e.g. DeepSpeed's `checkpoint`).
  bool (*noop)(const nlohmann::json& value, const nlohmann::json& doc);
  std::string_view why;   // why those values change nothing in Strata (the "ignored" note)
  std::string_view what;  // at other values: the DeepSpeed feature Strata does not implement
  std::string_view fix;   // what to do about it
  bool nullable = false;  // null is a valid value
};

// One line per DeepSpeed key Strata does not have, for `strata config keys --deepspeed` and
// docs/config.md: the key (with the optimizer types it belongs to), the values accepted as a
// no-op ("-" for none), and what it asks for otherwise.
struct DeepSpeedKeyRow {
  std::string key, noop_values, otherwise;
};
std::vector<DeepSpeedKeyRow> deepspeed_key_rows();

// The entry for a dotted path outside optimizer.params and scheduler.params, or nullptr.
const DeepSpeedKey* find_deepspeed_key(std::string_view path);

// Names of the entries directly inside a section ("" = the top level), for suggestions.
std::vector<std::string> deepspeed_keys_in(std::string_view section);

// An optimizer parameter of DeepSpeed's optimizers beyond Strata's (torch_adam, amsgrad, ...), or
// nullptr; which types take it is each type's declaration (OptimizerSpec::deepspeed_params).
const DeepSpeedKey* find_optimizer_param(std::string_view name);

// A scheduler parameter DeepSpeed's warmup schedules take beyond Strata's, or nullptr.
const DeepSpeedKey* find_scheduler_param(std::string_view name);

// What DeepSpeed's optimizer (or torch.optim optimizer DeepSpeed loads by name) of this type is,
// when Strata does not implement it ("" when type is not one); any letter case.
std::string_view deepspeed_optimizer(std::string_view type);
// Likewise for DeepSpeed's learning-rate schedules.
std::string_view deepspeed_scheduler(std::string_view type);

// Judges value (at key k.path of config doc): a note "ignored: ..." when it changes nothing in
// Strata, else a problem naming the DeepSpeed feature; a value of the wrong kind is a mistake.
// Sections with noop == nullptr are judged key by key (unknown keys inside are mistakes).
void judge_deepspeed_key(const DeepSpeedKey& k, const nlohmann::json& value,
                         const nlohmann::json& doc, Problems& problems,
                         std::vector<std::string>& notes);

// Rewrites DeepSpeed's old names into the ones Strata reads (bfloat16 → bf16,
// zero_optimization.cpu_offload → offload_optimizer.device "cpu", aio.intra_op_parallelism →
// aio.thread_count, ...), noting each; old and new name both given is a mistake.
void apply_aliases(nlohmann::json& doc, Problems& problems, std::vector<std::string>& notes);

// The problem line for a DeepSpeed feature Strata does not implement: "<shown> asks for <what>, a
// DeepSpeed feature Strata does not implement; <fix>".
std::string not_implemented(std::string_view shown, std::string_view what, std::string_view fix);

// "true", "\"cpu\"", "{...}" (sections), "[0.9,0.999]": a value as messages show it.
std::string value_text(const nlohmann::json& v);

}  // namespace strata::config
