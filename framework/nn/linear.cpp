#include "framework/nn/linear.hpp"

#include "framework/backend/ops/ops.hpp"

namespace strata::nn {

namespace {
int part_of(int features, TpShard tp, const std::string& who) {
  STRATA_CHECK(tp.size >= 1 && tp.index >= 0 && tp.index < tp.size, "nn",
               "{}: tensor-parallel part {} of {}", who, tp.index, tp.size);
  if (features % tp.size != 0)
    user_fail("nn", "{}: {} features do not split over tensor_parallel_size {}: choose a size "
              "that divides them", who, features, tp.size);
  return features / tp.size;
}
}  // namespace

Linear::Linear(std::string prefix, int in, int out, bool bias, float init_std, TpSplit split,
               TpShard tp, int stride)
    : Module(std::move(prefix)), in_(in), out_(out), split_(tp.size > 1 ? split : TpSplit::none), tp_(tp) {
  STRATA_CHECK(stride == 1 || split == TpSplit::column, "nn", "{}: a stride needs a column split",
               this->prefix());
  if (split_ == TpSplit::column) {
    STRATA_CHECK(out % stride == 0, "nn", "{}: {} outputs are not {} blocks", this->prefix(), out, stride);
    out_ = stride * part_of(out / stride, tp, this->prefix());
  }
  if (split_ == TpSplit::row) in_ = part_of(in, tp, this->prefix());
  w_ = &declare("weight", Shape{out_, in_}, Init::normal(init_std), true);
  if (bias) b_ = &declare("bias", Shape{out_}, Init::zeros(), false);
  if (split_ == TpSplit::column) {
    w_->placement = {0, tp.size, tp.index, stride};
    if (b_) b_->placement = {0, tp.size, tp.index, stride};
  } else if (split_ == TpSplit::row) {
    w_->placement = {1, tp.size, tp.index, 1};
  }
}

Tensor Linear::forward(Context& ctx, const Tensor& x) {
  STRATA_CHECK(x.rank() == 2 && x.dim(1) == in_ && x.is_contiguous(), "nn",
               "{}: input {} does not match in_features {}", prefix(), x.shape().str(), in_);
  Tensor y = ctx.act(Shape{x.dim(0), out_});
  // Row-parallel: the bias is added by part 0 only, before the partial outputs are summed.
  const bool with_bias = b_ && (split_ != TpSplit::row || tp_.index == 0);
  ops::linear_forward(x, value_of(*w_), with_bias ? value_of(*b_) : Tensor(), y);
  save(ctx, {x});
  if (split_ == TpSplit::row) tp_all_reduce(ctx, tp_.size, y, prefix().c_str());  // g
  return y;
}

Tensor Linear::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  const Tensor x = restore(ctx).tensors[0];
  Tensor dx;
  if (need_dx) dx = ctx.act(Shape{x.dim(0), in_});
  ops::linear_backward(x, value_of(*w_), dy, dx, grad_of(*w_), b_ ? grad_of(*b_) : Tensor());
  if (need_dx && split_ == TpSplit::column) tp_all_reduce(ctx, tp_.size, dx, prefix().c_str());  // f
  return dx;
}

void Linear::drop_input(Context& ctx) const {
  if (ctx.grad_enabled) ctx.saved->at(static_cast<const Module*>(this), prefix()).tensors[0] = {};
}

void Linear::give_input(Context& ctx, Tensor x) const {
  Tensor& kept = ctx.saved->at(static_cast<const Module*>(this), prefix()).tensors[0];
  STRATA_CHECK(!kept.defined(), "nn", "{}: an input handed back over one that was kept", prefix());
  kept = std::move(x);
}

}  // namespace strata::nn
