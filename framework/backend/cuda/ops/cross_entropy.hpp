// Launchers of cross_entropy.cu: softmax cross-entropy over rows of logits [N, V] (any float
// dtype, read as f32) against i32 targets (< 0: an ignored row), whole-vocabulary and in the
// pieces of a vocabulary-parallel one. Raw pointers and the stream to queue on; nothing here
// synchronises the host (cross_entropy_op.cpp reads the forward's total back). No Tensor here
// (nvcc cannot compile fmt 9 in C++20; see elementwise.hpp).
//
// Every vocabulary kernel runs one block of kRowThreads threads per row (blocks loop over rows
// when N exceeds the grid); a row's reductions are per-thread partials over a fixed column
// stride followed by common.cuh's fixed-order block reductions, so every result is the same bits
// run after run.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "framework/backend/cuda/ops/half_hd.hpp"

namespace strata::cuda_ops {

// The forward, two kernels queued on s:
//   per row r: lse[r] = max + log(sum_j exp(x[r,j] - max)) (f32, as the CPU), and
//              row_loss[r] = double(lse[r]) - double(x[r, targets[r]]) for a target in [0, V),
//              0 otherwise (ignored rows, and targets >= V, which the total reports);
//   then one block: sum[0] = the sum of row_loss in double (fixed order), or NaN when a row's
//   target is >= V (the host reads it without having waited for the kernels).
// row_loss: N doubles of device workspace; sum: 1 double of device memory. N >= 1, V >= 1.
void launch_cross_entropy_forward(const void* logits, DT ldt, const std::int32_t* targets,
                                  float* lse, double* row_loss, double* sum, std::int64_t N,
                                  std::int64_t V, cudaStream_t s);

// dlogits[r, j] = round(exp(x[r,j] - lse[r]) * scale - (j == target - vocab_start ? scale : 0)),
// 0 on ignored rows (target < 0); a target outside [vocab_start, vocab_start + V) subtracts
// nothing. dlogits may be logits itself (each element is read and then written by one thread).
// The whole-vocabulary backward is vocab_start = 0.
void launch_cross_entropy_backward(const void* logits, DT ldt, const float* lse,
                                   const std::int32_t* targets, std::int64_t vocab_start,
                                   float scale, void* dlogits, DT ddt, std::int64_t N,
                                   std::int64_t V, cudaStream_t s);

// out[r] = max_j x[r, j] (f32; -inf for V = 0).
void launch_row_max(const void* logits, DT ldt, float* out, std::int64_t N, std::int64_t V,
                    cudaStream_t s);

// out[r] = sum_j exp(x[r, j] - max[r]): f32 exponentials summed in double, rounded once to f32.
void launch_row_sum_exp(const void* logits, DT ldt, const float* max, float* out, std::int64_t N,
                        std::int64_t V, cudaStream_t s);

// out[r] = x[r, targets[r] - vocab_start] when the target falls in [vocab_start, vocab_start + V),
// else 0.
void launch_target_logit(const void* logits, DT ldt, const std::int32_t* targets,
                         std::int64_t vocab_start, float* out, std::int64_t N, std::int64_t V,
                         cudaStream_t s);

// The vocabulary-parallel cross-entropy's last step, two kernels queued on s: per row
// lse[r] = max[r] + log(sum_exp[r]) (f32, as the CPU) and row_loss[r] = double(lse[r]) -
// double(target[r]) for targets[r] >= 0, else 0; then the forward's summing block: sum[0] =
// the sum of row_loss in double (fixed order; no target is out of range here).
// row_loss: N doubles of device workspace; sum: 1 double. N >= 1.
void launch_combine_cross_entropy(const float* max, const float* sum_exp, const float* target,
                                  const std::int32_t* targets, float* lse, double* row_loss,
                                  double* sum, std::int64_t N, cudaStream_t s);

}  // namespace strata::cuda_ops
