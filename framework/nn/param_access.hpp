// Float32 access to parameters for the f32 CPU kernels, whatever dtype parameters and gradients
// are stored in (mixed precision keeps them in bf16/f16; kernels compute in f32).
#pragma once

#include "framework/nn/context.hpp"
#include "framework/nn/parameter.hpp"

namespace strata::nn {

// The parameter's value as f32: the value itself when it is f32, else a converted scratch copy.
class F32Value {
 public:
  F32Value(const Context& ctx, const Parameter& p);
  const float* get() const { return ptr_; }

 private:
  Tensor tmp_;
  const float* ptr_ = nullptr;
};

// Where kernels accumulate a parameter's gradient in f32: the gradient itself when it is f32;
// else a zeroed scratch buffer added into the 16-bit gradient (with rounding) on commit().
class F32Grad {
 public:
  F32Grad(const Context& ctx, Parameter& p);
  ~F32Grad();
  float* get() const { return ptr_; }
  void commit();

 private:
  Parameter* p_;
  Tensor tmp_;
  float* ptr_ = nullptr;
};

}  // namespace strata::nn
