// The elementwise ops on CUDA tensors (elementwise.cu has the kernels).
#include "framework/backend/cuda/ops/common.hpp"
#include "framework/backend/cuda/ops/elementwise.hpp"
#include "framework/backend/cuda/ops/kernels.hpp"

namespace strata::cuda_ops {

void add(const Tensor& a, const Tensor& b, const Tensor& out) {
  launch_add(a.raw(), dt(a), b.raw(), dt(b), out.raw(), dt(out), a.numel(), stream_of(a));
  check_launch("add");
}

void add_inplace(const Tensor& a, const Tensor& b) {
  launch_add(a.raw(), dt(a), b.raw(), dt(b), a.raw(), dt(a), a.numel(), stream_of(a));
  check_launch("add_inplace");
}

void scale_inplace(const Tensor& a, float s) {
  launch_scale(a.raw(), dt(a), s, a.numel(), stream_of(a));
  check_launch("scale_inplace");
}

void cast(const Tensor& src, const Tensor& dst) {
  launch_convert(src.raw(), dt(src), dst.raw(), dt(dst), src.numel(), stream_of(src));
  check_launch("cast");
}

}  // namespace strata::cuda_ops
