// Float32 access to tensors of any float dtype for the CPU backend's f32 kernels: the tensor's own
// memory when it is f32, else a converted workspace copy charged to the tensor's ledger and tier.
// On meta tensors the same workspace is charged and nothing is converted (the meta op table
// plans the CPU backend's memory with these helpers).
#pragma once

#include <algorithm>
#include <cstdint>

#include "framework/core/tensor.hpp"

namespace strata::ops::cpu_detail {

// An f32 workspace tensor of `shape` on t's device, tier and ledger.
Tensor workspace_like(const Tensor& t, const Shape& shape);

// Rows of a [rows, cols] block so that it holds about a million elements (the row blocks in which
// products with 16-bit operands are computed).
inline int block_rows(std::int64_t total_rows, std::int64_t cols) {
  return static_cast<int>(std::clamp<std::int64_t>((1 << 20) / std::max<std::int64_t>(1, cols), 1,
                                                   std::max<std::int64_t>(1, total_rows)));
}

// Read access (undefined tensor → nullptr).
class In32 {
 public:
  explicit In32(const Tensor& t);
  const float* get() const { return p_; }

 private:
  Tensor tmp_;
  const float* p_ = nullptr;
};

// Write access to an output that the kernel overwrites; commit() stores a 16-bit result.
class Out32 {
 public:
  explicit Out32(const Tensor& t);
  float* get() const { return p_; }
  void commit();

 private:
  Tensor t_, tmp_;
  float* p_ = nullptr;
};

// Accumulate access (kernels add into it): the f32 tensor itself, else a zeroed f32 workspace
// that commit() adds into the 16-bit tensor (f32 sum, rounded once). Undefined → nullptr.
// With `overwrite` the workspace is not zeroed: the kernel writes every element of it (linear's
// dW and db with beta 0) and commit() adds it in the same way.
class Acc32 {
 public:
  explicit Acc32(const Tensor& t, bool overwrite = false);
  float* get() const { return p_; }
  void commit();

 private:
  Tensor t_, tmp_;
  float* p_ = nullptr;
};

}  // namespace strata::ops::cpu_detail
