#include "framework/checkpoint/compat.hpp"

#include <map>

#include "framework/checkpoint/slice.hpp"
#include "framework/core/error.hpp"

namespace strata::checkpoint {

std::vector<std::string> compatibility_differences(const Manifest& m,
                                                   const std::vector<ExpectedParam>& model) {
  std::vector<std::string> out;
  std::map<std::string, const ExpectedParam*> want;
  for (const auto& e : model) want[e.name] = &e;
  for (const auto& e : model) {
    const ParamEntry* p = m.find(e.name);
    if (!p)
      out.push_back(fmt::format("missing from the checkpoint: {} {}", e.name, e.shape.str()));
    else if (p->shape != e.shape)
      out.push_back(fmt::format("shape of {}: checkpoint {}, model {}", e.name, p->shape.str(),
                                e.shape.str()));
  }
  for (const auto& p : m.params)
    if (!want.count(p.name) && !is_state_entry(p.name))
      out.push_back(fmt::format("not in the model: {} {}", p.name, p.shape.str()));
  return out;
}

void check_compatible(const Manifest& m, const std::vector<ExpectedParam>& model,
                      const std::string& source) {
  const auto diff = compatibility_differences(m, model);
  if (diff.empty()) return;
  constexpr std::size_t kShown = 20;
  std::string list;
  for (std::size_t i = 0; i < diff.size() && i < kShown; ++i) list += (i ? "; " : "") + diff[i];
  if (diff.size() > kShown) list += fmt::format("; and {} more", diff.size() - kShown);
  user_fail("checkpoint", "{} does not match the model ({} difference{}): {}", source, diff.size(),
            diff.size() == 1 ? "" : "s", list);
}

}  // namespace strata::checkpoint
