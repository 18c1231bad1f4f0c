// Picks the update kernels of a SIMD path, and the 16-bit parameter copy they can write.
#include "framework/optim/update_kernels.hpp"

#include "framework/core/convert.hpp"
#include "framework/core/error.hpp"

namespace strata::optim::detail {

const UpdateKernels& update_kernels(SimdPath path) {
  STRATA_CHECK(simd_path_supported(path), "optim", "this CPU does not support the {} path",
               simd_path_name(path));
  const UpdateKernels* k = path == SimdPath::avx512 ? update_kernels_avx512()
                           : path == SimdPath::avx2 ? update_kernels_avx2()
                                                    : update_kernels_scalar();
  STRATA_CHECK(k != nullptr, "optim", "the {} path was not compiled into this build",
               simd_path_name(path));
  return *k;
}

void check_param16(const std::uint16_t* param16, DType dt16) {
  STRATA_CHECK(!param16 || dt16 == DType::bf16 || dt16 == DType::f16, "optim",
               "the 16-bit parameter copy must be bf16 or f16, got {}", dtype_name(dt16));
}

void round_to_16(const float* src, std::uint16_t* dst, std::size_t n, DType dt16) {
  if (dt16 == DType::bf16) {
    f32_to_bf16(src, dst, n);
  } else {
    f32_to_f16(src, dst, n);
  }
}

}  // namespace strata::optim::detail
