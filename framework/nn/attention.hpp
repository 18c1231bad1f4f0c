// Causal multi-head self-attention as in GPT-2: fused qkv projection `c_attn`, output
// projection `c_proj`. Saves qkv, the attention output and the softmax log-sum-exp per row
// (not the T×T probabilities: backward recomputes them).
#pragma once

#include "framework/nn/linear.hpp"

namespace strata::nn {

class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(std::string prefix, int n_embd, int n_head, float init_std, float proj_std);
  // x: [B*T, C] → [B*T, C]
  Tensor forward(Context& ctx, const Tensor& x, int B, int T);
  Tensor backward(Context& ctx, const Tensor& dy);

  Linear c_attn, c_proj;

 private:
  int C_, NH_;
};

}  // namespace strata::nn
