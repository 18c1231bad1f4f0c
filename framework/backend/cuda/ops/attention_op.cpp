// The causal self-attention ops on CUDA tensors (attention.cu has the kernels): every operand in
// its own float dtype, read and written directly by the kernels (no widened copies); backward's
// D = rowsum(dout * out) lives in a workspace for the duration of the op.
// strata.allow_rounded_attention (math_mode.hpp) is read at each call.
#include <climits>

#include "framework/backend/cuda/ops/attention.hpp"
#include "framework/backend/cuda/ops/common.hpp"
#include "framework/backend/cuda/ops/kernels.hpp"
#include "framework/backend/math_mode.hpp"
#include "framework/core/error.hpp"

namespace strata::cuda_ops {
namespace {

struct Dims {
  int B, T, C;
};

// qkv [B, T, 3C] as ops.cpp checked it; the kernels' limits on top of the op's contract.
Dims dims_of(const char* op, const Tensor& qkv, int n_head) {
  const std::int64_t B = qkv.dim(0), T = qkv.dim(1), C = qkv.dim(2) / 3;
  STRATA_CHECK(B <= INT_MAX && T <= INT_MAX && 3 * C <= INT_MAX && B * n_head <= INT_MAX, "cuda",
               "{}: qkv {} is too large for the CUDA kernels", op, qkv.shape().str());
  STRATA_CHECK(C / n_head <= kAttentionMaxHeadSize, "cuda",
               "{}: head size {} (C = {}, {} heads) is larger than the CUDA kernels' {}", op,
               C / n_head, C, n_head, kAttentionMaxHeadSize);
  STRATA_CHECK((T + 15) / 16 <= 65535, "cuda", "{}: T = {} is too long for the CUDA kernels", op,
               T);
  return {static_cast<int>(B), static_cast<int>(T), static_cast<int>(C)};
}

}  // namespace

void attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse, int n_head) {
  const Dims d = dims_of("attention_forward", qkv, n_head);
  if (d.B == 0 || d.T == 0) return;
  check_cuda(launch_attention_forward(qkv.raw(), dt(qkv), out.raw(), dt(out),
                                      static_cast<float*>(lse.raw()), d.B, d.T, d.C, n_head,
                                      stream_of(qkv), allow_rounded_attention()),
             "attention_forward");
  check_launch("attention_forward");
}

void attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& lse, const Tensor& dout,
                        const Tensor& dqkv, int n_head) {
  const Dims d = dims_of("attention_backward", qkv, n_head);
  if (d.B == 0 || d.T == 0) return;
  // Released when this function returns: the allocator is stream-ordered, so the kernels queued
  // below still see it.
  Tensor D = workspace(qkv, Shape{static_cast<std::int64_t>(d.B) * n_head * d.T}, DType::f32);
  check_cuda(launch_attention_backward(qkv.raw(), dt(qkv), out.raw(), dt(out),
                                       static_cast<const float*>(lse.raw()), dout.raw(), dt(dout),
                                       dqkv.raw(), dt(dqkv), static_cast<float*>(D.raw()), d.B, d.T,
                                       d.C, n_head, stream_of(qkv), allow_rounded_attention()),
             "attention_backward");
  check_launch("attention_backward");
}

}  // namespace strata::cuda_ops
