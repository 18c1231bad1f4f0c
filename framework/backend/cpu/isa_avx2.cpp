// AVX2 + FMA build of the row kernels (this file alone is compiled with -mavx2 -mfma; isa.cpp only
// calls it after checking the CPU).
#include "framework/backend/cpu/row_kernels.hpp"

#if defined(__AVX2__) && defined(__FMA__)
#include "framework/backend/cpu/row_kernels_body.hpp"

const strata::cpu::detail::RowKernels* strata::cpu::detail::row_kernels_avx2() {
  return &kRowKernels<simd::Avx2>;
}
#else
const strata::cpu::detail::RowKernels* strata::cpu::detail::row_kernels_avx2() {
  return nullptr;
}
#endif
