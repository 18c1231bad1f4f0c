// The ZeRO paper's per-rank model-state memory for a stage, to print beside what the ledger
// measures: stage 0 keeps everything, 1 shards optimizer state, 2 also gradients, 3 also
// parameters (mixed precision with Adam: 2Ψ + 2Ψ + 12Ψ = 16Ψ at stage 0); and the optimizer
// state's bytes per parameter, read from the optimizer's declaration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "framework/core/shape.hpp"
#include "framework/optim/optimizers/optimizer.hpp"

namespace strata::parallel {

struct ModelStateBytes {
  double params = 0, grads = 0, optimizer = 0;
  double total() const { return params + grads + optimizer; }
};

// psi: parameter elements (padded); bytes per element of parameters, gradients and optimizer
// state (e.g. 2, 2, 12 for bf16 + AdamW with fp32 master; 4, 4, 8 for fp32 + AdamW), and
// optimizer bytes every rank holds whole whatever the stage (Adafactor's row/column statistics).
ModelStateBytes zero_prediction(int stage, int dp_size, double psi, double param_bytes,
                                double grad_bytes, double optimizer_bytes,
                                double optimizer_replicated = 0);

// Optimizer state: bytes per parameter element (sharded over dp by ZeRO >= 1) and bytes every
// rank holds whole, summed over the optimizer's declared state tensors (docs/optimizers.md):
//   elements     the dtype's size per element (AdamW's m, v: 8)
//   blocks       the dtype's size per `count` elements (AdamW8bit's absmax: 2 × 4 / 2048)
//   vectors      the dtype's size × the share of elements in parameters with < 2 dims
//   factored     whole: the dtype's size × (rows + cols) of every matrix
//   per_param    whole: the dtype's size × count per parameter
//   rank_errors  whole: this rank's compression errors (worker + server) of the exchanged tensors
// plus 4 for the f32 master copy when parameters are 16-bit (master = true).
struct OptimizerStateBytes {
  double per_element = 0;
  double replicated = 0;
};
OptimizerStateBytes optimizer_state_bytes(const optim::Optimizer& o, bool master,
                                          const std::vector<Shape>& shapes, int ranks = 1);
// "AdamW8bit: 6.00 bytes per parameter (fp32 master 4 + 8-bit m, v 2.00)" and the replicated part.
std::string describe(const optim::Optimizer& o, bool master, const OptimizerStateBytes& b);

// "params 12.0 MiB, grads 6.0 MiB, optimizer 18.0 MiB, total 36.0 MiB".
std::string describe(const ModelStateBytes& b);

}  // namespace strata::parallel
