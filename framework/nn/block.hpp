// GPT-2 transformer block (pre-LayerNorm): x + attn(ln_1(x)), then + mlp(ln_2(.)).
// With full recomputation (activation checkpointing) the block keeps only its input after forward
// and recomputes its forward at the start of backward; with selective recomputation it drops the
// LayerNorm outputs, the attention core's output and log-sum-exps and the GELU output, and
// recomputes them in backward from what it keeps (recompute.hpp). Gradients are bitwise the same
// as without either: the same kernels run on the same inputs.
#pragma once

#include "framework/nn/attention.hpp"
#include "framework/nn/layer_norm.hpp"
#include "framework/nn/mlp.hpp"
#include "framework/nn/recompute.hpp"

namespace strata::nn {

class Block : public Module {
 public:
  // tp: this rank's part of the attention heads and MLP columns (LayerNorms are replicated). With
  // tp.sequence_parallel, x and the output are this part's tokens [B·T/tp, C]; B and T are the
  // whole micro-batch's.
  Block(std::string prefix, int n_embd, int n_head, float init_std, float proj_std, TpShard tp = {});
  Tensor forward(Context& ctx, const Tensor& x, int B, int T);
  Tensor backward(Context& ctx, const Tensor& dy);
  void set_recompute(Recompute mode);

  LayerNorm ln_1;
  CausalSelfAttention attn;
  LayerNorm ln_2;
  Mlp mlp;

 private:
  Tensor run_forward(Context& ctx, const Tensor& x, int B, int T);
  Recompute mode_ = Recompute::none;
};

}  // namespace strata::nn
