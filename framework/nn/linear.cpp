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
  // Sequence parallelism: a column-parallel layer's input is this part's tokens; it computes on
  // every part's (all-gather, Megatron's f) and saves only its own (gathered again in backward).
  const bool sp = tp_.splits_tokens() && split_ != TpSplit::none;
  const Tensor xin = sp && split_ == TpSplit::column ? sp_gather(ctx, tp_, x, prefix().c_str()) : x;
  Tensor y = ctx.act(Shape{xin.dim(0), out_});
  // Row-parallel: the bias is added by part 0 only, before the partial outputs are summed.
  const bool with_bias = b_ && (split_ != TpSplit::row || tp_.index == 0);
  ops::linear_forward(xin, value_of(*w_), with_bias ? value_of(*b_) : Tensor(), y);
  save(ctx, {x});
  if (split_ == TpSplit::row) {
    if (sp) return sp_scatter(ctx, tp_, y, prefix().c_str());  // g: this part's tokens of the sum
    tp_all_reduce(ctx, tp_.size, y, prefix().c_str());  // g
  }
  return y;
}

Tensor Linear::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  const Tensor saved = restore(ctx).tensors[0];
  const bool sp = tp_.splits_tokens() && split_ != TpSplit::none;
  // Sequence parallelism: a column-parallel layer gathers its input again (it saved its part), a
  // row-parallel one gathers the output gradient of every token (g's backward).
  Tensor x = sp && split_ == TpSplit::column ? sp_gather(ctx, tp_, saved, prefix().c_str()) : saved;
  Tensor g = sp && split_ == TpSplit::row ? sp_gather(ctx, tp_, dy, prefix().c_str()) : dy;
  Tensor dx;
  if (need_dx) dx = ctx.act(Shape{x.dim(0), in_});
  ops::linear_backward(x, value_of(*w_), g, dx, grad_of(*w_), b_ ? grad_of(*b_) : Tensor());
  x = g = {};  // the gathered copies go before the reduce-scatter's output is allocated
  if (need_dx && split_ == TpSplit::column) {
    if (sp) return sp_scatter(ctx, tp_, dx, prefix().c_str());  // f: this part's tokens' gradient
    tp_all_reduce(ctx, tp_.size, dx, prefix().c_str());  // f
  }
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
