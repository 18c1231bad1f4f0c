// Global-norm clipping helpers; the per-buffer reduction is strata::cpu::sum_squares.
#include "framework/optim/clip.hpp"

#include <cmath>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/core/error.hpp"

namespace strata::optim {

double sum_squares(const float* grad, std::size_t n) {
  STRATA_CHECK(n == 0 || grad, "optim", "sum_squares got a null buffer for {} elements", n);
  if (n == 0) return 0.0;
  return cpu::sum_squares(grad, n);
}

double sum_squares(std::span<const std::span<const float>> grads) {
  double total = 0.0;
  for (const auto& g : grads) total += sum_squares(g.data(), g.size());
  return total;
}

double global_norm(double sum_of_squares) { return std::sqrt(sum_of_squares); }

float clip_coefficient(double total_norm, double max_norm) {
  if (!(max_norm > 0.0) || !std::isfinite(max_norm)) {
    user_fail("optim", "gradient_clipping must be a finite number > 0, got {}", max_norm);
  }
  if (!std::isfinite(total_norm)) return 1.0f;  // overflow: the step is skipped anyway
  const double coef = max_norm / (total_norm + 1e-6);
  return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

}  // namespace strata::optim
