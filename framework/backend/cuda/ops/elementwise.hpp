// Launchers of elementwise.cu (raw pointers, the stream to queue on; no host synchronisation).
// Like every <concern>.hpp here it includes no Tensor (nvcc cannot compile fmt 9 in C++20): the
// .cu files define kernels and launchers over raw pointers, the <concern>_op.cpp files the ops
// over tensors that call them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "framework/backend/cuda/ops/half_hd.hpp"

namespace strata::cuda_ops {

// dst[i] = src[i] converted (RNE for 16-bit), n elements.
void launch_convert(const void* src, DT sdt, void* dst, DT ddt, std::int64_t n, cudaStream_t s);
// dst[i] = round(dst[i] + add[i]) for a float dst of any dtype and an f32 add.
void launch_accumulate(void* dst, DT ddt, const float* add, std::int64_t n, cudaStream_t s);
// out[i] = round(a[i] + b[i]) (f32 sum of the widened operands, rounded once to out's dtype).
void launch_add(const void* a, DT adt, const void* b, DT bdt, void* out, DT odt, std::int64_t n,
                cudaStream_t s);
// a[i] = round(a[i] * s).
void launch_scale(void* a, DT adt, float scale, std::int64_t n, cudaStream_t s);

}  // namespace strata::cuda_ops
