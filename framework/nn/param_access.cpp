#include "framework/nn/param_access.hpp"

#include <vector>

#include "framework/core/convert.hpp"

namespace strata::nn {

F32Value::F32Value(const Context& ctx, const Parameter& p) {
  STRATA_CHECK(p.value.defined(), "nn", "parameter {} used before it was materialised", p.name);
  if (p.value.dtype() == DType::f32) {
    ptr_ = p.value.data<float>();
  } else {
    tmp_ = ctx.scratch(p.shape);
    convert(p.value.raw(), p.value.dtype(), tmp_.raw(), DType::f32, p.value.numel());
    ptr_ = tmp_.data<float>();
  }
}

F32Grad::F32Grad(const Context& ctx, Parameter& p) : p_(&p) {
  STRATA_CHECK(p.grad.defined(), "nn", "parameter {} has no gradient buffer", p.name);
  if (p.grad.dtype() == DType::f32) {
    ptr_ = p.grad.data<float>();
  } else {
    tmp_ = Tensor::zeros(p.shape, DType::f32, ctx.workspace);
    ptr_ = tmp_.data<float>();
  }
}

void F32Grad::commit() {
  if (!tmp_.defined()) return;
  const std::size_t n = static_cast<std::size_t>(p_->grad.numel());
  std::vector<float> cur(n);
  convert(p_->grad.raw(), p_->grad.dtype(), cur.data(), DType::f32, n);
  const float* add = tmp_.data<float>();
  for (std::size_t i = 0; i < n; ++i) cur[i] += add[i];
  convert(cur.data(), DType::f32, p_->grad.raw(), p_->grad.dtype(), n);
  tmp_ = {};
}

F32Grad::~F32Grad() {
  try {
    commit();
  } catch (...) {
  }
}

}  // namespace strata::nn
