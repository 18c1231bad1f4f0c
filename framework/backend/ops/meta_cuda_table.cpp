// The meta-CUDA op table (meta_cuda(), framework/core/meta_device.hpp): ops on meta tensors
// compute nothing, reductions return 0 and "no inf/NaN", and what the CUDA backend's ops would
// allocate is charged, op by op, in the same order and for the same scope as the CUDA op layer
// (framework/backend/cuda/ops/*_op.cpp): 16-bit products run directly, an operand of a mixed
// product is widened to f32 for the op, an f32 D for a C the product cannot write, linear's db
// strips, layernorm backward's partials, attention backward's D, cross-entropy's f64 row losses,
// embedding's token flag and sort scratch, the reductions' partials and flags, the 8-bit
// optimizers' decay runs beyond kQ8InlineRuns, Adafactor's and LAMB's chunk partials. Every size
// comes from cuda/ops/workspace_sizes.hpp, the functions the CUDA ops size their workspaces with.
// The memory planner runs a GPU job's step on this table (parallel/plan/planner.cpp);
// tests/cuda_emu/test_meta_cuda.cpp checks, op by op and dtype by dtype, that it charges what the
// CUDA op layer allocates on the CPU emulator.
//
// Two figures only the CUDA runtime knows come from MetaCudaQueries (op_table.hpp) when a GPU is
// there: the device's compute capability (before 8.0, bf16 products are widened to f32) and CUB's
// temporary storage for embedding backward's sort. Without one, sm_80 or later is assumed and CUB's
// storage is charged at embedding_dwte_cub_bound, an upper bound.
#include "framework/backend/cuda/ops/workspace_sizes.hpp"
#include "framework/backend/ops/op_table.hpp"
#include "framework/core/error.hpp"

namespace strata::ops {
namespace {

using cuda_ops::DT;

MetaCudaQueries g_queries;

DT dt_of(const Tensor& t) {
  switch (t.dtype()) {
    case DType::bf16: return DT::bf16;
    case DType::f16: return DT::f16;
    default: return DT::f32;
  }
}

// common.cpp's workspace(): a tensor of `shape` on like's device and ledger, device tier.
Tensor workspace(const Tensor& like, const Shape& shape, DType dtype = DType::f32) {
  TensorOptions o{like.device(), Tier::device, Category::workspace, like.storage()->ledger()};
  return Tensor::empty(shape, dtype, o);
}

bool bf16_products() {
  const int major = g_queries.compute_capability_major ? g_queries.compute_capability_major() : -1;
  return major < 0 || major >= 8;
}

// gemm_op.cpp's Operand: the tensor and, made on first use and kept for the op, its f32 widening.
class Operand {
 public:
  explicit Operand(const Tensor& t) : t_(t) {}
  DT dtype() const { return dt_of(t_); }
  void widen() {
    if (!wide_.defined() && t_.dtype() != DType::f32) wide_ = workspace(t_, t_.shape());
  }

 private:
  Tensor t_, wide_;
};

// gemm_op.cpp's product(): what it allocates for C[M,N] = alpha op(A) op(B) + beta C (+ bias).
void product(Operand& A, Operand& B, const Tensor& C, float beta, const Tensor& bias,
             std::int64_t M, std::int64_t N, std::int64_t K) {
  if (M == 0 || N == 0 || K == 0) return;  // an empty C, or C = beta C (+ bias) in place
  const cuda_ops::GemmPlan plan = cuda_ops::gemm_plan(
      A.dtype(), B.dtype(), dt_of(C), beta, bias.defined(), bias.defined() ? dt_of(bias) : DT::f32,
      bf16_products());
  if (plan.widen_a) A.widen();
  if (plan.widen_b) B.widen();
  Tensor d;
  if (plan.f32_d) d = workspace(C, C.shape());
}

void matmul(const Tensor& A, const Tensor& B, const Tensor& C, bool ta, bool, float,
            float beta) {
  const std::int64_t M = C.dim(0), N = C.dim(1), K = ta ? A.dim(0) : A.dim(1);
  Operand a(A), b(B);
  product(a, b, C, beta, Tensor(), M, N, K);
}

void linear_forward(const Tensor& x, const Tensor& W, const Tensor& b, const Tensor& y) {
  const std::int64_t N = x.dim(0), in = x.dim(1), out = W.dim(0);
  Operand xo(x), wo(W);
  product(xo, wo, y, 0.0f, b, N, out, in);
}

void linear_backward(const Tensor& x, const Tensor& W, const Tensor& dy, const Tensor& dx,
                     const Tensor& dW, const Tensor& db) {
  const std::int64_t N = x.dim(0), in = x.dim(1), out = W.dim(0);
  Operand xo(x), wo(W), dyo(dy);
  if (dx.defined()) product(dyo, wo, dx, 0.0f, Tensor(), N, in, out);
  product(dyo, xo, dW, 1.0f, Tensor(), out, in, N);
  if (db.defined() && N > 0 && out > 0) {
    Tensor scratch = workspace(dy, Shape{cuda_ops::column_sum_plan(N, out).strips * out});
  }
}

void layernorm_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                       const Tensor&, float) {}

void layernorm_backward(const Tensor&, const Tensor& x, const Tensor&, const Tensor&,
                        const Tensor&, const Tensor&, const Tensor& dw, const Tensor& db) {
  const std::int64_t floats = cuda_ops::layernorm_backward_partial_floats(x.dim(0), x.dim(1));
  Tensor partial;
  if ((dw.defined() || db.defined()) && floats > 0) partial = workspace(x, Shape{floats});
}

void gelu_forward(const Tensor&, const Tensor&) {}
void gelu_backward(const Tensor&, const Tensor&, const Tensor&) {}
void attention_forward(const Tensor&, const Tensor&, const Tensor&, int) {}

void attention_backward(const Tensor& qkv, const Tensor&, const Tensor&, const Tensor&,
                        const Tensor&, int n_head) {
  const std::int64_t B = qkv.dim(0), T = qkv.dim(1);
  if (B == 0 || T == 0) return;
  Tensor D = workspace(qkv, Shape{B * n_head * T});
}

// embedding_op.cpp's check_tokens: an 8-byte flag for the duration of the check.
void token_flag(const Tensor& tokens) { Tensor flag = workspace(tokens, Shape{1}, DType::i64); }

void embedding_forward(const Tensor& tokens, const Tensor&, const Tensor&, const Tensor&,
                       std::int64_t, ops::TokenCheck check) {
  if (check == ops::TokenCheck::in_op) token_flag(tokens);
}

void embedding_backward(const Tensor& tokens, const Tensor& dout, const Tensor& dwte, const Tensor&,
                        std::int64_t, ops::TokenCheck check) {
  if (dwte.defined() && check == ops::TokenCheck::in_op) token_flag(tokens);
  const std::int64_t N = tokens.numel(), C = dout.dim(1);
  if (!dwte.defined() || N <= 0 || C <= 0 || dwte.dim(0) <= 0) return;
  std::size_t bytes = 0;
  if (!g_queries.embedding_dwte_scratch_bytes ||
      !g_queries.embedding_dwte_scratch_bytes(N, dwte.dim(0), &bytes))
    bytes = cuda_ops::embedding_dwte_scratch_total(
        N, cuda_ops::embedding_dwte_cub_bound(N, cuda_ops::embedding_key_bits(dwte.dim(0))));
  Tensor scratch = workspace(dout, Shape{static_cast<std::int64_t>(bytes)}, DType::u8);
}

void cross_entropy_forward(const Tensor& logits, const Tensor&, const Tensor&, const Tensor&) {
  const std::int64_t N = logits.dim(0);
  if (N == 0) return;
  Tensor row_loss = workspace(logits, Shape{N}, DType::f64);
}

void cross_entropy_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, float) {}
void row_max(const Tensor&, const Tensor&) {}
void row_sum_exp(const Tensor&, const Tensor&, const Tensor&) {}
void target_logit(const Tensor&, const Tensor&, std::int64_t, const Tensor&) {}
void cross_entropy_backward_slice(const Tensor&, const Tensor&, const Tensor&, std::int64_t, float,
                                  const Tensor&) {}
// The CUDA op's workspace (cross_entropy_op.cpp): a double per row.
void combine_cross_entropy(const Tensor& max, const Tensor&, const Tensor&, const Tensor&,
                           const Tensor&, const Tensor&) {
  const std::int64_t N = max.numel();
  if (N == 0) return;
  Tensor row_loss = workspace(max, Shape{N}, DType::f64);
}
void add(const Tensor&, const Tensor&, const Tensor&) {}
void add_inplace(const Tensor&, const Tensor&) {}
void scale_inplace(const Tensor&, float) {}
void cast(const Tensor&, const Tensor&) {}

double sum_squares(const Tensor& x) {
  const std::int64_t n = x.numel();
  if (n == 0) return 0.0;
  Tensor partials = workspace(x, Shape{cuda_ops::sum_squares_partials(n, dt_of(x))}, DType::f64);
  Tensor result = workspace(x, Shape{1}, DType::f64);
  return 0.0;
}

bool has_inf_or_nan(const Tensor& x) {
  if (x.numel() == 0) return false;
  Tensor flag = workspace(x, Shape{1}, DType::i32);
  return false;
}

// The updates read every operand in its own dtype: nothing to charge.
void adamw_step(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                const optim::AdamWHyper&, std::int64_t, float, const Tensor&) {}
void sgd_step(const Tensor&, const Tensor&, const Tensor&, const optim::SGDHyper&, std::int64_t,
              float, const Tensor&) {}
void lion_step(const Tensor&, const Tensor&, const Tensor&, const optim::LionHyper&, std::int64_t,
               float, const Tensor&) {}

// optimizer_op.cpp's q8_run_args: the decay runs beyond kQ8InlineRuns in a workspace.
void q8_runs(const Tensor& master, std::size_t runs) {
  if (master.numel() == 0) return;
  const std::int64_t bytes = cuda_ops::q8_runs_workspace_bytes(static_cast<std::int64_t>(runs));
  Tensor buf;
  if (bytes > 0) buf = workspace(master, Shape{bytes}, DType::u8);
}

void adamw8bit_step(const Tensor& master, const Tensor&, const Tensor&, const Tensor&,
                    const Tensor&, const Tensor&, std::span<const optim::DecayRun> runs,
                    const optim::AdamWHyper&, std::int64_t, float, const Tensor&) {
  q8_runs(master, runs.size());
}

void lion8bit_step(const Tensor& master, const Tensor&, const Tensor&, const Tensor&,
                   std::span<const optim::DecayRun> runs, const optim::LionHyper&, std::int64_t,
                   float, const Tensor&) {
  q8_runs(master, runs.size());
}

// shard_sum_updates_op.cpp: the chunk partials of a sum, for the op.
void partials(const Tensor& like, std::int64_t n) {
  Tensor keep = workspace(like, Shape{n}, DType::f64);
}

void sum_squares_add(const Tensor& x, const Tensor&) {
  if (x.numel() > 0) partials(x, cuda_ops::sum_squares_add_partials(x.numel()));
}
void adafactor_sq_sums(const Tensor&, std::int64_t, std::int64_t, float, float, const Tensor&,
                       const Tensor&) {}
void adafactor_ema(const Tensor&, const Tensor&, double, double) {}
void adafactor_factors(const Tensor&, const Tensor&, const Tensor&, const Tensor&) {}
void adafactor_factored_sumsq(const Tensor& grad, std::int64_t, std::int64_t, float, const Tensor&,
                              const Tensor&, const Tensor&) {
  if (grad.numel() > 0) partials(grad, cuda_ops::adafactor_partials(grad.numel()));
}
void adafactor_vector_sumsq(const Tensor& grad, const Tensor&, float, float, double,
                            const Tensor&) {
  if (grad.numel() > 0) partials(grad, cuda_ops::adafactor_partials(grad.numel()));
}
void adafactor_apply_factored(const Tensor&, const Tensor&, const Tensor&, std::int64_t,
                              std::int64_t, const Tensor&, const Tensor&,
                              const optim::AdafactorHyper&, const optim::AdafactorScalars&,
                              const Tensor&) {}
void adafactor_apply_vector(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                            const optim::AdafactorHyper&, const optim::AdafactorScalars&,
                            const Tensor&) {}
void lamb_sums(const Tensor& param, const Tensor&, const Tensor&, const Tensor&,
               const optim::LambHyper&, float, const Tensor&) {
  if (param.numel() > 0) partials(param, cuda_ops::lamb_partials(param.numel()));
}
void lamb_apply(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const optim::LambHyper&,
                float, double, double, const Tensor&) {}

// 1-bit Adam's and LAMB's kernels read and write f32 operands (sums into f64 tensors): the CUDA
// table has no kernels for them (its entries fail; the 1-bit optimizers refuse a GPU), and their
// CPU kernels allocate nothing: nothing is charged.
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

void set_meta_cuda_queries(const MetaCudaQueries& q) { g_queries = q; }
const MetaCudaQueries& meta_cuda_queries() { return g_queries; }

const OpTable& meta_cuda_op_table() {
  static const OpTable t = STRATA_OP_TABLE("meta-cuda");
  return t;
}

}  // namespace strata::ops
