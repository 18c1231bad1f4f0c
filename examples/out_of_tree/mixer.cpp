#include "mixer.hpp"

#include <cmath>
#include <string>

namespace mixer {

using namespace strata;

TokenMixing::TokenMixing(std::string prefix, int tokens)
    : Module(std::move(prefix)), tokens_(tokens) {
  // Declared, not allocated: the engine places it (sharded, offloaded) and initialises it from
  // (seed, name, element), so every sharding starts from the same weights.
  w_ = &declare("weight", Shape{tokens, tokens}, nn::Init::normal(1.0f / std::sqrt(float(tokens))),
                /*decay=*/true);
}

Tensor TokenMixing::forward(nn::Context& ctx, const Tensor& x) {
  const std::int64_t B = x.dim(0) / tokens_, C = x.dim(1);
  Tensor y = ctx.act(x.shape());
  const Tensor x3 = x.view({B, tokens_, C}), y3 = y.view({B, tokens_, C});
  for (std::int64_t b = 0; b < B; ++b) ops::matmul(nn::value_of(*w_), x3.select(b), y3.select(b));
  save(ctx, {x});
  return y;
}

Tensor TokenMixing::backward(nn::Context& ctx, const Tensor& dy) {
  const Tensor x = restore(ctx).tensors[0];
  const std::int64_t B = x.dim(0) / tokens_, C = x.dim(1);
  Tensor dx = ctx.act(x.shape());
  const Tensor x3 = x.view({B, tokens_, C}), dy3 = dy.view({B, tokens_, C}), dx3 = dx.view({B, tokens_, C});
  const Tensor& W = nn::value_of(*w_);
  const Tensor& dW = nn::grad_of(*w_);
  for (std::int64_t b = 0; b < B; ++b) {
    ops::matmul(W, dy3.select(b), dx3.select(b), /*trans_a=*/true);                         // dx = Wᵀ dy
    ops::matmul(dy3.select(b), x3.select(b), dW, false, /*trans_b=*/true, 1.0f, /*beta=*/1.0f);  // dW += dy xᵀ
  }
  return dx;
}

MixerBlock::MixerBlock(std::string prefix, int tokens, int channels, int hidden)
    : Module(std::move(prefix)),
      ln1_(child_name("ln1"), channels),
      tokens_(child_name("tokens"), tokens),
      ln2_(child_name("ln2"), channels),
      fc1_(child_name("fc1"), channels, hidden, true, std::sqrt(2.0f / float(channels))),
      fc2_(child_name("fc2"), hidden, channels, true, std::sqrt(1.0f / float(hidden))) {
  add_child(ln1_);
  add_child(tokens_);
  add_child(ln2_);
  add_child(fc1_);
  add_child(fc2_);
}

Tensor MixerBlock::forward(nn::Context& ctx, const Tensor& x) {
  Tensor x1 = ctx.act(x.shape());
  ops::add(x, tokens_.forward(ctx, ln1_.forward(ctx, x)), x1);  // x1 = x + mix(ln1(x))
  Tensor h = fc1_.forward(ctx, ln2_.forward(ctx, x1));
  Tensor g = ctx.act(h.shape());
  ops::gelu_forward(h, g);
  save(ctx, {h});
  Tensor x2 = ctx.act(x.shape());
  ops::add(x1, fc2_.forward(ctx, g), x2);  // x2 = x1 + fc2(gelu(fc1(ln2(x1))))
  return x2;
}

Tensor MixerBlock::backward(nn::Context& ctx, const Tensor& dy) {
  const Tensor h = restore(ctx).tensors[0];
  Tensor dg = fc2_.backward(ctx, dy);
  Tensor dh = ctx.act(h.shape());
  ops::gelu_backward(h, dg, dh);
  Tensor dx1 = ctx.act(dy.shape());
  ops::add(dy, ln2_.backward(ctx, fc1_.backward(ctx, dh)), dx1);
  Tensor dx = ctx.act(dy.shape());
  ops::add(dx1, ln1_.backward(ctx, tokens_.backward(ctx, dx1)), dx);
  return dx;
}

Mixer::Mixer(int tokens, int channels, int hidden, int classes, int depth)
    : Model("mixer"), tokens_(tokens), channels_(channels), classes_(classes),
      head_(child_name("head"), tokens * channels, classes, true,
            std::sqrt(1.0f / float(tokens * channels))) {
  for (int i = 0; i < depth; ++i) {
    blocks_.push_back(std::make_unique<MixerBlock>(child_name("blocks." + std::to_string(i)),
                                                   tokens, channels, hidden));
    add_child(*blocks_.back());
  }
  add_child(head_);
}

std::vector<std::vector<nn::Parameter*>> Mixer::units() {
  std::vector<std::vector<nn::Parameter*>> u;
  for (auto& b : blocks_) u.push_back(b->parameters());
  u.push_back(head_.parameters());
  return u;
}

std::vector<nn::UnitUse> Mixer::unit_schedule() const {
  const int n = static_cast<int>(blocks_.size()) + 1;
  std::vector<nn::UnitUse> s;
  for (int u = 0; u < n; ++u) s.push_back({false, u});
  for (int u = n - 1; u >= 0; --u) s.push_back({true, u});
  return s;
}

std::vector<nn::BatchField> Mixer::batch_fields(int micro_batch) const {
  return {{"x", Shape{micro_batch, tokens_, channels_}, DType::f32},
          {"labels", Shape{micro_batch}, DType::i32}};
}

double Mixer::forward(nn::Context& ctx, const nn::Batch& batch) {
  const Tensor& x = batch["x"];
  const Tensor& labels = batch["labels"];
  const std::int64_t B = x.dim(0);
  // Tokens as rows [B*P, C], in the activation dtype (16-bit with mixed precision).
  Tensor h = x.view({B * tokens_, channels_}).to(ctx.act_dtype, ctx.activations);
  const int head = static_cast<int>(blocks_.size());
  for (int i = 0; i < head; ++i) {
    ctx.before_forward(i);
    h = blocks_[i]->forward(ctx, h);
    ctx.after_forward(i);
  }
  ctx.before_forward(head);
  Tensor logits = head_.forward(ctx, h.view({B, tokens_ * channels_}));
  ctx.after_forward(head);
  Tensor lse = ctx.act(Shape{B}, DType::f32);
  const double sum = ops::cross_entropy_forward(logits, labels, lse);
  save(ctx, {logits, lse, labels.clone(ctx.activations)});
  return sum / static_cast<double>(B);
}

void Mixer::backward(nn::Context& ctx, float scale) {
  auto s = restore(ctx);
  Tensor logits = std::move(s.tensors[0]);
  const std::int64_t B = logits.dim(0);
  // d(mean loss)/d(logits), in place.
  ops::cross_entropy_backward(logits, s.tensors[1], s.tensors[2], logits, scale / static_cast<float>(B));
  const int head = static_cast<int>(blocks_.size());
  ctx.before_backward(head);
  Tensor dh = head_.backward(ctx, logits).view({B * tokens_, channels_});
  ctx.after_backward(head);
  for (int i = head - 1; i >= 0; --i) {
    ctx.before_backward(i);
    dh = blocks_[i]->backward(ctx, dh);
    ctx.after_backward(i);
  }
}

}  // namespace mixer
