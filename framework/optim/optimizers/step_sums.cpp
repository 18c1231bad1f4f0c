#include "framework/optim/optimizers/step_sums.hpp"

#include <cstring>
#include <memory>

#include "framework/memory/storage.hpp"

namespace strata::optim {

namespace {
// The host memory of `bytes` zeros (or `data` when given, owned by the caller), as a tensor,
// uncharged.
Tensor host_tensor(void* data, std::int64_t n, DType dtype, std::function<void(void*)> deleter) {
  const std::size_t bytes = static_cast<std::size_t>(n) * dtype_size(dtype);
  return Tensor(Storage::wrap(data, bytes, Device::cpu(), std::move(deleter)), dtype, Shape{n},
                {1});
}
}  // namespace

Tensor step_scratch(Device where, std::int64_t n, DType dtype, const TensorOptions& work) {
  if (!where.is_cpu()) {
    TensorOptions o = work;
    o.device = where;
    return Tensor::zeros(Shape{n}, dtype, o);
  }
  const std::size_t bytes = static_cast<std::size_t>(n) * dtype_size(dtype);
  auto* p = new unsigned char[bytes > 0 ? bytes : 1]();
  return host_tensor(p, n, dtype, [](void* q) { delete[] static_cast<unsigned char*>(q); });
}

StepSums::StepSums(Device where, std::size_t n, const TensorOptions& work) {
  host_.reserve(n > 0 ? n : 1);  // a non-null buffer to wrap
  host_.assign(n, 0.0);
  const auto len = static_cast<std::int64_t>(n);
  host_view_ = host_tensor(host_.data(), len, DType::f64, {});
  sums_ = where.is_cpu() ? host_view_ : step_scratch(where, len, DType::f64, work);
}

void StepSums::fetch() {
  if (!sums_.device().is_cpu()) host_view_.copy_from(sums_);  // waits for the kernels
}

void StepSums::reduce(const train::ShardReductions& red, bool back) {
  const bool device = !sums_.device().is_cpu();
  if (device) host_view_.copy_from(sums_);  // waits for the kernels that wrote the sums
  red.sum_vector(host_);
  if (device && back) sums_.copy_from(host_view_);
}

}  // namespace strata::optim
