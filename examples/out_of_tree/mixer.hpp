// Mixer: an MLP-mixer classifier (Tolstikhin et al. 2021, without the patch embedding) written
// against Strata's public API only. A sample is P tokens of C channels; each block mixes across
// tokens (TokenMixing: one P×P matrix, the same for every channel) and then across channels (an
// MLP), both with LayerNorm and a residual; a linear head over all tokens gives K logits. Each
// block is a parameter unit, and so is the head: ZeRO-3 gathers one at a time, offload moves
// them, checkpoints hold them, and the engine knows their order from unit_schedule().
#pragma once

#include <memory>
#include <vector>

#include <strata/model.hpp>

namespace mixer {

// A layer written here, with its backward next to its forward: y_b = W x_b for each sample b
// (x_b: [P, C]), W [P, P] — mixing information across tokens through the tensor ops (ops::matmul).
class TokenMixing : public strata::nn::Module {
 public:
  TokenMixing(std::string prefix, int tokens);
  strata::Tensor forward(strata::nn::Context& ctx, const strata::Tensor& x);  // [B*P, C]
  strata::Tensor backward(strata::nn::Context& ctx, const strata::Tensor& dy);

 private:
  int tokens_;
  strata::nn::Parameter* w_;
};

class MixerBlock : public strata::nn::Module {
 public:
  MixerBlock(std::string prefix, int tokens, int channels, int hidden);
  strata::Tensor forward(strata::nn::Context& ctx, const strata::Tensor& x);  // [B*P, C]
  strata::Tensor backward(strata::nn::Context& ctx, const strata::Tensor& dy);

 private:
  strata::nn::LayerNorm ln1_;
  TokenMixing tokens_;
  strata::nn::LayerNorm ln2_;
  strata::nn::Linear fc1_, fc2_;
};

class Mixer : public strata::nn::Model {
 public:
  Mixer(int tokens, int channels, int hidden, int classes, int depth);

  std::vector<std::vector<strata::nn::Parameter*>> units() override;
  std::vector<strata::nn::UnitUse> unit_schedule() const override;
  std::vector<strata::nn::BatchField> batch_fields(int micro_batch) const override;
  double forward(strata::nn::Context& ctx, const strata::nn::Batch& batch) override;
  void backward(strata::nn::Context& ctx, float scale) override;

 private:
  int tokens_, channels_, classes_;
  std::vector<std::unique_ptr<MixerBlock>> blocks_;
  strata::nn::Linear head_;
};

}  // namespace mixer
