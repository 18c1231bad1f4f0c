// The ZeRO paper's per-rank model-state memory for a stage, to print beside what the ledger
// measures: stage 0 keeps everything, 1 shards optimizer state, 2 also gradients, 3 also
// parameters (mixed precision with Adam: 2Ψ + 2Ψ + 12Ψ = 16Ψ at stage 0).
#pragma once

#include <cstdint>
#include <string>

namespace strata::parallel {

struct ModelStateBytes {
  double params = 0, grads = 0, optimizer = 0;
  double total() const { return params + grads + optimizer; }
};

// psi: parameter elements (padded); bytes per element of parameters, gradients and optimizer
// state (e.g. 2, 2, 12 for bf16 + AdamW with fp32 master; 4, 4, 8 for fp32 + AdamW).
ModelStateBytes zero_prediction(int stage, int dp_size, double psi, double param_bytes,
                                double grad_bytes, double optimizer_bytes);

// "params 12.0 MiB, grads 6.0 MiB, optimizer 18.0 MiB, total 36.0 MiB".
std::string describe(const ModelStateBytes& b);

}  // namespace strata::parallel
