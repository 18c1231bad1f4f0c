// Linear: y = x W^T + b with W stored [out, in] (PyTorch layout). Saves its input for backward.
// Split over tensor-parallel ranks (Megatron): column-parallel holds out/tp rows of W and b, takes
// the whole input and gives its slice of the output, and sums the input gradient over the group in
// backward (the operator f); row-parallel holds in/tp columns of W, takes its slice of the input
// and sums the partial outputs over the group in forward (the operator g), its bias replicated and
// added once. With sequence parallelism (TpShard::sequence_parallel) a column-parallel layer takes
// this part's tokens, all-gathers them, saves only its part (gathered again in backward) and
// reduce-scatters the input gradient; a row-parallel one reduce-scatters its output (each part
// gets its tokens of the sum) and all-gathers the output gradient in backward.
#pragma once

#include "framework/nn/module.hpp"

namespace strata::nn {

enum class TpSplit { none, column, row };

class Linear : public Module {
 public:
  // in, out: the whole layer's features. `stride` > 1 (column only): the output is `stride`
  // concatenated blocks, each split over the ranks (a fused qkv projection).
  Linear(std::string prefix, int in, int out, bool bias, float init_std,
         TpSplit split = TpSplit::none, TpShard tp = {}, int stride = 1);
  // x: [N, in'] contiguous (f32 or 16-bit) → [N, out'] in the context's activation dtype, where
  // in', out' are this rank's features (in/tp for row-parallel, out/tp for column-parallel).
  Tensor forward(Context& ctx, const Tensor& x);
  // dy: [N, out'] → dx [N, in'] (undefined if !need_dx). Accumulates into W.grad, b.grad.
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true);
  Parameter& weight() { return *w_; }
  // Selective recomputation (recompute.hpp): forget the input forward kept, and hand it back
  // (recomputed by whoever produced it) before backward. Nothing to forget without grad_enabled.
  void drop_input(Context& ctx) const;
  void give_input(Context& ctx, Tensor x) const;

 private:
  int in_, out_;  // this rank's
  TpSplit split_;
  TpShard tp_;
  Parameter* w_;
  Parameter* b_ = nullptr;
};

}  // namespace strata::nn
