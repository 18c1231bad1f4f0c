#include "framework/nn/layer_norm.hpp"

#include "framework/backend/cpu/kernels.hpp"
#include "framework/nn/param_access.hpp"

namespace strata::nn {

LayerNorm::LayerNorm(std::string prefix, int dim, float eps)
    : Module(std::move(prefix)), dim_(dim), eps_(eps) {
  w_ = &declare("weight", Shape{dim}, Init::ones(), false);
  b_ = &declare("bias", Shape{dim}, Init::zeros(), false);
}

Tensor LayerNorm::forward(Context& ctx, const Tensor& x) {
  STRATA_CHECK(x.rank() == 2 && x.dim(1) == dim_ && x.is_contiguous(), "nn",
               "{}: input {} does not match dim {}", prefix(), x.shape().str(), dim_);
  const int n = static_cast<int>(x.dim(0));
  Tensor y = ctx.act(x.shape());
  Tensor mean = ctx.act(Shape{n}), rstd = ctx.act(Shape{n});
  F32Value w(ctx, *w_), b(ctx, *b_);
  cpu::layernorm_forward(x.data<float>(), w.get(), b.get(), y.data<float>(), mean.data<float>(),
                         rstd.data<float>(), n, dim_, eps_);
  if (ctx.grad_enabled) {
    x_ = x;
    mean_ = mean;
    rstd_ = rstd;
  }
  return y;
}

Tensor LayerNorm::backward(Context& ctx, const Tensor& dy) {
  STRATA_CHECK(x_.defined(), "nn", "{}: backward without a saved forward", prefix());
  const int n = static_cast<int>(x_.dim(0));
  Tensor dx = ctx.act(x_.shape());
  {
    F32Value w(ctx, *w_);
    F32Grad dw(ctx, *w_), db(ctx, *b_);
    cpu::layernorm_backward(dy.data<float>(), x_.data<float>(), w.get(), mean_.data<float>(),
                            rstd_.data<float>(), dx.data<float>(), dw.get(), db.get(), n, dim_);
  }
  clear_saved();
  return dx;
}

}  // namespace strata::nn
