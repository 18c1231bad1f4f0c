// Tensor shapes: a short list of extents with element counts and row-major strides.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace strata {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims);
  explicit Shape(std::vector<std::int64_t> dims);

  std::size_t rank() const { return dims_.size(); }
  std::int64_t operator[](std::size_t i) const { return dims_[i]; }
  std::int64_t& operator[](std::size_t i) { return dims_[i]; }
  // dim(-1) is the last extent.
  std::int64_t dim(int i) const;
  std::int64_t numel() const;
  const std::vector<std::int64_t>& dims() const { return dims_; }
  // Row-major (C order) strides in elements.
  std::vector<std::int64_t> contiguous_strides() const;
  std::string str() const;  // "[2, 3, 4]"

  bool operator==(const Shape& o) const = default;

 private:
  std::vector<std::int64_t> dims_;
};

}  // namespace strata
