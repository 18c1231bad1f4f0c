// The hook where a memory planner will choose train_micro_batch_size_per_gpu when a config leaves
// it "auto" and no other batch size determines it. No planner exists yet: until one does, such a
// config is refused with what would resolve it (config parsing asks can_plan_micro_batch()).
#pragma once

#include <cstdint>
#include <optional>

namespace strata::config {

struct Config;

// Whether plan_micro_batch can choose a micro-batch size (false until the planner exists).
bool can_plan_micro_batch();

// The largest micro-batch that fits the memory caps for this config on data_parallel_size ranks,
// or nullopt when it cannot be planned.
std::optional<std::int64_t> plan_micro_batch(const Config& cfg, std::int64_t data_parallel_size);

}  // namespace strata::config
