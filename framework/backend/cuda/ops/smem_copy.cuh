// Shared-memory copies of the tensor-core kernels: cp.async (global -> shared without registers,
// in flight while the block computes) and ldmatrix (a warp's mma.sync fragments of four 8 x 8
// 16-bit matrices in one instruction, plain or transposed), and the fragment loads built on them.
//
// On a GPU of compute capability >= 8.0 (STRATA_MMA_PTX, mma.cuh) each is one PTX instruction.
// Elsewhere (the CUDA emulator, nvcc's host pass) a portable version does the same with plain
// loads and stores: cp.async copies at once and its waits do nothing (a valid execution of the
// asynchronous copy: the kernels still wait and synchronise as they must on a GPU), and ldmatrix
// gathers each lane's row address across the warp with __shfl_sync, following the PTX ISA's
// "Warp-level matrix load instruction: ldmatrix":
//   .x4: lane L gives the address of row L % 8 of matrix L / 8 (each row 8 16-bit values,
//        16-byte aligned); register j of lane L receives matrix j's row L / 4, columns
//        2 (L % 4), 2 (L % 4) + 1 (the lower index in the lower 16 bits);
//   .trans: the same of the transposed matrices: register j of lane L holds matrix j's
//        (row 2 (L % 4), column L / 4) and (row 2 (L % 4) + 1, column L / 4).
// Addresses are given as one base pointer for the warp and each lane's element offset from it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "framework/backend/cuda/ops/mma.cuh"

namespace strata::cuda_ops {

// 16 bytes from global src to shared dst (both 16-byte aligned), or 16 zero bytes when !valid
// (src is then not read). Complete only after cp_async_wait and a barrier.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
#if defined(STRATA_MMA_PTX)
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
#else
  *static_cast<uint4*>(dst) = valid ? *static_cast<const uint4*>(src) : make_uint4(0u, 0u, 0u, 0u);
#endif
}

// Closes the group of this thread's cp_async16 calls since the last commit.
__device__ __forceinline__ void cp_async_commit() {
#if defined(STRATA_MMA_PTX)
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(STRATA_MMA_PTX)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// ldmatrix .x4 (TRANS: .trans) of the 16-bit values at base + off (off: this lane's row, in
// elements), into r[0..3] as described above.
template <bool TRANS>
__device__ __forceinline__ void ldsm_x4(std::uint32_t (&r)[4], const std::uint16_t* base, int off) {
#if defined(STRATA_MMA_PTX)
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(base + off));
  if constexpr (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#else
  const int lane = static_cast<int>(threadIdx.x & 31u);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if constexpr (TRANS) {
      const int o0 = __shfl_sync(0xffffffffu, off, 8 * j + 2 * (lane & 3));
      const int o1 = __shfl_sync(0xffffffffu, off, 8 * j + 2 * (lane & 3) + 1);
      const int c = lane >> 2;
      r[j] = static_cast<std::uint32_t>(base[o0 + c]) |
             (static_cast<std::uint32_t>(base[o1 + c]) << 16);
    } else {
      const int o = __shfl_sync(0xffffffffu, off, 8 * j + (lane >> 2));
      r[j] = *reinterpret_cast<const std::uint32_t*>(base + o + 2 * (lane & 3));
    }
  }
#endif
}

// The fragments of mma.cuh's m16n8k16 from 16-bit tiles in shared memory of row stride st
// elements (a multiple of 8), every addressed row 16-byte aligned.

// A (16 x 16): rows r0 .. r0 + 15, columns c0 .. c0 + 15 of a row-major tile.
__device__ __forceinline__ void ld_frag_a(std::uint32_t (&a)[4], const std::uint16_t* s, int st,
                                          int r0, int c0) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  ldsm_x4<false>(a, s, (r0 + (lane & 7) + ((lane >> 3) & 1) * 8) * st + c0 + (lane >> 4) * 8);
}

// Two B fragments (16 x 8 each, k x n) for columns n0 .. n0 + 7 (b0) and n0 + 8 .. n0 + 15 (b1),
// k0 .. k0 + 15, of a tile stored n-major ([n][k], k contiguous: e.g. K's rows for Q K^T).
__device__ __forceinline__ void ld_frag_b_nk(std::uint32_t (&b0)[2], std::uint32_t (&b1)[2],
                                             const std::uint16_t* s, int st, int n0, int k0) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  std::uint32_t r[4];
  ldsm_x4<false>(r, s, (n0 + (lane & 7) + (lane >> 4) * 8) * st + k0 + ((lane >> 3) & 1) * 8);
  b0[0] = r[0];
  b0[1] = r[1];
  b1[0] = r[2];
  b1[1] = r[3];
}

// The same from a tile stored k-major ([k][n], n contiguous: e.g. V's rows for P V), transposed
// by ldmatrix .trans.
__device__ __forceinline__ void ld_frag_b_kn(std::uint32_t (&b0)[2], std::uint32_t (&b1)[2],
                                             const std::uint16_t* s, int st, int k0, int n0) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  std::uint32_t r[4];
  ldsm_x4<true>(r, s, (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * st + n0 + (lane >> 4) * 8);
  b0[0] = r[0];
  b0[1] = r[1];
  b1[0] = r[2];
  b1[1] = r[3];
}

}  // namespace strata::cuda_ops
