// LambStep: the Trainer's LAMB update over a ParamStore whose units may be sharded (ZeRO: a rank
// owns any contiguous slice of each unit's flat buffer, which can cut a parameter anywhere). The
// trust ratio of a parameter needs the norms of the whole parameter and of its whole update, so:
//   pass 1 (state read, not written): each shard sums p² and u² of its part of every parameter;
//   ShardReductions::sum_vector adds the parts (two numbers per parameter, one collective);
//   pass 2 (state written): the owned slices are updated with their parameter's trust ratio.
#pragma once

#include <cstdint>
#include <vector>

#include "framework/nn/param_store.hpp"
#include "framework/optim/lamb.hpp"
#include "framework/train/state_store.hpp"

namespace strata::train {

struct ShardReductions;

class LambStep {
 public:
  LambStep(const nn::ParamStore& store, const optim::LambHyper& h);

  // One update (1-based step) at the scheduled rate lr; grad_scale multiplies every gradient.
  void run(nn::ParamStore& store, OptimizerStateStore& states, const ShardReductions& red,
           std::int64_t step, double lr, float grad_scale);

  // Trust ratios of the last update, one per parameter in store order (reports and tests).
  const std::vector<double>& trust_ratios() const { return ratios_; }

 private:
  optim::LambHyper h_;
  optim::LambHyper h_nodecay_;  // parameters not declared `decay` (1-D by convention)
  std::size_t num_params_ = 0;
  std::vector<double> ratios_;
};

}  // namespace strata::train
