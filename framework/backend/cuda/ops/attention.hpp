// Launchers of attention.cu: fused causal multi-head self-attention, flash-attention style (the
// T x T scores are never materialised; forward saves lse, backward recomputes the probabilities
// from it). Raw pointers, sizes, runtime dtype codes and the stream to queue on; no Tensor, no fmt
// (nvcc cannot compile fmt 9 in C++20). Nothing here synchronises the host.
//
// Layout (as the CPU's framework/backend/cpu/attention.cpp): qkv [B, T, 3C] holds q | k | v, each
// [B, T, NH, hs] within its C-wide third (hs = C / NH); out and dout [B, T, C]; lse [B, NH, T] f32,
// the log-sum-exp of each row of the SCALED scores (scale = 1 / sqrt(hs)); the mask is causal
// (query t sees keys 0..t). qkv, out, dout and dqkv may each be f32, bf16 or f16 (their own DT
// code); everything is computed in f32 and a 16-bit output is rounded once (RNE).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "framework/backend/cuda/ops/half_hd.hpp"

namespace strata::cuda_ops {

// The largest head size (C / NH) the kernels take.
inline constexpr int kAttentionMaxHeadSize = 128;

// out = softmax(scale q k^T, causal) v per (batch, head); lse[b, h, t] = the row's log-sum-exp.
// out is overwritten (all B*T*C elements), lse too (all B*NH*T). Requires 1 <= C / NH <=
// kAttentionMaxHeadSize and C % NH == 0 (else cudaErrorInvalidValue, nothing queued). B == 0 or
// T == 0: nothing to do. Returns the first CUDA error of the set-up (cudaFuncSetAttribute); the
// caller checks the launch itself with cudaGetLastError.
//
// `rounded` (strata.allow_rounded_attention): the tensor-core kernels (16-bit qkv, and dout of the
// same type, on compute capability >= 8.0) round P, and in backward dS, to that 16-bit type once
// before their products, as FlashAttention does, instead of splitting them into hi + lo parts:
// fewer tensor-core products, about 2^-9 (bf16) or 2^-12 (f16) relative error in those terms. The
// FFMA kernels (f32 or mixed operands, sm_75) compute in f32 either way.
cudaError_t launch_attention_forward(const void* qkv, DT qkv_dt, void* out, DT out_dt, float* lse,
                                     int B, int T, int C, int NH, cudaStream_t s,
                                     bool rounded = false);

// dqkv [B, T, 3C] overwritten with the gradients of q, k and v (every element written) given
// dout, the forward's out and lse. `Dws` is a device workspace of at least B * NH * T floats (it
// receives D[b, h, t] = dout[b, t, h, :] . out[b, t, h, :]). Deterministic: no atomics, every sum
// in a fixed order. Same requirements and return value as the forward.
cudaError_t launch_attention_backward(const void* qkv, DT qkv_dt, const void* out, DT out_dt,
                                      const float* lse, const void* dout, DT dout_dt, void* dqkv,
                                      DT dqkv_dt, float* Dws, int B, int T, int C, int NH,
                                      cudaStream_t s, bool rounded = false);

}  // namespace strata::cuda_ops
