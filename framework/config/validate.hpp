// Rules that involve more than one key, checked after each key is read (used by check_config),
// and which ZeRO tuning keys a stage does not use.
#pragma once

#include <string>
#include <string_view>

#include "framework/config/config.hpp"
#include "framework/config/problems.hpp"

namespace strata::config {

// fp16 with bf16, offload without the ZeRO stage it needs, nvme without a path, heads that do
// not divide the width, ... Rules about a key that already has a problem are skipped.
void check_rules(const Config& cfg, Problems& problems);

// The batch rules that hold for every world size: at least train_batch_size or
// train_micro_batch_size_per_gpu given (or, for an "auto" micro-batch, a planner to choose it),
// and the given ones divide each other. auto_given: a batch size was "auto".
void check_batch_given(const Config& cfg, Problems& problems, bool auto_given = false);

// Why a ZeRO key Strata reads changes nothing at this stage (e.g. stage3_* below stage 3), or ""
// when the stage uses it.
std::string unused_at_stage(std::string_view key, int stage);

}  // namespace strata::config
