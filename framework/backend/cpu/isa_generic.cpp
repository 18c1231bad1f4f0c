// Portable scalar build of the row kernels: the fallback on CPUs (or architectures) without AVX2,
// and a second implementation the tests check the vector ones against.
#include "framework/backend/cpu/row_kernels_body.hpp"

const strata::cpu::detail::RowKernels* strata::cpu::detail::row_kernels_generic() {
  return &kRowKernels<simd::Scalar>;
}
