#include "framework/nn/linear.hpp"

#include "framework/backend/ops/ops.hpp"

namespace strata::nn {

Linear::Linear(std::string prefix, int in, int out, bool bias, float init_std)
    : Module(std::move(prefix)), in_(in), out_(out) {
  w_ = &declare("weight", Shape{out, in}, Init::normal(init_std), true);
  if (bias) b_ = &declare("bias", Shape{out}, Init::zeros(), false);
}

Tensor Linear::forward(Context& ctx, const Tensor& x) {
  STRATA_CHECK(x.rank() == 2 && x.dim(1) == in_ && x.is_contiguous(), "nn",
               "{}: input {} does not match in_features {}", prefix(), x.shape().str(), in_);
  Tensor y = ctx.act(Shape{x.dim(0), out_});
  ops::linear_forward(x, value_of(*w_), b_ ? value_of(*b_) : Tensor(), y);
  save(ctx, {x});
  return y;
}

Tensor Linear::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  const Tensor x = restore(ctx).tensors[0];
  Tensor dx;
  if (need_dx) dx = ctx.act(Shape{x.dim(0), in_});
  ops::linear_backward(x, value_of(*w_), dy, dx, grad_of(*w_), b_ ? grad_of(*b_) : Tensor());
  return dx;
}

}  // namespace strata::nn
