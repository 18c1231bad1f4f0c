// Staging for asynchronous saves: a slice copied into host memory that the slice owns (charged
// to the ledger as Tier::host, Category::other), so training may overwrite the original while a
// background thread writes the copy.
#pragma once

#include <string>

#include "framework/checkpoint/slice.hpp"
#include "framework/core/tensor.hpp"

namespace strata::checkpoint {

struct StagedSlice {
  std::string kind;
  std::string name;
  Shape global_shape;
  std::int64_t begin = 0, end = 0;
  Tensor data;  // host, contiguous, end - begin elements
  SliceRef ref() const;
};

// Copies a host slice.
StagedSlice stage(const SliceRef& s, MemoryLedger& ledger = MemoryLedger::global());
// Copies a tensor of any device (its elements in row-major order are the slice
// [begin, begin + numel) of parameter `name`).
StagedSlice stage(std::string kind, std::string name, Shape global_shape, std::int64_t begin,
                  const Tensor& src, MemoryLedger& ledger = MemoryLedger::global());

}  // namespace strata::checkpoint
