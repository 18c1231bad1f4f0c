#include "framework/optim/optimizers/lion.hpp"

#include "framework/backend/ops/ops.hpp"
#include "framework/core/meta_device.hpp"

namespace strata::optim {

namespace {
Declaration lion_declaration() {
  Declaration d;
  d.name = "Lion";
  d.checkpoint_name = "lion";
  d.state = {StateTensor::elements("exp_avg")};
  return d;
}
}  // namespace

LionHyper lion_from_config(const config::Optimizer& c) {
  LionHyper h;
  h.lr = c.params.number("lr");
  h.beta1 = c.params.pair("betas")[0];
  h.beta2 = c.params.pair("betas")[1];
  h.weight_decay = c.params.number("weight_decay");
  return h;
}

void lion_to_config(const LionHyper& h, config::Optimizer& out) {
  out.params.set("lr", h.lr);
  out.params.set("betas", HPair{h.beta1, h.beta2});
  out.params.set("weight_decay", h.weight_decay);
}

Lion::Lion(const LionHyper& h) : UnitStepOptimizer(lion_declaration()), h_(h) {}

std::shared_ptr<const Optimizer> Lion::from_config(const config::Optimizer& c) {
  return std::make_shared<Lion>(lion_from_config(c));
}

std::shared_ptr<const Optimizer> make_lion(const config::Optimizer& c) {
  return Lion::from_config(c);
}

void Lion::to_config(config::Optimizer& out) const {
  out = config::Optimizer("Lion");
  lion_to_config(h_, out);
}

void Lion::bind(const nn::ParamStore&, int) { validate(h_); }

void Lion::update_unit(UnitSlice& s, const StepArgs& a) {
  // On the host (and on the meta device, which charges it) the unit's 16-bit gradients are
  // widened once into `keep`, as the host kernel takes f32; a GPU's kernel widens each gradient
  // as it loads it (and so does a GPU job's plan, meta_cuda(): the op charges nothing).
  Tensor keep, grad = s.grad;
  if (!s.grad.device().is_cuda() && !is_meta_cuda(s.grad.device())) {
    (void)s.f32_grad(keep);
    if (s.meta()) return;
    if (keep.defined()) grad = keep;
  }
  train::UnitOptimizerState& st = *s.state;
  s.for_each_param([&](std::int64_t lo, std::int64_t hi, const nn::Parameter& p) {
    auto part = [&](const Tensor& t) { return t.defined() ? t.slice(0, lo, hi) : Tensor(); };
    LionHyper h = h_;
    h.lr = a.lr;
    if (!p.decay) h.weight_decay = 0;  // only parameters with >= 2 dims (declared `decay`)
    ops::lion_step(part(s.master), part(grad), part(st[0]), h, a.step, a.grad_scale,
                   part(s.param16));
  });
}

}  // namespace strata::optim
