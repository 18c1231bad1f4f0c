// AVX2 + FMA build of the optimizer updates (this file alone is compiled with -mavx2 -mfma;
// update_kernels() only hands it out after checking the CPU).
#include "framework/optim/update_kernels.hpp"

#if defined(__AVX2__) && defined(__FMA__)
#include "framework/optim/update_body.hpp"

const strata::optim::detail::UpdateKernels* strata::optim::detail::update_kernels_avx2() {
  return &kUpdateKernels<cpu::simd::Avx2>;
}
#else
const strata::optim::detail::UpdateKernels* strata::optim::detail::update_kernels_avx2() {
  return nullptr;
}
#endif
