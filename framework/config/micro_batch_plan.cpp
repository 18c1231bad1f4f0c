#include "framework/config/micro_batch_plan.hpp"

namespace strata::config {

bool can_plan_micro_batch() {
  return false;
}

std::optional<std::int64_t> plan_micro_batch(const Config& /*cfg*/,
                                             std::int64_t /*data_parallel_size*/) {
  return std::nullopt;
}

}  // namespace strata::config
