// InterleavedStage: pipeline rank `index` of `count` holding several model chunks, for the
// interleaved 1F1B schedule (Megatron-LM's virtual pipeline stages): the model is cut into
// count * chunks stages (Model::stage over count * chunks) and this rank holds stages index,
// index + count, ..., its chunk c being virtual stage c * count + index. Its units are the chunks'
// units in chunk order (chunk c's unit u is unit first_unit(c) + u here), its tied units theirs;
// forward_chunk/backward_chunk run one chunk with the unit hooks shifted to these ids. Every chunk
// must send and receive activations of one shape (a GPT's [B*T, C] at every boundary).
#pragma once

#include <memory>
#include <vector>

#include "framework/nn/model_stage.hpp"

namespace strata::nn {

class Model;

class InterleavedStage : public ModelStage {
 public:
  // Throws UserError (from Model::stage) when the model cannot be cut into count * chunks stages.
  InterleavedStage(Model& model, int index, int count, int chunks);

  int first_unit(int chunk) const { return first_unit_[static_cast<std::size_t>(chunk)]; }
  const ModelStage& chunk(int c) const { return *chunks_[static_cast<std::size_t>(c)]; }

  std::vector<std::vector<Parameter*>> units() override;
  std::vector<UnitUse> unit_schedule() const override;  // every chunk's, in chunk order
  std::vector<TiedUnit> tied_units() const override;
  Shape input_shape(const Batch& batch) const override;
  Shape output_shape(const Batch& batch) const override;
  StageOutput forward(Context& ctx, const Batch& batch, const Tensor& input) override;
  Tensor backward(Context& ctx, const Tensor& output_grad, float scale) override;

  int chunks() const override { return static_cast<int>(chunks_.size()); }
  std::vector<UnitUse> chunk_unit_schedule(int chunk) const override;
  StageOutput forward_chunk(Context& ctx, const Batch& batch, const Tensor& input,
                            int chunk) override;
  Tensor backward_chunk(Context& ctx, const Tensor& output_grad, float scale, int chunk) override;

 private:
  std::vector<std::unique_ptr<ModelStage>> chunks_;
  std::vector<int> first_unit_;
};

}  // namespace strata::nn
