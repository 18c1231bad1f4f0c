// GptStage: stage `index` of `count` of a GPT for pipeline parallelism. The first stage holds the
// embeddings (token and position) and its blocks, the middle stages only blocks, the last stage its
// blocks, ln_f and the LM head, which is tied to the token embedding: the last stage keeps a copy
// of wte (initialised bitwise like the first stage's: init is a function of the global name) whose
// gradient the engine sums with the first stage's after backward. Blocks are cut by cost
// (gpt_stage_blocks). Units, by stage (count > 1): first {wte}, {wpe}, blocks; middle blocks; last
// blocks, ln_f, head {wte}. One stage (count = 1) is the whole model with Gpt's own units and
// order, computing exactly what Gpt::forward/backward compute.
#pragma once

#include <memory>
#include <vector>

#include "framework/nn/gpt.hpp"
#include "framework/nn/model_stage.hpp"

namespace strata::nn {

// The first block of each of `count` stages, then n_layer (count + 1 entries): a block costs its
// matmuls and attention per token (24 C^2 + 4 T C), the last stage's head 2 V C more, the
// embedding lookup nothing; the largest stage cost is minimised (nn::balance_stages). Throws
// UserError when count is not in [1, n_layer].
std::vector<int> gpt_stage_blocks(const GptConfig& c, int count);

class GptStage : public ModelStage {
 public:
  GptStage(Gpt& gpt, int index, int count);

  int first_block() const { return block0_; }
  int end_block() const { return block1_; }

  std::vector<std::vector<Parameter*>> units() override;
  std::vector<UnitUse> unit_schedule() const override;
  std::vector<TiedUnit> tied_units() const override;
  Shape input_shape(const Batch& batch) const override;  // [B*T, C] (every boundary)
  Shape output_shape(const Batch& batch) const override { return input_shape(batch); }
  StageOutput forward(Context& ctx, const Batch& batch, const Tensor& input) override;
  Tensor backward(Context& ctx, const Tensor& output_grad, float scale) override;

 private:
  int block_unit(int block) const { return blocks_unit_ + (block - block0_); }

  Gpt& gpt_;
  int block0_, block1_;  // the blocks [block0_, block1_)
  // Unit ids on this stage (-1: not here). With one stage the embeddings are one unit, which the
  // head uses too, as in Gpt.
  int wte_unit_ = -1, wpe_unit_ = -1, blocks_unit_ = 0, ln_f_unit_ = -1, head_unit_ = -1;
};

}  // namespace strata::nn
