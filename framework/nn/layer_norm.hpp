// LayerNorm over the last dimension (eps 1e-5 by default, weight 1, bias 0 at init).
// Saves its input and the per-row mean and 1/std (from which its output can be recomputed).
// Replicated over tensor-parallel parts; with sequence parallelism each part normalises only its
// tokens (and recomputes only those), so backward sums the weight and bias gradients of this
// micro-batch over the parts (one all-reduce of 2·dim f32) before adding them to the parameters'
// gradients: every part then holds the whole sequence's gradient.
#pragma once

#include "framework/nn/module.hpp"

namespace strata::nn {

class LayerNorm : public Module {
 public:
  LayerNorm(std::string prefix, int dim, float eps = 1e-5f, TpShard tp = {});
  Tensor forward(Context& ctx, const Tensor& x);  // [N, C] → [N, C]
  Tensor backward(Context& ctx, const Tensor& dy);
  // The forward's output again, from what forward kept (selective recomputation): the same
  // kernel on the same input, so bitwise the same.
  Tensor recompute_output(Context& ctx) const;

 private:
  int dim_;
  float eps_;
  TpShard tp_;
  Parameter* w_;
  Parameter* b_;
};

}  // namespace strata::nn
