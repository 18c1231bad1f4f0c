#include "framework/optim/optimizers/lamb.hpp"

#include <algorithm>

#include "framework/optim/optimizers/adamw.hpp"
#include "framework/optim/optimizers/cuda_refusal.hpp"
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
  d.refusals.gpu = kNoCudaKernels;
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
  nn::ParamStore& store = ctx.store;
  const DType pd = store.options().param_dtype;
  LambHyper h = h_, h0 = h_nodecay_;
  h.lr = h0.lr = a.lr;
  // [sum p², sum u²] per parameter, over this shard's parts, then over every shard.
  std::vector<double> sums(2 * num_params_, 0.0);
  std::size_t global = 0;
  train::for_each_unit_grads(store, ctx.states, false, [&](std::size_t u, train::UnitOptimizerState& s, const float* g) {
    const ValueSlice held(store, ctx.staging, u, false);
    const float* master = pd == DType::f32 ? held.get().data<float>() : s.master.data<float>();
    lamb_owned_parts(store.layout(u), global, [&](std::size_t k, bool decay, std::int64_t off,
                                                  std::size_t n) {
      const LambSums ls = lamb_sums(master + off, g + off, s[0].data<float>() + off,
                                    s[1].data<float>() + off, n, decay ? h : h0, a.grad_scale);
      sums[2 * k] += ls.param_sq;
      sums[2 * k + 1] += ls.update_sq;
    });
  });
  ctx.red.sum_vector(sums);
  ratios_.assign(num_params_, 1.0);
  for (std::size_t k = 0; k < num_params_; ++k)
    ratios_[k] = lamb_trust_ratio(h_, sums[2 * k], sums[2 * k + 1]);
  const double step_size = lamb_step_size(h_, a.step, a.lr);
  global = 0;
  train::for_each_unit_grads(store, ctx.states, true, [&](std::size_t u, train::UnitOptimizerState& s, const float* g) {
    ValueSlice held(store, ctx.staging, u, /*dirty=*/true);
    const Tensor& vshard = held.get();
    float* master = pd == DType::f32 ? vshard.data<float>() : s.master.data<float>();
    auto* p16 = pd == DType::f32 ? nullptr : static_cast<std::uint16_t*>(vshard.raw());
    lamb_owned_parts(store.layout(u), global, [&](std::size_t k, bool decay, std::int64_t off,
                                                  std::size_t n) {
      lamb_apply(master + off, g + off, s[0].data<float>() + off, s[1].data<float>() + off, n,
                 decay ? h : h0, a.grad_scale, step_size, ratios_[k], p16 ? p16 + off : nullptr,
                 pd);
    });
    held.finish();
  });
  return a.lr;
}

}  // namespace strata::optim
