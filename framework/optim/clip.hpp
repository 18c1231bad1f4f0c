// Global gradient-norm clipping (torch.nn.utils.clip_grad_norm_ / DeepSpeed's
// gradient_clipping), split so that the sum of squares can be all-reduced across ranks first.
#pragma once

#include <cstddef>
#include <span>

namespace strata::optim {

// Sum of squares of one buffer, accumulated in double in a fixed order (bitwise reproducible
// whatever the thread count). Add the partial sums of every buffer (and rank) to get the total.
double sum_squares(const float* grad, std::size_t n);
// Sum over several buffers, in order.
double sum_squares(std::span<const std::span<const float>> grads);

// The L2 norm from a total sum of squares: sqrt(sum_of_squares).
double global_norm(double sum_of_squares);

// min(1, max_norm / (total_norm + 1e-6)), as a float32 multiplier for the gradients (pass it as
// grad_scale to the optimizer step, times the loss-scale unscaling factor). Returns exactly 1
// when no clipping is needed — apply only when < 1, as DeepSpeed does. A non-finite total_norm
// (overflow) also returns 1: the caller must detect overflow first and skip the step.
// Throws UserError if max_norm is not > 0 (gradient_clipping = 0 means "off": don't call this).
float clip_coefficient(double total_norm, double max_norm);

}  // namespace strata::optim
