// Untyped views of the memory a communication call reads or writes: pointer, element count,
// dtype, device. The Tensor overloads of Group build these; callers with raw memory use span().
#pragma once

#include <cstddef>

#include "framework/core/device.hpp"
#include "framework/core/dtype.hpp"
#include "framework/memory/tier.hpp"

namespace strata::parallel {

struct Span {
  void* data = nullptr;
  std::size_t count = 0;
  DType dtype = DType::f32;
  Device device = Device::cpu();
  Tier tier = Tier::host;  // where a staging copy of it would be charged
  std::size_t nbytes() const { return count * dtype_size(dtype); }
};

struct ConstSpan {
  const void* data = nullptr;
  std::size_t count = 0;
  DType dtype = DType::f32;
  Device device = Device::cpu();
  Tier tier = Tier::host;
  ConstSpan() = default;
  ConstSpan(const void* d, std::size_t n, DType t, Device dev = Device::cpu(), Tier ti = Tier::host)
      : data(d), count(n), dtype(t), device(dev), tier(ti) {}
  ConstSpan(const Span& s)  // NOLINT: a writable span is readable
      : data(s.data), count(s.count), dtype(s.dtype), device(s.device), tier(s.tier) {}
  std::size_t nbytes() const { return count * dtype_size(dtype); }
};

// span(ptr, n): a CPU span whose dtype is deduced from the pointer type (float, bfloat16, ...).
template <typename T>
Span span(T* p, std::size_t n, Device device = Device::cpu()) {
  return Span{p, n, DTypeOf<T>::value, device, device.is_cuda() ? Tier::device : Tier::host};
}
template <typename T>
ConstSpan span(const T* p, std::size_t n, Device device = Device::cpu()) {
  return ConstSpan(p, n, DTypeOf<T>::value, device, device.is_cuda() ? Tier::device : Tier::host);
}

}  // namespace strata::parallel
