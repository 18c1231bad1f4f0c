// The CUDA table's entries of 1-bit Adam's and 1-bit LAMB's kernels: none are written yet. Each
// entry is set (the table stays complete, check_complete) and fails in one line naming the
// optimizer, the op and the fix. A job never gets here: the 1-bit optimizers declare
// refusals.gpu (optim/optimizers/cuda_refusal.hpp), which parallel::gpu_refusal turns into the
// job's refusal before anything runs; only a direct ops:: call on CUDA tensors does.
// A kernel for one of them replaces its function here (in a .cu file), and when all of an
// optimizer's are written its refusals.gpu goes (docs/optimizers.md, "Kernels for other devices").
#include "framework/backend/cuda/ops/kernels.hpp"
#include "framework/core/error.hpp"

namespace strata::cuda_ops {

namespace {
[[noreturn]] void no_kernel(const char* optimizer, const char* op) {
  user_fail("ops",
            "{} has no CUDA kernels yet ({} on a CUDA tensor): run {} with strata.device \"cpu\" "
            "(a GPU job refuses it up front)",
            optimizer, op, optimizer);
}
}  // namespace

void onebit_momentum(const Tensor&, const Tensor&, const optim::OneBitAdamHyper&, float) {
  no_kernel("OneBitAdam", "onebit_momentum");
}
void onebit_apply(const Tensor&, const Tensor&, const Tensor&, const optim::OneBitAdamHyper&,
                  double, const Tensor&) {
  no_kernel("OneBitAdam", "onebit_apply");
}
void onebit_lamb_sumsq(const Tensor&, const Tensor&) { no_kernel("OneBitLamb", "onebit_lamb_sumsq"); }
void onebit_lamb_momentum(const Tensor&, const Tensor&, const Tensor&,
                          const optim::OneBitLambHyper&, float, double) {
  no_kernel("OneBitLamb", "onebit_lamb_momentum");
}
void onebit_lamb_after_exchange(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                const Tensor&, const optim::OneBitLambHyper&, double, double,
                                const Tensor&) {
  no_kernel("OneBitLamb", "onebit_lamb_after_exchange");
}
void onebit_lamb_apply(const Tensor&, const Tensor&, const Tensor&, const optim::OneBitLambHyper&,
                       double, double, const Tensor&) {
  no_kernel("OneBitLamb", "onebit_lamb_apply");
}

}  // namespace strata::cuda_ops
