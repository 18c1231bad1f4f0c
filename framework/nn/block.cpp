#include "framework/nn/block.hpp"

#include "framework/backend/ops/ops.hpp"

namespace strata::nn {

Block::Block(std::string prefix, int n_embd, int n_head, float init_std, float proj_std, TpShard tp)
    : Module(std::move(prefix)),
      ln_1(child_name("ln_1"), n_embd, 1e-5f, tp),
      attn(child_name("attn"), n_embd, n_head, init_std, proj_std, tp),
      ln_2(child_name("ln_2"), n_embd, 1e-5f, tp),
      mlp(child_name("mlp"), n_embd, init_std, proj_std, tp) {
  add_child(ln_1);
  add_child(attn);
  add_child(ln_2);
  add_child(mlp);
}

void Block::set_recompute(Recompute mode) {
  mode_ = mode;
  attn.set_recompute_core(mode == Recompute::selective);
  mlp.set_recompute_gelu(mode == Recompute::selective);
}

Tensor Block::run_forward(Context& ctx, const Tensor& x, int B, int T) {
  const bool selective = mode_ == Recompute::selective;
  Tensor a = attn.forward(ctx, ln_1.forward(ctx, x), B, T);
  if (selective) attn.c_attn.drop_input(ctx);  // ln_1's output, recomputed in backward
  Tensor x1 = ctx.act(x.shape());
  ops::add(x, a, x1);
  a = {};
  Tensor m = mlp.forward(ctx, ln_2.forward(ctx, x1));
  if (selective) mlp.c_fc.drop_input(ctx);  // ln_2's output
  ops::add_inplace(m, x1);  // m becomes x2 = x1 + mlp(...)
  return m;
}

Tensor Block::forward(Context& ctx, const Tensor& x, int B, int T) {
  if (!ctx.grad_enabled || mode_ != Recompute::full) return run_forward(ctx, x, B, T);
  // Checkpointing: keep only the input; run without saving anything; backward recomputes.
  save(ctx, {x}, {B, T});
  ctx.grad_enabled = false;
  Tensor y;
  try {
    y = run_forward(ctx, x, B, T);
  } catch (...) {
    ctx.grad_enabled = true;
    throw;
  }
  ctx.grad_enabled = true;
  return y;
}

Tensor Block::backward(Context& ctx, const Tensor& dy) {
  const bool selective = mode_ == Recompute::selective;
  if (mode_ == Recompute::full) {  // recompute, saving this time
    const auto s = restore(ctx);
    run_forward(ctx, s.tensors[0], static_cast<int>(s.ints[0]), static_cast<int>(s.ints[1]));
  }
  // x2 = x1 + mlp(ln_2(x1))  →  dx1 = dy + ln_2'(mlp'(dy))
  if (selective) mlp.c_fc.give_input(ctx, ln_2.recompute_output(ctx));
  Tensor dx1 = ln_2.backward(ctx, mlp.backward(ctx, dy));
  ops::add_inplace(dx1, dy);
  // x1 = x + attn(ln_1(x))   →  dx = dx1 + ln_1'(attn'(dx1))
  if (selective) attn.c_attn.give_input(ctx, ln_1.recompute_output(ctx));
  Tensor dx = ln_1.backward(ctx, attn.backward(ctx, dx1));
  ops::add_inplace(dx, dx1);
  return dx;
}

}  // namespace strata::nn
