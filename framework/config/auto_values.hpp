// "auto" values, as Hugging Face's DeepSpeed integration writes them: resolved the way its
// trainer_config_process/finalize does where the config determines the value (batch sizes from
// each other and the world size, the schedule's bounds from the optimizer and strata.train_steps,
// ZeRO bucket sizes from strata.model.n_embd); where only Hugging Face's command line would
// (learning rate, betas, ...), the default of its flag (TrainingArguments'), as Hugging Face
// takes when the flag is not given, with a note naming the key, the value and the --set that
// gives another.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "framework/config/problems.hpp"

namespace strata::config {

// Which batch sizes were "auto" (removed from the document: derived like keys not given).
struct AutoBatch {
  bool train_batch_size = false;
  bool train_micro_batch_size_per_gpu = false;
  bool gradient_accumulation_steps = false;
  // fp16.enabled / bf16.enabled were "auto" (false in the document): the device chooses the
  // precision at start-up (train::resolve_device).
  bool fp16_enabled = false;
  bool bf16_enabled = false;
};

// Replaces or removes every "auto" of doc that Strata knows, noting each resolution; an "auto"
// nothing determines is a problem (unresolved_auto) naming the --set that would resolve it.
// (train_micro_batch_size_per_gpu with no other batch size is left to check_config: the planner,
// or Hugging Face's default.)
// String keys keep "auto" (strata.checkpoint.resume takes it); unknown keys are left for the
// structure check.
AutoBatch resolve_auto(nlohmann::json& doc, Problems& problems, std::vector<std::string>& notes);

}  // namespace strata::config
