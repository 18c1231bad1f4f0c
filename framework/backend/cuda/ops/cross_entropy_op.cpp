// The cross-entropy ops on CUDA tensors (cross_entropy.cu has the kernels). ops.cpp has checked
// shapes, dtypes, contiguity and the device; the targets' values live on the device, so the one
// check the CPU makes on them (a target >= V is an error) is made by the forward's summing kernel,
// which makes the sum NaN (the host learns of it when it reads the sum). The backward cannot
// raise it without waiting for the device: there a target >= V (or outside the slice) simply
// subtracts nothing, as the slice op's.
#include <cstdint>

#include "framework/backend/cuda/ops/common.hpp"
#include "framework/backend/cuda/ops/cross_entropy.hpp"
#include "framework/backend/cuda/ops/kernels.hpp"
#include "framework/core/error.hpp"

namespace strata::cuda_ops {
namespace {
const std::int32_t* i32(const Tensor& t) {
  return static_cast<const std::int32_t*>(t.raw());
}
float* f32(const Tensor& t) {
  return static_cast<float*>(t.raw());
}
}  // namespace

// The sum stays on the device (the host does not wait): a target >= V makes it NaN, which
// ops::cross_entropy_forward's returning form turns into the CPU's error once it has read it.
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                           const Tensor& sum) {
  const std::int64_t N = logits.dim(0), V = logits.dim(1);
  STRATA_CHECK(N >= 0 && V > 0, "cuda", "cross_entropy: bad size N={} V={}", N, V);
  if (N == 0) {
    Tensor(sum).zero();  // a view of the same memory
    return;
  }
  Tensor row_loss = workspace(logits, Shape{N}, DType::f64);
  launch_cross_entropy_forward(logits.raw(), dt(logits), i32(targets), f32(lse),
                               static_cast<double*>(row_loss.raw()),
                               static_cast<double*>(sum.raw()), N, V, stream_of(logits));
  check_launch("cross_entropy_forward");
}

void cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                            const Tensor& dlogits, float scale) {
  const std::int64_t N = logits.dim(0), V = logits.dim(1);
  STRATA_CHECK(N >= 0 && V > 0, "cuda", "cross_entropy: bad size N={} V={}", N, V);
  // dlogits may be logits itself: the kernel reads each element before writing it, in one thread.
  launch_cross_entropy_backward(logits.raw(), dt(logits), f32(lse), i32(targets), 0, scale,
                                dlogits.raw(), dt(dlogits), N, V, stream_of(logits));
  check_launch("cross_entropy_backward");
}

void row_max(const Tensor& logits, const Tensor& out) {
  launch_row_max(logits.raw(), dt(logits), f32(out), logits.dim(0), logits.dim(1),
                 stream_of(logits));
  check_launch("row_max");
}

void row_sum_exp(const Tensor& logits, const Tensor& max, const Tensor& out) {
  launch_row_sum_exp(logits.raw(), dt(logits), f32(max), f32(out), logits.dim(0), logits.dim(1),
                     stream_of(logits));
  check_launch("row_sum_exp");
}

void target_logit(const Tensor& logits, const Tensor& targets, std::int64_t vocab_start,
                  const Tensor& out) {
  launch_target_logit(logits.raw(), dt(logits), i32(targets), vocab_start, f32(out), logits.dim(0),
                      logits.dim(1), stream_of(logits));
  check_launch("target_logit");
}

void cross_entropy_backward_slice(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                                  std::int64_t vocab_start, float scale, const Tensor& dlogits) {
  launch_cross_entropy_backward(logits.raw(), dt(logits), f32(lse), i32(targets), vocab_start,
                                scale, dlogits.raw(), dt(dlogits), logits.dim(0), logits.dim(1),
                                stream_of(logits));
  check_launch("cross_entropy_backward_slice");
}

void combine_cross_entropy(const Tensor& max, const Tensor& sum_exp, const Tensor& target,
                           const Tensor& targets, const Tensor& lse, const Tensor& sum) {
  const std::int64_t N = max.numel();
  if (N == 0) {
    Tensor(sum).zero();  // a view of the same memory
    return;
  }
  Tensor row_loss = workspace(max, Shape{N}, DType::f64);
  launch_combine_cross_entropy(f32(max), f32(sum_exp), f32(target), i32(targets), f32(lse),
                               static_cast<double*>(row_loss.raw()),
                               static_cast<double*>(sum.raw()), N, stream_of(max));
  check_launch("combine_cross_entropy");
}

}  // namespace strata::cuda_ops
