// Adafactor (framework/optim/adafactor.hpp, as transformers computes it) over a ParamStore whose
// units may be sharded (ZeRO: a rank owns any contiguous slice of each unit's flat buffer, which
// can cut a matrix anywhere). Its state: the first moment per element (with beta1), the second
// moment of the vectors per owned element, and each matrix's row and column statistics whole on
// every shard. Factored statistics (a matrix's row and column means of grad² + eps1) and the RMS
// terms (of the parameter for scale_parameter, of the update for clipping) are global over the
// whole parameter, so each shard sums its part and ShardReductions::sum_vector adds the parts:
//   pass 1 (state read, not written): partial row/column sums of every matrix, sum of squares of
//     every parameter, and of the update of every vector (its second moment is elementwise);
//   reduction 1; every shard updates all row/column statistics identically (replicated state);
//   partial sums of squares of every matrix's update (gradients only);
//   reduction 2 (one number per parameter: the update's RMS needs the new statistics);
//   pass 2 (state written): update of the owned slices.
#pragma once

#include "framework/optim/adafactor.hpp"
#include "framework/optim/optimizers/optimizer.hpp"

namespace strata::optim {

class Adafactor final : public Optimizer {
 public:
  explicit Adafactor(const AdafactorHyper& h = {});
  static std::shared_ptr<const Optimizer> from_config(const config::Optimizer& c);
  const AdafactorHyper& hyper() const { return h_; }

  double lr() const override { return h_.lr; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Adafactor>(*this); }
  void to_config(config::Optimizer& out) const override;
  void bind(const nn::ParamStore& store, int ranks) override;
  // Returns the step size it used (relative or scheduled).
  double step(StepContext& ctx, const StepArgs& a) override;
  void check_checkpoint(const std::function<bool(std::string_view, std::string_view)>& has,
                        const nn::ParamStore& store, const std::string& dir) const override;

  // How unit u's parameters map onto its state (after bind).
  struct Param : ParamGeometry {
    std::size_t global = 0;  // over every unit, for the per-parameter sums
    bool decay = true;
  };
  const std::vector<Param>& params(std::size_t u) const { return units_[u].params; }

 private:
  struct Unit {
    std::vector<Param> params;
    std::int64_t factored = 0;  // length of the unit's factored state
    std::int64_t fac_base = 0;  // offset of the unit's statistics in the all-units scratch
  };

  AdafactorHyper h_;
  AdafactorHyper h_nodecay_;  // for parameters not declared `decay` (1-D by convention)
  std::size_t m_ = 0, v_ = 0, f_ = 0;  // the state tensors: first moment, vectors, factored
  std::vector<Unit> units_;
  std::size_t num_params_ = 0;
  std::int64_t total_factored_ = 0;
};

// Its entry in framework/optim/registry.def: Adafactor::from_config.
std::shared_ptr<const Optimizer> make_adafactor(const config::Optimizer& c);

}  // namespace strata::optim
