// Host-side helpers of the CUDA ops (framework/backend/cuda/ops): the stream an op runs on,
// launch checks, workspaces charged to the ledger, and f32 views of operands of any float dtype
// (as the CPU table's cpu_f32.hpp: a 16-bit operand is widened into a workspace, a 16-bit output
// is written through one and rounded once on commit, a 16-bit gradient is accumulated in f32 and
// added in once). Every kernel of an op is queued on the current stream of the operands' device;
// nothing here synchronizes the host.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "framework/backend/cuda/ops/elementwise.hpp"
#include "framework/backend/cuda/ops/half_hd.hpp"
#include "framework/core/tensor.hpp"

namespace strata::cuda_ops {

// The current stream of t's device (framework/backend/stream.hpp).
cudaStream_t stream_of(const Tensor& t);

// Throws strata::Error naming `what` when the last launch (or call) failed.
void check_launch(const char* what);
void check_cuda(cudaError_t e, const char* what);

// The kernel's dtype code of a float tensor (f32, bf16, f16).
DT dt(const Tensor& t);

// A new tensor of `shape` and `dtype` on t's device, charged to t's ledger as workspace.
Tensor workspace(const Tensor& like, const Shape& shape, DType dtype = DType::f32);

// ---- f32 views (queued on the current stream of the tensor's device) ----
// Read access: the tensor itself when f32, else a widened workspace copy. Undefined → nullptr.
class In32 {
 public:
  explicit In32(const Tensor& t);
  const float* get() const { return p_; }

 private:
  Tensor tmp_;
  const float* p_ = nullptr;
};

// An output the kernel overwrites; commit() rounds a 16-bit one into the tensor.
class Out32 {
 public:
  explicit Out32(const Tensor& t);
  float* get() const { return p_; }
  void commit();

 private:
  Tensor t_, tmp_;
  float* p_ = nullptr;
};

// An output the kernel accumulates into (+=): the f32 tensor itself, else a zeroed f32 workspace
// (with `overwrite`: not zeroed, the kernel writes every element) that commit() adds into the
// 16-bit tensor (f32 sum of the old value and the workspace, rounded once).
class Acc32 {
 public:
  explicit Acc32(const Tensor& t, bool overwrite = false);
  float* get() const { return p_; }
  void commit();

 private:
  Tensor t_, tmp_;
  float* p_ = nullptr;
};

}  // namespace strata::cuda_ops
