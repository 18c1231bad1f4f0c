// GPT-2: token + learned position embeddings, L pre-LN blocks, final LayerNorm, LM head tied to
// the token embedding. Parameter names and layouts are nanoGPT's, so weights move to and from
// PyTorch unchanged. Parameters are grouped into units: 0 = embeddings, 1..L = blocks, L+1 = ln_f.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "framework/nn/block.hpp"

namespace strata::nn {

struct GptConfig {
  int vocab_size = 256;
  int block_size = 128;  // maximum sequence length
  int n_layer = 4;
  int n_head = 4;
  int n_embd = 128;
  std::int64_t num_parameters() const;  // with the tied head counted once
};

class Gpt : public Module {
 public:
  explicit Gpt(const GptConfig& cfg);

  const GptConfig& config() const { return cfg_; }
  // Parameters grouped by unit (see above), in a fixed order.
  std::vector<std::vector<Parameter*>> units();
  void set_checkpointing(bool on);

  // Forward pass over tokens/targets [B, T] (targets < 0 are ignored). Returns the mean loss over
  // the valid targets; with ctx.grad_enabled, saves what backward needs.
  double forward(Context& ctx, const std::int32_t* tokens, const std::int32_t* targets, int B, int T);
  // Backward from the last forward: d(mean loss) scaled by `scale` (e.g. loss scale / accumulation
  // steps) is propagated and parameter gradients are accumulated.
  void backward(Context& ctx, float scale);
  // Logits [B*T, V] for tokens [B, T], nothing saved (evaluation, sampling).
  Tensor logits(Context& ctx, const std::int32_t* tokens, int B, int T);

  void clear_saved() override;

 private:
  Tensor trunk(Context& ctx, const std::int32_t* tokens, int B, int T);  // → ln_f output [N, C]

  GptConfig cfg_;
  Parameter* wte_;
  Parameter* wpe_;
  std::vector<std::unique_ptr<Block>> blocks_;
  LayerNorm ln_f_;
  // saved for backward
  int B_ = 0, T_ = 0;
  std::int64_t n_valid_ = 0;
  std::vector<std::int32_t> tokens_, targets_;
  Tensor xf_, logits_, lse_;
};

}  // namespace strata::nn
