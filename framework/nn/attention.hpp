// Causal multi-head self-attention as in GPT-2: fused qkv projection `c_attn`, output
// projection `c_proj`. Saves qkv, the attention output and the softmax log-sum-exp per row
// (not the T×T probabilities: backward recomputes them); with selective recomputation only qkv,
// the output and log-sum-exps recomputed in backward. Over tp ranks the heads are split: c_attn
// column-parallel (q, k and v of this rank's heads), c_proj row-parallel.
#pragma once

#include "framework/nn/linear.hpp"

namespace strata::nn {

class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(std::string prefix, int n_embd, int n_head, float init_std, float proj_std,
                      TpShard tp = {});
  // x: [B*T, C] → [B*T, C]
  Tensor forward(Context& ctx, const Tensor& x, int B, int T);
  Tensor backward(Context& ctx, const Tensor& dy);
  // Selective recomputation: keep only qkv of the core, recompute its output and log-sum-exps
  // (attention_forward again) at the start of backward.
  void set_recompute_core(bool on) { recompute_core_ = on; }

  Linear c_attn, c_proj;

 private:
  int C_, NH_;  // this rank's width (its heads') and heads
  bool recompute_core_ = false;
};

}  // namespace strata::nn
