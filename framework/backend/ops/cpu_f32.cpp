#include "framework/backend/ops/cpu_f32.hpp"

#include "framework/backend/cpu/mixed_kernels.hpp"
#include "framework/core/convert.hpp"

namespace strata::ops::cpu_detail {

Tensor workspace_like(const Tensor& t, const Shape& shape) {
  TensorOptions o{t.device(), t.tier(), Category::workspace, t.storage()->ledger()};
  return Tensor::empty(shape, DType::f32, o);
}

In32::In32(const Tensor& t) {
  if (!t.defined()) return;
  if (t.dtype() == DType::f32) {
    p_ = static_cast<const float*>(t.raw());
    return;
  }
  tmp_ = workspace_like(t, t.shape());
  if (!t.device().is_meta())
    convert(t.raw(), t.dtype(), tmp_.raw(), DType::f32, static_cast<std::size_t>(t.numel()));
  p_ = static_cast<const float*>(tmp_.raw());
}

Out32::Out32(const Tensor& t) : t_(t) {
  if (!t.defined()) return;
  if (t.dtype() == DType::f32) {
    p_ = static_cast<float*>(t.raw());
    return;
  }
  tmp_ = workspace_like(t, t.shape());
  p_ = static_cast<float*>(tmp_.raw());
}

void Out32::commit() {
  if (!tmp_.defined()) return;
  if (t_.device().is_meta()) {
    tmp_ = {};
    return;
  }
  convert(tmp_.raw(), DType::f32, t_.raw(), t_.dtype(), static_cast<std::size_t>(t_.numel()));
  tmp_ = {};
}

Acc32::Acc32(const Tensor& t, bool overwrite) : t_(t) {
  if (!t.defined()) return;
  if (t.dtype() == DType::f32) {
    p_ = static_cast<float*>(t.raw());
    return;
  }
  tmp_ = workspace_like(t, t.shape());
  if (!overwrite) tmp_.zero();
  p_ = static_cast<float*>(tmp_.raw());
}

void Acc32::commit() {
  if (!tmp_.defined()) return;
  if (t_.device().is_meta()) {
    tmp_ = {};
    return;
  }
  // t += tmp in f32, rounded once, in per-thread chunks (no full-size f32 copy of t).
  cpu::add_inplace(cpu::FloatOut{t_.raw(), t_.dtype()},
                   cpu::FloatBuf{tmp_.raw(), DType::f32}, static_cast<std::size_t>(t_.numel()));
  tmp_ = {};
}

}  // namespace strata::ops::cpu_detail
