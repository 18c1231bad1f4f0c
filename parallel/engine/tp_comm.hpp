// The tensor-parallel group as the layers of a split model see it (nn::TpComm over a Group):
// blocking in-place all-reduces of activations and their gradients (with sequence parallelism,
// all-gathers and reduce-scatters of the tokens' activations), and the Trainer reductions
// that make the gradient norm and the overflow check span the tensor-parallel parts.
#pragma once

#include "framework/nn/tensor_parallel.hpp"
#include "framework/train/trainer.hpp"
#include "parallel/comm/group.hpp"

namespace strata::parallel {

class GroupTpComm : public nn::TpComm {
 public:
  explicit GroupTpComm(Group tp) : tp_(std::move(tp)) {}
  nn::TpShard shard() const override { return {tp_.rank(), tp_.size()}; }
  void all_reduce_sum(const Tensor& t) override;
  void all_reduce_max(const Tensor& t) override;
  void all_gather(const Tensor& in, const Tensor& out) override;
  void reduce_scatter_sum(const Tensor& in, const Tensor& out) override;
  // Seconds spent in these collectives so far.
  double wait_seconds() const { return wait_s_; }
  // Bytes moved so far, each call's whole tensor counted once (the payload, whatever algorithm
  // moves it): an all-reduce's tensor, an all-gather's output, a reduce-scatter's input (so a
  // reduce-scatter and an all-gather of a tensor count what its all-reduce counts twice, and move
  // as much: a ring all-reduce is a reduce-scatter then an all-gather). By kind, and the number
  // of calls.
  std::int64_t bytes() const { return traffic_.total(); }
  const nn::TpTraffic& traffic() const { return traffic_; }
  std::int64_t calls() const { return calls_; }

 private:
  Group tp_;
  double wait_s_ = 0;
  nn::TpTraffic traffic_;
  std::int64_t calls_ = 0;
};

// `inner` (over dp, or local), then over the tensor-parallel group: the split parameters' squares
// are summed over the parts, the replicated ones (equal on every part) counted on part 0 only.
train::ShardReductions tp_reductions(train::ShardReductions inner, const Group& tp);

}  // namespace strata::parallel
