// How an optimizer update reaches the parameters' owned value slices when they live apart from its
// state (nn::ParamStoreOptions::host_staging: a GPU's memory and the host's). The update runs
// where the state is; each unit's value slice is staged there and copied back after the update:
//   - state in host memory (offload_optimizer "cpu"/"nvme"), slices on the GPU: the slice is staged
//     in one of two pinned host buffers — copied down first when it is read (f32 parameters are
//     their own masters), not when it is only written (16-bit copies of the f32 masters) — and
//     copied back up on a copy stream while the host updates the next unit; end_step() makes the
//     device's current stream wait for those copies, so every kernel of the next step (the
//     gathers after the step, forward) reads the updated values;
//   - state on the GPU, slices in host memory (offload_param without offload_optimizer): the slice
//     is staged in a GPU buffer (copied up first when read) and copied back down before the store's
//     slice is released.
// On the CPU (tests) and the meta device (a plan) the same buffers are taken and the copies run
// at once, so the ledger sees what a GPU run holds.
#pragma once

#include <memory>

#include "framework/backend/transfer.hpp"
#include "framework/nn/param_store.hpp"

namespace strata::train {

class ValueStaging {
 public:
  // Null when nothing needs staging: no host_staging, or the state and the value slices on the
  // same side. state_tier: OptimizerStateStore::tier().
  static std::unique_ptr<ValueStaging> make(const nn::ParamStore& store, Tier state_tier);
  ValueStaging(const nn::ParamStore& store, bool state_on_host);
  ~ValueStaging();  // waits for the copies still using its buffers; never throws
  ValueStaging(const ValueStaging&) = delete;
  ValueStaging& operator=(const ValueStaging&) = delete;

  bool state_on_host() const { return on_host_; }
  // A copy of `slice` (the store's owned slice of a unit) on the state's side; `read`: with its
  // values (else its contents are unspecified until written).
  Tensor stage(const Tensor& slice, bool read);
  // slice <- staged after the update: queued up to the GPU behind the host (state on the host),
  // or copied down and waited for (state on the GPU: the store's host slice is released next).
  void write_back(const Tensor& slice, const Tensor& staged);
  // The device's current stream waits for every write-back queued so far: the end of a step's
  // updates (Trainer). The host does not block.
  void end_step();
  // The host waits for every copy queued so far (an update that failed half-way).
  void synchronize();

 private:
  const nn::ParamStore& store_;
  bool on_host_;
  CopyStream copies_;
  StagingBuffers host_;  // state on the host: two buffers of the largest owned slice
};

// Unit u's owned value slice where the optimizer's state is, for one use by an update: the
// store's own slice (acquired as nn::ValueShardScope does; `overwrite`: the caller writes every
// element before releasing it dirty), or with `staging` a staged copy of it. finish() ends a use
// that wrote it: the staged values are copied back when `dirty`. Without finish() (a use that only
// read, or an exception) a staged copy is dropped and the store's slice released as it was.
class ValueSlice {
 public:
  ValueSlice(const nn::ParamStore& store, ValueStaging* staging, std::size_t u, bool dirty,
             bool overwrite = false);
  ~ValueSlice();
  ValueSlice(const ValueSlice&) = delete;
  ValueSlice& operator=(const ValueSlice&) = delete;
  const Tensor& get() const { return staged_.defined() ? staged_ : held_.get(); }
  void finish();

 private:
  nn::ValueShardScope held_;
  ValueStaging* staging_;
  bool dirty_;
  Tensor staged_;
  bool finished_ = false;
};

}  // namespace strata::train
