// ModelStage: one pipeline stage of a model — a contiguous run of its layers, their parameter
// units, and forward/backward of one micro-batch's part of the model. Pipeline parallelism cuts a
// Model into stages (Model::stage); the engine runs its rank's stage on the micro-batches its
// schedule names and moves activations and their gradients between stages. framework/ knows no
// ranks: a stage only computes; sends, receives and the tied-gradient sum are the engine's.
#pragma once

#include <vector>

#include "framework/nn/batch.hpp"
#include "framework/nn/context.hpp"
#include "framework/nn/loss.hpp"
#include "framework/nn/parameter.hpp"

namespace strata::nn {

struct UnitUse;

// A unit holding a parameter that other stages hold too (the token embedding a tied LM head uses
// on the last stage). After backward the engine sums the gradients of the i-th tied unit of every
// stage that has one, so all copies stay equal; the copy marked `owner` is the one that counts
// (in the gradient norm, in checkpoints), the others are copies.
struct TiedUnit {
  int unit = 0;
  bool owner = false;
};

// What forward of one micro-batch on a stage gives: the activation for the next stage, or on the
// last stage the mean loss over what the model counts (its sum possibly still on the GPU).
struct StageOutput {
  Tensor activation;
  Loss loss;
};

class ModelStage {
 public:
  ModelStage(int index, int count) : index_(index), count_(count) {}
  virtual ~ModelStage() = default;
  ModelStage(const ModelStage&) = delete;
  ModelStage& operator=(const ModelStage&) = delete;

  int index() const { return index_; }
  int count() const { return count_; }
  bool is_first() const { return index_ == 0; }
  bool is_last() const { return index_ == count_ - 1; }

  // This stage's parameter units in a fixed order (the unit ids its hooks name).
  virtual std::vector<std::vector<Parameter*>> units() = 0;
  // The unit uses of one micro-batch's forward and then its backward on this stage, in order.
  virtual std::vector<UnitUse> unit_schedule() const = 0;
  // Units shared with other stages (see TiedUnit); in the same order on every stage that has any.
  virtual std::vector<TiedUnit> tied_units() const { return {}; }
  // The shapes of the activation this stage receives from the previous stage (whose gradient it
  // sends back) and of the one it sends to the next, for `batch`; the dtype is ctx.act_dtype.
  virtual Shape input_shape(const Batch& batch) const = 0;
  virtual Shape output_shape(const Batch& batch) const = 0;

  // Forward of one micro-batch: `input` is the previous stage's output (undefined on the first
  // stage, which reads the batch). Every stage gets the same batch: the first takes its inputs,
  // the last its targets. Saves what backward needs in ctx.saved when ctx.grad_enabled.
  virtual StageOutput forward(Context& ctx, const Batch& batch, const Tensor& input) = 0;
  // Backward of the forward saved in ctx.saved: `output_grad` is d(loss)/d(output) from the next
  // stage (undefined on the last stage, which starts from d(mean loss) * scale). Accumulates the
  // stage's parameter gradients and returns d(loss)/d(input) (undefined on the first stage).
  virtual Tensor backward(Context& ctx, const Tensor& output_grad, float scale) = 0;

  // Model chunks this stage holds under the interleaved schedule (InterleavedStage: rank index of
  // count holds virtual stages index, index + count, ...); a plain stage is its one chunk 0.
  // Chunk c is virtual stage c * count() + index() of count() * chunks(). The chunk calls below
  // name units by this stage's ids, like units().
  virtual int chunks() const { return 1; }
  virtual std::vector<UnitUse> chunk_unit_schedule(int chunk) const;
  virtual StageOutput forward_chunk(Context& ctx, const Batch& batch, const Tensor& input,
                                    int chunk);
  virtual Tensor backward_chunk(Context& ctx, const Tensor& output_grad, float scale, int chunk);
  // Whether chunk c is the model's first / last virtual stage (reads the batch's inputs / ends in
  // the loss).
  bool chunk_is_first(int chunk) const { return chunk == 0 && is_first(); }
  bool chunk_is_last(int chunk) const { return chunk == chunks() - 1 && is_last(); }

 private:
  int index_, count_;
};

}  // namespace strata::nn
