// GELU on CUDA tensors (gelu.cu has the kernels): every operand in its own float dtype, computed
// in f32, a 16-bit output rounded once.
#include "framework/backend/cuda/ops/common.hpp"
#include "framework/backend/cuda/ops/gelu.hpp"
#include "framework/backend/cuda/ops/kernels.hpp"

namespace strata::cuda_ops {

void gelu_forward(const Tensor& x, const Tensor& y) {
  launch_gelu_forward(x.raw(), dt(x), y.raw(), dt(y), x.numel(), stream_of(x));
  check_launch("gelu_forward");
}

// dx may be dy: the kernel reads dy[i] before writing dx[i], in the same thread.
void gelu_backward(const Tensor& x, const Tensor& dy, const Tensor& dx) {
  launch_gelu_backward(x.raw(), dt(x), dy.raw(), dt(dy), dx.raw(), dt(dx), x.numel(),
                       stream_of(x));
  check_launch("gelu_backward");
}

}  // namespace strata::cuda_ops
