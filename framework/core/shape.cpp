#include "framework/core/shape.hpp"

#include "framework/core/error.hpp"

#include <fmt/ranges.h>

namespace strata {

Shape::Shape(std::initializer_list<std::int64_t> dims) : Shape(std::vector<std::int64_t>(dims)) {}

Shape::Shape(std::vector<std::int64_t> dims) : dims_(std::move(dims)) {
  // -1 is allowed as the one extent Tensor::view infers; tensors themselves reject it.
  for (auto d : dims_)
    STRATA_CHECK(d >= -1, "core", "negative extent in shape {} (only -1, for an extent to be "
                 "inferred by a view, is allowed)", str());
}

std::int64_t Shape::dim(int i) const {
  const int r = static_cast<int>(dims_.size());
  const int j = i < 0 ? i + r : i;
  STRATA_CHECK(j >= 0 && j < r, "core", "dim {} out of range for shape {}", i, str());
  return dims_[j];
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (auto d : dims_) n *= d;
  return n;
}

std::vector<std::int64_t> Shape::contiguous_strides() const {
  std::vector<std::int64_t> s(dims_.size());
  std::int64_t acc = 1;
  for (std::size_t i = dims_.size(); i-- > 0;) {
    s[i] = acc;
    acc *= dims_[i];
  }
  return s;
}

std::string Shape::str() const { return fmt::format("[{}]", fmt::join(dims_, ", ")); }

}  // namespace strata
