// The optimizer ops on CUDA tensors (optimizer.cu has the kernels). The float32 scalars of the
// step come from the CPU's own code (optim::detail::adamw_consts / sgd_consts: the same
// validation and errors, the same bits), so a step on the GPU is bitwise a step on the CPU.
// ops.cpp has checked the tensors: master and the state f32, grad any float dtype, param16 (when
// given) bf16 or f16, all of master's numel, contiguous, on one CUDA device.
#include "framework/backend/cuda/ops/common.hpp"
#include "framework/backend/cuda/ops/kernels.hpp"
#include "framework/backend/cuda/ops/optimizer.hpp"

namespace strata::cuda_ops {

namespace {
float* f32_ptr(const Tensor& t) { return static_cast<float*>(t.raw()); }
void* raw_or_null(const Tensor& t) { return t.defined() ? t.raw() : nullptr; }
DT dt_or_bf16(const Tensor& t) { return t.defined() ? dt(t) : DT::bf16; }  // unused when undefined
}  // namespace

void adamw_step(const Tensor& master, const Tensor& grad, const Tensor& m, const Tensor& v,
                const optim::AdamWHyper& h, std::int64_t step, float grad_scale,
                const Tensor& param16) {
  // Validates h and step (throws before anything is queued), as the CPU's update does.
  const optim::detail::AdamWConsts c = optim::detail::adamw_consts(h, step, grad_scale);
  launch_adamw_step(f32_ptr(master), grad.raw(), dt(grad), f32_ptr(m), f32_ptr(v),
                    master.numel(), c, raw_or_null(param16), dt_or_bf16(param16),
                    stream_of(master));
  check_launch("adamw_step");
}

void sgd_step(const Tensor& master, const Tensor& grad, const Tensor& momentum,
              const optim::SGDHyper& h, std::int64_t step, float grad_scale,
              const Tensor& param16) {
  const optim::detail::SgdConsts c = optim::detail::sgd_consts(h, step, grad_scale);
  // The buffer is used only with momentum (ops.cpp has then checked it: f32, master's numel);
  // without, it may be undefined and is not touched.
  float* buf = c.momentum ? f32_ptr(momentum) : nullptr;
  launch_sgd_step(f32_ptr(master), grad.raw(), dt(grad), buf, master.numel(), c,
                  raw_or_null(param16), dt_or_bf16(param16), stream_of(master));
  check_launch("sgd_step");
}

}  // namespace strata::cuda_ops
