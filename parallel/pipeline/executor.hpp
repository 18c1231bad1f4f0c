// PipelineExecutor: one stage's part of a training step under the 1F1B schedule (interleaved when
// the stage holds several model chunks) — the forward and backward passes of the step's
// micro-batches in the schedule's order, each (chunk, micro-batch)'s saved activations in a
// SavedState of its own while it is in flight, activations and their gradients sent to and
// received from the neighbouring virtual stages without blocking compute (receives posted one
// action ahead, two with chunks, each send completed before the next action's compute:
// pipeline::executor_execution, which simulate() shows deadlock-free), and the tied units' gradients summed
// over the stages that share them. DataParallelEngine owns one when pipeline_parallel_size > 1
// and runs the rest of the step (ZeRO reductions, optimizer) as it does without.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "framework/nn/model.hpp"
#include "framework/nn/model_stage.hpp"
#include "framework/nn/param_store.hpp"
#include "framework/train/trainer.hpp"
#include "parallel/comm/group.hpp"
#include "parallel/grid/grid.hpp"
#include "parallel/pipeline/schedule.hpp"
#include "parallel/zero/zero_hooks.hpp"

namespace strata::parallel {

struct PipelineSetup {
  nn::ModelStage* stage = nullptr;  // this rank's stage; null: no pipeline
  Group pp;                         // the pipeline group (group rank = stage index)
  Group tied;                       // pipeline_tied_group
};

// Collective over grid.world(): this rank and the ranks at its (dp, tp) position whose stages
// also hold tied units (a GPT's first and last stage: Megatron's embedding group); a group of one
// for a stage without tied units.
Group pipeline_tied_group(const Grid& grid, bool has_tied);

// The unit uses of one step on `stage` in the order the action list makes them: the forward part
// of the stage's unit schedule for each forward, its backward part for each backward. ZeroHooks
// prefetch and release by it, and tell an offloaded parameter store what comes next.
std::vector<nn::UnitUse> step_unit_schedule(const nn::ModelStage& stage,
                                            const std::vector<pipeline::Action>& actions);

// A pipeline stage's Trainer reductions: `inner` (over dp for ZeRO, else local), then over the
// pipeline's stages; the tied copies a stage does not own are left out of the gradient norm.
train::ShardReductions pipeline_reductions(train::ShardReductions inner, const Group& pp,
                                           const nn::ModelStage& stage);

// The action list a rank runs for `stage` over `micro_batches`: 1F1B, or with several chunks the
// interleaved 1F1B schedule (pipeline::interleaved_one_f_one_b).
std::vector<pipeline::Action> stage_actions(const nn::ModelStage& stage, int micro_batches);

class PipelineExecutor {
 public:
  using NextBatch = std::function<void(nn::Batch&)>;
  // Runs one pass (backward: false for a forward) so that the engine can time it.
  using Compute = std::function<void(bool backward, const std::function<void()>& pass)>;

  PipelineExecutor(PipelineSetup setup, nn::ParamStore& store, ZeroHooks& hooks,
                   int micro_batches);

  const nn::ModelStage& stage() const { return *setup_.stage; }
  const Group& pp() const { return setup_.pp; }
  const std::vector<pipeline::Action>& actions() const { return actions_; }

  // The step's passes: `next` fills `batch` before each forward (on every stage, so the data
  // position stays the same everywhere); backward starts from d(loss) * scale on the last stage.
  // Ends by starting the host read of the micro-batches' losses (nn::LossSums::begin_read: on a
  // GPU a copy queued, no wait); losses() finishes it, after the optimizer step's read of the
  // gradient sums, so the host waits once for both.
  void run(const NextBatch& next, nn::Batch& batch, nn::Context& ctx, float scale,
           const Compute& compute);
  // After run(): the sum of its micro-batches' losses on the last stage (read on the host once
  // per step), 0 on the others.
  double losses();
  // After the data-parallel gradient reduction: sums the tied units' gradients over the tied
  // group (the full buffers at ZeRO stage 0, the owned slices above), so every copy is equal.
  void reduce_tied_grads();
  // The last stage's `v` on every stage.
  double from_last_stage(double v) const;
  // Forward only of one micro-batch (nothing saved): its mean loss, on every stage.
  double eval_loss(const nn::Batch& batch, nn::Context ctx);

  // Seconds spent waiting for the neighbouring stages so far (receives and sends).
  double wait_seconds() const { return wait_s_; }
  // The most micro-batches in flight (SavedStates held) during the last step.
  int peak_in_flight() const { return peak_in_flight_; }
  // Host reads of the last stage's losses so far (one per step).
  std::size_t loss_reads() const { return losses_.reads(); }

 private:
  void wait(const Work& w);
  // w.wait_on(the current stream of t's device): for a buffer t read only by later work there.
  void wait_on(const Work& w, const Tensor& t);

  PipelineSetup setup_;
  nn::ParamStore& store_;
  ZeroHooks& hooks_;
  int micro_batches_;
  std::vector<pipeline::Action> actions_;
  double wait_s_ = 0;
  int peak_in_flight_ = 0;
  nn::LossSums losses_;  // this step's losses, on the last stage
};

}  // namespace strata::parallel
