// SavedState: what forward passes keep for their backward, per module — the activations of one
// micro-batch. Layers keep nothing in members: they put their tensors here (Module::save) and take
// them back in backward (Module::restore), so an engine can hold several micro-batches in flight
// (a pipeline schedule does), each with its own SavedState.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "framework/core/tensor.hpp"

namespace strata::nn {

class SavedState {
 public:
  struct Entry {
    std::vector<Tensor> tensors;
    std::vector<std::int64_t> ints;
  };

  // Stores owner's entry (replacing an earlier one).
  void put(const void* owner, Entry e) { entries_[owner] = std::move(e); }
  // Removes and returns owner's entry; throws "[nn] <who>: backward without a saved forward".
  Entry take(const void* owner, std::string_view who);
  // owner's entry, left in place (selective recomputation drops and hands back single tensors);
  // throws as take.
  Entry& at(const void* owner, std::string_view who);
  bool has(const void* owner) const { return entries_.count(owner) != 0; }
  void clear() { entries_.clear(); }
  bool empty() const { return entries_.empty(); }
  std::size_t size() const { return entries_.size(); }

 private:
  std::unordered_map<const void*, Entry> entries_;
};

}  // namespace strata::nn
