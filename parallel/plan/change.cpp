#include "parallel/plan/change.hpp"

#include "framework/config/overrides.hpp"

namespace strata::parallel::plan {

std::string Change::flags() const {
  static const std::pair<const char*, const char*> kCapFlags[] = {
      {"strata.memory.device_limit=", "--device-memory "},
      {"strata.memory.host_limit=", "--host-memory "},
      {"strata.memory.nvme_limit=", "--nvme-memory "}};
  std::string out;
  for (const auto& s : sets) {
    std::string flag = "--set " + s;
    for (const auto& [key, f] : kCapFlags)
      if (s.starts_with(key)) flag = f + s.substr(std::string(key).size());
    out += (out.empty() ? "" : " ") + flag;
  }
  return out;
}

config::Config apply(const config::Config& cfg, const Change& change) {
  config::json doc = config::to_json(cfg);
  for (const auto& s : change.sets) config::apply_override(doc, s);
  config::Config out = config::parse_config(doc);
  out.micro_batch_auto = false;  // the resolved config's batch sizes are numbers
  return out;
}

}  // namespace strata::parallel::plan
