#include "framework/nn/linear.hpp"

#include "framework/backend/cpu/kernels.hpp"
#include "framework/nn/param_access.hpp"

#include <optional>

namespace strata::nn {

Linear::Linear(std::string prefix, int in, int out, bool bias, float init_std)
    : Module(std::move(prefix)), in_(in), out_(out) {
  w_ = &declare("weight", Shape{out, in}, Init::normal(init_std), true);
  if (bias) b_ = &declare("bias", Shape{out}, Init::zeros(), false);
}

Tensor Linear::forward(Context& ctx, const Tensor& x) {
  STRATA_CHECK(x.rank() == 2 && x.dim(1) == in_ && x.is_contiguous(), "nn",
               "{}: input {} does not match in_features {}", prefix(), x.shape().str(), in_);
  const int n = static_cast<int>(x.dim(0));
  Tensor y = ctx.act(Shape{n, out_});
  F32Value w(ctx, *w_);
  std::optional<F32Value> b;
  if (b_) b.emplace(ctx, *b_);
  cpu::linear_forward(x.data<float>(), w.get(), b ? b->get() : nullptr, y.data<float>(), n, in_,
                      out_);
  if (ctx.grad_enabled) x_ = x;
  return y;
}

Tensor Linear::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  STRATA_CHECK(x_.defined(), "nn", "{}: backward without a saved forward", prefix());
  const int n = static_cast<int>(x_.dim(0));
  Tensor dx;
  if (need_dx) dx = ctx.act(Shape{n, in_});
  {
    F32Value w(ctx, *w_);
    F32Grad dw(ctx, *w_);
    std::optional<F32Grad> db;
    if (b_) db.emplace(ctx, *b_);
    cpu::linear_backward(x_.data<float>(), w.get(), dy.data<float>(),
                         need_dx ? dx.data<float>() : nullptr, dw.get(), db ? db->get() : nullptr,
                         n, in_, out_);
  }
  x_ = {};
  return dx;
}

}  // namespace strata::nn
