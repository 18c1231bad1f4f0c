// Lint fixture (not compiled): what ops_only_lint.sh allows — the thread count, comments that
// mention cpu::matmul, and ops.
#include "framework/backend/cpu/kernels.hpp"
#include "framework/backend/ops/ops.hpp"

void setup(int n) {
  strata::cpu::set_num_threads(n);  // not cpu::matmul
  const int t = strata::cpu::num_threads();
  strata::ops::adamw_step(master, grad, m, v, h, t, 1.0f, {});
}
