// Launchers of embedding.cu: token + position embedding forward and backward, and the device-side
// token check (raw pointers, the stream to queue on). No Tensor here: nvcc cannot compile fmt 9
// in C++20 (embedding_op.cpp has the ops over tensors). Functions that call the CUDA runtime or
// CUB return its error code; the others queue kernels only (check with cudaGetLastError).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "framework/backend/cuda/ops/half_hd.hpp"
#include "framework/backend/cuda/ops/workspace_sizes.hpp"

namespace strata::cuda_ops {

// The first position i in [0, n) whose token is < 0 or >= hi: *bad_index = i and *bad_value =
// tokens[i], or *bad_index = -1 when every token is in range. `flag` is 8 bytes of device memory
// (a workspace). SYNCHRONISES the stream: the result is copied back to the host.
cudaError_t find_bad_token(const std::int32_t* tokens, std::int64_t n, std::int64_t hi,
                           unsigned long long* flag, std::int64_t* bad_index,
                           std::int32_t* bad_value, cudaStream_t s);

// out[r, :] = wte[tokens[r] - vocab_start, :] + wpe[r % T, :] for r in [0, N), rounded once to
// odt. A token whose row k = tokens[r] - vocab_start is outside [0, vocab_rows) adds nothing from
// wte; wpe null adds nothing. N = B * T.
void launch_embedding_forward(const std::int32_t* tokens, const void* wte, DT wdt,
                              std::int64_t vocab_start, std::int64_t vocab_rows, const void* wpe,
                              DT pdt, void* out, DT odt, std::int64_t N, std::int64_t T, int C,
                              cudaStream_t s);

// dwpe[t, :] += sum over b = 0..B-1, in order, of dout[b*T + t, :] for t in [0, T). An f32 dwpe
// adds each row into its old value in turn (the CPU's f32 arithmetic, bitwise); a 16-bit one gets
// round(old + f32 sum), as the CPU's Acc32.
void launch_embedding_backward_dwpe(const void* dout, DT ddt, void* dwpe, DT pdt, std::int64_t B,
                                    std::int64_t T, int C, cudaStream_t s);

// Bytes of device scratch launch_embedding_backward_dwte needs for n positions (n <= INT32_MAX)
// and a table of vocab_rows rows (asks CUB for its radix sort's temporary storage).
cudaError_t embedding_dwte_scratch_bytes(std::int64_t n, std::int64_t vocab_rows,
                                         std::size_t* bytes, cudaStream_t s);

// dwte[k, :] += dout[r, :] for every position r whose row k = tokens[r] - vocab_start lies in
// [0, vocab_rows), each row's positions summed in position order (a stable radix sort of the
// positions by row; then one block per run of equal rows, one thread per channel). f32 dwte: each
// row added into the old value in turn (bitwise the CPU); 16-bit: round(old + f32 sum). Tokens
// must be >= 0 (checked before). `scratch` holds embedding_dwte_scratch_bytes(n, vocab_rows)
// bytes of device memory.
cudaError_t launch_embedding_backward_dwte(const std::int32_t* tokens, std::int64_t n,
                                           std::int64_t vocab_start, std::int64_t vocab_rows,
                                           const void* dout, DT ddt, void* dwte, DT edt, int C,
                                           void* scratch, std::size_t scratch_bytes,
                                           cudaStream_t s);

}  // namespace strata::cuda_ops
