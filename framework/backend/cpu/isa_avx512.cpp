// AVX-512 build of the row kernels (this file alone is compiled with -mavx512f -mavx512dq; isa.cpp
// only calls it after checking the CPU).
#include "framework/backend/cpu/row_kernels.hpp"

#if defined(__AVX512F__) && defined(__AVX512DQ__)
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_* helpers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "framework/backend/cpu/row_kernels_body.hpp"

const strata::cpu::detail::RowKernels* strata::cpu::detail::row_kernels_avx512() {
  return &kRowKernels<simd::Avx512>;
}
#else
const strata::cpu::detail::RowKernels* strata::cpu::detail::row_kernels_avx512() {
  return nullptr;
}
#endif
