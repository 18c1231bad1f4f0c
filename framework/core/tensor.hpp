// Tensor: a typed, shaped, strided view into a Storage. Owned storage comes from the ledgered
// allocator, so every tensor is charged to a memory tier and category.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "framework/core/device.hpp"
#include "framework/core/dtype.hpp"
#include "framework/core/error.hpp"
#include "framework/core/shape.hpp"
#include "framework/memory/storage.hpp"

namespace strata {

// Where and under which account a new tensor is allocated.
struct TensorOptions {
  Device device = Device::cpu();
  Tier tier = Tier::device;
  Category category = Category::other;
  MemoryLedger* ledger = nullptr;  // nullptr: MemoryLedger::global()
  bool pinned = false;             // host tier: page-locked where CUDA can pin it

  TensorOptions with(Category c) const { auto o = *this; o.category = c; return o; }
  TensorOptions with(Tier t) const { auto o = *this; o.tier = t; return o; }
  TensorOptions pinned_if(bool p) const { auto o = *this; o.pinned = p; return o; }
};

class Tensor {
 public:
  Tensor() = default;

  static Tensor empty(const Shape& shape, DType dtype, const TensorOptions& opts = {});
  static Tensor zeros(const Shape& shape, DType dtype, const TensorOptions& opts = {});
  // A tensor over existing storage (offset and strides in elements).
  Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape shape, std::vector<std::int64_t> strides,
         std::int64_t offset = 0);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::int64_t dim(int i) const { return shape_.dim(i); }
  std::size_t rank() const { return shape_.rank(); }
  const std::vector<std::int64_t>& strides() const { return strides_; }
  std::int64_t offset() const { return offset_; }
  std::int64_t numel() const { return shape_.numel(); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  Tier tier() const { return storage_ ? storage_->tier() : Tier::device; }
  Category category() const { return storage_ ? storage_->category() : Category::other; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  bool is_contiguous() const;

  // Address of the first element, on the tensor's device (a backend's kernels take it; host
  // code must not dereference it unless device().is_cpu()); nullptr on the meta device.
  void* raw() const;
  // Typed host access: checks the dtype, and throws for a tensor that does not live in host
  // memory (copy it to the cpu device first).
  template <typename T>
  T* data() const {
    STRATA_CHECK(DTypeOf<T>::value == dtype_, "core", "tensor holds {}, accessed as {}",
                 dtype_name(dtype_), dtype_name(DTypeOf<T>::value));
    STRATA_CHECK(device().is_cpu(), "core",
                 "data<{}>() of a tensor on {}: its memory is not addressable from the host; copy "
                 "it to the cpu device first", dtype_name(dtype_), device().str());
    return static_cast<T*>(raw());
  }

  // Views (share storage).
  Tensor view(const Shape& shape) const;  // contiguous only; one extent may be -1
  Tensor slice(int dim, std::int64_t start, std::int64_t end) const;  // [start, end)
  Tensor select(std::int64_t index) const;                             // along dim 0
  Tensor flat() const { return view(Shape{numel()}); }
  Tensor transpose(int a, int b) const;

  // Copies.
  Tensor contiguous() const;  // this if already contiguous
  Tensor clone(const TensorOptions& opts) const;
  Tensor to(DType dtype, const TensorOptions& opts) const;  // new contiguous tensor
  // Copies src into this (same shape), converting dtype and moving across devices as needed.
  // Copies to or from the meta device move nothing; fill and zero of a meta tensor do nothing.
  void copy_from(const Tensor& src);
  void fill(double value);
  void zero();

  // Element read as double, for tests and small host-side logic (cpu only).
  double item(std::int64_t flat_index = 0) const;
  std::vector<float> to_vector() const;  // every element as f32, row-major

 private:
  std::shared_ptr<Storage> storage_;
  DType dtype_ = DType::f32;
  Shape shape_;
  std::vector<std::int64_t> strides_;
  std::int64_t offset_ = 0;
};

}  // namespace strata
