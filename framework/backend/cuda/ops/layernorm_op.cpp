// LayerNorm on CUDA tensors (layernorm.cu has the kernels): every float operand in its own dtype,
// computed in f32; y and dx rounded once; dw and db accumulated (a 16-bit one: the f32 sum of its
// old value and the rows' total, rounded once, as the CPU's Acc32).
#include "framework/backend/cuda/ops/common.hpp"
#include "framework/backend/cuda/ops/kernels.hpp"
#include "framework/backend/cuda/ops/layernorm.hpp"

namespace strata::cuda_ops {
namespace {

// An optional operand's pointer and dtype code (undefined: nullptr, and f32 that is never read).
void* ptr_or_null(const Tensor& t) { return t.defined() ? t.raw() : nullptr; }
DT dt_or_f32(const Tensor& t) { return t.defined() ? dt(t) : DT::f32; }

// N and C of x [N, C], checked as the CPU kernels check them.
void ln_dims(const Tensor& x, std::int64_t& N, int& C) {
  N = x.dim(0);
  const std::int64_t c = x.dim(1);
  STRATA_CHECK(N >= 0 && c > 0 && c <= 0x7fffffff, "cuda", "layernorm: bad size N={} C={}", N, c);
  C = static_cast<int>(c);
}

}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd, float eps) {
  std::int64_t N;
  int C;
  ln_dims(x, N, C);
  launch_layernorm_forward(x.raw(), dt(x), ptr_or_null(w), dt_or_f32(w), ptr_or_null(b),
                           dt_or_f32(b), y.raw(), dt(y), static_cast<float*>(mean.raw()),
                           static_cast<float*>(rstd.raw()), N, C, eps, stream_of(x));
  check_launch("layernorm_forward");
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, const Tensor& dw, const Tensor& db) {
  std::int64_t N;
  int C;
  ln_dims(x, N, C);
  // The per-strip partial sums of dw and db: a workspace released when this returns (the
  // allocator is stream-ordered: the kernels queued before that still see it).
  Tensor partial;
  const std::int64_t floats = layernorm_backward_partial_floats(N, C);
  if ((dw.defined() || db.defined()) && floats > 0) partial = workspace(x, Shape{floats});
  launch_layernorm_backward(dy.raw(), dt(dy), x.raw(), dt(x), ptr_or_null(w), dt_or_f32(w),
                            static_cast<const float*>(mean.raw()),
                            static_cast<const float*>(rstd.raw()), dx.raw(), dt(dx),
                            ptr_or_null(dw), dt_or_f32(dw), ptr_or_null(db), dt_or_f32(db), N, C,
                            partial.defined() ? static_cast<float*>(partial.raw()) : nullptr,
                            stream_of(x));
  check_launch("layernorm_backward");
}

}  // namespace strata::cuda_ops
