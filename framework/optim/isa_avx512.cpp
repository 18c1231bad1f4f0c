// AVX-512 build of the optimizer updates (this file alone is compiled with -mavx512f -mavx2 -mfma;
// update_kernels() only hands it out after checking the CPU).
#include "framework/optim/update_kernels.hpp"

#if defined(__AVX512F__)
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_* helpers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "framework/optim/update_body.hpp"

const strata::optim::detail::UpdateKernels* strata::optim::detail::update_kernels_avx512() {
  return &kUpdateKernels<cpu::simd::Avx512>;
}
#else
const strata::optim::detail::UpdateKernels* strata::optim::detail::update_kernels_avx512() {
  return nullptr;
}
#endif
