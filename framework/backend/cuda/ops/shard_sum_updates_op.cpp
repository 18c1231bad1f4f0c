// The CUDA table's entries of Adafactor's and LAMB's kernels and of sum_squares_add
// (shard_sum_updates.hpp): the CPU's scalars computed by the CPU's own code
// (optim::detail::adafactor_apply_consts, lamb_consts), the kernels queued on the operands'
// stream, the sums left in device memory (no host synchronisation). ops.cpp has checked the
// operands (f32 / f64, lengths, the range inside its matrix, one CUDA device, contiguous).
#include "framework/backend/cuda/ops/common.hpp"
#include "framework/backend/cuda/ops/kernels.hpp"
#include "framework/backend/cuda/ops/shard_sum_updates.hpp"
#include "framework/optim/chunked.hpp"

namespace strata::cuda_ops {

static_assert(kAdafactorChunk == static_cast<std::int64_t>(optim::detail::kChunk),
              "the CUDA sums run over the CPU's chunks");

namespace {
float* f32p(const Tensor& t) { return static_cast<float*>(t.raw()); }
double* f64p(const Tensor& t) { return static_cast<double*>(t.raw()); }
float* f32_or_null(const Tensor& t) { return t.defined() ? f32p(t) : nullptr; }
void* raw_or_null(const Tensor& t) { return t.defined() ? t.raw() : nullptr; }
DT dt_or_bf16(const Tensor& t) { return t.defined() ? dt(t) : DT::bf16; }
double* partials(const Tensor& like, std::int64_t n, Tensor& keep) {
  keep = workspace(like, Shape{n}, DType::f64);
  return f64p(keep);
}
}  // namespace

void sum_squares_add(const Tensor& x, const Tensor& out) {
  const std::int64_t n = x.numel();
  if (n == 0) return;
  Tensor keep;
  launch_sum_squares_add(x.raw(), dt(x), n, partials(x, sum_squares_add_partials(n), keep),
                         f64p(out), stream_of(x));
  check_launch("sum_squares_add");
}

void adafactor_sq_sums(const Tensor& grad, std::int64_t first, std::int64_t cols,
                       float grad_scale, float eps1, const Tensor& row_sums,
                       const Tensor& col_sums) {
  launch_adafactor_sq_sums(f32p(grad), first, grad.numel(), cols, grad_scale, eps1,
                           f64p(row_sums), f64p(col_sums), stream_of(grad));
  check_launch("adafactor_sq_sums");
}

void adafactor_ema(const Tensor& stat, const Tensor& sums, double count, double beta2) {
  launch_adafactor_ema(f32p(stat), f64p(sums), stat.numel(), count, beta2, stream_of(stat));
  check_launch("adafactor_ema");
}

void adafactor_factors(const Tensor& row, const Tensor& col, const Tensor& row_factor,
                       const Tensor& col_factor) {
  launch_adafactor_factors(f32p(row), row.numel(), f32p(col), col.numel(), f32p(row_factor),
                           f32p(col_factor), stream_of(row));
  check_launch("adafactor_factors");
}

void adafactor_factored_sumsq(const Tensor& grad, std::int64_t first, std::int64_t cols,
                              float grad_scale, const Tensor& row_factor,
                              const Tensor& col_factor, const Tensor& out) {
  const std::int64_t n = grad.numel();
  if (n == 0) return;
  Tensor keep;
  launch_adafactor_factored_sumsq(f32p(grad), first, n, cols, grad_scale, f32p(row_factor),
                                  f32p(col_factor), partials(grad, adafactor_partials(n), keep),
                                  f64p(out), stream_of(grad));
  check_launch("adafactor_factored_sumsq");
}

void adafactor_vector_sumsq(const Tensor& grad, const Tensor& v, float grad_scale, float eps1,
                            double beta2, const Tensor& out) {
  const std::int64_t n = grad.numel();
  if (n == 0) return;
  Tensor keep;
  launch_adafactor_vector_sumsq(f32p(grad), f32p(v), n, grad_scale, eps1, beta2,
                                partials(grad, adafactor_partials(n), keep), f64p(out),
                                stream_of(grad));
  check_launch("adafactor_vector_sumsq");
}

void adafactor_apply_factored(const Tensor& param, const Tensor& grad, const Tensor& m,
                              std::int64_t first, std::int64_t cols, const Tensor& row_factor,
                              const Tensor& col_factor, const optim::AdafactorHyper& h,
                              const optim::AdafactorScalars& s, const Tensor& param16) {
  const optim::detail::AdafactorApplyConsts c = optim::detail::adafactor_apply_consts(h, s);
  launch_adafactor_apply_factored(f32p(param), f32p(grad), f32_or_null(m), first, param.numel(),
                                  cols, f32p(row_factor), f32p(col_factor), c,
                                  raw_or_null(param16), dt_or_bf16(param16), stream_of(param));
  check_launch("adafactor_apply_factored");
}

void adafactor_apply_vector(const Tensor& param, const Tensor& grad, const Tensor& v,
                            const Tensor& m, const optim::AdafactorHyper& h,
                            const optim::AdafactorScalars& s, const Tensor& param16) {
  const optim::detail::AdafactorApplyConsts c = optim::detail::adafactor_apply_consts(h, s);
  launch_adafactor_apply_vector(f32p(param), f32p(grad), f32p(v), f32_or_null(m), param.numel(),
                                static_cast<float>(h.eps1), static_cast<float>(s.beta2),
                                static_cast<float>(1.0 - s.beta2), c, raw_or_null(param16),
                                dt_or_bf16(param16), stream_of(param));
  check_launch("adafactor_apply_vector");
}

void lamb_sums(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
               const optim::LambHyper& h, float grad_scale, const Tensor& out) {
  const optim::detail::LambConsts k = optim::detail::lamb_consts(h, grad_scale);
  const std::int64_t n = param.numel();
  if (n == 0) return;
  Tensor keep;
  launch_lamb_sums(f32p(param), f32p(grad), f32p(m), f32p(v), n, k,
                   partials(param, lamb_partials(n), keep), f64p(out), stream_of(param));
  check_launch("lamb_sums");
}

void lamb_apply(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                const optim::LambHyper& h, float grad_scale, double step_size, double trust_ratio,
                const Tensor& param16) {
  const optim::detail::LambConsts k = optim::detail::lamb_consts(h, grad_scale);
  launch_lamb_apply(f32p(param), f32p(grad), f32p(m), f32p(v), param.numel(), k,
                    static_cast<float>(step_size * trust_ratio), raw_or_null(param16),
                    dt_or_bf16(param16), stream_of(param));
  check_launch("lamb_apply");
}

}  // namespace strata::cuda_ops
