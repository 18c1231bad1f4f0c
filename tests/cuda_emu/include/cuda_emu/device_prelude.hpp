// Included first by every file cuda_emu_rewrite generates from a .cu file: the kernels compile as
// device code (__CUDACC__, __CUDA_ARCH__: half_hd.hpp and optimizer.hpp take their device
// branches, the correctly rounded intrinsics of the stand-in cuda_runtime.h) and run on the
// emulator.
#pragma once

#define __CUDACC__ 1
#define __CUDA_ARCH__ 900
#define STRATA_CUDA_EMU 1  // mma.cuh: the portable tensor-core products, not inline PTX

#include <cuda_runtime.h>
