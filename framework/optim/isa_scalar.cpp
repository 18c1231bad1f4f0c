// Portable build of the optimizer updates: the definition of the arithmetic (adamw_step_reference,
// sgd_step_reference) and the fallback on CPUs without AVX2.
#include "framework/optim/update_body.hpp"

const strata::optim::detail::UpdateKernels* strata::optim::detail::update_kernels_scalar() {
  return &kUpdateKernels<cpu::simd::Scalar>;
}
