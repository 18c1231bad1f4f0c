// The CPU backend's op table: adapters from tensors to the f32 kernels of backend/cpu and the
// optimizer kernels of framework/optim. 16-bit operands are widened to f32 (cpu_f32.hpp) or, for
// the elementwise and cross-entropy ops, chunk by chunk (backend/cpu/mixed_kernels.hpp); products
// whose operands include a 16-bit activation are computed in row blocks, so that no f32 copy of a
// [N, vocabulary] matrix is ever made. All-f32 operands take exactly the f32 kernels' path.
#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/backend/cpu/mixed_kernels.hpp"
#include "framework/backend/ops/cpu_f32.hpp"
#include "framework/backend/ops/op_table.hpp"
#include "framework/core/convert.hpp"
#include "framework/precision/overflow.hpp"

namespace strata::ops {
namespace {

using cpu_detail::Acc32;
using cpu_detail::In32;
using cpu_detail::Out32;
using cpu_detail::block_rows;
using cpu_detail::workspace_like;

int dim(const Tensor& t, int d) { return static_cast<int>(t.dim(d)); }
cpu::FloatBuf buf(const Tensor& t) { return {t.raw(), t.dtype()}; }
cpu::FloatOut out(const Tensor& t) { return {t.raw(), t.dtype()}; }
const std::int32_t* i32(const Tensor& t) { return static_cast<const std::int32_t*>(t.raw()); }
float* f32(const Tensor& t) { return static_cast<float*>(t.raw()); }
bool is16(const Tensor& t) { return t.defined() && t.dtype() != DType::f32; }

// Rows [r0, r0 + n) of a 2-D tensor as f32: a pointer into it, or widened into `scratch`.
const float* rows32(const Tensor& t, std::int64_t r0, std::int64_t n, Tensor& scratch) {
  const std::int64_t cols = t.dim(1);
  if (t.dtype() == DType::f32) return static_cast<const float*>(t.raw()) + r0 * cols;
  if (!scratch.defined()) scratch = workspace_like(t, Shape{n, cols});
  convert(static_cast<const char*>(t.raw()) + r0 * cols * static_cast<std::int64_t>(dtype_size(t.dtype())),
          t.dtype(), scratch.raw(), DType::f32, static_cast<std::size_t>(n * cols));
  return static_cast<const float*>(scratch.raw());
}

void store_rows(const float* src, const Tensor& t, std::int64_t r0, std::int64_t n) {
  const std::int64_t cols = t.dim(1);
  convert(src, DType::f32,
          static_cast<char*>(t.raw()) + r0 * cols * static_cast<std::int64_t>(dtype_size(t.dtype())),
          t.dtype(), static_cast<std::size_t>(n * cols));
}

// C = alpha op(A) op(B) + beta C, op(A) = A: row blocks of A and C against the whole of op(B).
void matmul_rows(const Tensor& A, const Tensor& B, const Tensor& C, bool tb, float alpha,
                 float beta, int M, int N, int K) {
  In32 b32(B);
  const int R = block_rows(M, std::max(K, N));
  Tensor sa, sc;
  for (int r0 = 0; r0 < M; r0 += R) {
    const int n = std::min(R, M - r0);
    const float* a = rows32(A, r0, n, sa);
    float* c;
    if (C.dtype() == DType::f32) {
      c = f32(C) + static_cast<std::int64_t>(r0) * N;
    } else {
      if (!sc.defined()) sc = workspace_like(C, Shape{R, N});
      c = f32(sc);
      if (beta != 0.0f) rows32(C, r0, n, sc);
    }
    cpu::matmul(a, b32.get(), c, n, N, K, false, tb, alpha, beta);
    if (C.dtype() != DType::f32) store_rows(c, C, r0, n);
  }
}

// C = alpha A^T op(B) + beta C with A [K, M]: the reduction runs over A's rows; with 16-bit A or
// B (and B not transposed) it runs in blocks of rows, C accumulating across blocks. An empty
// reduction (K = 0) is not blocked: there are no blocks, and C must still become beta C.
void matmul_reduce(const Tensor& A, const Tensor& B, const Tensor& C, bool tb, float alpha,
                   float beta, int M, int N, int K) {
  const bool blocked = !tb && K > 0 && (is16(A) || is16(B));
  // C in f32: itself; a 16-bit C with beta 1 accumulates into a zeroed workspace added on commit
  // (the sum rounded once, as gradient accumulation does); otherwise a workspace holding beta*C.
  std::optional<Acc32> acc;
  std::optional<Out32> o;
  float* c;
  float b0 = beta;
  if (C.dtype() == DType::f32) {
    c = f32(C);
  } else if (beta == 1.0f) {
    acc.emplace(C);
    c = acc->get();
  } else {
    o.emplace(C);
    c = o->get();
    if (beta != 0.0f) convert(C.raw(), C.dtype(), c, DType::f32, static_cast<std::size_t>(C.numel()));
  }
  if (!blocked) {
    In32 a32(A), b32(B);
    cpu::matmul(a32.get(), b32.get(), c, M, N, K, true, tb, alpha, b0);
  } else {
    const int R = block_rows(K, std::max(M, N));
    Tensor sa, sb;
    for (int k0 = 0; k0 < K; k0 += R) {
      const int n = std::min(R, K - k0);
      cpu::matmul(rows32(A, k0, n, sa), rows32(B, k0, n, sb), c, M, N, n, true, false, alpha,
                  k0 == 0 ? b0 : 1.0f);
    }
  }
  if (acc) acc->commit();
  if (o) o->commit();
}

void matmul(const Tensor& A, const Tensor& B, const Tensor& C, bool ta, bool tb, float alpha,
            float beta) {
  const int M = dim(C, 0), N = dim(C, 1), K = ta ? dim(A, 0) : dim(A, 1);
  if (!is16(A) && !is16(B) && !is16(C)) {
    cpu::matmul(f32(A), f32(B), f32(C), M, N, K, ta, tb, alpha, beta);
    return;
  }
  if (!ta) matmul_rows(A, B, C, tb, alpha, beta, M, N, K);
  else matmul_reduce(A, B, C, tb, alpha, beta, M, N, K);
}

// A 16-bit weight is read in place (widened where the product packs it), never copied to f32.
bool weight16(const Tensor& W) { return W.dtype() == DType::bf16 || W.dtype() == DType::f16; }

void linear_forward(const Tensor& x, const Tensor& W, const Tensor& b, const Tensor& y) {
  In32 x32(x), w32(weight16(W) ? Tensor() : W), b32(b);
  Out32 y32(y);
  if (weight16(W))
    cpu::linear_forward_w16(x32.get(), static_cast<const std::uint16_t*>(W.raw()), W.dtype(),
                            b32.get(), y32.get(), dim(x, 0), dim(x, 1), dim(W, 0));
  else
    cpu::linear_forward(x32.get(), w32.get(), b32.get(), y32.get(), dim(x, 0), dim(x, 1), dim(W, 0));
  y32.commit();
}

void linear_backward(const Tensor& x, const Tensor& W, const Tensor& dy, const Tensor& dx,
                     const Tensor& dW, const Tensor& db) {
  In32 x32(x), w32(weight16(W) ? Tensor() : W), dy32(dy);
  Out32 dx32(dx);
  // 16-bit gradients: the kernel writes dW and db into unzeroed workspaces (beta 0), which
  // commit() then adds in; f32 ones (or a mix) it accumulates into directly.
  auto sixteen = [](const Tensor& t) { return !t.defined() || t.dtype() != DType::f32; };
  const bool overwrite = sixteen(dW) && sixteen(db);
  Acc32 dw32(dW, overwrite), db32(db, overwrite);
  if (weight16(W))
    cpu::linear_backward_w16(x32.get(), static_cast<const std::uint16_t*>(W.raw()), W.dtype(),
                             dy32.get(), dx32.get(), dw32.get(), db32.get(), dim(x, 0), dim(x, 1),
                             dim(W, 0), !overwrite);
  else
    cpu::linear_backward(x32.get(), w32.get(), dy32.get(), dx32.get(), dw32.get(), db32.get(),
                         dim(x, 0), dim(x, 1), dim(W, 0), !overwrite);
  dx32.commit();
  dw32.commit();
  db32.commit();
}

void layernorm_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd, float eps) {
  In32 x32(x), w32(w), b32(b);
  Out32 y32(y);
  cpu::layernorm_forward(x32.get(), w32.get(), b32.get(), y32.get(), f32(mean), f32(rstd),
                         dim(x, 0), dim(x, 1), eps);
  y32.commit();
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, const Tensor& dw, const Tensor& db) {
  In32 dy32(dy), x32(x), w32(w);
  Out32 dx32(dx);
  Acc32 dw32(dw), db32(db);
  cpu::layernorm_backward(dy32.get(), x32.get(), w32.get(), f32(mean), f32(rstd), dx32.get(),
                          dw32.get(), db32.get(), dim(x, 0), dim(x, 1));
  dx32.commit();
  dw32.commit();
  db32.commit();
}

void gelu_forward(const Tensor& x, const Tensor& y) {
  cpu::gelu_forward(buf(x), out(y), static_cast<std::size_t>(x.numel()));
}

void gelu_backward(const Tensor& x, const Tensor& dy, const Tensor& dx) {
  cpu::gelu_backward(buf(x), buf(dy), out(dx), static_cast<std::size_t>(x.numel()));
}

void attention_forward(const Tensor& qkv, const Tensor& o, const Tensor& lse, int n_head) {
  In32 q32(qkv);
  Out32 o32(o);
  cpu::attention_forward(q32.get(), o32.get(), f32(lse), dim(qkv, 0), dim(qkv, 1),
                         dim(qkv, 2) / 3, n_head);
  o32.commit();
}

void attention_backward(const Tensor& qkv, const Tensor& o, const Tensor& lse, const Tensor& dout,
                        const Tensor& dqkv, int n_head) {
  In32 q32(qkv), o32(o), d32(dout);
  Out32 dq32(dqkv);
  cpu::attention_backward(q32.get(), o32.get(), f32(lse), d32.get(), dq32.get(), dim(qkv, 0),
                          dim(qkv, 1), dim(qkv, 2) / 3, n_head);
  dq32.commit();
}

// Every token in [0, V) for a whole table (vocab_start < 0), >= 0 for a tensor-parallel slice
// (tokens outside the slice's rows contribute nothing there): the embedding kernels index rows.
void check_tokens(const char* op, const Tensor& tokens, int V, std::int64_t vocab_start) {
  const std::int32_t* t = i32(tokens);
  const std::int64_t hi = vocab_start < 0 ? V : std::numeric_limits<std::int32_t>::max() + 1LL;
  for (std::int64_t i = 0; i < tokens.numel(); ++i)
    STRATA_CHECK(t[i] >= 0 && t[i] < hi, "ops",
                 "{}: token {} at position {} is outside the vocabulary [0, {})", op, t[i], i, V);
}

// The CPU checks even when the caller has (a loop over the tokens, no wait for anything).
void embedding_forward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                       const Tensor& o, std::int64_t vocab_start, ops::TokenCheck) {
  check_tokens("embedding_forward", tokens, dim(wte, 0), vocab_start);
  In32 e32(wte), p32(wpe);
  Out32 o32(o);
  cpu::embedding_forward(i32(tokens), e32.get(), p32.get(), o32.get(), dim(tokens, 0),
                         dim(tokens, 1), dim(wte, 1), std::max<std::int64_t>(vocab_start, 0),
                         dim(wte, 0));
  o32.commit();
}

void embedding_backward(const Tensor& tokens, const Tensor& dout, const Tensor& dwte,
                        const Tensor& dwpe, std::int64_t vocab_start, ops::TokenCheck) {
  if (dwte.defined()) check_tokens("embedding_backward", tokens, dim(dwte, 0), vocab_start);
  In32 d32(dout);
  Acc32 e32(dwte), p32(dwpe);
  cpu::embedding_backward(i32(tokens), d32.get(), e32.get(), p32.get(), dim(tokens, 0),
                          dim(tokens, 1), dim(dout, 1), std::max<std::int64_t>(vocab_start, 0),
                          dwte.defined() ? dim(dwte, 0) : 0);
  e32.commit();
  p32.commit();
}

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                           const Tensor& sum) {
  sum.data<double>()[0] = cpu::cross_entropy_forward(buf(logits), i32(targets), f32(lse),
                                                     dim(logits, 0), dim(logits, 1));
}

void cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                            const Tensor& dlogits, float scale) {
  cpu::cross_entropy_backward(buf(logits), f32(lse), i32(targets), out(dlogits), dim(logits, 0),
                              dim(logits, 1), scale);
}

void row_max(const Tensor& logits, const Tensor& o) {
  cpu::row_max(buf(logits), f32(o), dim(logits, 0), dim(logits, 1));
}

void row_sum_exp(const Tensor& logits, const Tensor& max, const Tensor& o) {
  cpu::row_sum_exp(buf(logits), f32(max), f32(o), dim(logits, 0), dim(logits, 1));
}

void target_logit(const Tensor& logits, const Tensor& targets, std::int64_t start,
                  const Tensor& o) {
  cpu::target_logit(buf(logits), i32(targets), start, f32(o), dim(logits, 0), dim(logits, 1));
}

void cross_entropy_backward_slice(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                                  std::int64_t start, float scale, const Tensor& dlogits) {
  cpu::cross_entropy_backward_slice(buf(logits), f32(lse), i32(targets), start, scale,
                                    out(dlogits), dim(logits, 0), dim(logits, 1));
}

void combine_cross_entropy(const Tensor& max, const Tensor& sum_exp, const Tensor& target,
                           const Tensor& targets, const Tensor& lse, const Tensor& sum) {
  sum.data<double>()[0] = cpu::combine_cross_entropy(f32(max), f32(sum_exp), f32(target),
                                                     i32(targets), f32(lse), max.numel());
}

void add(const Tensor& a, const Tensor& b, const Tensor& o) {
  cpu::add(buf(a), buf(b), out(o), static_cast<std::size_t>(a.numel()));
}

void add_inplace(const Tensor& a, const Tensor& b) {
  cpu::add_inplace(out(a), buf(b), static_cast<std::size_t>(a.numel()));
}

void scale_inplace(const Tensor& a, float s) {
  cpu::scale_inplace(out(a), s, static_cast<std::size_t>(a.numel()));
}

void cast(const Tensor& src, const Tensor& dst) {
  convert(src.raw(), src.dtype(), dst.raw(), dst.dtype(), static_cast<std::size_t>(src.numel()));
}

double sum_squares(const Tensor& x) {
  const auto n = static_cast<std::size_t>(x.numel());
  if (x.dtype() == DType::f32) return cpu::sum_squares(f32(x), n);
  return cpu::sum_squares(static_cast<const std::uint16_t*>(x.raw()), x.dtype(), n);
}

bool has_inf_or_nan(const Tensor& x) {
  const auto n = static_cast<std::size_t>(x.numel());
  if (x.dtype() == DType::f32) return precision::has_inf_or_nan(f32(x), n);
  return precision::has_inf_or_nan(static_cast<const std::uint16_t*>(x.raw()), n, x.dtype());
}

std::uint16_t* p16_or_null(const Tensor& param16) {
  return param16.defined() ? static_cast<std::uint16_t*>(param16.raw()) : nullptr;
}
DType dt16_of(const Tensor& param16) { return param16.defined() ? param16.dtype() : DType::bf16; }

void adamw_step(const Tensor& master, const Tensor& grad, const Tensor& m, const Tensor& v,
                const optim::AdamWHyper& h, std::int64_t step, float grad_scale,
                const Tensor& param16) {
  In32 g32(grad);
  const auto n = static_cast<std::size_t>(master.numel());
  if (param16.defined())
    optim::adamw_step_out16(f32(master), g32.get(), f32(m), f32(v), n, h, step, grad_scale,
                            static_cast<std::uint16_t*>(param16.raw()), param16.dtype());
  else
    optim::adamw_step(f32(master), g32.get(), f32(m), f32(v), n, h, step, grad_scale);
}

void sgd_step(const Tensor& master, const Tensor& grad, const Tensor& momentum,
              const optim::SGDHyper& h, std::int64_t step, float grad_scale,
              const Tensor& param16) {
  In32 g32(grad);
  const auto n = static_cast<std::size_t>(master.numel());
  float* buf = momentum.defined() ? f32(momentum) : nullptr;
  if (param16.defined())
    optim::sgd_step_out16(f32(master), g32.get(), buf, n, h, step, grad_scale,
                          static_cast<std::uint16_t*>(param16.raw()), param16.dtype());
  else
    optim::sgd_step(f32(master), g32.get(), buf, n, h, step, grad_scale);
}

void lion_step(const Tensor& master, const Tensor& grad, const Tensor& m,
               const optim::LionHyper& h, std::int64_t step, float grad_scale,
               const Tensor& param16) {
  In32 g32(grad);
  optim::lion_step(f32(master), g32.get(), f32(m), static_cast<std::size_t>(master.numel()), h,
                   step, grad_scale, p16_or_null(param16), dt16_of(param16));
}

// The 8-bit kernels widen a 16-bit gradient block by block themselves (no f32 copy).
void adamw8bit_step(const Tensor& master, const Tensor& grad, const Tensor& m_codes,
                    const Tensor& v_codes, const Tensor& m_absmax, const Tensor& v_absmax,
                    std::span<const optim::DecayRun> runs, const optim::AdamWHyper& h,
                    std::int64_t step, float grad_scale, const Tensor& param16) {
  const optim::Quant8Moments q{static_cast<std::uint8_t*>(m_codes.raw()),
                               static_cast<std::uint8_t*>(v_codes.raw()), f32(m_absmax),
                               f32(v_absmax)};
  optim::adamw8bit_step(f32(master), grad.raw(), q, static_cast<std::size_t>(master.numel()), runs,
                        h, step, grad_scale, p16_or_null(param16), dt16_of(param16), grad.dtype());
}

void lion8bit_step(const Tensor& master, const Tensor& grad, const Tensor& m_codes,
                   const Tensor& m_absmax, std::span<const optim::DecayRun> runs,
                   const optim::LionHyper& h, std::int64_t step, float grad_scale,
                   const Tensor& param16) {
  optim::lion8bit_step(f32(master), grad.raw(), static_cast<std::uint8_t*>(m_codes.raw()),
                       f32(m_absmax), static_cast<std::size_t>(master.numel()), runs, h, step,
                       grad_scale, p16_or_null(param16), dt16_of(param16), grad.dtype());
}

void sum_squares_add(const Tensor& x, const Tensor& out) {
  static_cast<double*>(out.raw())[0] += sum_squares(x);
}

// ---- Adafactor and LAMB: the host kernels of framework/optim, on the tensors' memory ----
double* f64(const Tensor& t) { return static_cast<double*>(t.raw()); }
std::size_t count(const Tensor& t) { return static_cast<std::size_t>(t.numel()); }

void adafactor_sq_sums(const Tensor& grad, std::int64_t first, std::int64_t cols,
                       float grad_scale, float eps1, const Tensor& row_sums,
                       const Tensor& col_sums) {
  optim::adafactor_sq_sums(f32(grad), first, count(grad), cols, grad_scale, eps1, f64(row_sums),
                           f64(col_sums));
}

void adafactor_ema(const Tensor& stat, const Tensor& sums, double n, double beta2) {
  optim::adafactor_ema(f32(stat), f64(sums), count(stat), n, beta2);
}

void adafactor_factors(const Tensor& row, const Tensor& col, const Tensor& row_factor,
                       const Tensor& col_factor) {
  optim::adafactor_factors(f32(row), row.numel(), f32(col), col.numel(), f32(row_factor),
                           f32(col_factor));
}

void adafactor_factored_sumsq(const Tensor& grad, std::int64_t first, std::int64_t cols,
                              float grad_scale, const Tensor& row_factor,
                              const Tensor& col_factor, const Tensor& out) {
  f64(out)[0] += optim::adafactor_factored_sumsq(f32(grad), first, count(grad), cols, grad_scale,
                                                 f32(row_factor), f32(col_factor));
}

void adafactor_vector_sumsq(const Tensor& grad, const Tensor& v, float grad_scale, float eps1,
                            double beta2, const Tensor& out) {
  f64(out)[0] += optim::adafactor_vector_sumsq(f32(grad), f32(v), count(grad), grad_scale, eps1,
                                               beta2);
}

void adafactor_apply_factored(const Tensor& param, const Tensor& grad, const Tensor& m,
                              std::int64_t first, std::int64_t cols, const Tensor& row_factor,
                              const Tensor& col_factor, const optim::AdafactorHyper& h,
                              const optim::AdafactorScalars& s, const Tensor& param16) {
  optim::adafactor_apply_factored(f32(param), f32(grad), m.defined() ? f32(m) : nullptr, first,
                                  count(param), cols, f32(row_factor), f32(col_factor), h, s,
                                  p16_or_null(param16), dt16_of(param16));
}

void adafactor_apply_vector(const Tensor& param, const Tensor& grad, const Tensor& v,
                            const Tensor& m, const optim::AdafactorHyper& h,
                            const optim::AdafactorScalars& s, const Tensor& param16) {
  optim::adafactor_apply_vector(f32(param), f32(grad), f32(v), m.defined() ? f32(m) : nullptr,
                                count(param), h, s, p16_or_null(param16), dt16_of(param16));
}

void lamb_sums(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
               const optim::LambHyper& h, float grad_scale, const Tensor& out) {
  const optim::LambSums ls =
      optim::lamb_sums(f32(param), f32(grad), f32(m), f32(v), count(param), h, grad_scale);
  f64(out)[0] += ls.param_sq;
  f64(out)[1] += ls.update_sq;
}

void lamb_apply(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                const optim::LambHyper& h, float grad_scale, double step_size, double trust_ratio,
                const Tensor& param16) {
  optim::lamb_apply(f32(param), f32(grad), f32(m), f32(v), count(param), h, grad_scale, step_size,
                    trust_ratio, p16_or_null(param16), dt16_of(param16));
}

// 1-bit Adam's and LAMB's kernels on f32 views, the arguments the optimizers passed before.
void onebit_momentum(const Tensor& m, const Tensor& grad, const optim::OneBitAdamHyper& h,
                     float grad_scale) {
  optim::onebit_momentum(f32(m), f32(grad), count(m), h, grad_scale);
}

void onebit_apply(const Tensor& param, const Tensor& m, const Tensor& v,
                  const optim::OneBitAdamHyper& h, double lr, const Tensor& param16) {
  optim::onebit_apply(f32(param), f32(m), f32(v), count(param), h, lr, p16_or_null(param16),
                      dt16_of(param16));
}

void onebit_lamb_sumsq(const Tensor& m, const Tensor& out) {
  f64(out)[0] += optim::onebit_lamb_sumsq(f32(m), count(m));
}

void onebit_lamb_momentum(const Tensor& m, const Tensor& m_last, const Tensor& grad,
                          const optim::OneBitLambHyper& h, float grad_scale, double scaling) {
  optim::onebit_lamb_momentum(f32(m), f32(m_last), f32(grad), count(m), h, grad_scale, scaling);
}

void onebit_lamb_after_exchange(const Tensor& m, const Tensor& m_last, const Tensor& v,
                                const Tensor& v_fresh, const Tensor& param,
                                const optim::OneBitLambHyper& h, double weight_decay,
                                double scaling, const Tensor& out) {
  const optim::OneBitLambSums s = optim::onebit_lamb_after_exchange(
      f32(m), f32(m_last), f32(v), f32(v_fresh), f32(param), count(m), h, weight_decay, scaling);
  double* o = f64(out);
  o[0] += s.prelim_sq;
  o[1] += s.update_sq;
  o[2] = std::max(o[2], s.denom_ratio);
}

void onebit_lamb_apply(const Tensor& param, const Tensor& m, const Tensor& v,
                       const optim::OneBitLambHyper& h, double weight_decay, double rate,
                       const Tensor& param16) {
  optim::onebit_lamb_apply(f32(param), f32(m), f32(v), count(param), h, weight_decay, rate,
                           p16_or_null(param16), dt16_of(param16));
}

}  // namespace

const OpTable& cpu_op_table() {
  static const OpTable t = STRATA_OP_TABLE("cpu");
  return t;
}

}  // namespace strata::ops
