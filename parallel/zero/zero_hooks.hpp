// ZeroHooks: the unit hooks that make a model data-parallel at ZeRO stage 0–3, all from one
// partition rule (dp rank r owns [lo, hi) of every unit's padded flat buffer, ParamStore):
//   0: gradients all-reduced (avg) in buckets after each unit's backward on the last micro-batch;
//   1: gradients reduce-scattered per unit into the owned slice on the last micro-batch; the
//      optimizer updates the slice; updated parameters all-gathered after the step;
//   2: as 1, but gradients exist in full only transiently: a unit's full gradient buffer is
//      allocated at its backward, reduce-scattered after it (every micro-batch) and freed;
//   3: as 2, and parameters live only as slices: a unit is all-gathered before its forward and
//      its backward (the unit of the next use prefetched meanwhile), and released after use
//      unless the model uses it again within max_reuse_distance elements.
// The order of uses comes from the model (nn::Model::unit_schedule, given by the engine): the
// hooks prefetch and release by it, and tell an offloaded value store what it will read next.
// With overlap_comm the reductions of a unit start as soon as its backward is done.
// Gradient offload (the ParamStore has a grad_store): at every stage >= 1 a unit's full gradient
// buffer exists only around its backward; its reduction (ZeRO-1: on the last micro-batch; before
// that its unreduced gradient is stashed whole in the store and brought back before the next
// backward) completes into the store, so the device holds at most the in-flight window.
// Offload from a GPU (ParamStoreOptions::host_staging): what moves between the device and the
// stores' host memory is copied on copy streams of the hooks' own, ordered by events — a reduced
// gradient slice goes down after the kernels that wrote it while backward goes on, an offloaded
// parameter slice goes up (and is gathered) beside the compute of the unit before its use — and
// the host memory a copy reads or writes is held until the copy has completed (docs/gpu.md).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "framework/backend/transfer.hpp"
#include "framework/nn/context.hpp"
#include "framework/nn/model.hpp"
#include "framework/nn/param_store.hpp"
#include "parallel/comm/group.hpp"

namespace strata::parallel {

struct ZeroOptions {
  int stage = 0;
  std::int64_t bucket_elements = 500'000'000;    // reduce_bucket_size (stage 0 buckets)
  // allgather_bucket_size: stages 1-2 keep at most this many parameter elements being gathered
  // after the step (a unit larger than it goes alone).
  std::int64_t allgather_bucket_elements = 500'000'000;
  bool overlap = true;                            // overlap_comm
  std::int64_t prefetch_elements = 50'000'000;   // stage3_prefetch_bucket_size
  std::int64_t max_live_elements = 1'000'000'000;  // stage3_max_live_parameters
  std::int64_t persistence_threshold = 0;        // stage3_param_persistence_threshold
  // stage3_max_reuse_distance: a unit whose next use (in the schedule) comes before this many
  // elements of other units' uses stays gathered. 0 releases after every use; DeepSpeed's
  // default, 1e9, keeps every unit of a smaller model gathered for the whole step.
  std::int64_t max_reuse_distance = 0;
  // How the gradient average is taken, as DeepSpeed's engine and ZeRO optimizer take it:
  //   prescale (prescale_gradients): g * f(1/N) before a sum-reduction;
  //   else predivide != 1 (gradient_predivide_factor f): g * f(1/f) before a sum-reduction and
  //     * f(f/N) after it (skipped when f == N);
  //   else (DeepSpeed's defaults): the collective's avg (sum, then / N).
  bool prescale = false;
  double predivide = 1.0;
};

// Bytes this rank handed to each kind of collective (payload sizes, not wire bytes).
struct CommVolume {
  std::uint64_t all_reduce = 0, reduce_scatter = 0, all_gather = 0;
  // Bytes sent per rank by ring algorithms: all-reduce 2(N-1)/N, reduce-scatter and all-gather
  // (N-1)/N of the full buffer.
  double ring_bytes_sent(int n) const;
};

class ZeroHooks : public nn::UnitHooks {
 public:
  // `schedule`: the model's unit uses of one micro-batch (nn::Model::unit_schedule); empty: units
  // used in order (forward 0..n-1, backward n-1..0).
  ZeroHooks(nn::ParamStore& store, Group dp, const ZeroOptions& opts,
            std::vector<nn::UnitUse> schedule = {});
  ~ZeroHooks() override;

  // The ParamStore options a stage needs (sharding flags, shard index, padding).
  static nn::ParamStoreOptions store_options(nn::ParamStoreOptions base, int stage, const Group& dp);

  void set_sync(bool sync) { sync_ = sync; }  // true on the accumulation's last micro-batch
  // Called with unit u's owned gradient slice, while it is resident, when the reduction of the
  // accumulation's last micro-batch (set_sync) has been written into it (stage 1-3): the step's
  // final gradients. The engine passes it to Trainer::note_final_gradient, or with
  // strata.optimizer_in_backward to Trainer::step_unit. Returns true when the gradient was
  // consumed: an offloaded one is then not written back (zero_grads after the step forgets it).
  void on_reduced_gradient(std::function<bool(std::size_t, const Tensor&)> f) {
    reduced_gradient_ = std::move(f);
  }
  // Stage 0 only: false leaves this step's gradients unreduced, each rank's own (1-bit Adam past
  // its freeze_step averages momenta instead).
  void set_reduce_gradients(bool on);
  void before_forward(int unit) override;
  void after_forward(int unit) override;
  void before_backward(int unit) override;
  void after_backward(int unit) override;

  // After each micro-batch's backward: completes what must complete per micro-batch (stage 2/3
  // reduce-scatters into the owned gradient slices).
  void end_backward();
  // After the last micro-batch: completes the step's gradient reductions (stage 0/1).
  void finish_gradients();
  // After the optimizer step: stage 1/2 all-gather the updated parameters; stage 3 drops any
  // gathered copies (they are stale).
  void after_step();
  // After an error in a step's forward/backward (out-of-memory recovery): waits for the
  // collectives this rank posted (every rank posted them before the same failing allocation),
  // forgets their results, drops gathered parameters and transient gradient buffers, zeroes the
  // gradients and rewinds the schedule — the state before the step, so it can be redone. Throws
  // the first error of a collective it waited for.
  void abort_step();

  const CommVolume& volume() const { return volume_; }
  // Seconds the hooks have spent waiting for collectives to complete (gathers, reductions).
  double comm_wait_seconds() const { return comm_wait_s_; }
  int stage() const { return opts_.stage; }
  const Group& dp() const { return dp_; }

 private:
  struct PendingReduce {
    std::size_t unit;
    Tensor full, out;  // keep the buffers alive until the collective completes
    Work work;
  };
  struct Gathered {
    Tensor full;
    Tensor shard;  // the acquired owned slice, held until the gather completes
    Work work;
    bool ready = false;
    int uses = 0;
    // Staged (a host slice gathered on a GPU): the slice's copy on the device, the event its
    // upload completes at (the host slice is released after it), and the copy stream's point
    // after the gather was posted there (the compute stream waits for it before the unit's use).
    Tensor up;
    Event lifted, posted;
  };
  // A copy between the device and a gradient store's host memory still running: the device
  // tensor it reads or writes is kept alive, and the store's slice (the owned slice, or the whole
  // unit for ZeRO-1's stash) held, until the copy has completed (land()).
  struct Landing {
    Tensor keep;
    Event done;
    std::size_t unit = 0;
    bool whole = false;  // the grad_store's unit itself, not ParamStore's owned slice of it
    bool dirty = false;  // released dirty: the copy wrote it
  };

  void launch_unit_reduction(std::size_t u);
  // Staged gradients: unit p.unit's reduced slice (on the device) goes to the gradient store by a
  // copy on down_ (accumulated on the device first when the store holds earlier micro-batches').
  void offload_reduced(PendingReduce& p);
  // Waits for every copy of landing_ in order and releases the store slices they held; `quiet`:
  // errors are not thrown (the first is returned), slices released clean.
  std::exception_ptr land(bool quiet = false);
  void release_landed(const Landing& l, bool dirty);
  // ZeRO-1 with offloaded gradients, before the last micro-batch: unit u's unreduced gradient
  // moves whole into the gradient store (restore_stashed brings it back before its next backward).
  void stash_unreduced(std::size_t u);
  void restore_stashed(std::size_t u, Tensor& full);
  // Completes the pending reductions in launch order, all but the newest `keep` reduce-scatters
  // (keep == 0: everything, stage-0 all-reduces included).
  void complete_reductions(std::size_t keep = 0);
  // Moves the schedule position to this use (the next matching one, wrapping).
  void advance(bool backward, int unit);
  // Whether unit u is used again within max_reuse_distance elements after the current position.
  bool reused_soon(std::size_t u) const;
  // Tells an offloaded value store the units the coming uses will gather, in order.
  void expect_gathers() const;
  void acquire(std::size_t u);
  void release(std::size_t u);
  void start_gather(std::size_t u);
  void prefetch_next_use();
  // Waits (on the device's stream when on_device, else on the host), releases the slice.
  void finish_gather(Gathered& g, std::size_t u, bool on_device);
  bool persistent(std::size_t u) const;

  nn::ParamStore& store_;
  Group dp_;
  ZeroOptions opts_;
  bool sync_ = true;
  bool reduce_grads_ = true;
  std::function<bool(std::size_t, const Tensor&)> reduced_gradient_;
  std::vector<bool> reduced_;  // unit's reduction launched in this micro-batch/step
  std::vector<bool> stashed_;  // unit's unreduced gradient is in the gradient store (ZeRO-1)
  std::vector<Work> allreduce_inflight_;
  std::vector<Tensor> allreduce_buckets_;  // beside allreduce_inflight_, for the post-scaling
  // The reduction of gradients and the factors around it (ZeroOptions::prescale, predivide);
  // a factor of 1 is not applied.
  ReduceOp grad_op_ = ReduceOp::avg;
  float pre_scale_ = 1.0f, post_scale_ = 1.0f;
  void scale(const Tensor& t, float s) const;
  std::vector<PendingReduce> pending_;
  std::vector<Gathered> gathered_;
  std::int64_t live_elements_ = 0;
  std::vector<nn::UnitUse> schedule_;
  std::size_t pos_;  // index in schedule_ of the current use
  CommVolume volume_;
  double comm_wait_s_ = 0;
  void wait(Work& w);  // w.wait(), timed into comm_wait_s_
  // w.wait_on(the current stream of the store's device) where device_waits_, else wait(w): for
  // results read only by work queued after it there (kernels, or host copies ordered there).
  void wait_on_stream(Work& w);
  // Waits on the host for the calls wait_on_stream only ordered the device after, with their
  // timeouts: a failed or stalled call is an error here (a stream waiting on the device cannot
  // time out). At the end of each micro-batch's backward (stages 2-3), of the step's reductions
  // and of after_step, where the host next reads the results anyway (loss, norm, overflow).
  void confirm_device_waits();
  bool device_waits_ = false;
  std::vector<Work> device_waited_;
  // Offload from a GPU (host_staging): gradients go down to the grad_store and value slices come
  // up from the value_store by copies on these streams.
  bool staged_grads_ = false, staged_values_ = false;
  CopyStream down_, up_;
  std::deque<Landing> landing_;
};

}  // namespace strata::parallel
