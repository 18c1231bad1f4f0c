// Elementwise maps out[i] = op(in_0[i], in_1[i], ...) with the operands' dtypes as template
// arguments and 16-byte memory accesses:
//   - each thread takes 8 consecutive elements of every operand (one uint4 of a 16-bit operand,
//     two float4 of an f32 one), widens them with half_hd.hpp's bitwise conversions, applies op
//     in f32 and stores the 8 results rounded once; the n % 8 last elements go one per thread of
//     the first block;
//   - when any pointer is not 16-byte aligned (a view at an odd offset), the same kernel takes
//     one element per thread instead (a uniform branch).
// Either way each element is the same f32 function of the same inputs as the scalar kernels'
// and the CPU's: only the memory access changes. Every input element of a thread is read before
// its outputs are written, so out may be any one of the inputs (in place), as before.
//
// launch_map(op, out, n, stream, in...) picks the path; with_dt(dt, f) turns a run-time DT into
// the compile-time one (common.cuh; one instantiation per dtype combination an op is called with).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "framework/backend/cuda/ops/common.cuh"

namespace strata::cuda_ops {

// One input operand of dtype T.
template <DT T>
struct In {
  const void* p;
};

// Eight consecutive elements (chunk c: elements 8c .. 8c + 7) as f32.
template <DT T>
struct Chunk8 {
  float v[8];
};

template <DT T>
__device__ __forceinline__ float widen16(std::uint32_t h) {
  if constexpr (T == DT::bf16) return bf16_to_f32(static_cast<std::uint16_t>(h));
  else return f16_to_f32(static_cast<std::uint16_t>(h));
}

template <DT T>
__device__ __forceinline__ std::uint32_t narrow16(float v) {
  if constexpr (T == DT::bf16) return f32_to_bf16(v);
  else return f32_to_f16(v);
}

// p 16-byte aligned.
template <DT T>
__device__ __forceinline__ Chunk8<T> load8(const void* p, std::int64_t c) {
  Chunk8<T> r;
  if constexpr (T == DT::f32) {
    const float4* q = static_cast<const float4*>(p) + 2 * c;
    const float4 a = q[0], b = q[1];
    r.v[0] = a.x, r.v[1] = a.y, r.v[2] = a.z, r.v[3] = a.w;
    r.v[4] = b.x, r.v[5] = b.y, r.v[6] = b.z, r.v[7] = b.w;
  } else {
    // Words in memory order; element 2k is word k's low half (little-endian).
    const uint4 w = static_cast<const uint4*>(p)[c];
    const std::uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      r.v[2 * k] = widen16<T>(words[k] & 0xffffu);
      r.v[2 * k + 1] = widen16<T>(words[k] >> 16);
    }
  }
  return r;
}

template <DT T>
__device__ __forceinline__ void store8(void* p, std::int64_t c, const float (&v)[8]) {
  if constexpr (T == DT::f32) {
    float4* q = static_cast<float4*>(p) + 2 * c;
    q[0] = make_float4(v[0], v[1], v[2], v[3]);
    q[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    std::uint32_t words[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) words[k] = narrow16<T>(v[2 * k]) | (narrow16<T>(v[2 * k + 1]) << 16);
    static_cast<uint4*>(p)[c] = make_uint4(words[0], words[1], words[2], words[3]);
  }
}

// The chunks are loaded (the arguments) before any result is stored.
template <DT O, class Op, DT... I>
__device__ __forceinline__ void apply8(const Op& op, void* out, std::int64_t c, const Chunk8<I>&... ch) {
  float r[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) r[k] = op(ch.v[k]...);
  store8<O>(out, c, r);
}

template <class Op, DT O, DT... I>
__global__ void map_kernel(Op op, bool vec, void* out, std::int64_t n, In<I>... in) {
  if (!vec) {
    STRATA_GRID_STRIDE(i, n) store(out, O, i, op(load(in.p, I, i)...));
    return;
  }
  const std::int64_t chunks = n >> 3;
  STRATA_GRID_STRIDE(c, chunks) apply8<O>(op, out, c, load8<I>(in.p, c)...);
  if (blockIdx.x == 0) {
    const std::int64_t i = chunks * 8 + threadIdx.x;  // blockDim.x >= 8
    if (i < n) store(out, O, i, op(load(in.p, I, i)...));
  }
}

inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

constexpr unsigned kMapThreads = 256;

template <DT O, DT... I, class Op>
void launch_map(const Op& op, void* out, std::int64_t n, cudaStream_t s, In<I>... in) {
  if (n <= 0) return;
  const bool vec = aligned16(out) && (aligned16(in.p) && ...);
  const unsigned blocks = grid_for(vec ? (n >> 3) : n, kMapThreads);
  map_kernel<Op, O, I...><<<blocks, kMapThreads, 0, s>>>(op, vec, out, n, in...);
}

}  // namespace strata::cuda_ops
