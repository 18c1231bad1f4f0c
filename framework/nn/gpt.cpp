#include "framework/nn/gpt.hpp"

#include <cmath>

#include "framework/backend/ops/ops.hpp"
#include "framework/nn/batch_device.hpp"
#include "framework/nn/vocab_parallel.hpp"

namespace strata::nn {

namespace {

// A host tensor over caller-owned i32 data [B, T] (nothing copied, nothing charged).
Tensor wrap_i32(const std::int32_t* p, int B, int T) {
  const auto n = static_cast<std::size_t>(B) * static_cast<std::size_t>(T);
  return Tensor(Storage::wrap(const_cast<std::int32_t*>(p), n * sizeof(std::int32_t), Device::cpu()),
                DType::i32, Shape{B, T}, {T, 1});
}

}  // namespace

std::int64_t GptConfig::num_parameters() const {
  const std::int64_t C = n_embd, L = n_layer;
  const std::int64_t per_block = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C +
                                 (4 * C * C + 4 * C) + (4 * C * C + C);
  return static_cast<std::int64_t>(vocab_size) * C + static_cast<std::int64_t>(block_size) * C +
         L * per_block + 2 * C;
}

std::int64_t gpt_tp_allreduce_bytes(const GptConfig& c, int tp, std::int64_t tokens, DType act,
                                    bool checkpointing, int block0, int block1, bool first,
                                    bool last) {
  return gpt_tp_traffic(c, tp, tokens, act, checkpointing, block0, block1, first, last, false)
      .all_reduce;
}

TpTraffic gpt_tp_traffic(const GptConfig& c, int tp, std::int64_t tokens, DType act,
                         bool checkpointing, int block0, int block1, bool first, bool last,
                         bool sequence_parallel) {
  TpTraffic t;
  if (tp <= 1) return t;
  const std::int64_t row = tokens * c.n_embd * static_cast<std::int64_t>(dtype_size(act));
  const std::int64_t blocks = block1 - block0;
  const std::int64_t recompute = checkpointing ? 2 : 0;
  const std::int64_t ce = 3 * tokens * 4;  // the cross-entropy's max, sum of exps, target logit
  if (!sequence_parallel) {
    t.all_reduce = blocks * (2 + 2 + recompute) * row;
    if (first) t.all_reduce += row;      // the embedding's sum
    if (last) t.all_reduce += row + ce;  // the head's input gradient; the cross-entropy
    return t;
  }
  const std::int64_t ln_grads = 2 * c.n_embd * 4;  // a LayerNorm's weight and bias gradients, f32
  t.all_gather = blocks * (2 + 4 + recompute) * row;
  t.reduce_scatter = blocks * (2 + 2 + recompute) * row;
  t.all_reduce = blocks * 2 * ln_grads;
  if (first) {  // the embedding: its sum scattered, its gradient gathered
    t.reduce_scatter += row;
    t.all_gather += row;
  }
  if (last) {  // the head: ln_f's output gathered forward and backward, its gradient scattered
    t.all_gather += 2 * row;
    t.reduce_scatter += row;
    t.all_reduce += ln_grads + ce;
  }
  return t;
}

std::int64_t gpt_block_activation_bytes(const GptConfig& c, TpShard tp, std::int64_t tokens,
                                        DType act, Recompute mode) {
  const std::int64_t e = static_cast<std::int64_t>(dtype_size(act)), h = c.n_embd, t = tp.size;
  const std::int64_t stats = 2 * 2 * 4;  // two LayerNorms' f32 mean and 1/std
  std::int64_t whole = 0, split = 0;      // per token: LayerNorm regions, the split layers (all t)
  switch (mode) {
    case Recompute::none:
      whole = 4 * e * h + stats;
      split = 12 * e * h + 4 * c.n_head;
      break;
    case Recompute::selective:
      whole = 2 * e * h + stats;
      split = 7 * e * h;
      break;
    case Recompute::full:
      whole = e * h;
      break;
  }
  return tp.splits_tokens() ? tokens * (whole + split) / t : tokens * whole + tokens * split / t;
}

Gpt::Gpt(const GptConfig& cfg, TpShard tp)
    : Model(""), cfg_(cfg), tp_(tp), ln_f_("transformer.ln_f", cfg.n_embd, 1e-5f, tp) {
  STRATA_CHECK(cfg.vocab_size > 0 && cfg.block_size > 0 && cfg.n_layer > 0 && cfg.n_embd > 0 &&
                   cfg.n_head > 0,
               "nn", "invalid GPT shape (vocab {}, block {}, layers {}, embd {}, heads {})",
               cfg.vocab_size, cfg.block_size, cfg.n_layer, cfg.n_embd, cfg.n_head);
  STRATA_CHECK(tp.size >= 1 && tp.index >= 0 && tp.index < tp.size, "nn",
               "tensor-parallel part {} of {}", tp.index, tp.size);
  if (cfg.vocab_size % tp.size != 0)
    user_fail("nn", "vocab_size {} does not split over tensor_parallel_size {}: pad the vocabulary "
              "to a multiple of it (e.g. {})", cfg.vocab_size, tp.size,
              (cfg.vocab_size + tp.size - 1) / tp.size * tp.size);
  const float std = 0.02f;
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(cfg.n_layer));
  const int v_part = cfg.vocab_size / tp.size;
  vocab_start_ = static_cast<std::int64_t>(tp.index) * v_part;
  wte_ = &declare("transformer.wte.weight", Shape{v_part, cfg.n_embd}, Init::normal(std), true);
  if (tp.size > 1) wte_->placement = {0, tp.size, tp.index, 1};
  wpe_ = &declare("transformer.wpe.weight", Shape{cfg.block_size, cfg.n_embd}, Init::normal(std), true);
  for (int l = 0; l < cfg.n_layer; ++l) {
    blocks_.push_back(std::make_unique<Block>("transformer.h." + std::to_string(l), cfg.n_embd,
                                              cfg.n_head, std, proj_std, tp));
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

std::vector<UnitUse> Gpt::unit_schedule() const {
  const int last = cfg_.n_layer + 1;
  std::vector<UnitUse> s;
  for (int u = 0; u <= last; ++u) s.push_back({false, u});
  s.push_back({false, 0});  // the tied head
  s.push_back({true, 0});   // the head's backward
  for (int u = last; u >= 1; --u) s.push_back({true, u});
  return s;
}

std::vector<BatchField> Gpt::batch_fields(int micro_batch) const {
  const Shape s{micro_batch, cfg_.block_size};
  return {{"tokens", s, DType::i32}, {"targets", s, DType::i32}};
}

void Gpt::set_recompute(Recompute mode) {
  for (auto& b : blocks_) b->set_recompute(mode);
}

void Gpt::check_tokens(const Tensor& tokens) const {
  STRATA_CHECK(tokens.rank() == 2 && tokens.dtype() == DType::i32, "nn",
               "GPT tokens must be i32 [B, T], got {} {}", dtype_name(tokens.dtype()),
               tokens.shape().str());
  const std::int64_t T = tokens.dim(1), N = tokens.numel();
  STRATA_CHECK(T >= 1 && T <= cfg_.block_size, "nn", "sequence length {} exceeds block_size {}", T,
               cfg_.block_size);
  check_sequence_split(T);
  const std::int32_t* tok = tokens.data<std::int32_t>();  // the batch is in host memory
  for (std::int64_t i = 0; i < N; ++i)
    STRATA_CHECK(tok[i] >= 0 && tok[i] < cfg_.vocab_size, "nn",
                 "token {} at position {} is outside the vocabulary [0, {})", tok[i], i,
                 cfg_.vocab_size);
}

Tensor Gpt::trunk(Context& ctx, const Tensor& tokens) {
  const std::int64_t T = tokens.dim(1);
  ctx.before_forward(0);
  Tensor x = embed(ctx, tokens);
  ctx.after_forward(0);
  const int B = static_cast<int>(tokens.dim(0));
  for (std::size_t l = 0; l < blocks_.size(); ++l) {
    ctx.before_forward(static_cast<int>(l) + 1);
    x = blocks_[l]->forward(ctx, x, B, static_cast<int>(T));
    ctx.after_forward(static_cast<int>(l) + 1);
  }
  const int last = cfg_.n_layer + 1;
  ctx.before_forward(last);
  Tensor xf = ln_f_.forward(ctx, x);
  ctx.after_forward(last);
  return xf;
}

void Gpt::check_sequence_split(std::int64_t T) const {
  if (tp_.splits_tokens() && T % tp_.size != 0)
    user_fail("nn", "sequence length {} does not split over strata.tensor_parallel_size {} with "
              "strata.sequence_parallel true: use a multiple of {}, or set "
              "strata.sequence_parallel to false", T, tp_.size, tp_.size);
}

// Every caller has checked the tokens on the host (check_tokens; GptStage the same way), before the
// batch went up: the op need not check them again (on a GPU that would be a wait of the host).
Tensor Gpt::embed(Context& ctx, const Tensor& tokens) {
  const std::int64_t N = tokens.numel();
  Tensor x = ctx.act(Shape{N, cfg_.n_embd});
  if (tp_.size == 1) {
    ops::embedding_forward(tokens, value_of(*wte_), value_of(*wpe_), x, -1,
                           ops::TokenCheck::done_by_caller);
    return x;
  }
  // Each part looks up the tokens of its vocabulary slice (0 for the others), part 0 adds the
  // positions, and the sum over the parts is the whole embedding (exactly: one term is nonzero).
  ops::embedding_forward(tokens, value_of(*wte_), tp_.index == 0 ? value_of(*wpe_) : Tensor(), x,
                         vocab_start_, ops::TokenCheck::done_by_caller);
  if (tp_.splits_tokens()) {
    check_sequence_split(tokens.dim(1));
    return sp_scatter(ctx, tp_, x, "the vocabulary-parallel embedding");  // this part's tokens
  }
  tp_all_reduce(ctx, tp_.size, x, "the vocabulary-parallel embedding");
  return x;
}

Tensor Gpt::head_forward(Context& ctx, const Tensor& xf) {
  const Tensor x = tp_.splits_tokens() ? sp_gather(ctx, tp_, xf, "the LM head") : xf;
  Tensor logits = ctx.act(Shape{x.dim(0), value_of(*wte_).dim(0)});  // this part's vocabulary
  ops::matmul(x, value_of(*wte_), logits, false, true);
  return logits;
}

Tensor Gpt::head_backward(Context& ctx, const Tensor& dlogits, const Tensor& xf) {
  // dxf = dlogits @ wte, dwte += dlogits^T @ xf (every token's: gathered again with sequence
  // parallelism, which saved only this part's).
  Tensor x = tp_.splits_tokens() ? sp_gather(ctx, tp_, xf, "the LM head") : xf;
  Tensor dx = ctx.act(Shape{x.dim(0), cfg_.n_embd});
  ops::matmul(dlogits, value_of(*wte_), dx, false, false);
  ops::matmul(dlogits, x, grad_of(*wte_), true, false, 1.0f, 1.0f);
  x = {};
  // f: xf's gradient from every vocabulary slice (with sequence parallelism, of this part's tokens)
  if (tp_.splits_tokens()) return sp_scatter(ctx, tp_, dx, "the LM head");
  tp_all_reduce(ctx, tp_.size, dx, "the LM head");
  return dx;
}

Tensor Gpt::head_loss(Context& ctx, const Tensor& logits, const Tensor& targets,
                      const Tensor& lse) {
  Tensor sum = ctx.scratch(Shape{1}, DType::f64);
  if (tp_.size == 1)
    ops::cross_entropy_forward(logits, targets, lse, sum);
  else
    vocab_parallel_cross_entropy(ctx, tp_.size, logits, targets, vocab_start_, lse, sum);
  return sum;
}

void Gpt::head_loss_backward(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                             float scale) {
  if (tp_.size == 1)
    ops::cross_entropy_backward(logits, lse, targets, logits, scale);
  else
    ops::cross_entropy_backward_slice(logits, lse, targets, vocab_start_, scale, logits);
}

void Gpt::embed_backward(Context& ctx, const Tensor& tokens, const Tensor& dx_part) {
  // With sequence parallelism every token's gradient (the reduce-scatter's backward).
  const Tensor dx = tp_.splits_tokens()
                        ? sp_gather(ctx, tp_, dx_part, "the vocabulary-parallel embedding")
                        : dx_part;
  ops::embedding_backward(tokens, dx, grad_of(*wte_), grad_of(*wpe_),
                          tp_.size == 1 ? -1 : vocab_start_, ops::TokenCheck::done_by_caller);
}

std::int64_t Gpt::count_targets(const Tensor& targets) const {
  std::int64_t valid = 0;
  const std::int32_t* t = targets.data<std::int32_t>();  // the batch is in host memory
  for (std::int64_t i = 0; i < targets.numel(); ++i) {
    // Checked here, where the host has them: a GPU's cross-entropy could only make its sum NaN.
    STRATA_CHECK(t[i] < cfg_.vocab_size, "nn",
                 "target {} at position {} is outside the vocabulary [0, {})", t[i], i,
                 cfg_.vocab_size);
    valid += t[i] >= 0;
  }
  return valid;
}

double Gpt::forward(Context& ctx, const Batch& batch) { return forward_loss(ctx, batch).value(); }

Loss Gpt::forward_loss(Context& ctx, const Batch& batch) {
  return forward(ctx, batch["tokens"], batch["targets"]);
}

double Gpt::forward(Context& ctx, const std::int32_t* tokens, const std::int32_t* targets, int B,
                    int T) {
  return forward(ctx, wrap_i32(tokens, B, T), wrap_i32(targets, B, T)).value();
}

Loss Gpt::forward(Context& ctx, const Tensor& tokens, const Tensor& targets) {
  STRATA_CHECK(targets.shape() == tokens.shape() && targets.dtype() == DType::i32, "nn",
               "GPT targets {} {} do not match tokens {}", dtype_name(targets.dtype()),
               targets.shape().str(), tokens.shape().str());
  check_tokens(tokens);
  const std::int64_t N = tokens.numel();
  const Tensor tgt = targets.view(Shape{N});
  const std::int64_t valid = count_targets(tgt);
  const Tensor dtok = on_compute_device(ctx, tokens), dtgt = on_compute_device(ctx, tgt);
  Tensor xf = trunk(ctx, dtok);
  ctx.before_forward(0);  // the head uses the tied token embedding
  Tensor logits = head_forward(ctx, xf);  // this part's vocabulary slice
  ctx.after_forward(0);
  Tensor lse = ctx.act(Shape{N}, DType::f32);
  Tensor sum = head_loss(ctx, logits, dtgt, lse);
  // Kept for backward: the tokens and targets (the batch buffers are refilled for the next
  // micro-batch: a GPU's copies are already the model's own), the head's input, the logits
  // (backward turns them into their gradient in place) and their log-sum-exps.
  save(ctx,
       {kept_for_backward(ctx, dtok, tokens), kept_for_backward(ctx, dtgt, tgt), xf, logits, lse},
       {valid});
  return Loss(std::move(sum), static_cast<double>(valid));
}

void Gpt::backward(Context& ctx, float scale) {
  auto s = restore(ctx);
  const Tensor tokens = std::move(s.tensors[0]), targets = std::move(s.tensors[1]);
  Tensor xf = std::move(s.tensors[2]), logits = std::move(s.tensors[3]), lse = std::move(s.tensors[4]);
  const std::int64_t n_valid = s.ints[0];
  s = {};
  const int last = cfg_.n_layer + 1;
  const float sc = n_valid > 0 ? scale / static_cast<float>(n_valid) : 0.0f;
  // Head: dlogits in place, then dxf = dlogits @ wte, dwte += dlogits^T @ xf.
  head_loss_backward(logits, lse, targets, sc);
  ctx.before_backward(0);
  Tensor dx = head_backward(ctx, logits, xf);
  logits = lse = xf = {};
  ctx.before_backward(last);
  dx = ln_f_.backward(ctx, dx);
  ctx.after_backward(last);
  for (std::size_t l = blocks_.size(); l-- > 0;) {
    ctx.before_backward(static_cast<int>(l) + 1);
    dx = blocks_[l]->backward(ctx, dx);
    ctx.after_backward(static_cast<int>(l) + 1);
  }
  embed_backward(ctx, tokens, dx);
  ctx.after_backward(0);
}

Tensor Gpt::logits(Context& ctx, const std::int32_t* tokens, int B, int T) {
  if (tp_.size > 1)
    user_fail("nn", "sampling from a tensor-parallel GPT is not implemented (each rank holds a "
              "slice of the vocabulary): sample from a checkpoint with tensor_parallel_size 1");
  const bool saved = ctx.grad_enabled;
  ctx.grad_enabled = false;
  Tensor xf;
  try {
    const Tensor host = wrap_i32(tokens, B, T);
    check_tokens(host);
    xf = trunk(ctx, on_compute_device(ctx, host));
  } catch (...) {
    ctx.grad_enabled = saved;
    throw;
  }
  ctx.grad_enabled = saved;
  ctx.before_forward(0);
  Tensor out = ctx.act(Shape{static_cast<std::int64_t>(B) * T, cfg_.vocab_size});
  ops::matmul(xf, value_of(*wte_), out, false, true);
  ctx.after_forward(0);
  return out;
}


}  // namespace strata::nn
