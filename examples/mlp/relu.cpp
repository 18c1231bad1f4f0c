#include "examples/mlp/relu.hpp"

namespace mlp {

using namespace strata;

namespace {
// x as f32 host values (activations are 16-bit with mixed precision).
Tensor f32_of(const nn::Context& ctx, const Tensor& x) {
  return x.dtype() == DType::f32 ? x : x.to(DType::f32, ctx.workspace);
}
}  // namespace

Tensor Relu::forward(nn::Context& ctx, const Tensor& x) {
  const Tensor x32 = f32_of(ctx, x);
  Tensor y32 = ctx.scratch(x.shape());
  const float* xp = x32.data<float>();
  float* yp = y32.data<float>();
  for (std::int64_t i = 0; i < x.numel(); ++i) yp[i] = xp[i] > 0 ? xp[i] : 0.0f;
  Tensor y = ctx.act(x.shape());
  y.copy_from(y32);
  save(ctx, {y});
  return y;
}

Tensor Relu::backward(nn::Context& ctx, const Tensor& dy) {
  const Tensor y32 = f32_of(ctx, restore(ctx).tensors[0]), g32 = f32_of(ctx, dy);
  Tensor d32 = ctx.scratch(dy.shape());
  const float* y = y32.data<float>();
  const float* g = g32.data<float>();
  float* d = d32.data<float>();
  for (std::int64_t i = 0; i < dy.numel(); ++i) d[i] = y[i] > 0 ? g[i] : 0.0f;
  Tensor dx = ctx.act(dy.shape());
  dx.copy_from(d32);
  return dx;
}

}  // namespace mlp
