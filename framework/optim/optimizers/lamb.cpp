#include "framework/optim/optimizers/lamb.hpp"

#include <algorithm>

#include "framework/optim/optimizers/adamw.hpp"
#include "framework/backend/ops/ops.hpp"
#include "framework/optim/optimizers/step_sums.hpp"
#include "framework/train/grad_view.hpp"

namespace strata::optim {

namespace {

Declaration lamb_declaration() {
  Declaration d;
  d.name = "Lamb";
  d.checkpoint_name = "lamb";
  d.state = {StateTensor::elements("exp_avg"), StateTensor::elements("exp_avg_sq")};
  d.shard_sums = true;
  d.refusals.tensor_parallel =
      "its trust ratios are taken over whole parameters, not tensor-parallel parts";
  return d;
}

// Calls f(global parameter index, decay, offset in the owned slice, count) for the owned part of
// every parameter of unit u (parameters with no owned part are skipped, but counted).
template <typename F>
void lamb_owned_parts(const nn::UnitLayout& l, std::size_t& global, F&& f) {
  for (std::size_t i = 0; i < l.params.size(); ++i, ++global) {
    const std::int64_t a = std::max(l.lo, l.offsets[i]);
    const std::int64_t b = std::min(l.hi, l.offsets[i] + l.params[i]->shape.numel());
    if (a < b) f(global, l.params[i]->decay, a - l.lo, static_cast<std::size_t>(b - a));
  }
}

}  // namespace

Lamb::Lamb(const LambHyper& h) : Optimizer(lamb_declaration()), h_(h), h_nodecay_(h) {
  h_nodecay_.weight_decay = 0;
}

std::shared_ptr<const Optimizer> Lamb::from_config(const config::Optimizer& c) {
  LambHyper h;
  adam_family_from_config(h, c);
  h.bias_correction = c.params.flag("bias_correction");
  h.max_coeff = c.params.number("max_coeff");
  h.min_coeff = c.params.number("min_coeff");
  h.eps_inside_sqrt = c.params.flag("eps_inside_sqrt");
  return std::make_shared<Lamb>(h);
}

std::shared_ptr<const Optimizer> make_lamb(const config::Optimizer& c) {
  return Lamb::from_config(c);
}

void Lamb::to_config(config::Optimizer& out) const {
  out = config::Optimizer("Lamb");
  adam_family_to_config(h_, out);
  out.params.set("bias_correction", h_.bias_correction);
  out.params.set("max_coeff", h_.max_coeff);
  out.params.set("min_coeff", h_.min_coeff);
  out.params.set("eps_inside_sqrt", h_.eps_inside_sqrt);
}

void Lamb::bind(const nn::ParamStore& store, int) {
  validate(h_);
  num_params_ = 0;
  for (std::size_t u = 0; u < store.num_units(); ++u) num_params_ += store.layout(u).params.size();
}

double Lamb::step(StepContext& ctx, const StepArgs& a) {
  if (ctx.meta()) {
    meta_pass(ctx);
    return a.lr;
  }
  // Every kernel is an ops:: entry, so the update runs where the state is. The norms' sums stay
  // there until the reduction over the shards: one host synchronisation per step on a GPU
  // (StepSums::reduce); the trust ratios are then computed on the host and passed by value.
  nn::ParamStore& store = ctx.store;
  const DType pd = store.options().param_dtype;
  LambHyper h = h_, h0 = h_nodecay_;
  h.lr = h0.lr = a.lr;
  auto part = [](const Tensor& t, std::int64_t off, std::size_t n) {
    return t.slice(0, off, off + static_cast<std::int64_t>(n));
  };
  // [sum p², sum u²] per parameter, over this shard's parts, then over every shard.
  StepSums sums(update_device(ctx.states.tier(), store.options().memory.device), 2 * num_params_,
                store.options().memory.with(Category::workspace));
  std::size_t global = 0;
  train::for_each_unit_grad_tensors(store, ctx.states, false, [&](std::size_t u, train::UnitOptimizerState& s, const Tensor& g) {
    const ValueSlice held(store, ctx.staging, u, false);
    const Tensor master = pd == DType::f32 ? held.get() : s.master;
    lamb_owned_parts(store.layout(u), global, [&](std::size_t k, bool decay, std::int64_t off,
                                                  std::size_t n) {
      ops::lamb_sums(part(master, off, n), part(g, off, n), part(s[0], off, n), part(s[1], off, n),
                     decay ? h : h0, a.grad_scale, sums.slice(2 * k, 2));
    });
  });
  sums.reduce(ctx.red, /*back=*/false);
  ratios_.assign(num_params_, 1.0);
  for (std::size_t k = 0; k < num_params_; ++k)
    ratios_[k] = lamb_trust_ratio(h_, sums.host()[2 * k], sums.host()[2 * k + 1]);
  const double step_size = lamb_step_size(h_, a.step, a.lr);
  global = 0;
  train::for_each_unit_grad_tensors(store, ctx.states, true, [&](std::size_t u, train::UnitOptimizerState& s, const Tensor& g) {
    ValueSlice held(store, ctx.staging, u, /*dirty=*/true);
    const Tensor& vshard = held.get();
    const Tensor master = pd == DType::f32 ? vshard : s.master;
    lamb_owned_parts(store.layout(u), global, [&](std::size_t k, bool decay, std::int64_t off,
                                                  std::size_t n) {
      ops::lamb_apply(part(master, off, n), part(g, off, n), part(s[0], off, n), part(s[1], off, n),
                      decay ? h : h0, a.grad_scale, step_size, ratios_[k],
                      pd == DType::f32 ? Tensor() : part(vshard, off, n));
    });
    held.finish();
  });
  return a.lr;
}

}  // namespace strata::optim
