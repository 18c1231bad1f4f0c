// Model: what the training engine needs from any model — its parameter units, the order in which
// one micro-batch uses them, what a micro-batch is, and forward/backward of one micro-batch. The
// GPT and a user's own model implement it; the engine, ZeRO and the offload stores work from it
// alone (they never guess the order in which units come next).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "framework/core/error.hpp"
#include "framework/nn/batch.hpp"
#include "framework/nn/loss.hpp"
#include "framework/nn/model_stage.hpp"
#include "framework/nn/module.hpp"
#include "framework/nn/recompute.hpp"

namespace strata::nn {

// One use of a parameter unit: the before_forward (backward = false) or before_backward call a
// model makes for it.
struct UnitUse {
  bool backward = false;
  int unit = 0;
  bool operator==(const UnitUse&) const = default;
};

class Model : public Module {
 public:
  using Module::Module;

  // Parameters grouped into units (a unit is gathered, reduced and offloaded as one), in a fixed
  // order; unit ids are indices into this list.
  virtual std::vector<std::vector<Parameter*>> units() = 0;
  // The uses of one micro-batch's forward and then its backward, in order: exactly the sequence
  // of before_forward/before_backward calls forward() and backward() make. A unit may appear
  // several times (a tied head uses the embedding again).
  virtual std::vector<UnitUse> unit_schedule() const = 0;
  // The tensors of one micro-batch of `micro_batch` samples (host memory, filled by the data).
  virtual std::vector<BatchField> batch_fields(int micro_batch) const = 0;
  // Forward of one micro-batch: the mean loss over what the model counts (every sample equally
  // weighted across micro-batches by the engine). Saves what backward needs when
  // ctx.grad_enabled.
  virtual double forward(Context& ctx, const Batch& batch) = 0;
  // The same forward, its loss as an nn::Loss (loss.hpp): a model computing on a GPU gives the
  // loss's sum where it is, so that the engine reads a step's losses once, not once per
  // micro-batch. The default gives forward's value.
  virtual Loss forward_loss(Context& ctx, const Batch& batch) { return forward(ctx, batch); }
  // Backward of the last forward: d(loss) * scale propagated, parameter gradients accumulated.
  virtual void backward(Context& ctx, float scale) = 0;
  // Activation recomputation where the model supports it (recompute instead of saving;
  // recompute.hpp); set_checkpointing(true) is Recompute::full.
  virtual void set_recompute(Recompute mode) {}
  void set_checkpointing(bool on) { set_recompute(on ? Recompute::full : Recompute::none); }
  // The tensor-parallel part this model was built as (framework/nn/tensor_parallel.hpp): its
  // layers hold that part of the split parameters and need Context::tp. {0, 1}: the whole model.
  virtual TpShard tensor_shard() const { return {}; }
  // Stage `index` of `count` for pipeline parallelism (framework/nn/model_stage.hpp), over this
  // model's layers and parameters (it must outlive the stage). A model that cannot be split says so.
  virtual std::unique_ptr<ModelStage> stage(int index, int count) {
    user_fail("nn", "this model cannot be split into pipeline stages (asked for stage {} of {}): "
              "set strata.pipeline_parallel_size to 1", index, count);
  }
};

}  // namespace strata::nn
