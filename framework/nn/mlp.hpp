// GPT-2 MLP: c_fc (C → 4C) → GELU (tanh approximation) → c_proj (4C → C). Saves the
// pre-activation; the GELU output that c_proj saved is recomputed-free (kept by c_proj).
#pragma once

#include "framework/nn/linear.hpp"

namespace strata::nn {

class Mlp : public Module {
 public:
  Mlp(std::string prefix, int n_embd, float init_std, float proj_std);
  Tensor forward(Context& ctx, const Tensor& x);
  Tensor backward(Context& ctx, const Tensor& dy);

  Linear c_fc, c_proj;
};

}  // namespace strata::nn
