// Tensor operations for layers, ZeRO hooks and the trainer. Each op checks shapes, dtypes and
// devices once, then dispatches on the tensors' device to the table its backend registers
// (op_table.hpp): the CPU backend today, CUDA next. Callers never touch a backend's kernels.
//
// Conventions (as the CPU kernels'): activations are row-major [N, C] with N = B*T rows. Float
// tensors may be f32, bf16 or f16 in any mix (kernels accumulate in f32; 16-bit results are
// rounded to nearest-even). Parameter gradients (dW, db, dw, dwte, ...) are ACCUMULATED (+=);
// other outputs are OVERWRITTEN. An optional tensor is passed as an undefined Tensor().
// Every op is deterministic: the same inputs give bitwise the same outputs on a backend, whatever
// its thread count.
#pragma once

#include <cstdint>
#include <span>

#include "framework/backend/ops/token_check.hpp"
#include "framework/core/tensor.hpp"
#include "framework/optim/adafactor.hpp"
#include "framework/optim/adamw.hpp"
#include "framework/optim/adamw8bit.hpp"
#include "framework/optim/lamb.hpp"
#include "framework/optim/lion.hpp"
#include "framework/optim/onebit_adam.hpp"
#include "framework/optim/onebit_lamb.hpp"
#include "framework/optim/sgd.hpp"

namespace strata::ops {

// ---- dense algebra ----
// C = alpha * op(A) @ op(B) + beta * C; A [M,K] (or [K,M] with trans_a), B [K,N] (or [N,K]),
// C [M,N]; all 2-D and contiguous.
void matmul(const Tensor& A, const Tensor& B, const Tensor& C, bool trans_a = false,
            bool trans_b = false, float alpha = 1.0f, float beta = 0.0f);
// y[N,out] = x[N,in] @ W[out,in]^T + b[out] (b optional).
void linear_forward(const Tensor& x, const Tensor& W, const Tensor& b, const Tensor& y);
// dx[N,in] = dy @ W (dx optional: skipped); dW += dy^T @ x; db += sum over rows of dy (optional).
void linear_backward(const Tensor& x, const Tensor& W, const Tensor& dy, const Tensor& dx,
                     const Tensor& dW, const Tensor& db);

// ---- normalisation and activations ----
// LayerNorm over the last dim of x [N,C] with gain w[C] and bias b[C]; writes y [N,C] and the
// f32 mean[N], rstd[N] that backward needs.
void layernorm_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd, float eps);
// dx [N,C] overwritten; dw, db [C] accumulated.
void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, const Tensor& dw, const Tensor& db);
// GELU, tanh approximation (PyTorch approximate='tanh'); x and y of the same shape.
void gelu_forward(const Tensor& x, const Tensor& y);
// dx = gelu'(x) * dy; dx may be the same tensor as dy.
void gelu_backward(const Tensor& x, const Tensor& dy, const Tensor& dx);

// ---- attention ----
// Causal multi-head self-attention on a fused qkv [B,T,3C] (q, k, v each [B,T,NH,C/NH] within
// the C-wide thirds, nanoGPT's c_attn output). out [B,T,C]; lse [B,NH,T] f32: the log-sum-exp of
// each softmax row, saved instead of the T×T probabilities. Scale 1/sqrt(C/NH).
void attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse, int n_head);
// dqkv [B,T,3C] overwritten; backward recomputes the probabilities from lse.
void attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                        const Tensor& dout, const Tensor& dqkv, int n_head);

// ---- embeddings ----
// out[b*T+t, :] = wte[tokens[b,t], :] + wpe[t, :]; tokens i32 [B,T], wte [V,C], wpe [>=T, C],
// out [B*T, C]. Tokens outside [0, V) are an error. With vocab_start >= 0, wte is the slice
// [vocab_start, vocab_start + V) of a vocabulary-parallel table: a token outside it (>= 0) adds
// nothing, and wpe is optional. check: TokenCheck::done_by_caller when the caller has checked the
// tokens already (token_check.hpp; the CUDA op then does not wait for its own check).
void embedding_forward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                       const Tensor& out, std::int64_t vocab_start = -1,
                       TokenCheck check = TokenCheck::in_op);
// dwte[tokens[b,t]] += dout[b*T+t]; dwpe[t] += sum over b of dout[b*T+t] (either optional).
// Deterministic order (no atomics). vocab_start >= 0: dwte is that slice's rows (as forward).
void embedding_backward(const Tensor& tokens, const Tensor& dout, const Tensor& dwte,
                        const Tensor& dwpe, std::int64_t vocab_start = -1,
                        TokenCheck check = TokenCheck::in_op);

// ---- cross-entropy over a vocabulary, whole or in pieces ----
// Softmax cross-entropy of logits [N,V] against targets i32 [N] (< 0: ignored row). Writes
// lse [N] f32 and the SUM of the losses of the valid rows (double accumulation) into sum, an f64
// tensor of one element on the logits' device: on a GPU it stays there (the host does not wait)
// until someone reads it, e.g. with a step's other losses (nn::LossSums). A target >= V is an
// error on the CPU; on a GPU, which the host does not wait for, it makes the sum NaN instead.
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                           const Tensor& sum);
// The same, the sum read back to the host (on a GPU the host waits for the device); a target >= V
// is an error on every device.
double cross_entropy_forward(const Tensor& logits, const Tensor& targets, const Tensor& lse);
// dlogits [N,V] = (softmax(logits) - onehot(target)) * scale, 0 on ignored rows. dlogits may be
// the same tensor as logits (in place).
void cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                            const Tensor& dlogits, float scale);
// The pieces a vocabulary-parallel cross-entropy is built from, each on a slice of the
// vocabulary [vocab_start, vocab_start + V) held as logits [N,V] (reduce max and sums over the
// slices between them):
//   row_max:      out[r] = max_j logits[r,j]                                      (f32 [N])
//   row_sum_exp:  out[r] = sum_j exp(logits[r,j] - max[r])                        (f32 [N])
//   target_logit: out[r] = logits[r, targets[r] - vocab_start] if the target falls in this
//                 slice, else 0                                                  (f32 [N])
//   cross_entropy_backward_slice: dlogits = (exp(logits - lse[r]) - [j == target - start]) *
//                 scale, 0 on ignored rows.
//   combine_cross_entropy: the last step, on the pieces reduced over the slices (max and
//                 sums of rows [N]): lse[r] = max[r] + log(sum_exp[r]) (f32), and the SUM over
//                 rows with targets[r] >= 0 of double(lse[r]) - double(target[r]) (double
//                 accumulation) into sum (f64, one element, on max's device), or returned (read
//                 back), as cross_entropy_forward's.
void row_max(const Tensor& logits, const Tensor& out);
void row_sum_exp(const Tensor& logits, const Tensor& max, const Tensor& out);
void target_logit(const Tensor& logits, const Tensor& targets, std::int64_t vocab_start,
                  const Tensor& out);
void cross_entropy_backward_slice(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                                  std::int64_t vocab_start, float scale, const Tensor& dlogits);
void combine_cross_entropy(const Tensor& max, const Tensor& sum_exp, const Tensor& target,
                           const Tensor& targets, const Tensor& lse, const Tensor& sum);
double combine_cross_entropy(const Tensor& max, const Tensor& sum_exp, const Tensor& target,
                             const Tensor& targets, const Tensor& lse);

// ---- elementwise ----
void add(const Tensor& a, const Tensor& b, const Tensor& out);  // out = a + b (same shapes)
void add_inplace(const Tensor& a, const Tensor& b);              // a += b
void scale_inplace(const Tensor& a, float s);                    // a *= s
// dst = src converted to dst's dtype (same shape, contiguous; RNE for 16-bit).
void cast(const Tensor& src, const Tensor& dst);

// ---- reductions and checks ----
// Sum of squares of a contiguous float tensor, in double with a fixed order (global-norm
// clipping); 16-bit values are widened exactly.
double sum_squares(const Tensor& x);
// True if any element is ±inf or NaN.
bool has_inf_or_nan(const Tensor& x);
// out[0] += sum_squares(x) (out: one f64 element, where it lives: no host value, so the sums of
// a step's many slices stay on the device until read once).
void sum_squares_add(const Tensor& x, const Tensor& out);

// ---- optimizer updates ----
// One AdamW update of contiguous 1-D slices, in place (see framework/optim/adamw.hpp for the
// arithmetic, bitwise PyTorch's). master, m, v: f32; grad: any float dtype, multiplied by
// grad_scale first; param16 (optional): bf16/f16 copy of the updated master, written too.
void adamw_step(const Tensor& master, const Tensor& grad, const Tensor& m, const Tensor& v,
                const optim::AdamWHyper& h, std::int64_t step, float grad_scale,
                const Tensor& param16);
// One SGD update (framework/optim/sgd.hpp); momentum optional when h.momentum == 0.
void sgd_step(const Tensor& master, const Tensor& grad, const Tensor& momentum,
              const optim::SGDHyper& h, std::int64_t step, float grad_scale,
              const Tensor& param16);
// One Lion update (framework/optim/lion.hpp): master, m f32; grad any float dtype.
void lion_step(const Tensor& master, const Tensor& grad, const Tensor& m,
               const optim::LionHyper& h, std::int64_t step, float grad_scale,
               const Tensor& param16);
// One 8-bit AdamW update (framework/optim/adamw8bit.hpp) of the n = master.numel() elements:
// m_codes, v_codes u8 of n elements; m_absmax, v_absmax f32 of quant_blocks(n) (block b is
// elements [b·kQuantBlock, (b+1)·kQuantBlock)); `runs` cover [0, n) in order and say which
// elements are decayed (weight_decay 0 elsewhere). grad any float dtype.
void adamw8bit_step(const Tensor& master, const Tensor& grad, const Tensor& m_codes,
                    const Tensor& v_codes, const Tensor& m_absmax, const Tensor& v_absmax,
                    std::span<const optim::DecayRun> runs, const optim::AdamWHyper& h,
                    std::int64_t step, float grad_scale, const Tensor& param16);
// One Lion8bit update (framework/optim/lion.hpp), the buffers and runs as adamw8bit_step's.
void lion8bit_step(const Tensor& master, const Tensor& grad, const Tensor& m_codes,
                   const Tensor& m_absmax, std::span<const optim::DecayRun> runs,
                   const optim::LionHyper& h, std::int64_t step, float grad_scale,
                   const Tensor& param16);

// ---- Adafactor's kernels (framework/optim/adafactor.hpp: the same arguments and bits) ----
// A matrix parameter of rows x cols (the entries of row and column length checked against them) is
// seen through the flat range [first, first + n) of its
// elements a shard owns (n = grad.numel()); grad is f32 (already widened) and every sum is f64,
// accumulated (+=) in the CPU kernel's fixed order on every backend.
// row_sums [rows] += sum over each row met of (g·grad_scale)² + eps1, col_sums [cols] likewise.
void adafactor_sq_sums(const Tensor& grad, std::int64_t first, std::int64_t rows, std::int64_t cols,
                       float grad_scale, float eps1, const Tensor& row_sums,
                       const Tensor& col_sums);
// stat (f32) = stat·f(beta2) + f(sums / count)·f(1 - beta2), fused; sums f64 of stat's numel.
void adafactor_ema(const Tensor& stat, const Tensor& sums, double count, double beta2);
// The factors of the new statistics: row_factor = 1/sqrt(row/mean(row)), col_factor = 1/sqrt(col).
void adafactor_factors(const Tensor& row, const Tensor& col, const Tensor& row_factor,
                       const Tensor& col_factor);
// out[0] += sum of ((rf·cf)·(g·grad_scale))² over the range (f64).
void adafactor_factored_sumsq(const Tensor& grad, std::int64_t first, std::int64_t rows,
                              std::int64_t cols,
                              float grad_scale, const Tensor& row_factor,
                              const Tensor& col_factor, const Tensor& out);
// out[0] += sum of u² of a vector's range, u = g / sqrt(v·f(beta2) + (g² + eps1)·f(1-beta2)).
void adafactor_vector_sumsq(const Tensor& grad, const Tensor& v, float grad_scale, float eps1,
                            double beta2, const Tensor& out);
// The updates of a range (param, m f32; m undefined without beta1; param16 optional).
void adafactor_apply_factored(const Tensor& param, const Tensor& grad, const Tensor& m,
                              std::int64_t first, std::int64_t rows, std::int64_t cols,
                              const Tensor& row_factor,
                              const Tensor& col_factor, const optim::AdafactorHyper& h,
                              const optim::AdafactorScalars& s, const Tensor& param16);
void adafactor_apply_vector(const Tensor& param, const Tensor& grad, const Tensor& v,
                            const Tensor& m, const optim::AdafactorHyper& h,
                            const optim::AdafactorScalars& s, const Tensor& param16);

// ---- LAMB's kernels (framework/optim/lamb.hpp) ----
// out[0] += sum p², out[1] += sum u² of the range (f64, the CPU's chunk order); param, grad, m,
// v f32 of one length, read only.
void lamb_sums(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
               const optim::LambHyper& h, float grad_scale, const Tensor& out);
// The update of the range (m, v, param written; param16 optional).
void lamb_apply(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                const optim::LambHyper& h, float grad_scale, double step_size, double trust_ratio,
                const Tensor& param16);

// ---- 1-bit Adam's and 1-bit LAMB's compressed-phase kernels (framework/optim/onebit_*.hpp) ----
// Every operand f32 of one length (param16 optional, bf16 or f16; out f64). The CUDA table has
// no kernels for these yet: its entries fail naming the optimizer (the GPU jobs refuse the 1-bit
// optimizers up front, parallel::gpu_refusal).
// m = f(b1)·m + f(1-b1)·(grad·grad_scale).
void onebit_momentum(const Tensor& m, const Tensor& grad, const optim::OneBitAdamHyper& h,
                     float grad_scale);
// param = param·f(1 - lr·wd) + (f(-lr)·m) / (sqrt(v) + f(eps)); param16 written when given.
void onebit_apply(const Tensor& param, const Tensor& m, const Tensor& v,
                  const optim::OneBitAdamHyper& h, double lr, const Tensor& param16);
// out[0] += sum of m², one element after another (f64, out of 1 element).
void onebit_lamb_sumsq(const Tensor& m, const Tensor& out);
// m_last = m; m = (f(b1)·m + f(1-b1)·(grad·grad_scale))·f(scaling).
void onebit_lamb_momentum(const Tensor& m, const Tensor& m_last, const Tensor& grad,
                          const optim::OneBitLambHyper& h, float grad_scale, double scaling);
// optim::onebit_lamb_after_exchange (m and v_fresh written): out (f64, 3 elements) gets
// out[0] += prelim_sq, out[1] += update_sq, out[2] = max(out[2], denom_ratio).
void onebit_lamb_after_exchange(const Tensor& m, const Tensor& m_last, const Tensor& v,
                                const Tensor& v_fresh, const Tensor& param,
                                const optim::OneBitLambHyper& h, double weight_decay,
                                double scaling, const Tensor& out);
// param = param - f(rate)·(m / (sqrt(v) + f(eps)) + f(wd)·param); param16 written when given.
void onebit_lamb_apply(const Tensor& param, const Tensor& m, const Tensor& v,
                       const optim::OneBitLambHyper& h, double weight_decay, double rate,
                       const Tensor& param16);

}  // namespace strata::ops
