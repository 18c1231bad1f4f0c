#include "framework/nn/saved.hpp"

#include "framework/core/error.hpp"

namespace strata::nn {

SavedState::Entry SavedState::take(const void* owner, std::string_view who) {
  auto it = entries_.find(owner);
  STRATA_CHECK(it != entries_.end(), "nn", "{}: backward without a saved forward", who);
  Entry e = std::move(it->second);
  entries_.erase(it);
  return e;
}

SavedState::Entry& SavedState::at(const void* owner, std::string_view who) {
  auto it = entries_.find(owner);
  STRATA_CHECK(it != entries_.end(), "nn", "{}: backward without a saved forward", who);
  return it->second;
}

}  // namespace strata::nn
