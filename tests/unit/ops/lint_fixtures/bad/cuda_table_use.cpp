// Lint fixture (not compiled): op_table.hpp included to test for CUDA kernels, and then to call
// one through the table, bypassing the ops' checks.
#include "framework/backend/ops/op_table.hpp"

void forward() {
  if (strata::ops::cuda_op_table() != nullptr) strata::ops::cuda_op_table()->matmul(a, b, c);
}
