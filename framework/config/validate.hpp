// Rules that involve more than one key, checked after each key is read (used by parse_config).
#pragma once

#include "framework/config/config.hpp"

namespace strata::config {

// fp16 with bf16, offload without the ZeRO stage it needs, nvme without a path, heads that do
// not divide the width, ... Throws UserError tagged "config".
void check_rules(const Config& cfg);

// The batch rules that hold for every world size: at least train_batch_size or
// train_micro_batch_size_per_gpu given, and the given ones divide each other.
void check_batch_given(const Config& cfg);

}  // namespace strata::config
