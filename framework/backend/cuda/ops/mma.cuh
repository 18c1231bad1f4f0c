// Warp-level tensor-core products (mma.sync, PTX ISA "Matrix Fragments for mma.m16n8k16 with
// floating point type") and the 16-bit packing the kernels feed them with.
//
// On a GPU of compute capability >= 8.0 (nvcc's device pass with __CUDA_ARCH__ >= 800) each
// function is one PTX instruction. Everywhere else (the CUDA emulator of tests/cuda_emu, which
// defines __CUDA_ARCH__ 900 and STRATA_CUDA_EMU; nvcc's host pass; an sm_75 device pass, whose
// launchers never run these kernels) a portable version with exactly the documented fragment
// layouts gathers the operands across the warp with __shfl_sync and multiplies in f32. Both
// accumulate in f32; the portable sum runs k = 0..15 with one fmaf each (the hardware's internal
// order and rounding of the 16 products are not specified, so a GPU may differ in the last bits;
// every test of these kernels compares to a tolerance).
//
// Fragments of m16n8k16 .row.col (lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3; the
// element with the lower index sits in the lower 16 bits of a register):
//   A (16 x 16, row-major): a[0] = (row g,     cols 2t, 2t+1)  a[1] = (row g + 8, cols 2t, 2t+1)
//                           a[2] = (row g,     cols 2t+8, +9)  a[3] = (row g + 8, cols 2t+8, +9)
//   B (16 x 8, k x n):      b[0] = (rows k = 2t, 2t+1, col n = g)  b[1] = (rows 2t+8, 2t+9, col g)
//   C, D (16 x 8, f32):     c[0], c[1] = (row g, cols 2t, 2t+1)    c[2], c[3] = (row g + 8, same)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "framework/backend/cuda/ops/half_hd.hpp"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(STRATA_CUDA_EMU)
#define STRATA_MMA_PTX 1
#endif

// True where the tensor-core kernels are compiled with their real bodies: the host pass, the
// emulator and devices of compute capability >= 8.0 (an sm_75 pass compiles them as a trap; the
// launchers never launch them there).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800 || defined(STRATA_CUDA_EMU)
#define STRATA_MMA_KERNELS 1
#endif

namespace strata::cuda_ops {

// The two 16-bit input types of the tensor cores.
enum class Mma16 { bf16, f16 };

#if !defined(STRATA_MMA_PTX)
namespace mma_detail {
template <Mma16 T>
__device__ __forceinline__ float to_f32(std::uint32_t h16) {
  if constexpr (T == Mma16::bf16)
    return bf16_to_f32(static_cast<std::uint16_t>(h16));
  else
    return f16_to_f32(static_cast<std::uint16_t>(h16));
}
template <Mma16 T>
__device__ __forceinline__ float lo_of(std::uint32_t r) {
  return to_f32<T>(r & 0xffffu);
}
template <Mma16 T>
__device__ __forceinline__ float hi_of(std::uint32_t r) {
  return to_f32<T>(r >> 16);
}

// The portable product: lane (g, t) computes its four outputs from row g and g + 8 of A and
// columns 2t, 2t + 1 of B, fetched from the lanes that hold them.
template <Mma16 T>
__device__ __forceinline__ void mma_16816_portable(float (&c)[4], const std::uint32_t (&a)[4],
                                                   const std::uint32_t (&b)[2]) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const int g = lane >> 2, t = lane & 3;
  float ar[2][16], bc[2][16];  // ar[i][k]: row g + 8i of A; bc[j][k]: column 2t + j of B
#pragma unroll
  for (int src_t = 0; src_t < 4; ++src_t) {
    // Lane 4g + src_t holds row g's and g + 8's columns 2 src_t, +1 (a[0], a[1]) and 2 src_t + 8,
    // +9 (a[2], a[3]); lane 4n + src_t holds column n's rows 2 src_t, +1 (b[0]) and +8, +9 (b[1]).
    const int sa = 4 * g + src_t;
    const std::uint32_t a0 = __shfl_sync(0xffffffffu, a[0], sa);
    const std::uint32_t a1 = __shfl_sync(0xffffffffu, a[1], sa);
    const std::uint32_t a2 = __shfl_sync(0xffffffffu, a[2], sa);
    const std::uint32_t a3 = __shfl_sync(0xffffffffu, a[3], sa);
    const int k = 2 * src_t;
    ar[0][k] = lo_of<T>(a0);
    ar[0][k + 1] = hi_of<T>(a0);
    ar[1][k] = lo_of<T>(a1);
    ar[1][k + 1] = hi_of<T>(a1);
    ar[0][k + 8] = lo_of<T>(a2);
    ar[0][k + 9] = hi_of<T>(a2);
    ar[1][k + 8] = lo_of<T>(a3);
    ar[1][k + 9] = hi_of<T>(a3);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int sb = 4 * (2 * t + j) + src_t;
      const std::uint32_t b0 = __shfl_sync(0xffffffffu, b[0], sb);
      const std::uint32_t b1 = __shfl_sync(0xffffffffu, b[1], sb);
      bc[j][k] = lo_of<T>(b0);
      bc[j][k + 1] = hi_of<T>(b0);
      bc[j][k + 8] = lo_of<T>(b1);
      bc[j][k + 9] = hi_of<T>(b1);
    }
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float acc = c[2 * i + j];
#pragma unroll
      for (int k = 0; k < 16; ++k) acc = fmaf(ar[i][k], bc[j][k], acc);
      c[2 * i + j] = acc;
    }
}
}  // namespace mma_detail
#endif

// c += A B (m16n8k16, f32 accumulation) for 16-bit A and B of type T.
template <Mma16 T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const std::uint32_t (&a)[4],
                                          const std::uint32_t (&b)[2]) {
#if defined(STRATA_MMA_PTX)
  if constexpr (T == Mma16::bf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#else
  mma_detail::mma_16816_portable<T>(c, a, b);
#endif
}

// Two f32 values rounded to nearest even into one register of T (x0 in the lower half), as
// half_hd.hpp's conversions (cvt.rn does the same rounding).
template <Mma16 T>
__device__ __forceinline__ std::uint32_t pack2(float x0, float x1) {
#if defined(STRATA_MMA_PTX)
  std::uint32_t r;
  if constexpr (T == Mma16::bf16)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(x1), "f"(x0));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(x1), "f"(x0));
  return r;
#else
  if constexpr (T == Mma16::bf16)
    return static_cast<std::uint32_t>(f32_to_bf16(x0)) |
           (static_cast<std::uint32_t>(f32_to_bf16(x1)) << 16);
  else
    return static_cast<std::uint32_t>(f32_to_f16(x0)) |
           (static_cast<std::uint32_t>(f32_to_f16(x1)) << 16);
#endif
}

// The two halves of a register of T as f32 (exact).
template <Mma16 T>
__device__ __forceinline__ void unpack2(std::uint32_t r, float& x0, float& x1) {
  if constexpr (T == Mma16::bf16) {
    x0 = bits_f32(r << 16);
    x1 = bits_f32(r & 0xffff0000u);
  } else {
#if defined(STRATA_MMA_PTX)
    const unsigned short h0 = static_cast<unsigned short>(r & 0xffffu);
    const unsigned short h1 = static_cast<unsigned short>(r >> 16);
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(x0) : "h"(h0));
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(x1) : "h"(h1));
#else
    x0 = f16_to_f32(static_cast<std::uint16_t>(r & 0xffffu));
    x1 = f16_to_f32(static_cast<std::uint16_t>(r >> 16));
#endif
  }
}

// x0, x1 split into hi + lo parts of T: hi = round(x), lo = round(x - hi) (x - hi is exact in
// f32). x = hi + lo to about 2^-16 relative for bf16 and 2^-22 for f16 (when x is within f16's
// normal range: the callers scale it there).
template <Mma16 T>
__device__ __forceinline__ void split2(float x0, float x1, std::uint32_t& hi, std::uint32_t& lo) {
  hi = pack2<T>(x0, x1);
  float h0, h1;
  unpack2<T>(hi, h0, h1);
  lo = pack2<T>(x0 - h0, x1 - h1);
}

}  // namespace strata::cuda_ops
