// Run-time CPU feature detection for the optimizer kernels.
#include "framework/optim/simd.hpp"

namespace strata::optim {

bool simd_path_supported(SimdPath path) {
  switch (path) {
    case SimdPath::scalar: return true;
#if defined(__x86_64__) || defined(__i386__)
    // libgcc's cpu model also checks that the OS saves the AVX / AVX-512 register state.
    case SimdPath::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case SimdPath::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
             __builtin_cpu_supports("fma");
#else
    case SimdPath::avx2:
    case SimdPath::avx512: return false;
#endif
  }
  return false;
}

SimdPath best_simd_path() {
  static const SimdPath best = [] {
    if (simd_path_supported(SimdPath::avx512)) return SimdPath::avx512;
    if (simd_path_supported(SimdPath::avx2)) return SimdPath::avx2;
    return SimdPath::scalar;
  }();
  return best;
}

const char* simd_path_name(SimdPath path) {
  switch (path) {
    case SimdPath::scalar: return "scalar";
    case SimdPath::avx2: return "avx2";
    case SimdPath::avx512: return "avx512";
  }
  return "?";
}

}  // namespace strata::optim
