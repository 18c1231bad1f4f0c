// Context: what a forward/backward pass needs besides its inputs — where activations and
// scratch space are allocated, whether to save for backward, and hooks the engine runs around
// each parameter unit (ZeRO-3 gathers, gradient-bucket reduction).
#pragma once

#include <memory>

#include "framework/core/tensor.hpp"
#include "framework/nn/saved.hpp"
#include "framework/nn/tensor_parallel.hpp"

namespace strata::nn {

class BatchUploads;  // batch_device.hpp

// Called by models around each parameter unit. The single-process engine needs none; data
// parallelism reduces a unit's gradients in after_backward, ZeRO-3 gathers in before_*.
class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void before_forward(int unit) {}
  virtual void after_forward(int unit) {}
  virtual void before_backward(int unit) {}
  virtual void after_backward(int unit) {}
};

struct Context {
  TensorOptions activations{Device::cpu(), Tier::device, Category::activations, nullptr};
  TensorOptions workspace{Device::cpu(), Tier::device, Category::workspace, nullptr};
  // The dtype of activations and activation gradients: f32, or the 16-bit compute dtype with
  // mixed precision (kernels accumulate in f32 either way).
  DType act_dtype = DType::f32;
  UnitHooks* hooks = nullptr;
  TpComm* tp = nullptr;  // the tensor-parallel group of a split model (null: tp = 1)
  bool grad_enabled = true;  // false: evaluation, nothing is saved for backward
  // Where forward keeps what backward needs (one micro-batch's; copies of a Context share it).
  std::shared_ptr<SavedState> saved = std::make_shared<SavedState>();
  // The pinned buffers the batch goes through to a GPU without the host waiting for it
  // (batch_device.hpp; copies of a Context share them). Null: each copy waits for the GPU.
  std::shared_ptr<BatchUploads> uploads;

  // An activation in act_dtype, or in `t` for what must stay f32 (statistics, log-sum-exps).
  Tensor act(const Shape& s) const { return Tensor::empty(s, act_dtype, activations); }
  Tensor act(const Shape& s, DType t) const { return Tensor::empty(s, t, activations); }
  Tensor scratch(const Shape& s, DType t = DType::f32) const { return Tensor::empty(s, t, workspace); }
  void before_forward(int u) { if (hooks) hooks->before_forward(u); }
  void after_forward(int u) { if (hooks) hooks->after_forward(u); }
  void before_backward(int u) { if (hooks) hooks->before_backward(u); }
  void after_backward(int u) { if (hooks) hooks->after_backward(u); }
};

}  // namespace strata::nn
