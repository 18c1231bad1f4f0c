// strata::OutOfMemory: thrown when an allocation would exceed a tier's cap; its message says
// what was asked, what is in use by category, what the whole step needs (when a planner knows),
// and which configuration changes would fit.
#pragma once

#include <string>
#include <vector>

#include "framework/core/error.hpp"
#include "framework/memory/ledger.hpp"

namespace strata {

class OutOfMemory : public Error {
 public:
  OutOfMemory(OomContext ctx, OomAdvice advice);
  const OomContext& context() const { return ctx_; }
  // The changes that fit, the first to try first.
  const std::vector<std::string>& advice() const { return advice_.changes; }
  // The config assignments of each change, as OomAdvice::sets.
  const std::vector<std::vector<std::string>>& advice_sets() const { return advice_.sets; }
  // What a whole step needs on the tier, when a planner said.
  std::optional<std::uint64_t> step_needs() const { return advice_.step_needs; }

 private:
  OomContext ctx_;
  OomAdvice advice_;
};

}  // namespace strata
