#include "framework/train/lamb_step.hpp"

#include <algorithm>

#include "framework/train/grad_view.hpp"
#include "framework/train/trainer.hpp"

namespace strata::train {

namespace {

// Calls f(global parameter index, decay, offset in the owned slice, count) for the owned part of
// every parameter of unit u (parameters with no owned part are skipped, but counted).
template <typename F>
void for_each_owned_part(const nn::UnitLayout& l, std::size_t& global, F&& f) {
  for (std::size_t i = 0; i < l.params.size(); ++i, ++global) {
    const std::int64_t a = std::max(l.lo, l.offsets[i]);
    const std::int64_t b = std::min(l.hi, l.offsets[i] + l.params[i]->shape.numel());
    if (a < b) f(global, l.params[i]->decay, a - l.lo, static_cast<std::size_t>(b - a));
  }
}

}  // namespace

LambStep::LambStep(const nn::ParamStore& store, const optim::LambHyper& h) : h_(h), h_nodecay_(h) {
  optim::validate(h);
  h_nodecay_.weight_decay = 0;
  for (std::size_t u = 0; u < store.num_units(); ++u) num_params_ += store.layout(u).params.size();
}

void LambStep::run(nn::ParamStore& store, OptimizerStateStore& states, const ShardReductions& red,
                   std::int64_t step, double lr, float grad_scale) {
  const DType pd = store.options().param_dtype;
  optim::LambHyper h = h_, h0 = h_nodecay_;
  h.lr = h0.lr = lr;
  // [sum p², sum u²] per parameter, over this shard's parts, then over every shard.
  std::vector<double> sums(2 * num_params_, 0.0);
  std::size_t global = 0;
  for_each_unit_grads(store, states, false, [&](std::size_t u, UnitOptimizerState& s, const float* g) {
    const nn::ValueShardScope held(store, u, false);
    const float* master = pd == DType::f32 ? held.get().data<float>() : s.master.data<float>();
    for_each_owned_part(store.layout(u), global, [&](std::size_t k, bool decay, std::int64_t off,
                                                     std::size_t n) {
      const optim::LambSums ls = optim::lamb_sums(master + off, g + off, s.m.data<float>() + off,
                                                  s.v.data<float>() + off, n, decay ? h : h0,
                                                  grad_scale);
      sums[2 * k] += ls.param_sq;
      sums[2 * k + 1] += ls.update_sq;
    });
  });
  red.sum_vector(sums);
  ratios_.assign(num_params_, 1.0);
  for (std::size_t k = 0; k < num_params_; ++k)
    ratios_[k] = optim::lamb_trust_ratio(h_, sums[2 * k], sums[2 * k + 1]);
  const double step_size = optim::lamb_step_size(h_, step, lr);
  global = 0;
  for_each_unit_grads(store, states, true, [&](std::size_t u, UnitOptimizerState& s, const float* g) {
    const nn::ValueShardScope held(store, u, /*dirty=*/true);
    const Tensor& vshard = held.get();
    float* master = pd == DType::f32 ? vshard.data<float>() : s.master.data<float>();
    auto* p16 = pd == DType::f32 ? nullptr : static_cast<std::uint16_t*>(vshard.raw());
    for_each_owned_part(store.layout(u), global, [&](std::size_t k, bool decay, std::int64_t off,
                                                     std::size_t n) {
      optim::lamb_apply(master + off, g + off, s.m.data<float>() + off, s.v.data<float>() + off, n,
                        decay ? h : h0, grad_scale, step_size, ratios_[k],
                        p16 ? p16 + off : nullptr, pd);
    });
  });
}

}  // namespace strata::train
