// Linear: y = x W^T + b with W stored [out, in] (PyTorch layout). Saves its input for backward.
#pragma once

#include "framework/nn/module.hpp"

namespace strata::nn {

class Linear : public Module {
 public:
  Linear(std::string prefix, int in, int out, bool bias, float init_std);
  // x: [N, in] contiguous (f32 or 16-bit) → [N, out] in the context's activation dtype.
  Tensor forward(Context& ctx, const Tensor& x);
  // dy: [N, out] → dx [N, in] (undefined if !need_dx). Accumulates into W.grad, b.grad.
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true);
  Parameter& weight() { return *w_; }

 private:
  int in_, out_;
  Parameter* w_;
  Parameter* b_ = nullptr;
};

}  // namespace strata::nn
