// Host-side helpers of the CUDA kernels (common.hpp).
#include "framework/backend/cuda/ops/common.hpp"

#include "framework/backend/stream.hpp"

namespace strata::cuda_ops {

cudaStream_t stream_of(const Tensor& t) {
  return static_cast<cudaStream_t>(current_stream(t.device()).handle());
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail("cuda", "{} failed: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

void check_launch(const char* what) { check_cuda(cudaGetLastError(), what); }

DT dt(const Tensor& t) {
  switch (t.dtype()) {
    case DType::f32: return DT::f32;
    case DType::bf16: return DT::bf16;
    case DType::f16: return DT::f16;
    default: fail("cuda", "a {} tensor where a float one is expected", dtype_name(t.dtype()));
  }
}

Tensor workspace(const Tensor& like, const Shape& shape, DType dtype) {
  TensorOptions o{like.device(), Tier::device, Category::workspace, like.storage()->ledger()};
  return Tensor::empty(shape, dtype, o);
}

In32::In32(const Tensor& t) {
  if (!t.defined()) return;
  if (t.dtype() == DType::f32) {
    p_ = static_cast<const float*>(t.raw());
    return;
  }
  tmp_ = workspace(t, t.shape());
  launch_convert(t.raw(), dt(t), tmp_.raw(), DT::f32, t.numel(), stream_of(t));
  p_ = static_cast<const float*>(tmp_.raw());
}

Out32::Out32(const Tensor& t) : t_(t) {
  if (!t.defined()) return;
  if (t.dtype() == DType::f32) {
    p_ = static_cast<float*>(t.raw());
    return;
  }
  tmp_ = workspace(t, t.shape());
  p_ = static_cast<float*>(tmp_.raw());
}

void Out32::commit() {
  if (!tmp_.defined()) return;
  launch_convert(tmp_.raw(), DT::f32, t_.raw(), dt(t_), t_.numel(), stream_of(t_));
  tmp_ = {};
}

Acc32::Acc32(const Tensor& t, bool overwrite) : t_(t) {
  if (!t.defined()) return;
  if (t.dtype() == DType::f32) {
    p_ = static_cast<float*>(t.raw());
    return;
  }
  tmp_ = workspace(t, t.shape());
  if (!overwrite)
    check_cuda(cudaMemsetAsync(tmp_.raw(), 0, tmp_.nbytes(), stream_of(t)), "cudaMemsetAsync");
  p_ = static_cast<float*>(tmp_.raw());
}

void Acc32::commit() {
  if (!tmp_.defined()) return;
  launch_accumulate(t_.raw(), dt(t_), static_cast<const float*>(tmp_.raw()), t_.numel(),
                    stream_of(t_));
  tmp_ = {};
}

}  // namespace strata::cuda_ops
