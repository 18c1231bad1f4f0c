// GPT-2 MLP: c_fc (C → 4C) → GELU (tanh approximation) → c_proj (4C → C). Saves the
// pre-activation; c_proj keeps the GELU output (its input), or, with selective recomputation,
// backward recomputes it from the pre-activation. Over tp
// ranks c_fc is column-parallel and c_proj row-parallel (one all-reduce each way).
#pragma once

#include "framework/nn/linear.hpp"

namespace strata::nn {

class Mlp : public Module {
 public:
  Mlp(std::string prefix, int n_embd, float init_std, float proj_std, TpShard tp = {});
  Tensor forward(Context& ctx, const Tensor& x);
  Tensor backward(Context& ctx, const Tensor& dy);
  // Selective recomputation: c_proj forgets its input (the GELU output), recomputed from the
  // kept pre-activation at the start of backward.
  void set_recompute_gelu(bool on) { recompute_gelu_ = on; }

  Linear c_fc, c_proj;

 private:
  bool recompute_gelu_ = false;
};

}  // namespace strata::nn
