// Which vector instruction set the optimizer kernels run on. Chosen at run time from the CPU
// (never -march=native); every path gives bitwise the same results as the scalar reference.
#pragma once

namespace strata::optim {

enum class SimdPath { scalar, avx2, avx512 };

// The widest path this CPU and OS support (AVX2 needs FMA too; AVX-512 needs AVX-512F).
SimdPath best_simd_path();
bool simd_path_supported(SimdPath path);
// "scalar", "avx2", "avx512".
const char* simd_path_name(SimdPath path);

}  // namespace strata::optim
