// GPT-2: token + learned position embeddings, L pre-LN blocks, final LayerNorm, LM head tied to
// the token embedding. Parameter names and layouts are nanoGPT's, so weights move to and from
// PyTorch unchanged. Parameters are grouped into units: 0 = embeddings, 1..L = blocks, L+1 = ln_f.
// A micro-batch is "tokens" and "targets", i32 [B, block_size] (targets < 0 are ignored).
// Tensor parallel (Megatron): built as part `index` of `size`, a rank holds its slice of the
// vocabulary (wte rows, vocabulary-parallel embedding, head and cross-entropy), of the attention
// heads and of the MLP; LayerNorms and wpe are replicated. With sequence parallelism
// (TpShard::sequence_parallel) the activations outside the split layers — the embedding's output,
// each block's input, LayerNorms and residual adds, ln_f — hold this part's 1/tp of the tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "framework/nn/block.hpp"
#include "framework/nn/model.hpp"

namespace strata::nn {

struct GptConfig {
  int vocab_size = 256;
  int block_size = 128;  // maximum sequence length
  int n_layer = 4;
  int n_head = 4;
  int n_embd = 128;
  std::int64_t num_parameters() const;  // with the tied head counted once
};

// Bytes a tensor-parallel GPT part all-reduces over its tp group for one micro-batch of `tokens`
// tokens (forward and backward), in the part of the model that runs blocks [block0, block1)
// (`first`: with the embedding, `last`: with the head): forward, the embedding's sum and two
// row-parallel outputs per block (g); backward, two column-parallel input gradients per block (f)
// and the head's input gradient; with activation checkpointing the blocks' forward again in
// backward; the vocabulary-parallel cross-entropy's row maxima, sums of exponentials and target
// logits (3 f32 per token). Activations in `act` (f32 or 16-bit). 0 for tp = 1 (nothing moves).
std::int64_t gpt_tp_allreduce_bytes(const GptConfig& c, int tp, std::int64_t tokens, DType act,
                                    bool checkpointing, int block0, int block1, bool first,
                                    bool last);

// The same by kind of collective, with or without sequence parallelism (TpTraffic's counting;
// without it, only all_reduce, gpt_tp_allreduce_bytes). With it, per block, a = N·C activations:
// forward, an all-gather before each column-parallel layer and a reduce-scatter after each
// row-parallel one (2a each); backward, the reduce-scatters' conjugate all-gathers of the output
// gradients (2a), the column-parallel layers' inputs gathered again (2a: they saved only their
// part) and the reduce-scatters of their input gradients (2a); with checkpointing the forward's
// 2a + 2a again; and the all-reduce of the two LayerNorms' weight and bias gradients (2 × 2C
// f32). The embedding reduce-scatters its sum (a) and gathers its gradient (a); the head gathers
// ln_f's output (a) forward and again backward (a), reduce-scatters its input gradient (a), and
// all-reduces ln_f's gradients (2C f32) and the cross-entropy's 3 f32 per token.
TpTraffic gpt_tp_traffic(const GptConfig& c, int tp, std::int64_t tokens, DType act,
                         bool checkpointing, int block0, int block1, bool first, bool last,
                         bool sequence_parallel);

// Bytes one transformer block of a tensor-parallel part (tp.size = 1: the whole block) keeps for
// backward from its forward until its backward, for a micro-batch of `tokens` tokens with
// activations in `act` (e bytes an element), h = n_embd, a = n_head, t = tp.size; per token, in the
// LayerNorm regions (whole on every part) and inside the split layers (1/t of the features):
//   none:      e·h (block input, ln_1's) + 8 (ln_1's f32 mean, 1/std) + e·h (ln_1's output,
//              c_attn's input) + e·h (x1, ln_2's input) + 8 (ln_2's mean, 1/std) + e·h (ln_2's
//              output, c_fc's input)  =  4·e·h + 16;  split: e·3h/t (qkv) + e·h/t (attention
//              output, c_proj's input) + 4·a/t (f32 log-sum-exp per head and row) + e·4h/t (GELU
//              input) + e·4h/t (GELU output, c_proj's input)  =  (12·e·h + 4·a)/t
//   selective: none without ln_1's and ln_2's outputs, the attention output and log-sum-exps and
//              the GELU output (recomputed in backward): 2·e·h + 16;  split 7·e·h/t
//   full:      the block input: e·h;  split 0
// Without sequence parallelism: tokens·(LayerNorm regions + split). With it (tp.splits_tokens())
// the LayerNorm regions hold tokens/t — the column-parallel layers save their part of the tokens
// and gather it again in backward, so the LayerNorm outputs selective drops and recomputes are
// parts too — and the whole is divided by t: none tokens·(16·e·h + 4·a + 16)/t (Megatron's 34
// s·b·h/t less the two dropout masks Strata does not have, and the log-sum-exps instead of the s²
// softmax), selective tokens·(9·e·h + 16)/t, full tokens·e·h/t. The ledger measures exactly this
// (tests/unit/nn/test_recompute.cpp, tests/dist/tensor/test_tensor_sequence.cpp); docs/memory.md
// and docs/parallelism.md compare it with Korthikanti et al. (2022).
std::int64_t gpt_block_activation_bytes(const GptConfig& c, TpShard tp, std::int64_t tokens,
                                        DType act, Recompute mode = Recompute::none);

class Gpt : public Model {
 public:
  explicit Gpt(const GptConfig& cfg, TpShard tp = {});

  const GptConfig& config() const { return cfg_; }
  // Parameters grouped by unit (see above), in a fixed order.
  std::vector<std::vector<Parameter*>> units() override;
  // Forward: 0 (embeddings), 1..L, L+1, then 0 again (the tied head); backward: 0 (head), L+1,
  // L..1 (unit 0's gradient is complete only after the embedding backward, at the very end).
  std::vector<UnitUse> unit_schedule() const override;
  std::vector<BatchField> batch_fields(int micro_batch) const override;
  void set_recompute(Recompute mode) override;
  TpShard tensor_shard() const override { return tp_; }
  // Pipeline stage `index` of `count` (a GptStage, framework/nn/gpt_stage.hpp).
  std::unique_ptr<ModelStage> stage(int index, int count) override;

  // Mean loss over the valid targets of batch["tokens"], batch["targets"] (i32 [B, T], T <=
  // block_size); with ctx.grad_enabled, saves what backward needs.
  double forward(Context& ctx, const Batch& batch) override;
  // The same, the loss's sum where the logits are (on a GPU: not read yet).
  Loss forward_loss(Context& ctx, const Batch& batch) override;
  // The same on host arrays tokens/targets [B, T].
  double forward(Context& ctx, const std::int32_t* tokens, const std::int32_t* targets, int B, int T);
  // Backward from the last forward: d(mean loss) scaled by `scale` (e.g. loss scale / accumulation
  // steps) is propagated and parameter gradients are accumulated.
  void backward(Context& ctx, float scale) override;
  // Logits [B*T, V] for tokens [B, T], nothing saved (evaluation, sampling). Whole model only
  // (a tensor-parallel part throws: its logits are a slice of the vocabulary).
  Tensor logits(Context& ctx, const std::int32_t* tokens, int B, int T);

 private:
  friend class GptStage;  // a pipeline stage runs a part of this model's layers
  Loss forward(Context& ctx, const Tensor& tokens, const Tensor& targets);
  // Host tokens i32 [B, T] with 1 <= T <= block_size, every one in the vocabulary.
  void check_tokens(const Tensor& tokens) const;
  // Host targets i32 [N]: every one below the vocabulary's size (negative: ignored); returns the
  // count of the others, the loss's divisor.
  std::int64_t count_targets(const Tensor& targets) const;
  // Tokens checked and on the compute device → ln_f output [N, C].
  Tensor trunk(Context& ctx, const Tensor& tokens);
  // The pieces a tensor-parallel part runs differently, shared with GptStage: the token and
  // position embedding into x [N, C] (a part looks up its vocabulary slice and the parts' sum is
  // the whole; with sequence parallelism each part keeps its tokens of the sum, [N/tp, C]); the
  // tied head's logits [N, V or V/tp] of the ln_f output (this part's tokens with sequence
  // parallelism: gathered first) and its backward from the logits' gradient into the ln_f
  // output's (accumulating wte's gradient); the cross-entropy's sum over tokens of its logits
  // (f64 [1] where the logits are; lse [N] kept for backward) and its backward into the logits,
  // in place; the embedding's backward. embed and embed_backward take tokens their caller has
  // checked on the host (check_tokens): the ops are told so and do not check them again.
  Tensor embed(Context& ctx, const Tensor& tokens);
  Tensor head_forward(Context& ctx, const Tensor& xf);
  Tensor head_backward(Context& ctx, const Tensor& dlogits, const Tensor& xf);
  Tensor head_loss(Context& ctx, const Tensor& logits, const Tensor& targets, const Tensor& lse);
  void head_loss_backward(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                          float scale);
  void embed_backward(Context& ctx, const Tensor& tokens, const Tensor& dx);
  // Sequence parallelism: T must be a multiple of tp (a one-line UserError otherwise).
  void check_sequence_split(std::int64_t T) const;

  GptConfig cfg_;
  TpShard tp_;
  std::int64_t vocab_start_ = 0;  // this part's first vocabulary row
  Parameter* wte_;
  Parameter* wpe_;
  std::vector<std::unique_ptr<Block>> blocks_;
  LayerNorm ln_f_;
};

}  // namespace strata::nn
