// Classifier: the user's model — Linear → ReLU → Linear over D features into K classes, trained
// with softmax cross-entropy. It implements nn::Model, so the same engine, ZeRO stages, offload and
// checkpoints that train the GPT train it: two units (fc1, fc2), a micro-batch of "x" f32 [B, D]
// and "labels" i32 [B].
#pragma once

#include "examples/mlp/relu.hpp"
#include "framework/nn/linear.hpp"
#include "framework/nn/model.hpp"

namespace mlp {

class Classifier : public strata::nn::Model {
 public:
  Classifier(int inputs, int hidden, int classes);

  std::vector<std::vector<strata::nn::Parameter*>> units() override;
  std::vector<strata::nn::UnitUse> unit_schedule() const override;
  std::vector<strata::nn::BatchField> batch_fields(int micro_batch) const override;
  double forward(strata::nn::Context& ctx, const strata::nn::Batch& batch) override;
  void backward(strata::nn::Context& ctx, float scale) override;
  // Logits [B, K] of inputs x [B, D], nothing saved.
  strata::Tensor logits(strata::nn::Context& ctx, const strata::Tensor& x);

  int inputs() const { return inputs_; }
  int classes() const { return classes_; }

 private:
  strata::Tensor run(strata::nn::Context& ctx, const strata::Tensor& x);

  int inputs_, classes_;
  strata::nn::Linear fc1_;
  Relu relu_;
  strata::nn::Linear fc2_;
};

}  // namespace mlp
