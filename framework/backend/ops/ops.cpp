// The ops' argument checks and their dispatch to the device's table.
#include "framework/backend/ops/ops.hpp"

#include <array>
#include <cmath>
#include <initializer_list>

#include "framework/backend/ops/op_table.hpp"
#include "framework/core/meta_device.hpp"

namespace strata::ops {
namespace {

bool is_float(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

// A float operand: defined, f32/bf16/f16, contiguous, of the expected rank.
void check_float(const char* op, const char* name, const Tensor& t, std::size_t rank) {
  STRATA_CHECK(t.defined(), "ops", "{}: {} is undefined", op, name);
  STRATA_CHECK(is_float(t.dtype()), "ops", "{}: {} is {}, expected f32, bf16 or f16", op, name,
               dtype_name(t.dtype()));
  STRATA_CHECK(t.is_contiguous(), "ops", "{}: {} {} is not contiguous", op, name, t.shape().str());
  STRATA_CHECK(rank == 0 || t.rank() == rank, "ops", "{}: {} has shape {}, expected rank {}", op,
               name, t.shape().str(), rank);
}

void check_shape(const char* op, const char* name, const Tensor& t, const Shape& want) {
  STRATA_CHECK(t.shape() == want, "ops", "{}: {} has shape {}, expected {}", op, name,
               t.shape().str(), want.str());
}

void check_numel(const char* op, const char* name, const Tensor& t, std::int64_t n) {
  STRATA_CHECK(t.numel() == n, "ops", "{}: {} has {} elements ({}), expected {}", op, name,
               t.numel(), t.shape().str(), n);
}

void check_f32(const char* op, const char* name, const Tensor& t) {
  STRATA_CHECK(t.defined() && t.dtype() == DType::f32 && t.is_contiguous(), "ops",
               "{}: {} must be a contiguous f32 tensor{}", op, name,
               t.defined() ? fmt::format(" (it is {} {})", dtype_name(t.dtype()), t.shape().str())
                           : " (it is undefined)");
}

void check_f64(const char* op, const char* name, const Tensor& t, std::int64_t n) {
  STRATA_CHECK(t.defined() && t.dtype() == DType::f64 && t.is_contiguous(), "ops",
               "{}: {} must be a contiguous f64 tensor", op, name);
  check_numel(op, name, t, n);
}

void check_i32(const char* op, const char* name, const Tensor& t) {
  STRATA_CHECK(t.defined() && t.dtype() == DType::i32 && t.is_contiguous(), "ops",
               "{}: {} must be a contiguous i32 tensor{}", op, name,
               t.defined() ? fmt::format(" (it is {} {})", dtype_name(t.dtype()), t.shape().str())
                           : " (it is undefined)");
}

// Every defined operand on one device; returns that device's table. A plan on the meta device
// also takes host operands (the data's token batches stay real CPU tensors): a meta operand with
// cpu operands is a meta op, charged as the CUDA backend's when an operand is on meta_cuda() (the
// device tier of a GPU job's plan), else as the CPU backend's (meta_device.hpp).
const OpTable& table(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = nullptr;
  const Tensor* meta = nullptr;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    if (t->device().is_meta() && !(meta && is_meta_cuda(meta->device()))) meta = t;
    if (!first) first = t;
  }
  STRATA_CHECK(first, "ops", "{}: no operand is defined", op);
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    const bool same = meta ? (t->device().is_meta() || t->device().is_cpu())
                           : t->device() == first->device();
    STRATA_CHECK(same, "ops",
                 "{}: operands are on different devices ({} and {}); copy them to one device first",
                 op, (meta ? meta : first)->device().str(), t->device().str());
  }
  return op_table(meta ? meta->device() : first->device());
}

}  // namespace

void matmul(const Tensor& A, const Tensor& B, const Tensor& C, bool ta, bool tb, float alpha,
            float beta) {
  const char* op = "matmul";
  check_float(op, "A", A, 2);
  check_float(op, "B", B, 2);
  check_float(op, "C", C, 2);
  const std::int64_t M = ta ? A.dim(1) : A.dim(0), K = ta ? A.dim(0) : A.dim(1);
  const std::int64_t KB = tb ? B.dim(1) : B.dim(0), N = tb ? B.dim(0) : B.dim(1);
  STRATA_CHECK(K == KB, "ops", "matmul: inner extents differ: op(A) is [{}, {}], op(B) is [{}, {}]",
               M, K, KB, N);
  check_shape(op, "C", C, Shape{M, N});
  table(op, {&A, &B, &C}).matmul(A, B, C, ta, tb, alpha, beta);
}

void linear_forward(const Tensor& x, const Tensor& W, const Tensor& b, const Tensor& y) {
  const char* op = "linear_forward";
  check_float(op, "x", x, 2);
  check_float(op, "W", W, 2);
  check_float(op, "y", y, 2);
  const std::int64_t N = x.dim(0), in = x.dim(1), out = W.dim(0);
  check_shape(op, "W", W, Shape{out, in});
  check_shape(op, "y", y, Shape{N, out});
  if (b.defined()) {
    check_float(op, "b", b, 0);
    check_numel(op, "b", b, out);
  }
  table(op, {&x, &W, &b, &y}).linear_forward(x, W, b, y);
}

void linear_backward(const Tensor& x, const Tensor& W, const Tensor& dy, const Tensor& dx,
                     const Tensor& dW, const Tensor& db) {
  const char* op = "linear_backward";
  check_float(op, "x", x, 2);
  check_float(op, "W", W, 2);
  check_float(op, "dy", dy, 2);
  check_float(op, "dW", dW, 2);
  const std::int64_t N = x.dim(0), in = x.dim(1), out = W.dim(0);
  check_shape(op, "W", W, Shape{out, in});
  check_shape(op, "dy", dy, Shape{N, out});
  check_shape(op, "dW", dW, Shape{out, in});
  if (dx.defined()) {
    check_float(op, "dx", dx, 2);
    check_shape(op, "dx", dx, Shape{N, in});
  }
  if (db.defined()) {
    check_float(op, "db", db, 0);
    check_numel(op, "db", db, out);
  }
  table(op, {&x, &W, &dy, &dx, &dW, &db}).linear_backward(x, W, dy, dx, dW, db);
}

void layernorm_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd, float eps) {
  const char* op = "layernorm_forward";
  check_float(op, "x", x, 2);
  check_float(op, "y", y, 2);
  check_float(op, "w", w, 0);
  check_float(op, "b", b, 0);
  check_f32(op, "mean", mean);
  check_f32(op, "rstd", rstd);
  const std::int64_t N = x.dim(0), C = x.dim(1);
  check_shape(op, "y", y, x.shape());
  check_numel(op, "w", w, C);
  check_numel(op, "b", b, C);
  check_numel(op, "mean", mean, N);
  check_numel(op, "rstd", rstd, N);
  table(op, {&x, &w, &b, &y, &mean, &rstd}).layernorm_forward(x, w, b, y, mean, rstd, eps);
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, const Tensor& dw, const Tensor& db) {
  const char* op = "layernorm_backward";
  check_float(op, "x", x, 2);
  check_float(op, "dy", dy, 2);
  check_float(op, "dx", dx, 2);
  check_float(op, "w", w, 0);
  check_float(op, "dw", dw, 0);
  check_float(op, "db", db, 0);
  check_f32(op, "mean", mean);
  check_f32(op, "rstd", rstd);
  const std::int64_t N = x.dim(0), C = x.dim(1);
  check_shape(op, "dy", dy, x.shape());
  check_shape(op, "dx", dx, x.shape());
  check_numel(op, "w", w, C);
  check_numel(op, "dw", dw, C);
  check_numel(op, "db", db, C);
  check_numel(op, "mean", mean, N);
  check_numel(op, "rstd", rstd, N);
  table(op, {&dy, &x, &w, &mean, &rstd, &dx, &dw, &db})
      .layernorm_backward(dy, x, w, mean, rstd, dx, dw, db);
}

void gelu_forward(const Tensor& x, const Tensor& y) {
  const char* op = "gelu_forward";
  check_float(op, "x", x, 0);
  check_float(op, "y", y, 0);
  check_shape(op, "y", y, x.shape());
  table(op, {&x, &y}).gelu_forward(x, y);
}

void gelu_backward(const Tensor& x, const Tensor& dy, const Tensor& dx) {
  const char* op = "gelu_backward";
  check_float(op, "x", x, 0);
  check_float(op, "dy", dy, 0);
  check_float(op, "dx", dx, 0);
  check_shape(op, "dy", dy, x.shape());
  check_shape(op, "dx", dx, x.shape());
  table(op, {&x, &dy, &dx}).gelu_backward(x, dy, dx);
}

namespace {
// qkv [B,T,3C] with C divisible by n_head; returns {B, T, C}.
std::array<std::int64_t, 3> attention_dims(const char* op, const Tensor& qkv, int n_head) {
  check_float(op, "qkv", qkv, 3);
  const std::int64_t B = qkv.dim(0), T = qkv.dim(1), C3 = qkv.dim(2);
  STRATA_CHECK(C3 % 3 == 0 && n_head > 0 && (C3 / 3) % n_head == 0, "ops",
               "{}: qkv {} is not [B, T, 3C] with C divisible by {} heads", op, qkv.shape().str(),
               n_head);
  return {B, T, C3 / 3};
}
}  // namespace

void attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse, int n_head) {
  const char* op = "attention_forward";
  const auto [B, T, C] = attention_dims(op, qkv, n_head);
  check_float(op, "out", out, 0);
  check_numel(op, "out", out, B * T * C);
  check_f32(op, "lse", lse);
  check_numel(op, "lse", lse, B * n_head * T);
  table(op, {&qkv, &out, &lse}).attention_forward(qkv, out, lse, n_head);
}

void attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                        const Tensor& dout, const Tensor& dqkv, int n_head) {
  const char* op = "attention_backward";
  const auto [B, T, C] = attention_dims(op, qkv, n_head);
  check_float(op, "out", out, 0);
  check_float(op, "dout", dout, 0);
  check_float(op, "dqkv", dqkv, 0);
  check_numel(op, "out", out, B * T * C);
  check_numel(op, "dout", dout, B * T * C);
  check_numel(op, "dqkv", dqkv, qkv.numel());
  check_f32(op, "lse", lse);
  check_numel(op, "lse", lse, B * n_head * T);
  table(op, {&qkv, &out, &lse, &dout, &dqkv}).attention_backward(qkv, out, lse, dout, dqkv, n_head);
}

void embedding_forward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                       const Tensor& out, std::int64_t vocab_start, TokenCheck check) {
  const char* op = "embedding_forward";
  check_i32(op, "tokens", tokens);
  STRATA_CHECK(tokens.rank() == 2, "ops", "{}: tokens {} must be [B, T]", op, tokens.shape().str());
  check_float(op, "wte", wte, 2);
  check_float(op, "out", out, 2);
  const std::int64_t T = tokens.dim(1), C = wte.dim(1);
  STRATA_CHECK(wpe.defined() || vocab_start >= 0, "ops", "{}: wpe is required for a whole table", op);
  if (wpe.defined()) {
    check_float(op, "wpe", wpe, 2);
    STRATA_CHECK(wpe.dim(1) == C && wpe.dim(0) >= T, "ops",
                 "{}: wpe {} does not cover {} positions of width {}", op, wpe.shape().str(), T, C);
  }
  check_shape(op, "out", out, Shape{tokens.numel(), C});
  table(op, {&tokens, &wte, &wpe, &out}).embedding_forward(tokens, wte, wpe, out, vocab_start, check);
}

void embedding_backward(const Tensor& tokens, const Tensor& dout, const Tensor& dwte,
                        const Tensor& dwpe, std::int64_t vocab_start, TokenCheck check) {
  const char* op = "embedding_backward";
  check_i32(op, "tokens", tokens);
  STRATA_CHECK(tokens.rank() == 2, "ops", "{}: tokens {} must be [B, T]", op, tokens.shape().str());
  check_float(op, "dout", dout, 2);
  const std::int64_t T = tokens.dim(1), C = dout.dim(1);
  check_shape(op, "dout", dout, Shape{tokens.numel(), C});
  if (dwte.defined()) {
    check_float(op, "dwte", dwte, 2);
    STRATA_CHECK(dwte.dim(1) == C, "ops", "{}: dwte {} is not [V, {}]", op, dwte.shape().str(), C);
  }
  if (dwpe.defined()) {
    check_float(op, "dwpe", dwpe, 2);
    STRATA_CHECK(dwpe.dim(1) == C && dwpe.dim(0) >= T, "ops",
                 "{}: dwpe {} does not cover {} positions of width {}", op, dwpe.shape().str(), T, C);
  }
  table(op, {&tokens, &dout, &dwte, &dwpe}).embedding_backward(tokens, dout, dwte, dwpe, vocab_start, check);
}

namespace {
// logits [N,V], targets i32 with N elements.
void check_logits(const char* op, const Tensor& logits, const Tensor& targets) {
  check_float(op, "logits", logits, 2);
  check_i32(op, "targets", targets);
  check_numel(op, "targets", targets, logits.dim(0));
}

// A loss's sum (f64, one element) on `like`'s device, for the forms that return it.
Tensor sum_slot(const Tensor& like) {
  return Tensor::empty(Shape{1}, DType::f64,
                       TensorOptions{like.device(), like.tier(), Category::workspace,
                                     like.storage() ? like.storage()->ledger() : nullptr});
}

// The sum's value (the host waits for a GPU's); 0 on the meta device, which has no values.
double read_sum(const Tensor& sum) { return sum.device().is_meta() ? 0.0 : sum.item(); }

// The checks of every operand but the sum; the table of their device.
const OpTable& cross_entropy_table(const Tensor& logits, const Tensor& targets, const Tensor& lse) {
  const char* op = "cross_entropy_forward";
  check_logits(op, logits, targets);
  check_f32(op, "lse", lse);
  check_numel(op, "lse", lse, logits.dim(0));
  return table(op, {&logits, &targets, &lse});
}
}  // namespace

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                           const Tensor& sum) {
  cross_entropy_table(logits, targets, lse);
  const char* op = "cross_entropy_forward";
  check_f64(op, "sum", sum, 1);
  table(op, {&logits, &targets, &lse, &sum}).cross_entropy_forward(logits, targets, lse, sum);
}

double cross_entropy_forward(const Tensor& logits, const Tensor& targets, const Tensor& lse) {
  const OpTable& t = cross_entropy_table(logits, targets, lse);
  const Tensor sum = sum_slot(logits);  // once the operands are known good
  t.cross_entropy_forward(logits, targets, lse, sum);
  const double v = read_sum(sum);
  if (std::isnan(v) && !targets.device().is_cpu() && !targets.device().is_meta()) {
    // A GPU marks a target >= V by a NaN sum: the first such row, from the targets themselves.
    const Tensor t = targets.to(DType::i32, TensorOptions{}.with(Tier::host));
    const std::int32_t* p = t.data<std::int32_t>();
    for (std::int64_t r = 0; r < t.numel(); ++r)
      if (p[r] >= logits.dim(1))
        fail("ops", "cross_entropy: target {} of row {} is outside the vocabulary of {}", p[r], r,
             logits.dim(1));
  }
  return v;
}

void cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                            const Tensor& dlogits, float scale) {
  const char* op = "cross_entropy_backward";
  check_logits(op, logits, targets);
  check_f32(op, "lse", lse);
  check_numel(op, "lse", lse, logits.dim(0));
  check_float(op, "dlogits", dlogits, 2);
  check_shape(op, "dlogits", dlogits, logits.shape());
  table(op, {&logits, &lse, &targets, &dlogits})
      .cross_entropy_backward(logits, lse, targets, dlogits, scale);
}

void row_max(const Tensor& logits, const Tensor& out) {
  const char* op = "row_max";
  check_float(op, "logits", logits, 2);
  check_f32(op, "out", out);
  check_numel(op, "out", out, logits.dim(0));
  table(op, {&logits, &out}).row_max(logits, out);
}

void row_sum_exp(const Tensor& logits, const Tensor& max, const Tensor& out) {
  const char* op = "row_sum_exp";
  check_float(op, "logits", logits, 2);
  check_f32(op, "max", max);
  check_f32(op, "out", out);
  check_numel(op, "max", max, logits.dim(0));
  check_numel(op, "out", out, logits.dim(0));
  table(op, {&logits, &max, &out}).row_sum_exp(logits, max, out);
}

void target_logit(const Tensor& logits, const Tensor& targets, std::int64_t vocab_start,
                  const Tensor& out) {
  const char* op = "target_logit";
  check_logits(op, logits, targets);
  check_f32(op, "out", out);
  check_numel(op, "out", out, logits.dim(0));
  STRATA_CHECK(vocab_start >= 0, "ops", "{}: negative vocab_start {}", op, vocab_start);
  table(op, {&logits, &targets, &out}).target_logit(logits, targets, vocab_start, out);
}

void cross_entropy_backward_slice(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                                  std::int64_t vocab_start, float scale, const Tensor& dlogits) {
  const char* op = "cross_entropy_backward_slice";
  check_logits(op, logits, targets);
  check_f32(op, "lse", lse);
  check_numel(op, "lse", lse, logits.dim(0));
  check_float(op, "dlogits", dlogits, 2);
  check_shape(op, "dlogits", dlogits, logits.shape());
  STRATA_CHECK(vocab_start >= 0, "ops", "{}: negative vocab_start {}", op, vocab_start);
  table(op, {&logits, &lse, &targets, &dlogits})
      .cross_entropy_backward_slice(logits, lse, targets, vocab_start, scale, dlogits);
}

namespace {
// The checks of every operand but the sum; the table of their device.
const OpTable& combine_table(const Tensor& max, const Tensor& sum_exp, const Tensor& target,
                             const Tensor& targets, const Tensor& lse) {
  const char* op = "combine_cross_entropy";
  check_f32(op, "max", max);
  const std::int64_t N = max.numel();
  check_f32(op, "sum_exp", sum_exp);
  check_numel(op, "sum_exp", sum_exp, N);
  check_f32(op, "target", target);
  check_numel(op, "target", target, N);
  check_i32(op, "targets", targets);
  check_numel(op, "targets", targets, N);
  check_f32(op, "lse", lse);
  check_numel(op, "lse", lse, N);
  return table(op, {&max, &sum_exp, &target, &targets, &lse});
}
}  // namespace

void combine_cross_entropy(const Tensor& max, const Tensor& sum_exp, const Tensor& target,
                           const Tensor& targets, const Tensor& lse, const Tensor& sum) {
  combine_table(max, sum_exp, target, targets, lse);
  const char* op = "combine_cross_entropy";
  check_f64(op, "sum", sum, 1);
  table(op, {&max, &sum_exp, &target, &targets, &lse, &sum})
      .combine_cross_entropy(max, sum_exp, target, targets, lse, sum);
}

double combine_cross_entropy(const Tensor& max, const Tensor& sum_exp, const Tensor& target,
                             const Tensor& targets, const Tensor& lse) {
  const OpTable& t = combine_table(max, sum_exp, target, targets, lse);
  const Tensor sum = sum_slot(max);  // once the operands are known good
  t.combine_cross_entropy(max, sum_exp, target, targets, lse, sum);
  return read_sum(sum);
}

void add(const Tensor& a, const Tensor& b, const Tensor& out) {
  const char* op = "add";
  check_float(op, "a", a, 0);
  check_float(op, "b", b, 0);
  check_float(op, "out", out, 0);
  check_shape(op, "b", b, a.shape());
  check_shape(op, "out", out, a.shape());
  table(op, {&a, &b, &out}).add(a, b, out);
}

void add_inplace(const Tensor& a, const Tensor& b) {
  const char* op = "add_inplace";
  check_float(op, "a", a, 0);
  check_float(op, "b", b, 0);
  check_numel(op, "b", b, a.numel());
  table(op, {&a, &b}).add_inplace(a, b);
}

void scale_inplace(const Tensor& a, float s) {
  check_float("scale_inplace", "a", a, 0);
  table("scale_inplace", {&a}).scale_inplace(a, s);
}

void cast(const Tensor& src, const Tensor& dst) {
  const char* op = "cast";
  check_float(op, "src", src, 0);
  check_float(op, "dst", dst, 0);
  check_numel(op, "dst", dst, src.numel());
  table(op, {&src, &dst}).cast(src, dst);
}

double sum_squares(const Tensor& x) {
  check_float("sum_squares", "x", x, 0);
  return table("sum_squares", {&x}).sum_squares(x);
}

bool has_inf_or_nan(const Tensor& x) {
  check_float("has_inf_or_nan", "x", x, 0);
  return table("has_inf_or_nan", {&x}).has_inf_or_nan(x);
}

namespace {
void check_update(const char* op, const Tensor& master, const Tensor& grad,
                  std::initializer_list<std::pair<const char*, const Tensor*>> states,
                  const Tensor& param16) {
  check_f32(op, "master", master);
  check_float(op, "grad", grad, 0);
  check_numel(op, "grad", grad, master.numel());
  for (const auto& [name, t] : states) {
    check_f32(op, name, *t);
    check_numel(op, name, *t, master.numel());
  }
  if (param16.defined()) {
    check_float(op, "param16", param16, 0);
    STRATA_CHECK(param16.dtype() != DType::f32, "ops", "{}: param16 must be bf16 or f16", op);
    check_numel(op, "param16", param16, master.numel());
  }
}
}  // namespace

void adamw_step(const Tensor& master, const Tensor& grad, const Tensor& m, const Tensor& v,
                const optim::AdamWHyper& h, std::int64_t step, float grad_scale,
                const Tensor& param16) {
  const char* op = "adamw_step";
  check_update(op, master, grad, {{"m", &m}, {"v", &v}}, param16);
  STRATA_CHECK(step >= 1, "ops", "{}: step {} must be >= 1", op, step);
  table(op, {&master, &grad, &m, &v, &param16})
      .adamw_step(master, grad, m, v, h, step, grad_scale, param16);
}

void sgd_step(const Tensor& master, const Tensor& grad, const Tensor& momentum,
              const optim::SGDHyper& h, std::int64_t step, float grad_scale,
              const Tensor& param16) {
  const char* op = "sgd_step";
  if (h.momentum != 0.0) check_update(op, master, grad, {{"momentum", &momentum}}, param16);
  else check_update(op, master, grad, {}, param16);
  STRATA_CHECK(step >= 1, "ops", "{}: step {} must be >= 1", op, step);
  table(op, {&master, &grad, &momentum, &param16})
      .sgd_step(master, grad, momentum, h, step, grad_scale, param16);
}

void lion_step(const Tensor& master, const Tensor& grad, const Tensor& m,
               const optim::LionHyper& h, std::int64_t step, float grad_scale,
               const Tensor& param16) {
  const char* op = "lion_step";
  check_update(op, master, grad, {{"m", &m}}, param16);
  STRATA_CHECK(step >= 1, "ops", "{}: step {} must be >= 1", op, step);
  table(op, {&master, &grad, &m, &param16}).lion_step(master, grad, m, h, step, grad_scale, param16);
}

namespace {
// The 8-bit state of n elements: codes u8 of n, absmax f32 of quant_blocks(n); runs covering
// [0, n) in order.
void check_8bit(const char* op, std::int64_t n,
                std::initializer_list<std::pair<const char*, const Tensor*>> codes,
                std::initializer_list<std::pair<const char*, const Tensor*>> absmax,
                std::span<const optim::DecayRun> runs) {
  for (const auto& [name, t] : codes) {
    STRATA_CHECK(t->defined() && t->dtype() == DType::u8 && t->is_contiguous(), "ops",
                 "{}: {} must be a contiguous u8 tensor", op, name);
    check_numel(op, name, *t, n);
  }
  const auto blocks = static_cast<std::int64_t>(optim::quant_blocks(static_cast<std::size_t>(n)));
  for (const auto& [name, t] : absmax) {
    check_f32(op, name, *t);
    check_numel(op, name, *t, blocks);
  }
  std::size_t at = 0;
  for (const optim::DecayRun& r : runs) {
    STRATA_CHECK(r.begin == at && r.end > r.begin, "ops",
                 "{}: decay runs must cover [0, {}) in order; run [{}, {}) after {}", op, n,
                 r.begin, r.end, at);
    at = r.end;
  }
  STRATA_CHECK(at == static_cast<std::size_t>(n), "ops", "{}: decay runs cover [0, {}) of {} elements",
               op, at, n);
}
}  // namespace

void adamw8bit_step(const Tensor& master, const Tensor& grad, const Tensor& m_codes,
                    const Tensor& v_codes, const Tensor& m_absmax, const Tensor& v_absmax,
                    std::span<const optim::DecayRun> runs, const optim::AdamWHyper& h,
                    std::int64_t step, float grad_scale, const Tensor& param16) {
  const char* op = "adamw8bit_step";
  check_update(op, master, grad, {}, param16);
  check_8bit(op, master.numel(), {{"m_codes", &m_codes}, {"v_codes", &v_codes}},
             {{"m_absmax", &m_absmax}, {"v_absmax", &v_absmax}}, runs);
  STRATA_CHECK(step >= 1, "ops", "{}: step {} must be >= 1", op, step);
  table(op, {&master, &grad, &m_codes, &v_codes, &m_absmax, &v_absmax, &param16})
      .adamw8bit_step(master, grad, m_codes, v_codes, m_absmax, v_absmax, runs, h, step,
                      grad_scale, param16);
}

void lion8bit_step(const Tensor& master, const Tensor& grad, const Tensor& m_codes,
                   const Tensor& m_absmax, std::span<const optim::DecayRun> runs,
                   const optim::LionHyper& h, std::int64_t step, float grad_scale,
                   const Tensor& param16) {
  const char* op = "lion8bit_step";
  check_update(op, master, grad, {}, param16);
  check_8bit(op, master.numel(), {{"m_codes", &m_codes}}, {{"m_absmax", &m_absmax}}, runs);
  STRATA_CHECK(step >= 1, "ops", "{}: step {} must be >= 1", op, step);
  table(op, {&master, &grad, &m_codes, &m_absmax, &param16})
      .lion8bit_step(master, grad, m_codes, m_absmax, runs, h, step, grad_scale, param16);
}

namespace {

// grad f32 of n elements as the range [first, first + n) of a matrix of `cols` columns whose
// rows are `rows` (checked against the range).
void check_range(const char* op, const Tensor& grad, std::int64_t first, std::int64_t cols,
                 std::int64_t rows) {
  check_f32(op, "grad", grad);
  STRATA_CHECK(cols >= 1 && first >= 0 && first + grad.numel() <= rows * cols, "ops",
               "{}: the range [{}, {}) does not lie in a {} x {} matrix", op, first,
               first + grad.numel(), rows, cols);
}
}  // namespace

void sum_squares_add(const Tensor& x, const Tensor& out) {
  const char* op = "sum_squares_add";
  check_float(op, "x", x, 0);
  check_f64(op, "out", out, 1);
  table(op, {&x, &out}).sum_squares_add(x, out);
}

void adafactor_sq_sums(const Tensor& grad, std::int64_t first, std::int64_t rows, std::int64_t cols,
                       float grad_scale, float eps1, const Tensor& row_sums,
                       const Tensor& col_sums) {
  const char* op = "adafactor_sq_sums";
  check_f64(op, "col_sums", col_sums, cols);
  check_f64(op, "row_sums", row_sums, rows);
  check_range(op, grad, first, cols, rows);
  table(op, {&grad, &row_sums, &col_sums})
      .adafactor_sq_sums(grad, first, cols, grad_scale, eps1, row_sums, col_sums);
}

void adafactor_ema(const Tensor& stat, const Tensor& sums, double count, double beta2) {
  const char* op = "adafactor_ema";
  check_f32(op, "stat", stat);
  check_f64(op, "sums", sums, stat.numel());
  table(op, {&stat, &sums}).adafactor_ema(stat, sums, count, beta2);
}

void adafactor_factors(const Tensor& row, const Tensor& col, const Tensor& row_factor,
                       const Tensor& col_factor) {
  const char* op = "adafactor_factors";
  check_f32(op, "row", row);
  check_f32(op, "col", col);
  check_f32(op, "row_factor", row_factor);
  check_f32(op, "col_factor", col_factor);
  STRATA_CHECK(row.numel() >= 1 && col.numel() >= 1, "ops", "{}: a matrix of {} x {}", op,
               row.numel(), col.numel());
  check_numel(op, "row_factor", row_factor, row.numel());
  check_numel(op, "col_factor", col_factor, col.numel());
  table(op, {&row, &col, &row_factor, &col_factor})
      .adafactor_factors(row, col, row_factor, col_factor);
}

void adafactor_factored_sumsq(const Tensor& grad, std::int64_t first, std::int64_t rows,
                              std::int64_t cols, float grad_scale, const Tensor& row_factor,
                              const Tensor& col_factor, const Tensor& out) {
  const char* op = "adafactor_factored_sumsq";
  check_f32(op, "row_factor", row_factor);
  check_f32(op, "col_factor", col_factor);
  check_numel(op, "row_factor", row_factor, rows);
  check_numel(op, "col_factor", col_factor, cols);
  check_range(op, grad, first, cols, rows);
  check_f64(op, "out", out, 1);
  table(op, {&grad, &row_factor, &col_factor, &out})
      .adafactor_factored_sumsq(grad, first, cols, grad_scale, row_factor, col_factor, out);
}

void adafactor_vector_sumsq(const Tensor& grad, const Tensor& v, float grad_scale, float eps1,
                            double beta2, const Tensor& out) {
  const char* op = "adafactor_vector_sumsq";
  check_f32(op, "grad", grad);
  check_f32(op, "v", v);
  check_numel(op, "v", v, grad.numel());
  check_f64(op, "out", out, 1);
  table(op, {&grad, &v, &out}).adafactor_vector_sumsq(grad, v, grad_scale, eps1, beta2, out);
}

namespace {
// An Adafactor update's operands: param f32, grad f32 of its numel, m f32 with beta1 (undefined
// without), param16 as the other updates'.
void check_adafactor_update(const char* op, const Tensor& param, const Tensor& grad,
                            const Tensor& m, const optim::AdafactorHyper& h,
                            const Tensor& param16) {
  check_update(op, param, grad, {}, param16);
  check_f32(op, "grad", grad);
  STRATA_CHECK(h.has_beta1() == m.defined(), "ops", "{}: m must be given exactly with beta1", op);
  if (m.defined()) {
    check_f32(op, "m", m);
    check_numel(op, "m", m, param.numel());
  }
}
}  // namespace

void adafactor_apply_factored(const Tensor& param, const Tensor& grad, const Tensor& m,
                              std::int64_t first, std::int64_t rows, std::int64_t cols,
                              const Tensor& row_factor, const Tensor& col_factor,
                              const optim::AdafactorHyper& h, const optim::AdafactorScalars& s,
                              const Tensor& param16) {
  const char* op = "adafactor_apply_factored";
  check_adafactor_update(op, param, grad, m, h, param16);
  check_f32(op, "row_factor", row_factor);
  check_f32(op, "col_factor", col_factor);
  check_numel(op, "row_factor", row_factor, rows);
  check_numel(op, "col_factor", col_factor, cols);
  check_range(op, grad, first, cols, rows);
  table(op, {&param, &grad, &m, &row_factor, &col_factor, &param16})
      .adafactor_apply_factored(param, grad, m, first, cols, row_factor, col_factor, h, s,
                                param16);
}

void adafactor_apply_vector(const Tensor& param, const Tensor& grad, const Tensor& v,
                            const Tensor& m, const optim::AdafactorHyper& h,
                            const optim::AdafactorScalars& s, const Tensor& param16) {
  const char* op = "adafactor_apply_vector";
  check_adafactor_update(op, param, grad, m, h, param16);
  check_f32(op, "v", v);
  check_numel(op, "v", v, param.numel());
  table(op, {&param, &grad, &v, &m, &param16})
      .adafactor_apply_vector(param, grad, v, m, h, s, param16);
}

void lamb_sums(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
               const optim::LambHyper& h, float grad_scale, const Tensor& out) {
  const char* op = "lamb_sums";
  check_update(op, param, grad, {{"m", &m}, {"v", &v}}, Tensor());
  check_f32(op, "grad", grad);
  check_f64(op, "out", out, 2);
  table(op, {&param, &grad, &m, &v, &out}).lamb_sums(param, grad, m, v, h, grad_scale, out);
}

void lamb_apply(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                const optim::LambHyper& h, float grad_scale, double step_size, double trust_ratio,
                const Tensor& param16) {
  const char* op = "lamb_apply";
  check_update(op, param, grad, {{"m", &m}, {"v", &v}}, param16);
  check_f32(op, "grad", grad);
  table(op, {&param, &grad, &m, &v, &param16})
      .lamb_apply(param, grad, m, v, h, grad_scale, step_size, trust_ratio, param16);
}

void onebit_momentum(const Tensor& m, const Tensor& grad, const optim::OneBitAdamHyper& h,
                     float grad_scale) {
  const char* op = "onebit_momentum";
  check_update(op, m, grad, {}, Tensor());
  check_f32(op, "grad", grad);
  table(op, {&m, &grad}).onebit_momentum(m, grad, h, grad_scale);
}

void onebit_apply(const Tensor& param, const Tensor& m, const Tensor& v,
                  const optim::OneBitAdamHyper& h, double lr, const Tensor& param16) {
  const char* op = "onebit_apply";
  check_update(op, param, m, {{"v", &v}}, param16);
  check_f32(op, "m", m);
  table(op, {&param, &m, &v, &param16}).onebit_apply(param, m, v, h, lr, param16);
}

void onebit_lamb_sumsq(const Tensor& m, const Tensor& out) {
  const char* op = "onebit_lamb_sumsq";
  check_f32(op, "m", m);
  check_f64(op, "out", out, 1);
  table(op, {&m, &out}).onebit_lamb_sumsq(m, out);
}

void onebit_lamb_momentum(const Tensor& m, const Tensor& m_last, const Tensor& grad,
                          const optim::OneBitLambHyper& h, float grad_scale, double scaling) {
  const char* op = "onebit_lamb_momentum";
  check_update(op, m, grad, {{"m_last", &m_last}}, Tensor());
  check_f32(op, "grad", grad);
  table(op, {&m, &m_last, &grad}).onebit_lamb_momentum(m, m_last, grad, h, grad_scale, scaling);
}

void onebit_lamb_after_exchange(const Tensor& m, const Tensor& m_last, const Tensor& v,
                                const Tensor& v_fresh, const Tensor& param,
                                const optim::OneBitLambHyper& h, double weight_decay,
                                double scaling, const Tensor& out) {
  const char* op = "onebit_lamb_after_exchange";
  check_update(op, m, param, {{"m_last", &m_last}, {"v", &v}, {"v_fresh", &v_fresh}}, Tensor());
  check_f32(op, "param", param);
  check_f64(op, "out", out, 3);
  table(op, {&m, &m_last, &v, &v_fresh, &param, &out})
      .onebit_lamb_after_exchange(m, m_last, v, v_fresh, param, h, weight_decay, scaling, out);
}

void onebit_lamb_apply(const Tensor& param, const Tensor& m, const Tensor& v,
                       const optim::OneBitLambHyper& h, double weight_decay, double rate,
                       const Tensor& param16) {
  const char* op = "onebit_lamb_apply";
  check_update(op, param, m, {{"v", &v}}, param16);
  check_f32(op, "m", m);
  table(op, {&param, &m, &v, &param16}).onebit_lamb_apply(param, m, v, h, weight_decay, rate, param16);
}

}  // namespace strata::ops
