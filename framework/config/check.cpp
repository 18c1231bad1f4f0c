// check_config with a world size (what `strata config check` answers) and parse_config naming
// the source of the document.
#include <fmt/format.h>

#include "framework/config/config.hpp"

namespace strata::config {

Config parse_config(const json& doc, std::string_view source) {
  Problems problems;
  Config c = check_config(doc, problems);
  problems.raise_if_any(source);
  return c;
}

CheckResult check_config(const json& doc, std::optional<std::int64_t> world_size) {
  CheckResult r;
  r.config = check_config(doc, r.problems);
  if (!world_size) return r;
  // The batch arithmetic for this world size, unless the keys it reads have problems already.
  for (const char* key :
       {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
        "strata.tensor_parallel_size", "strata.pipeline_parallel_size"})
    if (r.problems.about(key)) return r;
  std::int64_t dp = 0;
  try {
    dp = data_parallel_size(r.config, *world_size);
  } catch (const UserError& e) {
    r.problems.mistake("strata.tensor_parallel_size", "{}", error_lines(e).front());
    return r;
  }
  try {
    resolve_batch(r.config, dp);
  } catch (const UserError& e) {
    r.problems.mistake("train_batch_size", "{} (world size {})", error_lines(e).front(),
                       *world_size);
  }
  return r;
}

}  // namespace strata::config
