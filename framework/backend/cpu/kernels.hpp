// CPU compute kernels for the transformer layers, on raw row-major float32 buffers.
// Conventions: x/y activations are [N, C] with N = B*T rows. Parameter gradients (dW, db,
// dwte, ...) are ACCUMULATED (+=); input gradients (dx) are OVERWRITTEN. All kernels are
// multi-threaded (OpenMP) and deterministic: the same inputs give bitwise the same outputs
// whatever the thread count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "framework/core/dtype.hpp"

namespace strata::cpu {

// Number of threads the kernels use (defaults to the hardware concurrency / OMP_NUM_THREADS).
int num_threads();
// Also sets OpenMP's default team size (omp_set_num_threads) for the calling thread, so other
// OpenMP code it runs (the optimizer) uses the same count.
void set_num_threads(int n);

// C[M,N] = alpha * op(A) @ op(B) + beta * C, row-major, op = transpose when the flag is set.
// A is [M,K] (or [K,M] if trans_a), B is [K,N] (or [N,K] if trans_b).
void matmul(const float* A, const float* B, float* C, int M, int N, int K, bool trans_a,
            bool trans_b, float alpha = 1.0f, float beta = 0.0f);

// y[N,out] = x[N,in] @ W[out,in]^T + b[out] (b may be null).
void linear_forward(const float* x, const float* W, const float* b, float* y, int N, int in,
                    int out);
// dx[N,in] = dy @ W (dx may be null: skipped); dW[out,in] += dy^T @ x; db[out] += sum_rows(dy)
// (db may be null). With accumulate false, dW and db are overwritten instead (= in place of +=;
// what they held is never read, so it may be uninitialised memory).
void linear_backward(const float* x, const float* W, const float* dy, float* dx, float* dW,
                     float* db, int N, int in, int out, bool accumulate = true);
// The same with 16-bit weights W (bf16 or f16: wt), widened exactly where the product reads them
// (no f32 copy of W is made): bitwise the f32 kernels on the widened W.
void linear_forward_w16(const float* x, const std::uint16_t* W, DType wt, const float* b, float* y,
                        int N, int in, int out);
void linear_backward_w16(const float* x, const std::uint16_t* W, DType wt, const float* dy,
                         float* dx, float* dW, float* db, int N, int in, int out,
                         bool accumulate = true);

// LayerNorm over the last dim C with eps; saves mean[N] and rstd[N] for backward.
void layernorm_forward(const float* x, const float* w, const float* b, float* y, float* mean,
                       float* rstd, int N, int C, float eps);
// dx overwritten; dw, db accumulated.
void layernorm_backward(const float* dy, const float* x, const float* w, const float* mean,
                        const float* rstd, float* dx, float* dw, float* db, int N, int C);

// GELU, tanh approximation (PyTorch approximate='tanh').
void gelu_forward(const float* x, float* y, std::size_t n);
void gelu_backward(const float* x, const float* dy, float* dx, std::size_t n);  // dx overwritten; may alias dy

// Causal multi-head self-attention on a fused qkv[B,T,3C] (q, k, v each [B,T,NH,C/NH] within
// the C-wide thirds, as nanoGPT's c_attn output split). out[B,T,C]. Saves lse[B,NH,T] (log-sum-exp
// of each softmax row) instead of the [T,T] probabilities; backward recomputes them.
// Scale is 1/sqrt(C/NH).
void attention_forward(const float* qkv, float* out, float* lse, int B, int T, int C, int NH);
// dqkv[B,T,3C] overwritten.
void attention_backward(const float* qkv, const float* out, const float* lse, const float* dout,
                        float* dqkv, int B, int T, int C, int NH);

// Token + position embedding: out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]. On a slice of the
// vocabulary (wte holds rows [vocab_start, vocab_start + vocab_rows)) a token outside it adds 0;
// wpe may be null (no position term).
void embedding_forward(const std::int32_t* tokens, const float* wte, const float* wpe, float* out,
                       int B, int T, int C, std::int64_t vocab_start = 0,
                       std::int64_t vocab_rows = INT64_MAX);
// dwte[tokens[b,t],:] += dout[b,t,:]; dwpe[t,:] += sum_b dout[b,t,:]. Deterministic order. On a
// slice of the vocabulary only the rows of tokens inside it are accumulated.
void embedding_backward(const std::int32_t* tokens, const float* dout, float* dwte, float* dwpe,
                        int B, int T, int C, std::int64_t vocab_start = 0,
                        std::int64_t vocab_rows = INT64_MAX);

// Softmax cross-entropy over rows of logits[N,V]. Rows whose target is < 0 are ignored.
// Writes lse[N] and returns the SUM of the per-row losses (double accumulation).
double cross_entropy_forward(const float* logits, const std::int32_t* targets, float* lse, int N,
                             int V);
// dlogits[N,V] = (softmax(logits) - onehot(target)) * scale (0 for ignored rows). dlogits may
// alias logits.
void cross_entropy_backward(const float* logits, const float* lse, const std::int32_t* targets,
                            float* dlogits, int N, int V, float scale);

// Elementwise helpers.
void add(const float* a, const float* b, float* out, std::size_t n);  // out = a + b
void add_inplace(float* a, const float* b, std::size_t n);            // a += b
void scale_inplace(float* a, float s, std::size_t n);                 // a *= s
// Sum of squares in double, fixed reduction order (for global-norm clipping).
double sum_squares(const float* a, std::size_t n);
// The same for 16-bit values (bf16 or f16), widened exactly: equals sum_squares of the f32 copy.
double sum_squares(const std::uint16_t* a, DType dtype, std::size_t n);

}  // namespace strata::cpu
