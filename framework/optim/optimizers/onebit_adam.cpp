#include "framework/optim/optimizers/onebit_adam.hpp"

#include "framework/backend/ops/ops.hpp"
#include "framework/optim/optimizers/adamw.hpp"
#include "framework/optim/optimizers/cuda_refusal.hpp"
#include "framework/train/grad_view.hpp"

namespace strata::optim {

namespace {
Declaration onebit_adam_declaration() {
  Declaration d;
  d.name = "OneBitAdam";
  d.checkpoint_name = "onebitadam";
  d.state = {StateTensor::elements("exp_avg"), StateTensor::elements("exp_avg_sq"),
             StateTensor::rank_errors("compression_errors", /*fused=*/false)};
  d.compressed_exchange = true;
  d.refusals.zero =
      "DeepSpeed refuses it too: the compressed momentum exchange needs every rank to hold whole "
      "tensors";
  d.refusals.model_parallel =
      "the compressed momentum exchange averages whole tensors over the data-parallel ranks";
  d.refusals.gpu = kNoCudaKernels;
  return d;
}
}  // namespace

OneBitAdam::OneBitAdam(const OneBitAdamHyper& h) : Optimizer(onebit_adam_declaration()), h_(h) {}

std::shared_ptr<const Optimizer> OneBitAdam::from_config(const config::Optimizer& c) {
  OneBitAdamHyper h;
  adam_family_from_config(h, c);
  h.freeze_step = c.params.integer("freeze_step");
  return std::make_shared<OneBitAdam>(h);
}

std::shared_ptr<const Optimizer> make_onebit_adam(const config::Optimizer& c) {
  return OneBitAdam::from_config(c);
}

void OneBitAdam::to_config(config::Optimizer& out) const {
  out = config::Optimizer("OneBitAdam");  // bias_correction false: the only value it takes
  adam_family_to_config(h_, out);
  out.params.set("freeze_step", h_.freeze_step);
}

void OneBitAdam::bind(const nn::ParamStore& store, int ranks) {
  validate(h_);
  slots_.clear();
  for (std::size_t u = 0; u < store.num_units(); ++u) {
    const nn::UnitLayout& l = store.layout(u);
    STRATA_CHECK(l.lo == 0 && l.hi >= l.numel, "train",
                 "1-bit Adam needs every unit whole (ZeRO stage 0): unit {} owns [{}, {})", u, l.lo,
                 l.hi);
    slots_.push_back(error_slots(declaration(), store, u, ranks));
  }
}

double OneBitAdam::step(StepContext& ctx, const StepArgs& a) {
  if (!h_.frozen(a.step)) {
    // The warm-up: AdamW's kernel without bias correction, unit by unit.
    update_units(ctx, [&](UnitSlice& s) {
      train::UnitOptimizerState& st = *s.state;
      s.for_each_param([&](std::int64_t lo, std::int64_t hi, const nn::Parameter& p) {
        auto part = [&](const Tensor& t) { return t.defined() ? t.slice(0, lo, hi) : Tensor(); };
        AdamWHyper h = onebit_warmup_hyper(h_);
        h.lr = a.lr;
        if (!p.decay) h.weight_decay = 0;  // only parameters with >= 2 dims (declared `decay`)
        ops::adamw_step(part(s.master), part(s.grad), part(st[0]), part(st[1]), h, a.step,
                        a.grad_scale, part(s.param16));
      });
    });
  } else if (ctx.meta()) {
    meta_pass(ctx);
  } else {
    frozen_step(ctx, a.lr, a.grad_scale);
  }
  return a.lr;
}

// Past freeze_step: each rank's own gradients into its momentum, the momenta averaged by the
// compressed all-reduce (every parameter of every unit in one exchange), then the update with the
// frozen second moment. Units are whole (stage 0) and their state stays acquired across the
// exchange. Every per-element pass is an ops:: entry (onebit_momentum, onebit_apply); the exchange
// reads and writes the momenta and this rank's errors in host memory (the engine's
// compressed_average).
void OneBitAdam::frozen_step(StepContext& ctx, double lr, float grad_scale) {
  nn::ParamStore& store = ctx.store;
  train::OptimizerStateStore& states = ctx.states;
  const DType pd = store.options().param_dtype;
  const OneBitAdamHyper& h = h_;
  std::vector<ErrorFeedbackTensor> tensors;
  std::vector<train::UnitOptimizerState*> held;
  store.expect_grad_shards_in_order();
  try {
    for (std::size_t u = 0; u < store.num_units(); ++u) {
      train::UnitOptimizerState& s = states.acquire(u);
      held.push_back(&s);
      const nn::UnitLayout& l = store.layout(u);
      Tensor keep;
      const nn::GradShardScope g(store, u, false);
      const Tensor grad = train::f32_grad_tensor(store, u, g.get(), keep);
      ops::onebit_momentum(s[0].slice(0, 0, grad.numel()), grad, h, grad_scale);
      const std::vector<ErrorSlot>& slots = slots_[u];
      for (std::size_t i = 0; i < l.params.size(); ++i)
        tensors.push_back({s[0].data<float>() + l.offsets[i],
                           static_cast<std::size_t>(l.params[i]->shape.numel()),
                           s[2].data<float>() + slots[i].worker,
                           s[2].data<float>() + slots[i].server});
    }
    if (ctx.red.ranks > 1) ctx.red.compressed_average(tensors);
    store.expect_value_shards_in_order();
    for (std::size_t u = 0; u < store.num_units(); ++u) {
      train::UnitOptimizerState& s = *held[u];
      ValueSlice v(store, ctx.staging, u, /*dirty=*/true);
      const Tensor master = pd == DType::f32 ? v.get() : s.master;
      const Tensor p16 = pd == DType::f32 ? Tensor() : v.get();
      const nn::UnitLayout& l = store.layout(u);
      for (std::size_t i = 0; i < l.params.size(); ++i) {
        // Weight decay only on parameters with >= 2 dims (declared `decay`), as AdamW.
        OneBitAdamHyper hh = h;
        if (!l.params[i]->decay) hh.weight_decay = 0;
        const std::int64_t off = l.offsets[i], end = off + l.params[i]->shape.numel();
        auto part = [&](const Tensor& t) { return t.defined() ? t.slice(0, off, end) : Tensor(); };
        ops::onebit_apply(part(master), part(s[0]), part(s[1]), hh, lr, part(p16));
      }
      v.finish();
    }
  } catch (...) {
    for (std::size_t u = 0; u < held.size(); ++u) states.release(u, true);
    throw;
  }
  for (std::size_t u = 0; u < held.size(); ++u) states.release(u, true);
}

}  // namespace strata::optim
