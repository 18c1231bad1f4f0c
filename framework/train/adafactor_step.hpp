// AdafactorStep: the Trainer's Adafactor update over a ParamStore whose units may be sharded
// (ZeRO: a rank owns any contiguous slice of each unit's flat buffer, which can cut a matrix
// anywhere). Factored statistics (a matrix's row and column means of grad² + eps1) and the RMS
// terms (of the parameter for scale_parameter, of the update for clipping) are global over the
// whole parameter, so each shard sums its part and ShardReductions::sum_vector adds the parts:
//   pass 1 (state read, not written): partial row/column sums of every matrix, sum of squares of
//     every parameter, and of the update of every vector (its second moment is elementwise);
//   reduction 1; every shard updates all row/column statistics identically (replicated state);
//   partial sums of squares of every matrix's update (gradients only);
//   reduction 2 (one number per parameter: the update's RMS needs the new statistics);
//   pass 2 (state written): update of the owned slices.
#pragma once

#include <cstdint>
#include <vector>

#include "framework/nn/param_store.hpp"
#include "framework/optim/adafactor.hpp"
#include "framework/train/state_store.hpp"

namespace strata::train {

struct ShardReductions;

class AdafactorStep {
 public:
  AdafactorStep(const nn::ParamStore& store, const optim::AdafactorHyper& h);

  // Unit u's replicated statistics (rows + cols of each matrix) and packed vector second moment
  // (its owned elements of 1-D parameters): StateLayout::factored / packed_second_moment.
  std::int64_t factored_size(std::size_t u) const { return units_[u].factored; }
  std::int64_t packed_v_size(std::size_t u) const { return units_[u].packed_v; }

  // One update (1-based step). lr: the scheduled rate (used unless relative_step); grad_scale
  // multiplies every gradient. Returns the step size it used (relative or scheduled).
  double run(nn::ParamStore& store, OptimizerStateStore& states, const ShardReductions& red,
             std::int64_t step, double lr, float grad_scale);

  // How unit u's parameters map onto its Adafactor state (checkpoints use it).
  struct Param {
    std::size_t index = 0;       // in the unit's parameter list
    std::size_t global = 0;      // over every unit, for the per-parameter sums
    std::int64_t numel = 0;
    bool decay = true;
    bool factored = false;
    std::int64_t rows = 0, cols = 0;
    std::int64_t fac = 0;        // row statistics at `fac` of the unit's factored state, cols after
    std::int64_t a = 0, b = 0;   // owned part, flat positions in the unit (a >= b: none)
    std::int64_t offset = 0;     // the parameter's first flat position in the unit
    std::int64_t v = 0;          // vectors: its part's offset in the packed second moment
  };
  const std::vector<Param>& params(std::size_t u) const { return units_[u].params; }

 private:
  struct Unit {
    std::vector<Param> params;
    std::int64_t factored = 0, packed_v = 0;
    std::int64_t fac_base = 0;   // offset of the unit's statistics in the all-units scratch
  };

  optim::AdafactorHyper h_;
  optim::AdafactorHyper h_nodecay_;  // for parameters not declared `decay` (1-D by convention)
  std::vector<Unit> units_;
  std::size_t num_params_ = 0;
  std::int64_t total_factored_ = 0;
};

}  // namespace strata::train
