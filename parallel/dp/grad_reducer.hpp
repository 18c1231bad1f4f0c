// GradReducer: data-parallel gradient averaging in buckets. Installed as the model's unit
// hooks, it launches a unit's buckets (non-blocking all-reduce, avg over dp) as soon as backward
// has finished that unit — on the last micro-batch of an accumulation only — so communication
// overlaps the rest of backward (`overlap_comm`). Without overlap, every bucket is launched
// after backward. finish() waits for all of them.
#pragma once

#include <cstdint>
#include <vector>

#include "framework/nn/context.hpp"
#include "framework/nn/param_store.hpp"
#include "parallel/comm/group.hpp"

namespace strata::parallel {

struct ReducerOptions {
  std::int64_t bucket_elements = 500'000'000;  // zero_optimization.reduce_bucket_size
  bool overlap = true;                          // zero_optimization.overlap_comm
};

class GradReducer : public nn::UnitHooks {
 public:
  GradReducer(nn::ParamStore& store, Group dp, const ReducerOptions& opts);

  // True on the micro-batch whose backward completes the accumulation (gradients are reduced
  // only then).
  void set_sync(bool sync) { sync_ = sync; }
  void after_backward(int unit) override;
  // Launches anything not yet launched and waits for every bucket.
  void finish();

  std::uint64_t buckets_launched() const { return launched_; }
  std::uint64_t bytes_reduced() const { return bytes_; }

 private:
  void launch_unit(std::size_t unit);

  nn::ParamStore& store_;
  Group dp_;
  ReducerOptions opts_;
  bool sync_ = true;
  std::vector<bool> done_;  // unit launched in this step
  std::vector<Work> inflight_;
  std::uint64_t launched_ = 0, bytes_ = 0;
};

}  // namespace strata::parallel
