// The table of op implementations a backend provides. ops.cpp checks every op's arguments once
// and then calls the table of the tensors' device, so a backend's functions receive tensors that
// are already known to be consistent (shapes, dtypes, one device, contiguous where required). A
// table must be complete: every entry set (registration checks it), so no op ever finds a
// backend that "does not support" it.
#pragma once

#include <cstddef>
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

struct OpTable {
  const char* name = nullptr;  // "cpu", "cuda"

  void (*matmul)(const Tensor& A, const Tensor& B, const Tensor& C, bool trans_a, bool trans_b,
                 float alpha, float beta) = nullptr;
  void (*linear_forward)(const Tensor& x, const Tensor& W, const Tensor& b,
                         const Tensor& y) = nullptr;
  void (*linear_backward)(const Tensor& x, const Tensor& W, const Tensor& dy, const Tensor& dx,
                          const Tensor& dW, const Tensor& db) = nullptr;
  void (*layernorm_forward)(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                            const Tensor& mean, const Tensor& rstd, float eps) = nullptr;
  void (*layernorm_backward)(const Tensor& dy, const Tensor& x, const Tensor& w,
                             const Tensor& mean, const Tensor& rstd, const Tensor& dx,
                             const Tensor& dw, const Tensor& db) = nullptr;
  void (*gelu_forward)(const Tensor& x, const Tensor& y) = nullptr;
  void (*gelu_backward)(const Tensor& x, const Tensor& dy, const Tensor& dx) = nullptr;
  void (*attention_forward)(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                            int n_head) = nullptr;
  void (*attention_backward)(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                             const Tensor& dout, const Tensor& dqkv, int n_head) = nullptr;
  void (*embedding_forward)(const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                            const Tensor& out, std::int64_t vocab_start,
                            ops::TokenCheck check) = nullptr;
  void (*embedding_backward)(const Tensor& tokens, const Tensor& dout, const Tensor& dwte,
                             const Tensor& dwpe, std::int64_t vocab_start,
                             ops::TokenCheck check) = nullptr;
  void (*cross_entropy_forward)(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                                const Tensor& sum) = nullptr;
  void (*cross_entropy_backward)(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                                 const Tensor& dlogits, float scale) = nullptr;
  void (*row_max)(const Tensor& logits, const Tensor& out) = nullptr;
  void (*row_sum_exp)(const Tensor& logits, const Tensor& max, const Tensor& out) = nullptr;
  void (*target_logit)(const Tensor& logits, const Tensor& targets, std::int64_t vocab_start,
                       const Tensor& out) = nullptr;
  void (*cross_entropy_backward_slice)(const Tensor& logits, const Tensor& lse,
                                       const Tensor& targets, std::int64_t vocab_start,
                                       float scale, const Tensor& dlogits) = nullptr;
  void (*combine_cross_entropy)(const Tensor& max, const Tensor& sum_exp, const Tensor& target,
                                const Tensor& targets, const Tensor& lse,
                                const Tensor& sum) = nullptr;
  void (*add)(const Tensor& a, const Tensor& b, const Tensor& out) = nullptr;
  void (*add_inplace)(const Tensor& a, const Tensor& b) = nullptr;
  void (*scale_inplace)(const Tensor& a, float s) = nullptr;
  void (*cast)(const Tensor& src, const Tensor& dst) = nullptr;
  double (*sum_squares)(const Tensor& x) = nullptr;
  bool (*has_inf_or_nan)(const Tensor& x) = nullptr;
  void (*adamw_step)(const Tensor& master, const Tensor& grad, const Tensor& m, const Tensor& v,
                     const optim::AdamWHyper& h, std::int64_t step, float grad_scale,
                     const Tensor& param16) = nullptr;
  void (*sgd_step)(const Tensor& master, const Tensor& grad, const Tensor& momentum,
                   const optim::SGDHyper& h, std::int64_t step, float grad_scale,
                   const Tensor& param16) = nullptr;
  void (*lion_step)(const Tensor& master, const Tensor& grad, const Tensor& m,
                    const optim::LionHyper& h, std::int64_t step, float grad_scale,
                    const Tensor& param16) = nullptr;
  void (*adamw8bit_step)(const Tensor& master, const Tensor& grad, const Tensor& m_codes,
                         const Tensor& v_codes, const Tensor& m_absmax, const Tensor& v_absmax,
                         std::span<const optim::DecayRun> runs, const optim::AdamWHyper& h,
                         std::int64_t step, float grad_scale, const Tensor& param16) = nullptr;
  void (*lion8bit_step)(const Tensor& master, const Tensor& grad, const Tensor& m_codes,
                        const Tensor& m_absmax, std::span<const optim::DecayRun> runs,
                        const optim::LionHyper& h, std::int64_t step, float grad_scale,
                        const Tensor& param16) = nullptr;
  void (*sum_squares_add)(const Tensor& x, const Tensor& out) = nullptr;
  void (*adafactor_sq_sums)(const Tensor& grad, std::int64_t first, std::int64_t cols,
                            float grad_scale, float eps1, const Tensor& row_sums,
                            const Tensor& col_sums) = nullptr;
  void (*adafactor_ema)(const Tensor& stat, const Tensor& sums, double count,
                        double beta2) = nullptr;
  void (*adafactor_factors)(const Tensor& row, const Tensor& col, const Tensor& row_factor,
                            const Tensor& col_factor) = nullptr;
  void (*adafactor_factored_sumsq)(const Tensor& grad, std::int64_t first, std::int64_t cols,
                                   float grad_scale, const Tensor& row_factor,
                                   const Tensor& col_factor, const Tensor& out) = nullptr;
  void (*adafactor_vector_sumsq)(const Tensor& grad, const Tensor& v, float grad_scale,
                                 float eps1, double beta2, const Tensor& out) = nullptr;
  void (*adafactor_apply_factored)(const Tensor& param, const Tensor& grad, const Tensor& m,
                                   std::int64_t first, std::int64_t cols,
                                   const Tensor& row_factor, const Tensor& col_factor,
                                   const optim::AdafactorHyper& h,
                                   const optim::AdafactorScalars& s,
                                   const Tensor& param16) = nullptr;
  void (*adafactor_apply_vector)(const Tensor& param, const Tensor& grad, const Tensor& v,
                                 const Tensor& m, const optim::AdafactorHyper& h,
                                 const optim::AdafactorScalars& s,
                                 const Tensor& param16) = nullptr;
  void (*lamb_sums)(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                    const optim::LambHyper& h, float grad_scale, const Tensor& out) = nullptr;
  void (*lamb_apply)(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                     const optim::LambHyper& h, float grad_scale, double step_size,
                     double trust_ratio, const Tensor& param16) = nullptr;
  void (*onebit_momentum)(const Tensor& m, const Tensor& grad, const optim::OneBitAdamHyper& h,
                          float grad_scale) = nullptr;
  void (*onebit_apply)(const Tensor& param, const Tensor& m, const Tensor& v,
                       const optim::OneBitAdamHyper& h, double lr,
                       const Tensor& param16) = nullptr;
  void (*onebit_lamb_sumsq)(const Tensor& m, const Tensor& out) = nullptr;
  void (*onebit_lamb_momentum)(const Tensor& m, const Tensor& m_last, const Tensor& grad,
                               const optim::OneBitLambHyper& h, float grad_scale,
                               double scaling) = nullptr;
  void (*onebit_lamb_after_exchange)(const Tensor& m, const Tensor& m_last, const Tensor& v,
                                     const Tensor& v_fresh, const Tensor& param,
                                     const optim::OneBitLambHyper& h, double weight_decay,
                                     double scaling, const Tensor& out) = nullptr;
  void (*onebit_lamb_apply)(const Tensor& param, const Tensor& m, const Tensor& v,
                            const optim::OneBitLambHyper& h, double weight_decay, double rate,
                            const Tensor& param16) = nullptr;
};

// The table for a device: the CPU backend's, or the CUDA backend's when this build has one
// (throws UserError naming what is missing otherwise).
const OpTable& op_table(Device device);

// The backends' tables (the CUDA one is nullptr in a build without CUDA kernels). The meta
// tables compute nothing: meta_op_table charges the workspace the CPU backend's ops would
// allocate (meta_table.cpp; Device::meta()), meta_cuda_op_table what the CUDA backend's would
// (meta_cuda_table.cpp; meta_cuda(), framework/core/meta_device.hpp).
const OpTable& cpu_op_table();
const OpTable* cuda_op_table();
const OpTable& meta_op_table();
const OpTable& meta_cuda_op_table();

// What the meta-CUDA table asks the CUDA runtime, when one is there (a CUDA build on a machine
// with a GPU: dispatch.cpp installs the CUDA backend's answers, cuda_table.cpp, the first time the
// table is used). Without answers it assumes compute capability 8.0 or later and charges
// embedding backward an upper bound of CUB's temporary storage (cuda/ops/workspace_sizes.hpp).
struct MetaCudaQueries {
  // The compute capability's major version of the device a plan is for (a negative value: unknown).
  int (*compute_capability_major)() = nullptr;
  // The bytes embedding_backward's dwte scratch takes for n positions and a table of vocab_rows
  // rows (CUB's figure included); false when the runtime cannot tell.
  bool (*embedding_dwte_scratch_bytes)(std::int64_t n, std::int64_t vocab_rows,
                                       std::size_t* bytes) = nullptr;
};
void set_meta_cuda_queries(const MetaCudaQueries& q);
const MetaCudaQueries& meta_cuda_queries();
// The CUDA backend's answers (cuda_table.cpp; nullptr in a build without CUDA kernels).
const MetaCudaQueries* cuda_meta_queries();

// Throws strata::Error naming the first entry a table leaves unset.
void check_complete(const OpTable& table);

// Every kernel entry of OpTable. STRATA_OP_TABLE("cpu") is a table named "cpu" whose entries are
// the functions of the same names in scope (a backend's kernels file).
#define STRATA_OP_TABLE_ENTRIES(X)                                                               \
  X(matmul) X(linear_forward) X(linear_backward) X(layernorm_forward) X(layernorm_backward)      \
  X(gelu_forward) X(gelu_backward) X(attention_forward) X(attention_backward)                   \
  X(embedding_forward) X(embedding_backward) X(cross_entropy_forward) X(cross_entropy_backward) \
  X(row_max) X(row_sum_exp) X(target_logit) X(cross_entropy_backward_slice)                    \
  X(combine_cross_entropy) X(add) X(add_inplace) X(scale_inplace) X(cast) X(sum_squares)       \
  X(has_inf_or_nan) X(adamw_step)                                                               \
  X(sgd_step) X(lion_step) X(adamw8bit_step) X(lion8bit_step) X(sum_squares_add)               \
  X(adafactor_sq_sums) X(adafactor_ema) X(adafactor_factors) X(adafactor_factored_sumsq)        \
  X(adafactor_vector_sumsq) X(adafactor_apply_factored) X(adafactor_apply_vector) X(lamb_sums)  \
  X(lamb_apply) X(onebit_momentum) X(onebit_apply) X(onebit_lamb_sumsq) X(onebit_lamb_momentum)  \
  X(onebit_lamb_after_exchange) X(onebit_lamb_apply)
#define STRATA_OP_TABLE_SET_ENTRY(op) x.op = op;
#define STRATA_OP_TABLE(table_name)                     \
  [] {                                                  \
    OpTable x;                                          \
    x.name = table_name;                                \
    STRATA_OP_TABLE_ENTRIES(STRATA_OP_TABLE_SET_ENTRY)  \
    return x;                                           \
  }()

}  // namespace strata::ops
