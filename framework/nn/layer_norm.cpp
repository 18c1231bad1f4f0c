#include "framework/nn/layer_norm.hpp"

#include "framework/backend/ops/ops.hpp"

namespace strata::nn {

LayerNorm::LayerNorm(std::string prefix, int dim, float eps, TpShard tp)
    : Module(std::move(prefix)), dim_(dim), eps_(eps), tp_(tp) {
  w_ = &declare("weight", Shape{dim}, Init::ones(), false);
  b_ = &declare("bias", Shape{dim}, Init::zeros(), false);
}

Tensor LayerNorm::forward(Context& ctx, const Tensor& x) {
  STRATA_CHECK(x.rank() == 2 && x.dim(1) == dim_ && x.is_contiguous(), "nn",
               "{}: input {} does not match dim {}", prefix(), x.shape().str(), dim_);
  const std::int64_t n = x.dim(0);
  Tensor y = ctx.act(x.shape());
  Tensor mean = ctx.act(Shape{n}, DType::f32), rstd = ctx.act(Shape{n}, DType::f32);
  ops::layernorm_forward(x, value_of(*w_), value_of(*b_), y, mean, rstd, eps_);
  save(ctx, {x, mean, rstd});
  return y;
}

Tensor LayerNorm::recompute_output(Context& ctx) const {
  const Tensor& x = ctx.saved->at(static_cast<const Module*>(this), prefix()).tensors[0];
  const std::int64_t n = x.dim(0);
  Tensor y = ctx.act(x.shape());
  // mean and 1/std again into scratch: the kept ones stay as forward wrote them.
  Tensor mean = ctx.scratch(Shape{n}), rstd = ctx.scratch(Shape{n});
  ops::layernorm_forward(x, value_of(*w_), value_of(*b_), y, mean, rstd, eps_);
  return y;
}

Tensor LayerNorm::backward(Context& ctx, const Tensor& dy) {
  const auto s = restore(ctx);
  const Tensor &x = s.tensors[0], &mean = s.tensors[1], &rstd = s.tensors[2];
  Tensor dx = ctx.act(x.shape());
  if (!tp_.splits_tokens()) {
    ops::layernorm_backward(dy, x, value_of(*w_), mean, rstd, dx, grad_of(*w_), grad_of(*b_));
    return dx;
  }
  // Sequence parallelism: this part's tokens' share of dw and db, summed over the parts in f32.
  const Tensor part = Tensor::zeros(Shape{2, dim_}, DType::f32, ctx.workspace);
  const Tensor dw = part.slice(0, 0, 1).view(Shape{dim_}), db = part.slice(0, 1, 2).view(Shape{dim_});
  ops::layernorm_backward(dy, x, value_of(*w_), mean, rstd, dx, dw, db);
  tp_all_reduce(ctx, tp_.size, part, prefix().c_str());
  ops::add_inplace(grad_of(*w_), dw);
  ops::add_inplace(grad_of(*b_), db);
  return dx;
}

}  // namespace strata::nn
