// The owned gradient slice of a unit as f32, as the optimizer kernels read it (16-bit gradients
// are widened into a workspace tensor), and the number of owned elements that hold parameters.
#pragma once

#include <algorithm>
#include <utility>

#include "framework/backend/ops/ops.hpp"
#include "framework/core/convert.hpp"
#include "framework/nn/param_store.hpp"
#include "framework/train/state_store.hpp"

namespace strata::train {

// Elements of the owned slice that hold parameters (the padded tail holds none).
inline std::size_t owned_numel(const nn::UnitLayout& l) {
  return static_cast<std::size_t>(std::max<std::int64_t>(0, std::min(l.hi, l.numel) - l.lo));
}

// Unit u's owned gradients [lo, lo + owned_numel) as f32, from `g` (its acquired owned slice,
// store.acquire_grad_shard / nn::GradShardScope); `keep` holds the widened copy.
inline const float* f32_grad(const nn::ParamStore& store, std::size_t u, const Tensor& g,
                             Tensor& keep) {
  if (g.dtype() == DType::f32) return g.data<float>();
  const std::size_t owned = owned_numel(store.layout(u));
  keep = Tensor::empty(Shape{static_cast<std::int64_t>(owned)}, DType::f32,
                       store.options().memory.with(Category::workspace));
  convert(g.raw(), g.dtype(), keep.raw(), DType::f32, owned);
  return keep.data<float>();
}

// As f32_grad, as a tensor where the gradients are (a GPU's: widened there by ops::cast):
// [0, owned_numel) of unit u's owned gradients g.
inline Tensor f32_grad_tensor(const nn::ParamStore& store, std::size_t u, const Tensor& g,
                              Tensor& keep) {
  const auto owned = static_cast<std::int64_t>(owned_numel(store.layout(u)));
  const Tensor mine = g.slice(0, 0, owned);
  if (g.dtype() == DType::f32) return mine;
  TensorOptions o = store.options().memory.with(Category::workspace);
  o.device = g.device();
  keep = Tensor::empty(Shape{owned}, DType::f32, o);
  if (owned > 0) ops::cast(mine, keep);
  return keep;
}

namespace detail {
// Calls f(u, state, view(store, u, owned gradients, keep)) for every unit in order with its
// optimizer state acquired (released dirty or not, also when f throws).
template <typename View, typename F>
void for_each_unit_with(nn::ParamStore& store, OptimizerStateStore& states, bool dirty,
                        View view, F&& f) {
  store.expect_grad_shards_in_order();
  for (std::size_t u = 0; u < store.num_units(); ++u) {
    UnitOptimizerState& s = states.acquire(u);
    try {
      Tensor keep;
      const nn::GradShardScope g(store, u, false);
      f(u, s, view(store, u, g.get(), keep));
    } catch (...) {
      states.release(u, dirty);
      throw;
    }
    states.release(u, dirty);
  }
}
}  // namespace detail

// Calls f(u, state, grad) for every unit in order with its optimizer state acquired (released
// dirty or not, also when f throws) and its owned gradients as f32 on the host (f32_grad: the
// host-only multi-pass updates, 1-bit LAMB).
template <typename F>
void for_each_unit_grads(nn::ParamStore& store, OptimizerStateStore& states, bool dirty, F&& f) {
  detail::for_each_unit_with(store, states, dirty, f32_grad, std::forward<F>(f));
}

// As for_each_unit_grads, with the f32 gradients as a tensor where they are (f32_grad_tensor:
// Adafactor, LAMB).
template <typename F>
void for_each_unit_grad_tensors(nn::ParamStore& store, OptimizerStateStore& states, bool dirty,
                                F&& f) {
  detail::for_each_unit_with(store, states, dirty, f32_grad_tensor, std::forward<F>(f));
}

}  // namespace strata::train
