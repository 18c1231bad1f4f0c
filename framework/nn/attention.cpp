#include "framework/nn/attention.hpp"

#include "framework/backend/ops/ops.hpp"

namespace strata::nn {

CausalSelfAttention::CausalSelfAttention(std::string prefix, int n_embd, int n_head,
                                         float init_std, float proj_std, TpShard tp)
    : Module(std::move(prefix)),
      c_attn(child_name("c_attn"), n_embd, 3 * n_embd, true, init_std, TpSplit::column, tp, 3),
      c_proj(child_name("c_proj"), n_embd, n_embd, true, proj_std, TpSplit::row, tp),
      C_(n_embd / tp.size),
      NH_(n_head / tp.size) {
  STRATA_CHECK(n_head > 0 && n_embd % n_head == 0, "nn", "n_embd {} is not divisible by n_head {}",
               n_embd, n_head);
  if (n_head % tp.size != 0)
    user_fail("nn", "n_head {} does not split over tensor_parallel_size {}: the heads are divided "
              "among the ranks, choose a size that divides n_head", n_head, tp.size);
  add_child(c_attn);
  add_child(c_proj);
}

Tensor CausalSelfAttention::forward(Context& ctx, const Tensor& x, int B, int T) {
  Tensor qkv = c_attn.forward(ctx, x);
  Tensor out = ctx.act(Shape{static_cast<std::int64_t>(B) * T, C_});
  Tensor lse = ctx.act(Shape{B, NH_, T}, DType::f32);
  ops::attention_forward(qkv.view(Shape{B, T, 3 * C_}), out, lse, NH_);
  if (!recompute_core_) {
    save(ctx, {qkv, out, lse}, {B, T});
    return c_proj.forward(ctx, out);
  }
  save(ctx, {qkv}, {B, T});
  Tensor y = c_proj.forward(ctx, out);
  c_proj.drop_input(ctx);  // out, recomputed in backward
  return y;
}

Tensor CausalSelfAttention::backward(Context& ctx, const Tensor& dy) {
  auto s = restore(ctx);
  const Tensor qkv = std::move(s.tensors[0]);
  const std::int64_t B = s.ints[0], T = s.ints[1];
  Tensor out, lse;
  if (s.tensors.size() == 3) {
    out = std::move(s.tensors[1]);
    lse = std::move(s.tensors[2]);
  } else {  // selective recomputation: the core again, as forward ran it
    out = ctx.act(Shape{B * T, C_});
    lse = ctx.act(Shape{B, NH_, T}, DType::f32);
    ops::attention_forward(qkv.view(Shape{B, T, 3 * C_}), out, lse, NH_);
    c_proj.give_input(ctx, out);
  }
  s = {};
  Tensor dout = c_proj.backward(ctx, dy);
  Tensor dqkv = ctx.act(qkv.shape());
  ops::attention_backward(qkv.view(Shape{B, T, 3 * C_}), out, lse, dout, dqkv, NH_);
  return c_attn.backward(ctx, dqkv);
}


}  // namespace strata::nn
