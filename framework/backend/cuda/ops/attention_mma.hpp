// Launchers of attention_mma.cu: the tensor-core versions of attention.cu's forward, dK/dV and dQ
// kernels, for qkv (and, backward, dout) of one 16-bit type on a device of compute capability >=
// 8.0. Only attention.cu calls them (launch_attention_forward/backward dispatch; their contract in
// attention.hpp holds for these too); the sizes are already checked there.
#pragma once

#include <cuda_runtime.h>

#include "framework/backend/cuda/ops/half_hd.hpp"

namespace strata::cuda_ops {

struct MmaArgs {
  const void* qkv = nullptr;  // [B, T, 3C] of qdt (bf16 or f16)
  DT qdt = DT::bf16;
  void* out = nullptr;  // forward: [B, T, C] of odt
  DT odt = DT::f32;
  float* lse = nullptr;           // forward: [B, NH, T]
  const void* dout = nullptr;     // backward: [B, T, C] of qdt too
  const float* lse_in = nullptr;  // backward: the forward's lse
  const float* Dws = nullptr;     // backward: D = rowsum(dout * out), [B, NH, T]
  void* dqkv = nullptr;           // backward: [B, T, 3C] of ddt
  DT ddt = DT::f32;
  int B = 0, T = 0, C = 0, NH = 0, hs = 0;
  float scale = 1.0f;
  bool rounded = false;  // P and dS rounded to qdt once before their products (attention.hpp)
};

// Whether the current device runs these kernels as written: their code for it was compiled from a
// virtual architecture >= 8.0 (cudaFuncGetAttributes's ptxVersion). A build whose only code for
// the GPU is older (CMAKE_CUDA_ARCHITECTURES=75 run on an A100: the driver compiles compute_75's
// PTX, in which these kernels are empty and trap, mma.cuh) gives false: attention.cu then keeps
// its FFMA kernels.
bool mma_kernels_loaded();

cudaError_t launch_attention_forward_mma(const MmaArgs& a, cudaStream_t s);
// dK/dV and dQ (D already in a.Dws).
cudaError_t launch_attention_backward_mma(const MmaArgs& a, cudaStream_t s);

}  // namespace strata::cuda_ops
