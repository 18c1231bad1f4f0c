// strata::OutOfMemory: thrown when an allocation would exceed a tier's cap; its message says
// what was asked, what is in use by category, and which configuration changes would fit.
#pragma once

#include <string>
#include <vector>

#include "framework/core/error.hpp"
#include "framework/memory/ledger.hpp"

namespace strata {

class OutOfMemory : public Error {
 public:
  OutOfMemory(OomContext ctx, std::vector<std::string> advice);
  const OomContext& context() const { return ctx_; }
  const std::vector<std::string>& advice() const { return advice_; }

 private:
  OomContext ctx_;
  std::vector<std::string> advice_;
};

}  // namespace strata
