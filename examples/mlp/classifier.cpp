#include "examples/mlp/classifier.hpp"

#include <cmath>

#include "framework/backend/ops/ops.hpp"

namespace mlp {

using namespace strata;

Classifier::Classifier(int inputs, int hidden, int classes)
    : Model("mlp"),
      inputs_(inputs),
      classes_(classes),
      fc1_(child_name("fc1"), inputs, hidden, true, std::sqrt(2.0f / static_cast<float>(inputs))),
      relu_(child_name("relu")),
      fc2_(child_name("fc2"), hidden, classes, true, std::sqrt(1.0f / static_cast<float>(hidden))) {
  add_child(fc1_);
  add_child(relu_);
  add_child(fc2_);
}

std::vector<std::vector<nn::Parameter*>> Classifier::units() {
  return {fc1_.parameters(), fc2_.parameters()};
}

std::vector<nn::UnitUse> Classifier::unit_schedule() const {
  return {{false, 0}, {false, 1}, {true, 1}, {true, 0}};
}

std::vector<nn::BatchField> Classifier::batch_fields(int micro_batch) const {
  return {{"x", Shape{micro_batch, inputs_}, DType::f32}, {"labels", Shape{micro_batch}, DType::i32}};
}

Tensor Classifier::run(nn::Context& ctx, const Tensor& x) {
  ctx.before_forward(0);
  Tensor h = relu_.forward(ctx, fc1_.forward(ctx, x));
  ctx.after_forward(0);
  ctx.before_forward(1);
  Tensor y = fc2_.forward(ctx, h);
  ctx.after_forward(1);
  return y;
}

double Classifier::forward(nn::Context& ctx, const nn::Batch& batch) {
  const Tensor& x = batch["x"];
  const Tensor& labels = batch["labels"];
  // The input in the activation dtype, as the layers expect it.
  const Tensor xin = x.dtype() == ctx.act_dtype ? x : x.to(ctx.act_dtype, ctx.activations);
  Tensor logits = run(ctx, xin);
  Tensor lse = ctx.act(Shape{x.dim(0)}, DType::f32);
  const double sum = ops::cross_entropy_forward(logits, labels, lse);
  save(ctx, {logits, lse, labels.clone(ctx.activations)});
  return sum / static_cast<double>(x.dim(0));
}

void Classifier::backward(nn::Context& ctx, float scale) {
  auto s = restore(ctx);
  Tensor logits = std::move(s.tensors[0]);
  // d(mean loss)/d(logits), in place.
  ops::cross_entropy_backward(logits, s.tensors[1], s.tensors[2], logits,
                              scale / static_cast<float>(logits.dim(0)));
  s = {};
  ctx.before_backward(1);
  Tensor dh = relu_.backward(ctx, fc2_.backward(ctx, logits));
  logits = {};
  ctx.after_backward(1);
  ctx.before_backward(0);
  fc1_.backward(ctx, dh, /*need_dx=*/false);
  ctx.after_backward(0);
}

Tensor Classifier::logits(nn::Context& ctx, const Tensor& x) {
  const bool saved = ctx.grad_enabled;
  ctx.grad_enabled = false;
  Tensor out;
  try {
    out = run(ctx, x.dtype() == ctx.act_dtype ? x : x.to(ctx.act_dtype, ctx.activations));
  } catch (...) {
    ctx.grad_enabled = saved;
    throw;
  }
  ctx.grad_enabled = saved;
  return out;
}


}  // namespace mlp
