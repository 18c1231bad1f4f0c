#include "framework/train/grad_sums.hpp"

#include <algorithm>

#include "framework/core/error.hpp"

namespace strata::train {

GradSums::GradSums(std::size_t units) : where_(units, kUnset) {}

Tensor GradSums::take(std::size_t u, const Tensor& like) {
  STRATA_CHECK(u < where_.size(), "train", "gradient sums of unit {} of {}", u, where_.size());
  int b = 0;
  while (b < static_cast<int>(bufs_.size()) &&
         !(bufs_[static_cast<std::size_t>(b)].device() == like.device() &&
           bufs_[static_cast<std::size_t>(b)].tier() == like.tier()))
    ++b;
  if (b == static_cast<int>(bufs_.size())) {
    const TensorOptions o{like.device(), like.tier(), Category::other,
                          like.storage() ? like.storage()->ledger() : nullptr};
    bufs_.push_back(Tensor::zeros(Shape{2 * static_cast<std::int64_t>(where_.size())}, DType::f64, o));
  }
  where_[u] = b;
  const auto i = 2 * static_cast<std::int64_t>(u);
  Tensor slots = bufs_[static_cast<std::size_t>(b)].slice(0, i, i + 2);
  slots.zero();
  return slots;
}

bool GradSums::complete() const {
  return std::all_of(where_.begin(), where_.end(), [](int b) { return b != kUnset; });
}

void GradSums::forget() { std::fill(where_.begin(), where_.end(), kUnset); }

std::vector<std::array<double, 2>> GradSums::read() {
  std::vector<std::array<double, 2>> out(where_.size(), std::array<double, 2>{0.0, 0.0});
  for (std::size_t b = 0; b < bufs_.size(); ++b) {
    if (std::find(where_.begin(), where_.end(), static_cast<int>(b)) == where_.end()) continue;
    const Tensor& buf = bufs_[b];
    ++reads_;
    if (buf.device().is_meta()) continue;  // a plan's step: no values (zeros, as its sums are)
    const Tensor host =
        buf.device().is_cpu() ? buf : buf.to(DType::f64, TensorOptions{}.with(Tier::host));
    const double* v = host.data<double>();
    for (std::size_t u = 0; u < where_.size(); ++u)
      if (where_[u] == static_cast<int>(b)) out[u] = {v[2 * u], v[2 * u + 1]};
  }
  return out;
}

}  // namespace strata::train
