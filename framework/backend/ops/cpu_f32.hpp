// Float32 access to tensors of any float dtype for the CPU backend's f32 kernels: the tensor's own
// memory when it is f32, else a converted workspace copy charged to the tensor's ledger and tier.
#pragma once

#include "framework/core/tensor.hpp"

namespace strata::ops::cpu_detail {

// An f32 workspace tensor of `shape` on t's device, tier and ledger.
Tensor workspace_like(const Tensor& t, const Shape& shape);

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
class Acc32 {
 public:
  explicit Acc32(const Tensor& t);
  float* get() const { return p_; }
  void commit();

 private:
  Tensor t_, tmp_;
  float* p_ = nullptr;
};

}  // namespace strata::ops::cpu_detail
