#include "framework/nn/attention.hpp"

#include "framework/backend/ops/ops.hpp"

namespace strata::nn {

CausalSelfAttention::CausalSelfAttention(std::string prefix, int n_embd, int n_head,
                                         float init_std, float proj_std)
    : Module(std::move(prefix)),
      c_attn(child_name("c_attn"), n_embd, 3 * n_embd, true, init_std),
      c_proj(child_name("c_proj"), n_embd, n_embd, true, proj_std),
      C_(n_embd),
      NH_(n_head) {
  STRATA_CHECK(n_head > 0 && n_embd % n_head == 0, "nn", "n_embd {} is not divisible by n_head {}",
               n_embd, n_head);
  add_child(c_attn);
  add_child(c_proj);
}

Tensor CausalSelfAttention::forward(Context& ctx, const Tensor& x, int B, int T) {
  Tensor qkv = c_attn.forward(ctx, x);
  Tensor out = ctx.act(Shape{static_cast<std::int64_t>(B) * T, C_});
  Tensor lse = ctx.act(Shape{B, NH_, T}, DType::f32);
  ops::attention_forward(qkv.view(Shape{B, T, 3 * C_}), out, lse, NH_);
  if (ctx.grad_enabled) {
    qkv_ = qkv;
    out_ = out;
    lse_ = lse;
    B_ = B;
    T_ = T;
  }
  return c_proj.forward(ctx, out);
}

Tensor CausalSelfAttention::backward(Context& ctx, const Tensor& dy) {
  STRATA_CHECK(qkv_.defined(), "nn", "{}: backward without a saved forward", prefix());
  Tensor dout = c_proj.backward(ctx, dy);
  Tensor dqkv = ctx.act(qkv_.shape());
  ops::attention_backward(qkv_.view(Shape{B_, T_, 3 * C_}), out_, lse_, dout, dqkv, NH_);
  dout = {};
  qkv_ = out_ = lse_ = {};
  return c_attn.backward(ctx, dqkv);
}

void CausalSelfAttention::clear_saved() {
  qkv_ = out_ = lse_ = {};
  Module::clear_saved();
}

}  // namespace strata::nn
