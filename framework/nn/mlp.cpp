#include "framework/nn/mlp.hpp"

#include "framework/backend/ops/ops.hpp"

namespace strata::nn {

Mlp::Mlp(std::string prefix, int n_embd, float init_std, float proj_std, TpShard tp)
    : Module(std::move(prefix)),
      c_fc(child_name("c_fc"), n_embd, 4 * n_embd, true, init_std, TpSplit::column, tp),
      c_proj(child_name("c_proj"), 4 * n_embd, n_embd, true, proj_std, TpSplit::row, tp) {
  add_child(c_fc);
  add_child(c_proj);
}

Tensor Mlp::forward(Context& ctx, const Tensor& x) {
  Tensor h = c_fc.forward(ctx, x);
  Tensor g = ctx.act(h.shape());
  ops::gelu_forward(h, g);
  save(ctx, {h});  // the GELU's input
  Tensor y = c_proj.forward(ctx, g);
  if (recompute_gelu_) c_proj.drop_input(ctx);
  return y;
}

Tensor Mlp::backward(Context& ctx, const Tensor& dy) {
  const Tensor pre = restore(ctx).tensors[0];
  if (recompute_gelu_) {
    Tensor g = ctx.act(pre.shape());
    ops::gelu_forward(pre, g);
    c_proj.give_input(ctx, std::move(g));
  }
  Tensor dg = c_proj.backward(ctx, dy);
  // dh overwrites dg in place: gelu_backward reads dg[i] before writing dx[i].
  ops::gelu_backward(pre, dg, dg);
  return c_fc.backward(ctx, dg);
}

}  // namespace strata::nn
