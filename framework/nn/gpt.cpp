#include "framework/nn/gpt.hpp"

#include <cmath>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/nn/param_access.hpp"

namespace strata::nn {

std::int64_t GptConfig::num_parameters() const {
  const std::int64_t C = n_embd, L = n_layer;
  const std::int64_t per_block = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C +
                                 (4 * C * C + 4 * C) + (4 * C * C + C);
  return static_cast<std::int64_t>(vocab_size) * C + static_cast<std::int64_t>(block_size) * C +
         L * per_block + 2 * C;
}

Gpt::Gpt(const GptConfig& cfg) : Module(""), cfg_(cfg), ln_f_("transformer.ln_f", cfg.n_embd) {
  STRATA_CHECK(cfg.vocab_size > 0 && cfg.block_size > 0 && cfg.n_layer > 0 && cfg.n_embd > 0 &&
                   cfg.n_head > 0,
               "nn", "invalid GPT shape (vocab {}, block {}, layers {}, embd {}, heads {})",
               cfg.vocab_size, cfg.block_size, cfg.n_layer, cfg.n_embd, cfg.n_head);
  const float std = 0.02f;
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(cfg.n_layer));
  wte_ = &declare("transformer.wte.weight", Shape{cfg.vocab_size, cfg.n_embd}, Init::normal(std), true);
  wpe_ = &declare("transformer.wpe.weight", Shape{cfg.block_size, cfg.n_embd}, Init::normal(std), true);
  for (int l = 0; l < cfg.n_layer; ++l) {
    blocks_.push_back(std::make_unique<Block>("transformer.h." + std::to_string(l), cfg.n_embd,
                                              cfg.n_head, std, proj_std));
    add_child(*blocks_.back());
  }
  add_child(ln_f_);
}

std::vector<std::vector<Parameter*>> Gpt::units() {
  std::vector<std::vector<Parameter*>> u;
  u.push_back({wte_, wpe_});
  for (auto& b : blocks_) u.push_back(b->parameters());
  u.push_back(ln_f_.parameters());
  return u;
}

void Gpt::set_checkpointing(bool on) {
  for (auto& b : blocks_) b->set_checkpointing(on);
}

Tensor Gpt::trunk(Context& ctx, const std::int32_t* tokens, int B, int T) {
  STRATA_CHECK(T >= 1 && T <= cfg_.block_size, "nn", "sequence length {} exceeds block_size {}", T,
               cfg_.block_size);
  const std::int64_t N = static_cast<std::int64_t>(B) * T;
  for (std::int64_t i = 0; i < N; ++i)
    STRATA_CHECK(tokens[i] >= 0 && tokens[i] < cfg_.vocab_size, "nn",
                 "token {} at position {} is outside the vocabulary [0, {})", tokens[i], i,
                 cfg_.vocab_size);
  const int C = cfg_.n_embd;
  ctx.before_forward(0);
  Tensor x = ctx.act(Shape{N, C});
  {
    F32Value wte(ctx, *wte_), wpe(ctx, *wpe_);
    cpu::embedding_forward(tokens, wte.get(), wpe.get(), x.data<float>(), B, T, C);
  }
  ctx.after_forward(0);
  for (std::size_t l = 0; l < blocks_.size(); ++l) {
    ctx.before_forward(static_cast<int>(l) + 1);
    x = blocks_[l]->forward(ctx, x, B, T);
    ctx.after_forward(static_cast<int>(l) + 1);
  }
  const int last = cfg_.n_layer + 1;
  ctx.before_forward(last);
  Tensor xf = ln_f_.forward(ctx, x);
  ctx.after_forward(last);
  return xf;
}

double Gpt::forward(Context& ctx, const std::int32_t* tokens, const std::int32_t* targets, int B,
                    int T) {
  Tensor xf = trunk(ctx, tokens, B, T);
  const int N = B * T, C = cfg_.n_embd, V = cfg_.vocab_size;
  ctx.before_forward(0);  // the head uses the tied token embedding
  Tensor logits = ctx.act(Shape{N, V});
  {
    F32Value wte(ctx, *wte_);
    cpu::matmul(xf.data<float>(), wte.get(), logits.data<float>(), N, V, C, false, true);
  }
  ctx.after_forward(0);
  Tensor lse = ctx.act(Shape{N});
  const double sum = cpu::cross_entropy_forward(logits.data<float>(), targets, lse.data<float>(), N, V);
  std::int64_t valid = 0;
  for (int i = 0; i < N; ++i) valid += targets[i] >= 0;
  if (ctx.grad_enabled) {
    B_ = B;
    T_ = T;
    n_valid_ = valid;
    tokens_.assign(tokens, tokens + N);
    targets_.assign(targets, targets + N);
    xf_ = xf;
    logits_ = logits;
    lse_ = lse;
  }
  return valid > 0 ? sum / static_cast<double>(valid) : 0.0;
}

void Gpt::backward(Context& ctx, float scale) {
  STRATA_CHECK(logits_.defined(), "nn", "GPT backward without a saved forward");
  const int N = B_ * T_, C = cfg_.n_embd, V = cfg_.vocab_size;
  const int last = cfg_.n_layer + 1;
  const float s = n_valid_ > 0 ? scale / static_cast<float>(n_valid_) : 0.0f;
  // Head: dlogits in place, then dxf = dlogits @ wte, dwte += dlogits^T @ xf.
  cpu::cross_entropy_backward(logits_.data<float>(), lse_.data<float>(), targets_.data(),
                              logits_.data<float>(), N, V, s);
  Tensor dx = ctx.act(Shape{N, C});
  ctx.before_backward(0);
  {
    F32Value wte(ctx, *wte_);
    F32Grad dwte(ctx, *wte_);
    cpu::matmul(logits_.data<float>(), wte.get(), dx.data<float>(), N, C, V, false, false);
    cpu::matmul(logits_.data<float>(), xf_.data<float>(), dwte.get(), V, C, N, true, false, 1.0f, 1.0f);
  }
  logits_ = lse_ = xf_ = {};
  ctx.before_backward(last);
  dx = ln_f_.backward(ctx, dx);
  ctx.after_backward(last);
  for (std::size_t l = blocks_.size(); l-- > 0;) {
    ctx.before_backward(static_cast<int>(l) + 1);
    dx = blocks_[l]->backward(ctx, dx);
    ctx.after_backward(static_cast<int>(l) + 1);
  }
  {
    F32Grad dwte(ctx, *wte_), dwpe(ctx, *wpe_);
    cpu::embedding_backward(tokens_.data(), dx.data<float>(), dwte.get(), dwpe.get(), B_, T_, C);
  }
  ctx.after_backward(0);
}

Tensor Gpt::logits(Context& ctx, const std::int32_t* tokens, int B, int T) {
  const bool saved = ctx.grad_enabled;
  ctx.grad_enabled = false;
  Tensor xf = trunk(ctx, tokens, B, T);
  ctx.grad_enabled = saved;
  const int N = B * T, C = cfg_.n_embd, V = cfg_.vocab_size;
  Tensor out = ctx.act(Shape{N, V});
  F32Value wte(ctx, *wte_);
  cpu::matmul(xf.data<float>(), wte.get(), out.data<float>(), N, V, C, false, true);
  return out;
}

void Gpt::clear_saved() {
  xf_ = logits_ = lse_ = {};
  Module::clear_saved();
}

}  // namespace strata::nn
