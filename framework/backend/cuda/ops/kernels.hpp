// The CUDA backend's op implementations, one entry of ops::OpTable each (op_table.hpp; ops.hpp has
// each op's contract), defined in the .cu file of their concern:
//   gemm.cu           matmul, linear_forward, linear_backward (cuBLASLt)
//   layernorm.cu      layernorm_forward, layernorm_backward
//   gelu.cu           gelu_forward, gelu_backward
//   attention.cu      attention_forward, attention_backward (flash-style: lse kept, no T x T)
//   embedding.cu      embedding_forward, embedding_backward (deterministic, no float atomics)
//   cross_entropy.cu  cross_entropy_forward/backward, row_max, row_sum_exp, target_logit,
//                     cross_entropy_backward_slice, combine_cross_entropy
//   elementwise.cu    add, add_inplace, scale_inplace, cast (and the f32 views' launchers)
//   reduce.cu         sum_squares, has_inf_or_nan
//   optimizer.cu      adamw_step, sgd_step, lion_step, adamw8bit_step, lion8bit_step (bitwise
//                     the CPU's arithmetic and block-wise 8-bit quantization)
//   adafactor.cu      sum_squares_add, adafactor_* (bitwise the CPU's sums and updates)
//   lamb.cu           lamb_sums, lamb_apply (bitwise the CPU's)
//   onebit_op.cpp     onebit_* (no kernels yet: each fails naming the optimizer and the fix)
// Arguments arrive checked by ops.cpp (shapes, dtypes, one CUDA device, contiguous). Every kernel
// is queued on the current stream of that device; ops that return a host value wait for it.
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

namespace strata::cuda_ops {

void matmul(const Tensor& A, const Tensor& B, const Tensor& C, bool trans_a, bool trans_b,
            float alpha, float beta);
void linear_forward(const Tensor& x, const Tensor& W, const Tensor& b, const Tensor& y);
void linear_backward(const Tensor& x, const Tensor& W, const Tensor& dy, const Tensor& dx,
                     const Tensor& dW, const Tensor& db);
void layernorm_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd, float eps);
void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, const Tensor& dw, const Tensor& db);
void gelu_forward(const Tensor& x, const Tensor& y);
void gelu_backward(const Tensor& x, const Tensor& dy, const Tensor& dx);
void attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse, int n_head);
void attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                        const Tensor& dout, const Tensor& dqkv, int n_head);
void embedding_forward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                       const Tensor& out, std::int64_t vocab_start,
                       ops::TokenCheck check = ops::TokenCheck::in_op);
void embedding_backward(const Tensor& tokens, const Tensor& dout, const Tensor& dwte,
                        const Tensor& dwpe, std::int64_t vocab_start,
                        ops::TokenCheck check = ops::TokenCheck::in_op);
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                           const Tensor& sum);
void cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                            const Tensor& dlogits, float scale);
void row_max(const Tensor& logits, const Tensor& out);
void row_sum_exp(const Tensor& logits, const Tensor& max, const Tensor& out);
void target_logit(const Tensor& logits, const Tensor& targets, std::int64_t vocab_start,
                  const Tensor& out);
void cross_entropy_backward_slice(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                                  std::int64_t vocab_start, float scale, const Tensor& dlogits);
void combine_cross_entropy(const Tensor& max, const Tensor& sum_exp, const Tensor& target,
                           const Tensor& targets, const Tensor& lse, const Tensor& sum);
void add(const Tensor& a, const Tensor& b, const Tensor& out);
void add_inplace(const Tensor& a, const Tensor& b);
void scale_inplace(const Tensor& a, float s);
void cast(const Tensor& src, const Tensor& dst);
double sum_squares(const Tensor& x);
bool has_inf_or_nan(const Tensor& x);
void adamw_step(const Tensor& master, const Tensor& grad, const Tensor& m, const Tensor& v,
                const optim::AdamWHyper& h, std::int64_t step, float grad_scale,
                const Tensor& param16);
void sgd_step(const Tensor& master, const Tensor& grad, const Tensor& momentum,
              const optim::SGDHyper& h, std::int64_t step, float grad_scale,
              const Tensor& param16);
void lion_step(const Tensor& master, const Tensor& grad, const Tensor& m,
               const optim::LionHyper& h, std::int64_t step, float grad_scale,
               const Tensor& param16);
void adamw8bit_step(const Tensor& master, const Tensor& grad, const Tensor& m_codes,
                    const Tensor& v_codes, const Tensor& m_absmax, const Tensor& v_absmax,
                    std::span<const optim::DecayRun> runs, const optim::AdamWHyper& h,
                    std::int64_t step, float grad_scale, const Tensor& param16);
void lion8bit_step(const Tensor& master, const Tensor& grad, const Tensor& m_codes,
                   const Tensor& m_absmax, std::span<const optim::DecayRun> runs,
                   const optim::LionHyper& h, std::int64_t step, float grad_scale,
                   const Tensor& param16);

void sum_squares_add(const Tensor& x, const Tensor& out);
void adafactor_sq_sums(const Tensor& grad, std::int64_t first, std::int64_t cols,
                       float grad_scale, float eps1, const Tensor& row_sums,
                       const Tensor& col_sums);
void adafactor_ema(const Tensor& stat, const Tensor& sums, double count, double beta2);
void adafactor_factors(const Tensor& row, const Tensor& col, const Tensor& row_factor,
                       const Tensor& col_factor);
void adafactor_factored_sumsq(const Tensor& grad, std::int64_t first, std::int64_t cols,
                              float grad_scale, const Tensor& row_factor,
                              const Tensor& col_factor, const Tensor& out);
void adafactor_vector_sumsq(const Tensor& grad, const Tensor& v, float grad_scale, float eps1,
                            double beta2, const Tensor& out);
void adafactor_apply_factored(const Tensor& param, const Tensor& grad, const Tensor& m,
                              std::int64_t first, std::int64_t cols, const Tensor& row_factor,
                              const Tensor& col_factor, const optim::AdafactorHyper& h,
                              const optim::AdafactorScalars& s, const Tensor& param16);
void adafactor_apply_vector(const Tensor& param, const Tensor& grad, const Tensor& v,
                            const Tensor& m, const optim::AdafactorHyper& h,
                            const optim::AdafactorScalars& s, const Tensor& param16);
void lamb_sums(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
               const optim::LambHyper& h, float grad_scale, const Tensor& out);
void lamb_apply(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                const optim::LambHyper& h, float grad_scale, double step_size, double trust_ratio,
                const Tensor& param16);
void onebit_momentum(const Tensor& m, const Tensor& grad, const optim::OneBitAdamHyper& h,
                     float grad_scale);
void onebit_apply(const Tensor& param, const Tensor& m, const Tensor& v,
                  const optim::OneBitAdamHyper& h, double lr, const Tensor& param16);
void onebit_lamb_sumsq(const Tensor& m, const Tensor& out);
void onebit_lamb_momentum(const Tensor& m, const Tensor& m_last, const Tensor& grad,
                          const optim::OneBitLambHyper& h, float grad_scale, double scaling);
void onebit_lamb_after_exchange(const Tensor& m, const Tensor& m_last, const Tensor& v,
                                const Tensor& v_fresh, const Tensor& param,
                                const optim::OneBitLambHyper& h, double weight_decay,
                                double scaling, const Tensor& out);
void onebit_lamb_apply(const Tensor& param, const Tensor& m, const Tensor& v,
                       const optim::OneBitLambHyper& h, double weight_decay, double rate,
                       const Tensor& param16);

}  // namespace strata::cuda_ops
