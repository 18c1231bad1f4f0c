// The meta device's op table: ops on meta tensors compute nothing (ops.cpp has checked their
// arguments), reductions return 0 and "no inf/NaN". What they would allocate is charged: the
// workspace the CPU backend's adapters take (f32 copies of 16-bit operands, the row blocks of
// 16-bit products), through the same helpers (cpu_f32.hpp), on meta tensors. The memory planner
// (parallel/plan) runs a real training step on this table; tests/unit/plan/test_meta.cpp checks,
// op by op and dtype by dtype, that the workspace charged here equals the CPU table's.
#include <optional>

#include "framework/backend/ops/cpu_f32.hpp"
#include "framework/backend/ops/op_table.hpp"

namespace strata::ops {
namespace {

using cpu_detail::Acc32;
using cpu_detail::block_rows;
using cpu_detail::In32;
using cpu_detail::Out32;
using cpu_detail::workspace_like;

bool is16(const Tensor& t) { return t.defined() && t.dtype() != DType::f32; }

// The f32 block a 16-bit 2-D tensor's rows [r0, r0 + n) are widened into (cpu_table's rows32).
void rows32(const Tensor& t, std::int64_t n, Tensor& scratch) {
  if (t.dtype() != DType::f32 && !scratch.defined()) scratch = workspace_like(t, Shape{n, t.dim(1)});
}

// cpu_table's matmul_rows: op(A) = A, row blocks of A and C against the widened op(B).
void matmul_rows(const Tensor& A, const Tensor& B, const Tensor& C, std::int64_t M, std::int64_t N,
                 std::int64_t K) {
  In32 b32(B);
  const int R = block_rows(M, std::max(K, N));
  Tensor sa, sc;
  rows32(A, std::min<std::int64_t>(R, M), sa);
  if (C.dtype() != DType::f32) sc = workspace_like(C, Shape{R, N});
}

// cpu_table's matmul_reduce: A^T op(B), blocked over A's rows when A or B is 16-bit.
void matmul_reduce(const Tensor& A, const Tensor& B, const Tensor& C, bool tb, float beta,
                   std::int64_t M, std::int64_t N, std::int64_t K) {
  const bool blocked = !tb && (is16(A) || is16(B));
  std::optional<Acc32> acc;
  std::optional<Out32> o;
  if (C.dtype() != DType::f32) {
    if (beta == 1.0f) acc.emplace(C);
    else o.emplace(C);
  }
  if (!blocked) {
    In32 a32(A), b32(B);
    return;
  }
  const std::int64_t n = std::min<std::int64_t>(block_rows(K, std::max(M, N)), K);
  Tensor sa, sb;
  rows32(A, n, sa);
  rows32(B, n, sb);
}

void matmul(const Tensor& A, const Tensor& B, const Tensor& C, bool ta, bool tb, float,
            float beta) {
  if (!is16(A) && !is16(B) && !is16(C)) return;
  const std::int64_t M = C.dim(0), N = C.dim(1), K = ta ? A.dim(0) : A.dim(1);
  if (!ta) matmul_rows(A, B, C, M, N, K);
  else matmul_reduce(A, B, C, tb, beta, M, N, K);
}

// As the CPU table: a 16-bit weight is read in place, an f32 copy only of other dtypes' weights.
bool weight16(const Tensor& W) { return W.dtype() == DType::bf16 || W.dtype() == DType::f16; }

void linear_forward(const Tensor& x, const Tensor& W, const Tensor& b, const Tensor& y) {
  In32 x32(x), w32(weight16(W) ? Tensor() : W), b32(b);
  Out32 y32(y);
}

void linear_backward(const Tensor& x, const Tensor& W, const Tensor& dy, const Tensor& dx,
                     const Tensor& dW, const Tensor& db) {
  In32 x32(x), w32(weight16(W) ? Tensor() : W), dy32(dy);
  Out32 dx32(dx);
  Acc32 dw32(dW), db32(db);
}

void layernorm_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                       const Tensor&, const Tensor&, float) {
  In32 x32(x), w32(w), b32(b);
  Out32 y32(y);
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor&,
                        const Tensor&, const Tensor& dx, const Tensor& dw, const Tensor& db) {
  In32 dy32(dy), x32(x), w32(w);
  Out32 dx32(dx);
  Acc32 dw32(dw), db32(db);
}

void gelu_forward(const Tensor&, const Tensor&) {}
void gelu_backward(const Tensor&, const Tensor&, const Tensor&) {}

void attention_forward(const Tensor& qkv, const Tensor& o, const Tensor&, int) {
  In32 q32(qkv);
  Out32 o32(o);
}

void attention_backward(const Tensor& qkv, const Tensor& o, const Tensor&, const Tensor& dout,
                        const Tensor& dqkv, int) {
  In32 q32(qkv), o32(o), d32(dout);
  Out32 dq32(dqkv);
}

void embedding_forward(const Tensor&, const Tensor& wte, const Tensor& wpe, const Tensor& o,
                       std::int64_t, ops::TokenCheck) {
  In32 e32(wte), p32(wpe);
  Out32 o32(o);
}

void embedding_backward(const Tensor&, const Tensor& dout, const Tensor& dwte, const Tensor& dwpe,
                        std::int64_t, ops::TokenCheck) {
  In32 d32(dout);
  Acc32 e32(dwte), p32(dwpe);
}

void cross_entropy_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&) {}
void cross_entropy_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, float) {}
void row_max(const Tensor&, const Tensor&) {}
void row_sum_exp(const Tensor&, const Tensor&, const Tensor&) {}
void target_logit(const Tensor&, const Tensor&, std::int64_t, const Tensor&) {}
void cross_entropy_backward_slice(const Tensor&, const Tensor&, const Tensor&, std::int64_t, float,
                                  const Tensor&) {}
void combine_cross_entropy(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                           const Tensor&, const Tensor&) {}
void add(const Tensor&, const Tensor&, const Tensor&) {}
void add_inplace(const Tensor&, const Tensor&) {}
void scale_inplace(const Tensor&, float) {}
void cast(const Tensor&, const Tensor&) {}
double sum_squares(const Tensor&) { return 0.0; }
bool has_inf_or_nan(const Tensor&) { return false; }

void adamw_step(const Tensor&, const Tensor& grad, const Tensor&, const Tensor&,
                const optim::AdamWHyper&, std::int64_t, float, const Tensor&) {
  In32 g32(grad);
}

void sgd_step(const Tensor&, const Tensor& grad, const Tensor&, const optim::SGDHyper&,
              std::int64_t, float, const Tensor&) {
  In32 g32(grad);
}

void lion_step(const Tensor&, const Tensor& grad, const Tensor&, const optim::LionHyper&,
               std::int64_t, float, const Tensor&) {
  In32 g32(grad);
}

// The 8-bit kernels widen 16-bit gradients block by block: nothing to charge.
void adamw8bit_step(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                    const Tensor&, std::span<const optim::DecayRun>, const optim::AdamWHyper&,
                    std::int64_t, float, const Tensor&) {}
void lion8bit_step(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                   std::span<const optim::DecayRun>, const optim::LionHyper&, std::int64_t, float,
                   const Tensor&) {}

// Adafactor's and LAMB's kernels read f32 operands and sum into f64 tensors: nothing to charge.
void sum_squares_add(const Tensor&, const Tensor&) {}
void adafactor_sq_sums(const Tensor&, std::int64_t, std::int64_t, float, float, const Tensor&,
                       const Tensor&) {}
void adafactor_ema(const Tensor&, const Tensor&, double, double) {}
void adafactor_factors(const Tensor&, const Tensor&, const Tensor&, const Tensor&) {}
void adafactor_factored_sumsq(const Tensor&, std::int64_t, std::int64_t, float, const Tensor&,
                              const Tensor&, const Tensor&) {}
void adafactor_vector_sumsq(const Tensor&, const Tensor&, float, float, double, const Tensor&) {}
void adafactor_apply_factored(const Tensor&, const Tensor&, const Tensor&, std::int64_t,
                              std::int64_t, const Tensor&, const Tensor&,
                              const optim::AdafactorHyper&, const optim::AdafactorScalars&,
                              const Tensor&) {}
void adafactor_apply_vector(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                            const optim::AdafactorHyper&, const optim::AdafactorScalars&,
                            const Tensor&) {}
void lamb_sums(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const optim::LambHyper&,
               float, const Tensor&) {}
void lamb_apply(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const optim::LambHyper&,
                float, double, double, const Tensor&) {}

// 1-bit Adam's and LAMB's kernels read and write f32 operands (sums into f64 tensors): the CPU's
// allocate nothing, so nothing is charged.
void onebit_momentum(const Tensor&, const Tensor&, const optim::OneBitAdamHyper&, float) {}
void onebit_apply(const Tensor&, const Tensor&, const Tensor&, const optim::OneBitAdamHyper&,
                  double, const Tensor&) {}
void onebit_lamb_sumsq(const Tensor&, const Tensor&) {}
void onebit_lamb_momentum(const Tensor&, const Tensor&, const Tensor&,
                          const optim::OneBitLambHyper&, float, double) {}
void onebit_lamb_after_exchange(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                const Tensor&, const optim::OneBitLambHyper&, double, double,
                                const Tensor&) {}
void onebit_lamb_apply(const Tensor&, const Tensor&, const Tensor&, const optim::OneBitLambHyper&,
                       double, double, const Tensor&) {}

}  // namespace

const OpTable& meta_op_table() {
  static const OpTable t = STRATA_OP_TABLE("meta");
  return t;
}

}  // namespace strata::ops
