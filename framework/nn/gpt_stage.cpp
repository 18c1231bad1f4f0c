#include "framework/nn/gpt_stage.hpp"

#include "framework/backend/ops/ops.hpp"
#include "framework/nn/batch_device.hpp"
#include "framework/nn/stage_balance.hpp"
#include "framework/nn/tensor_parallel.hpp"

namespace strata::nn {

std::vector<int> gpt_stage_blocks(const GptConfig& c, int count) {
  if (count < 1 || count > c.n_layer)
    user_fail("nn", "a GPT with n_layer {} cannot be cut into {} pipeline stages: every stage "
              "needs a block; set strata.pipeline_parallel_size between 1 and {}", c.n_layer,
              count, c.n_layer);
  const double C = c.n_embd, T = c.block_size, V = c.vocab_size;
  const double block = 24 * C * C + 4 * T * C;
  return balance_stages(c.n_layer, count, 0.0, 2 * V * C / block);
}

// A tensor-parallel GPT cuts into stages of its parts: the first stage's embedding and the last
// stage's head are vocabulary-parallel as in Gpt::forward, the blocks split as always.
std::unique_ptr<ModelStage> Gpt::stage(int index, int count) {
  return std::make_unique<GptStage>(*this, index, count);
}

GptStage::GptStage(Gpt& gpt, int index, int count) : ModelStage(index, count), gpt_(gpt) {
  STRATA_CHECK(count >= 1 && index >= 0 && index < count, "nn", "stage {} of {} does not exist",
               index, count);
  const auto cut = gpt_stage_blocks(gpt.cfg_, count);
  block0_ = cut[static_cast<std::size_t>(index)];
  block1_ = cut[static_cast<std::size_t>(index) + 1];
  int next = 0;
  if (is_first()) {
    wte_unit_ = next++;
    wpe_unit_ = count == 1 ? wte_unit_ : next++;  // one stage: Gpt's embedding unit
  }
  blocks_unit_ = next;
  next += block1_ - block0_;
  if (is_last()) {
    ln_f_unit_ = next++;
    head_unit_ = count == 1 ? wte_unit_ : next++;
  }
}

std::vector<std::vector<Parameter*>> GptStage::units() {
  std::vector<std::vector<Parameter*>> u;
  if (is_first()) {
    if (wpe_unit_ == wte_unit_) {
      u.push_back({gpt_.wte_, gpt_.wpe_});
    } else {
      u.push_back({gpt_.wte_});
      u.push_back({gpt_.wpe_});
    }
  }
  for (int b = block0_; b < block1_; ++b) u.push_back(gpt_.blocks_[static_cast<std::size_t>(b)]->parameters());
  if (is_last()) {
    u.push_back(gpt_.ln_f_.parameters());
    if (head_unit_ != wte_unit_) u.push_back({gpt_.wte_});
  }
  return u;
}

std::vector<UnitUse> GptStage::unit_schedule() const {
  std::vector<UnitUse> s;
  if (is_first()) {
    s.push_back({false, wte_unit_});
    if (wpe_unit_ != wte_unit_) s.push_back({false, wpe_unit_});
  }
  for (int b = block0_; b < block1_; ++b) s.push_back({false, block_unit(b)});
  if (is_last()) {
    s.push_back({false, ln_f_unit_});
    s.push_back({false, head_unit_});
    s.push_back({true, head_unit_});
    s.push_back({true, ln_f_unit_});
  }
  for (int b = block1_; b-- > block0_;) s.push_back({true, block_unit(b)});
  // The embedding backward; with one stage the head's use of the embedding unit covers it.
  if (is_first() && head_unit_ != wte_unit_) {
    s.push_back({true, wte_unit_});
    s.push_back({true, wpe_unit_});
  }
  return s;
}

std::vector<TiedUnit> GptStage::tied_units() const {
  if (count() == 1) return {};  // the head uses the embedding itself
  if (is_first()) return {{wte_unit_, true}};
  if (is_last()) return {{head_unit_, false}};
  return {};
}

Shape GptStage::input_shape(const Batch& batch) const {
  const Tensor& tokens = batch["tokens"];
  // With sequence parallelism a stage hands on this part's tokens.
  const std::int64_t n = gpt_.tp_.splits_tokens() ? tokens.numel() / gpt_.tp_.size : tokens.numel();
  return Shape{n, gpt_.cfg_.n_embd};
}

namespace {

// A copy kept for backward (the caller's batch buffers are refilled for the next micro-batch).

}  // namespace

StageOutput GptStage::forward(Context& ctx, const Batch& batch, const Tensor& input) {
  const GptConfig& cfg = gpt_.cfg_;
  const Tensor& tokens = batch["tokens"];
  STRATA_CHECK(tokens.rank() == 2 && tokens.dtype() == DType::i32, "nn",
               "GPT tokens must be i32 [B, T], got {} {}", dtype_name(tokens.dtype()),
               tokens.shape().str());
  const std::int64_t T = tokens.dim(1), N = tokens.numel();
  STRATA_CHECK(T >= 1 && T <= cfg.block_size, "nn", "sequence length {} exceeds block_size {}", T,
               cfg.block_size);
  gpt_.check_sequence_split(T);
  const int B = static_cast<int>(tokens.dim(0));
  // Kept for backward: [tokens (first stage), targets, ln_f output, logits, log-sum-exps (last)].
  std::vector<Tensor> keep(5);
  std::int64_t valid = 0;
  Tensor x;
  if (is_first()) {
    const std::int32_t* tok = tokens.data<std::int32_t>();
    for (std::int64_t i = 0; i < N; ++i)
      STRATA_CHECK(tok[i] >= 0 && tok[i] < cfg.vocab_size, "nn",
                   "token {} at position {} is outside the vocabulary [0, {})", tok[i], i,
                   cfg.vocab_size);
    const Tensor dtok = on_compute_device(ctx, tokens);
    ctx.before_forward(wte_unit_);
    if (wpe_unit_ != wte_unit_) ctx.before_forward(wpe_unit_);
    x = gpt_.embed(ctx, dtok);
    if (wpe_unit_ != wte_unit_) ctx.after_forward(wpe_unit_);
    ctx.after_forward(wte_unit_);
    if (ctx.grad_enabled) keep[0] = kept_for_backward(ctx, dtok, tokens);
  } else {
    STRATA_CHECK(input.defined() && input.shape() == input_shape(batch) &&
                     input.dtype() == ctx.act_dtype,
                 "nn", "stage {} of {}: input activation {} {}, expected {} {}", index(), count(),
                 input.defined() ? dtype_name(input.dtype()) : "none",
                 input.defined() ? input.shape().str() : "", dtype_name(ctx.act_dtype),
                 input_shape(batch).str());
    x = input;
  }
  for (int b = block0_; b < block1_; ++b) {
    ctx.before_forward(block_unit(b));
    x = gpt_.blocks_[static_cast<std::size_t>(b)]->forward(ctx, x, B, static_cast<int>(T));
    ctx.after_forward(block_unit(b));
  }
  StageOutput out;
  if (!is_last()) {
    out.activation = std::move(x);
    if (ctx.grad_enabled && is_first()) ctx.saved->put(this, {std::move(keep), {}});
    return out;
  }
  const Tensor& targets = batch["targets"];
  STRATA_CHECK(targets.shape() == tokens.shape() && targets.dtype() == DType::i32, "nn",
               "GPT targets {} {} do not match tokens {}", dtype_name(targets.dtype()),
               targets.shape().str(), tokens.shape().str());
  ctx.before_forward(ln_f_unit_);
  Tensor xf = gpt_.ln_f_.forward(ctx, x);
  ctx.after_forward(ln_f_unit_);
  x = {};
  const Tensor tgt = targets.view(Shape{N});
  valid = gpt_.count_targets(tgt);
  const Tensor dtgt = on_compute_device(ctx, tgt);
  ctx.before_forward(head_unit_);
  Tensor logits = gpt_.head_forward(ctx, xf);  // this part's vocabulary
  ctx.after_forward(head_unit_);
  Tensor lse = ctx.act(Shape{N}, DType::f32);
  Tensor sum = gpt_.head_loss(ctx, logits, dtgt, lse);
  if (ctx.grad_enabled) {
    keep[1] = kept_for_backward(ctx, dtgt, tgt);
    keep[2] = std::move(xf);
    keep[3] = std::move(logits);
    keep[4] = std::move(lse);
    ctx.saved->put(this, {std::move(keep), {valid}});
  }
  out.loss = Loss(std::move(sum), static_cast<double>(valid));
  return out;
}

Tensor GptStage::backward(Context& ctx, const Tensor& output_grad, float scale) {
  const bool has_saved = is_first() || is_last();
  SavedState::Entry s = has_saved ? ctx.saved->take(this, "GptStage") : SavedState::Entry{};
  const Tensor tokens = has_saved ? std::move(s.tensors[0]) : Tensor();
  Tensor dx;
  if (is_last()) {
    const Tensor targets = std::move(s.tensors[1]);
    Tensor xf = std::move(s.tensors[2]), logits = std::move(s.tensors[3]), lse = std::move(s.tensors[4]);
    const std::int64_t n_valid = s.ints[0];
    s = {};
    const float sc = n_valid > 0 ? scale / static_cast<float>(n_valid) : 0.0f;
    // Head: dlogits in place, then dxf = dlogits @ wte, dwte += dlogits^T @ xf.
    gpt_.head_loss_backward(logits, lse, targets, sc);
    ctx.before_backward(head_unit_);
    dx = gpt_.head_backward(ctx, logits, xf);  // xf's gradient from every slice
    logits = lse = xf = {};
    // On its own stage the head's copy of wte is complete now; with one stage the embedding
    // backward below adds to it.
    if (head_unit_ != wte_unit_) ctx.after_backward(head_unit_);
    ctx.before_backward(ln_f_unit_);
    dx = gpt_.ln_f_.backward(ctx, dx);
    ctx.after_backward(ln_f_unit_);
  } else {
    STRATA_CHECK(output_grad.defined(), "nn", "stage {} of {}: backward without the output's gradient",
                 index(), count());
    dx = output_grad;
  }
  for (int b = block1_; b-- > block0_;) {
    ctx.before_backward(block_unit(b));
    dx = gpt_.blocks_[static_cast<std::size_t>(b)]->backward(ctx, dx);
    ctx.after_backward(block_unit(b));
  }
  if (!is_first()) return dx;
  if (head_unit_ != wte_unit_) {
    ctx.before_backward(wte_unit_);
    ctx.before_backward(wpe_unit_);
  }
  gpt_.embed_backward(ctx, tokens, dx);
  if (wpe_unit_ != wte_unit_) ctx.after_backward(wpe_unit_);
  ctx.after_backward(wte_unit_);
  return {};
}

}  // namespace strata::nn
